"""Where the lab page's slow, pure work runs: on worker threads under `lab serve`, at once in the browser.

`lab serve` is one Python process, one event loop, for every student it serves. A run
(simulate, measure, blame), a pinned fleet's run, a rate sweep's point and an uploaded
trace's parse are pure work: lab.core on values read from the state beforehand, nothing of
the page. On the loop, a mission of 200,000 requests held every other student's page for
12 s a change. So `run(work, then)` hands `work` to a pool of threads (`start_pool`, which
`lab serve --workers N` calls) and calls `then` with its outcome back on the loop, under the
document's lock, where the page may be changed.

Threads, not processes: CPython gives the event loop the interpreter every few
milliseconds while a thread computes (its switch interval), so no page waits for another
student's run to end; runs share the CPU instead. A process would copy each run across (a
200,000-request run is hundreds of megabytes of objects) and spend more memory per worker.

Without a pool (the browser, where Pyodide has no threads; tests; the static site's
pre-render) `then` runs at once, in the caller's turn, as the page always did.
"""

import sys
import threading
import traceback

__all__ = ["Outcome", "run", "start_pool", "stop_pool", "pooled", "DEFAULT_WORKERS", "MAX_WORKERS"]

DEFAULT_WORKERS = 4  # runs at once; more wait their turn (each session has at most one: LabApp)
MAX_WORKERS = 64

_pool = None
_lock = threading.Lock()


class Outcome:
    """What `work()` gave: `get()` returns its value or raises what it raised."""

    __slots__ = ("_value", "_error")

    def __init__(self, value=None, error=None):
        self._value, self._error = value, error

    @classmethod
    def of(cls, work):
        try:
            return cls(value=work())
        except Exception as exc:  # handed to `then`, which says what went wrong on its page
            return cls(error=exc)

    def get(self):
        if self._error is not None:
            raise self._error
        return self._value


def start_pool(workers=DEFAULT_WORKERS):
    """Run later `run` calls' work on `workers` threads (idempotent for the same size)."""
    global _pool
    if not 1 <= int(workers) <= MAX_WORKERS:
        raise ValueError(f"workers: {workers} is not 1 to {MAX_WORKERS}")
    with _lock:
        if _pool is not None and _pool._max_workers == int(workers):
            return
        if _pool is not None:
            _pool.shutdown(wait=False)
        import concurrent.futures  # (here: the browser, which has no threads, never needs it)

        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=int(workers), thread_name_prefix="stf-run")


def stop_pool():
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def pooled():
    """Whether work goes to worker threads (False: it runs at once)."""
    return _pool is not None


def run(work, then):
    """Call `then(Outcome)` with what `work()` returned or raised: at once without a pool;
    with one, `work` on a worker thread and `then` on the current document's event loop, under
    its lock (Bokeh's add_next_tick_callback, the one Document method safe from another thread).
    A page closed meanwhile gets nothing."""
    import panel as pn
    from panel.io.state import set_curdoc

    pool, doc = _pool, pn.state.curdoc
    if pool is None or doc is None:
        then(Outcome.of(work))
        return

    def on_loop(outcome):
        with set_curdoc(doc):
            then(outcome)

    pool.submit(Outcome.of, work).add_done_callback(lambda future: _hand_back(future, doc, on_loop))


def _hand_back(future, doc, on_loop):
    """(The pool's thread) hand `future`'s Outcome to `on_loop` on `doc`'s event loop."""
    if future.cancelled():
        return
    outcome = future.result()
    try:
        doc.add_next_tick_callback(lambda: on_loop(outcome))
    except Exception:  # the session is gone: nobody waits for this
        traceback.print_exc(file=sys.stderr)
