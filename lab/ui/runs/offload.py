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
(`work` must be picklable: a module-level function and its arguments, as lab/ui/runs/run_work.py's
are). For a run of 200,000 requests that was about 2 s of unpickling its requests, their
rows and blames, and unpickling is one call that holds the interpreter lock throughout: on
the pool's thread it held every page for those 2 s. So each list longer than SLICE_ITEMS
in what the work returns (the requests, their rows and blames, a small run's step logs)
comes back in slices, pickled apart in the worker, and each long array (a big run's step
logs: typed numbers, unpickled at memory speed) as a slice of its own; the loop unpickles
slices for at most TURN_S a turn, taking other pages' changes between turns. (Before the
arrays were sliced too, the pool's thread unpickled them, 220 MB at the page's bound, in
one call of 0.2 to 0.3 s.)

Heavy work (a run of more than run_work.HEAVY_REQUESTS requests, a large upload) goes to a
second, smaller pool whose processes run at a lower CPU priority (HEAVY_NICE; on Linux,
SCHED_IDLE: only when a core would otherwise idle): on a laptop's
two cores, one student's run at the page's bound otherwise takes a core from the server and the
other students' small runs, whose answers then slow down for everyone (benchmarks/classroom.py;
its figures are in benchmarks/README.md). The heavy run still gets every cycle nobody else
wants.

Without a pool (the browser, where Pyodide has neither processes nor threads; tests; the
static site's pre-render) `then` runs at once, in the caller's turn, as the page always did.
"""

import dataclasses
import os
import pickle
import sys
import threading
import time
import traceback
from array import array
from itertools import chain

__all__ = ["Outcome", "run", "start_pool", "stop_pool", "pooled", "DEFAULT_WORKERS", "MAX_WORKERS", "HEAVY_NICE"]

DEFAULT_WORKERS = 4  # runs at once; more wait their turn (each page has at most one under way: LabApp)
MAX_WORKERS = 64
HEAVY_NICE = 10  # the heavy pool's niceness (Linux: about a tenth of a normal process's share when both want a core)
PARENT_CHECK_S = 1.0  # how often a worker looks whether the server is still there
SLICE_ITEMS = 5_000  # items of a long list per slice: about 20 ms of unpickling requests on the loop
SLICE_DEPTH = 4  # how deep in dicts, tuples, short lists and dataclasses lists are looked for (a twin's result: 4)
LOOK_INTO_ITEMS = 256  # a list this short is looked into (a run's GPUs, whose step logs are long lists)
TURN_S = 0.015  # slices unpickled in one turn of the loop, at most this long (then the next turn)

_pools = {}  # heavy (bool) -> its ProcessPoolExecutor, while `lab serve` runs
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
    """Run later `run` calls' work in `workers` processes, and heavy work in half as many (at
    least one) at a lower priority (idempotent for the same size)."""
    if not 1 <= int(workers) <= MAX_WORKERS:
        raise ValueError(f"workers: {workers} is not 1 to {MAX_WORKERS}")
    sizes = {False: int(workers), True: max(1, int(workers) // 2)}
    with _lock:
        for heavy, size in sizes.items():
            pool = _pools.get(heavy)
            if pool is not None and pool._max_workers == size:
                continue
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            _pools[heavy] = _new_pool(size, heavy)


def _new_pool(workers, heavy):
    # (imported here: the browser, which has no processes, never needs them)
    import concurrent.futures
    import multiprocessing

    # "spawn": a fresh interpreter, not a fork of a server with threads (a forked child can
    # inherit a lock some other thread held); it imports lab.core alone.
    return concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                                  initializer=_worker_start, initargs=(os.getpid(), heavy))


def _worker_start(server_pid, heavy):
    """(A worker process, as it starts) leave with the server, and in the heavy pool yield the
    CPU to the server and light runs: on Linux run only when a core would otherwise idle
    (SCHED_IDLE), elsewhere at a lower priority (nice), on Windows at the normal one."""
    threading.Thread(target=_leave_with, args=(server_pid,), daemon=True).start()
    if heavy and hasattr(os, "nice"):
        os.nice(HEAVY_NICE)
    if heavy and hasattr(os, "SCHED_IDLE"):
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def _leave_with(server_pid):
    """Exit once the server is gone (killed, so it could not stop its pool): a worker never
    outlives it, finishing a run nobody waits for."""
    while os.getppid() == server_pid:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def stop_pool():
    """Stop the pools: queued work is dropped and runs under way are ended (their processes too)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()


def pooled():
    """Whether work goes to worker processes (False: it runs at once)."""
    return bool(_pools)


def run(work, then, heavy=False):
    """Call `then(Outcome)` with what `work()` returned or raised: at once without a pool;
    with one, `work` in a worker process (of the heavy pool if `heavy`) and `then` on the
    current document's event loop, under
    its lock (Bokeh's add_next_tick_callback, the one Document method safe from another thread).
    A page closed meanwhile gets nothing. A worker that died (out of memory, say) fails this
    work with a message, and the pool is started afresh for the next."""
    import panel as pn
    from panel.io.state import set_curdoc

    pool, doc = _pools.get(bool(heavy)), pn.state.curdoc
    if pool is None or doc is None:
        then(Outcome.of(work))
        return

    def on_loop(outcome):
        with set_curdoc(doc):
            then(outcome)

    try:
        future = pool.submit(_in_worker, work)
    except Exception as exc:  # a broken pool (a worker died): a new one for the next run
        _renew(pool)
        then(Outcome(error=exc))
        return
    future.add_done_callback(lambda done: _hand_back(done, doc, on_loop, pool))


def _in_worker(work):
    """(In the worker process) work's Outcome, with its long lists cut out, and their slices
    pickled (see the module docstring)."""
    outcome, slices = Outcome.of(work), []
    outcome._value = _cut(outcome._value, slices, SLICE_DEPTH)
    return outcome, slices


class _Sliced:
    """Where a long list was: it is slices[first:last], concatenated (an array: slices[first])."""

    __slots__ = ("first", "last")

    def __init__(self, first, last):
        self.first, self.last = first, last


def _cut(value, slices, depth):
    """`value` with each list in it longer than SLICE_ITEMS (looked for `depth` deep in
    dicts, tuples and dataclass instances, which are changed in place) replaced by a _Sliced,
    its slices pickled onto `slices`."""
    if type(value) is list and len(value) > SLICE_ITEMS:
        first = len(slices)
        slices.extend(pickle.dumps(value[i:i + SLICE_ITEMS], pickle.HIGHEST_PROTOCOL)
                      for i in range(0, len(value), SLICE_ITEMS))
        return _Sliced(first, len(slices))
    if type(value) is array and len(value) > SLICE_ITEMS:
        slices.append(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
        return _Sliced(len(slices) - 1, len(slices))
    return _each(value, lambda item: _cut(item, slices, depth - 1)) if depth > 0 else value


def _paste(value, lists, depth):
    """_cut undone: each _Sliced in `value` replaced by its list (`lists`: the slices, unpickled)."""
    if type(value) is _Sliced:
        pieces = lists[value.first:value.last]
        return pieces[0] if type(pieces[0]) is array else list(chain.from_iterable(pieces))
    return _each(value, lambda item: _paste(item, lists, depth - 1)) if depth > 0 else value


def _each(value, change):
    """`value` with `change` applied to each item of a dict, tuple or short list, or field of a
    dataclass: `value` itself when nothing changed (so a frozen dataclass holding it is never set)."""
    if type(value) is list and len(value) <= LOOK_INTO_ITEMS:
        changed = [change(item) for item in value]
        return value if all(a is b for a, b in zip(changed, value)) else changed
    if type(value) is dict:
        changed = {key: change(item) for key, item in value.items()}
        return value if all(changed[key] is item for key, item in value.items()) else changed
    if type(value) is tuple:
        changed = tuple(change(item) for item in value)
        return value if all(a is b for a, b in zip(changed, value)) else changed
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kept = vars(value)  # (GpuLog makes some columns when read: those are not in it, and left alone)
        for field in dataclasses.fields(value):
            if field.name in kept:
                item = kept[field.name]
                changed = change(item)
                if changed is not item:  # (never in a frozen dataclass: it holds no long list)
                    setattr(value, field.name, changed)
    return value


def _hand_back(future, doc, on_loop, pool):
    """(The pool's thread) hand `future`'s Outcome to `on_loop` on `doc`'s event loop, its
    lists' slices unpickled there one a turn."""
    if future.cancelled():
        return
    try:
        outcome, slices = future.result()
    except Exception as exc:  # the worker died, or what it returned could not be pickled
        _renew(pool)
        outcome, slices = Outcome(error=RuntimeError(f"the lab's worker process failed ({type(exc).__name__}: {exc})")), []
    lists = []

    def next_slice():
        nonlocal outcome
        try:
            turn_ends = time.perf_counter() + TURN_S
            while len(lists) < len(slices):
                lists.append(pickle.loads(slices[len(lists)]))
                slices[len(lists) - 1] = None  # (its bytes are not needed twice)
                if len(lists) < len(slices) and time.perf_counter() > turn_ends:
                    _on_loop(doc, next_slice)
                    return
            outcome._value = _paste(outcome._value, lists, SLICE_DEPTH)
        except Exception as exc:
            outcome = Outcome(error=RuntimeError(f"the lab could not read its worker's answer ({type(exc).__name__}: {exc})"))
        on_loop(outcome)

    _on_loop(doc, next_slice)


def _on_loop(doc, callback):
    try:
        doc.add_next_tick_callback(callback)
    except Exception:  # the session is gone: nobody waits for this
        traceback.print_exc(file=sys.stderr)


def _renew(broken):
    """Replace a pool that can take no more work (concurrent.futures' BrokenProcessPool)."""
    with _lock:
        for heavy, pool in _pools.items():
            if pool is broken and getattr(broken, "_broken", False):
                _pools[heavy] = _new_pool(broken._max_workers, heavy)
                broken.shutdown(wait=False, cancel_futures=True)
