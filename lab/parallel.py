"""Where independent runs execute: in this process, over local processes, or on a Dask cluster.

`lab sweep` and `lab plan` hand their runs to a map function, one code path for all three:

    with run_map(workers=4) as map_fn:                 # ProcessPoolExecutor (the default)
        results = list(map_fn(run_point, tasks))       # in the order of `tasks`
    with run_map(dask_address="tcp://host:8786") as map_fn:   # distributed.Client(...).get_executor()

Both are `concurrent.futures.Executor`s, so `executor.map` serves either; `workers=1` maps in
this process (no pickling, easiest to debug). Results never depend on where a run went: each
task carries everything its run needs (a scenario as its dict, never live objects) and the map
keeps the tasks' order. Dask is optional (`pip install 'split-the-fleet[cluster]'`).
"""

import contextlib
import os
import re

from lab.core.errors import LabError

__all__ = ["run_map", "default_workers", "parse_workers", "check_dask_address", "DASK_TIMEOUT_S", "MAX_WORKERS"]

MAX_WORKERS = 256
# How long `--dask` waits for the scheduler before saying it cannot be reached (no hang).
DASK_TIMEOUT_S = 10.0
# tcp://host:port, tls://host:port, host:port, or a bare host (Dask's default port 8786).
_ADDRESS = re.compile(r"^(?:(tcp|tls|inproc|ws|wss|ucx)://)?[A-Za-z0-9_.\-\[\]:%]+(?::\d{1,5})?$")


def default_workers():
    """Local processes by default: one per CPU."""
    return max(1, os.cpu_count() or 1)


def parse_workers(text, field="--workers"):
    """'4' -> 4; a whole number from 1 to MAX_WORKERS, else LabError naming the flag."""
    raw = str(text).strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 4 and 1 <= int(raw) <= MAX_WORKERS):
        raise LabError(field, f"expected a whole number of processes from 1 to {MAX_WORKERS}, got {raw[:20]!r}")
    return int(raw)


def check_dask_address(address, field="--dask"):
    """A scheduler address as Dask spells it (tcp://10.0.0.5:8786), or LabError."""
    text = str(address).strip()
    if not text or len(text) > 300 or not _ADDRESS.match(text):
        raise LabError(field, f"{text[:60]!r} is not a Dask scheduler address such as tcp://10.0.0.5:8786")
    return text


@contextlib.contextmanager
def run_map(workers=1, dask_address=None, timeout_s=DASK_TIMEOUT_S):
    """A map function (`map_fn(fn, items)` -> results in order) over the chosen executor.

    `fn` must be a module-level function and `items` picklable unless `workers` is 1.
    """
    if dask_address is not None:
        with _dask_executor(check_dask_address(dask_address), timeout_s) as executor:
            yield executor.map
        return
    if workers == 1:
        yield map
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as executor:
        yield executor.map


@contextlib.contextmanager
def _dask_executor(address, timeout_s):
    try:
        from distributed import Client
    except ImportError:
        raise LabError("--dask", "needs Dask's distributed scheduler: pip install 'split-the-fleet[cluster]' "
                                 "(or 'dask[distributed]')") from None
    try:
        client = Client(address, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError) as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise LabError("--dask", f"cannot reach a Dask scheduler at {address!r} within {timeout_s:g} s ({reason}); "
                                 "start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
    try:
        yield client.get_executor()
    finally:
        client.close()
