"""Where the lab page's slow, pure work runs: in worker processes under `lab serve`, at once in the browser.

`lab serve` is one Python process, one event loop, for every student it serves. A run
(simulate, measure, blame), a pinned fleet's run, a rate sweep's point and an uploaded
trace's parse are pure work: lab.core on values read from the state beforehand, nothing of
the page. On the loop, a mission of 200,000 requests held every other student's page for
12 s a change. So `run(work, then)` hands `work` to a pool of processes (`start_pool`, which
`lab serve --workers N` calls) and calls `then` with its outcome back on the loop, under the
document's lock, where the page may be changed.

Processes, not threads: threads share one interpreter lock, so Python code runs on one core
at a time however many the machine has, and on threads one heavy page took half of that core
from thirty light ones (benchmarks/classroom.py; its figures, threads and processes, are in
benchmarks/README.md). A process has a core of its own; the price is copying each run back
(`work` must be picklable: a module-level function and its arguments, as lab/ui/run_work.py's
are), which for a run at the page's bound is seconds of unpickling, done on the pool's own
thread, not the loop.

Without a pool (the browser, where Pyodide has neither processes nor threads; tests; the
static site's pre-render) `then` runs at once, in the caller's turn, as the page always did.
"""

import sys
import threading
import traceback

__all__ = ["Outcome", "run", "start_pool", "stop_pool", "pooled", "DEFAULT_WORKERS", "MAX_WORKERS"]

DEFAULT_WORKERS = 4  # runs at once; more wait their turn (each page has at most one under way: LabApp)
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
    """Run later `run` calls' work in `workers` processes (idempotent for the same size)."""
    global _pool
    if not 1 <= int(workers) <= MAX_WORKERS:
        raise ValueError(f"workers: {workers} is not 1 to {MAX_WORKERS}")
    with _lock:
        if _pool is not None and _pool._max_workers == int(workers):
            return
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = _new_pool(int(workers))


def _new_pool(workers):
    # (imported here: the browser, which has no processes, never needs them)
    import concurrent.futures
    import multiprocessing

    # "spawn": a fresh interpreter, not a fork of a server with threads (a forked child can
    # inherit a lock some other thread held); it imports lab.core alone.
    return concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))


def stop_pool():
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def pooled():
    """Whether work goes to worker processes (False: it runs at once)."""
    return _pool is not None


def run(work, then):
    """Call `then(Outcome)` with what `work()` returned or raised: at once without a pool;
    with one, `work` in a worker process and `then` on the current document's event loop, under
    its lock (Bokeh's add_next_tick_callback, the one Document method safe from another thread).
    A page closed meanwhile gets nothing. A worker that died (out of memory, say) fails this
    work with a message, and the pool is started afresh for the next."""
    import panel as pn
    from panel.io.state import set_curdoc

    pool, doc = _pool, pn.state.curdoc
    if pool is None or doc is None:
        then(Outcome.of(work))
        return

    def on_loop(outcome):
        with set_curdoc(doc):
            then(outcome)

    try:
        future = pool.submit(Outcome.of, work)
    except Exception as exc:  # a broken pool (a worker died): a new one for the next run
        _renew(pool)
        then(Outcome(error=exc))
        return
    future.add_done_callback(lambda done: _hand_back(done, doc, on_loop, pool))


def _hand_back(future, doc, on_loop, pool):
    """(The pool's thread) hand `future`'s Outcome to `on_loop` on `doc`'s event loop."""
    if future.cancelled():
        return
    try:
        outcome = future.result()
    except Exception as exc:  # the worker died, or what it returned could not be pickled
        _renew(pool)
        outcome = Outcome(error=RuntimeError(f"the lab's worker process failed ({type(exc).__name__}: {exc})"))
    try:
        doc.add_next_tick_callback(lambda: on_loop(outcome))
    except Exception:  # the session is gone: nobody waits for this
        traceback.print_exc(file=sys.stderr)


def _renew(broken):
    """Replace a pool that can take no more work (concurrent.futures' BrokenProcessPool)."""
    global _pool
    with _lock:
        if _pool is broken and getattr(broken, "_broken", False):
            _pool = _new_pool(broken._max_workers)
            broken.shutdown(wait=False, cancel_futures=True)
