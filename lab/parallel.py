"""Where independent runs execute: in this process, over local processes, or on a Dask cluster.

`lab sweep` and `lab plan` hand their runs to a map function, whichever executor runs them:

    with run_map(workers=4) as map_fn:                 # ProcessPoolExecutor (the default)
        results = list(map_fn(run_point, tasks))       # in the order of `tasks`
    with run_map(dask_address="tcp://host:8786") as map_fn:   # a distributed.Client's executor

`workers=1` maps in this process (no pickling, easiest to debug). Results never depend on
where a run went: each task carries everything its run needs (a scenario as its dict, never
live objects) and the map keeps the tasks' order. Dask is optional
(`pip install 'split-the-fleet[cluster]'`).

Every wait on a cluster is bounded, so a wrong address is an error line, never a hang:
reaching the scheduler, its answer, a worker joining and closing take at most `timeout_s`
(`--dask-timeout`); a map fails when no run finishes for `run_timeout_s`
(`--dask-run-timeout`). The scheduler is first asked who it is over a connection of our own
(`_probe`), because a Client that meets a silent port or another protocol waits forever or
fails only after a long close.
"""

import concurrent.futures as cf
import contextlib
import ipaddress
import os
import re

from lab.core.errors import LabError

__all__ = ["run_map", "default_workers", "parse_workers", "check_dask_address", "DASK_PORT",
           "DASK_TIMEOUT_S", "DASK_RUN_TIMEOUT_S", "DASK_ADDRESS_FORMS", "MAX_WORKERS"]

MAX_WORKERS = 256
DASK_PORT = 8786  # a Dask scheduler's default port
# How long `--dask` waits for the scheduler's answer (and a worker, and closing) before an error.
DASK_TIMEOUT_S = 10.0
# How long a map waits with no run finishing on the cluster (a lost worker, a stuck run).
DASK_RUN_TIMEOUT_S = 600.0
DASK_ADDRESS_FORMS = f"tcp://HOST:PORT, HOST:PORT or HOST (port {DASK_PORT}), HOST a name, an IPv4 address or an [IPv6] one"
# tcp:// is optional; HOST is a name, an IPv4 address or a bracketed IPv6 one; PORT is optional.
_ADDRESS = re.compile(r"(?:tcp://)?(?P<host>\[[0-9A-Fa-f:.%]+\]|[A-Za-z0-9](?:[A-Za-z0-9_\-]*[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9_\-]*[A-Za-z0-9])?)*)(?::(?P<port>\d{1,5}))?")


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
    """A scheduler address in the forms DASK_ADDRESS_FORMS names, as tcp://HOST:PORT; else LabError.

    Other protocols (tls, ucx, inproc, ws) are refused: the lab passes a Client no
    certificates or transports, so they could only fail later, less clearly.
    """
    text = str(address).strip()
    match = _ADDRESS.fullmatch(text) if len(text) <= 300 else None
    host = match and match["host"]
    if host and host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            match = None
    port = int(match["port"]) if match and match["port"] else DASK_PORT
    if not match or not 1 <= port <= 65535:
        raise LabError(field, f"{text[:60]!r} is not a Dask scheduler address: expected {DASK_ADDRESS_FORMS}")
    return f"tcp://{host}:{port}"


@contextlib.contextmanager
def run_map(workers=1, dask_address=None, timeout_s=DASK_TIMEOUT_S, run_timeout_s=DASK_RUN_TIMEOUT_S):
    """A map function (`map_fn(fn, items)` -> results in order) over the chosen executor.

    `fn` must be a module-level function and `items` picklable unless `workers` is 1.
    """
    if dask_address is not None:
        with _dask_map(check_dask_address(dask_address), timeout_s, run_timeout_s) as map_fn:
            yield map_fn
        return
    if workers == 1:
        yield map
        return
    with cf.ProcessPoolExecutor(max_workers=workers) as executor:
        yield executor.map


@contextlib.contextmanager
def _dask_map(address, timeout_s, run_timeout_s):
    try:
        from distributed import Client
    except ImportError:
        raise LabError("--dask", "needs Dask's distributed scheduler: pip install 'split-the-fleet[cluster]' "
                                 "(or 'dask[distributed]')") from None
    identity = _probe(address, timeout_s)
    try:
        client = Client(address, timeout=timeout_s, set_as_default=False)
    except Exception as exc:  # the scheduler answered a moment ago: say what the Client met
        raise LabError("--dask", f"cannot connect to the Dask scheduler at {address!r}: {_reason(exc)}") from None
    try:
        if not identity.get("n_workers"):
            try:
                client.wait_for_workers(1, timeout=timeout_s)
            except (TimeoutError, OSError):
                raise LabError("--dask", f"the Dask scheduler at {address!r} has no workers (none joined within "
                                         f"{timeout_s:g} s): start some with `dask worker {address}`") from None
        executor = client.get_executor()
        yield lambda fn, items: _bounded_map(executor, fn, items, address, run_timeout_s)
    finally:
        with contextlib.suppress(Exception):
            client.close(timeout=timeout_s)


def _bounded_map(executor, fn, items, address, run_timeout_s):
    """Submit every run now (as Executor.map does); yield results in order, or LabError when
    no run finishes for `run_timeout_s`."""
    futures = [executor.submit(fn, item) for item in items]

    def results():
        pending = set(futures)
        for future in futures:
            while not future.done():
                done, pending = cf.wait(pending, timeout=run_timeout_s, return_when=cf.FIRST_COMPLETED)
                if not done:
                    raise LabError("--dask-run-timeout", f"no run finished on the Dask cluster at {address!r} within "
                                                         f"{run_timeout_s:g} s (its workers may be gone or busy); "
                                                         "raise --dask-run-timeout for runs that long")
            try:
                yield future.result()
            except (cf.CancelledError, OSError) as exc:  # the cluster lost the run
                raise LabError("--dask", f"the Dask cluster at {address!r} lost a run: {_reason(exc)}") from None

    return results()


def _probe(address, timeout_s):
    """The scheduler's identity (a dict), asked over our own connection within `timeout_s`.

    The whole exchange runs on a private event loop under one deadline, so a port that
    accepts and never answers, or answers in another protocol, leaves nothing running.
    """
    import asyncio  # (here, not at the top: every `lab` command imports this module for its flags)

    from distributed.comm import connect

    host, port = address[len("tcp://"):].rsplit(":", 1)
    host = host.strip("[]")

    async def reach(deadline):
        # A refused connection is tried again until the deadline, as Dask's own client does
        # (a scheduler may be starting); a connection made is closed at once.
        loop = asyncio.get_running_loop()
        while True:
            try:
                _, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), max(0.01, deadline - loop.time()))
                writer.close()
                return
            except (OSError, asyncio.TimeoutError) as exc:
                if loop.time() + 0.2 >= deadline:
                    raise _Unreachable(_reason(exc)) from None
                await asyncio.sleep(0.2)

    async def ask():
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await reach(deadline)
        comm = await asyncio.wait_for(connect(address, timeout=max(0.01, deadline - loop.time())), max(0.01, deadline - loop.time()))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await asyncio.wait_for(comm.read(), max(0.01, deadline - loop.time()))
        finally:
            comm.abort()

    try:
        # (Every step inside has the deadline; this outer limit is only a backstop.)
        identity = asyncio.run(asyncio.wait_for(ask(), timeout_s + 1))
    except _Unreachable as exc:
        raise LabError("--dask", f"cannot reach a Dask scheduler at {address!r} within {timeout_s:g} s ({exc}); "
                                 "start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
    except (asyncio.TimeoutError, TimeoutError):
        raise LabError("--dask", f"the Dask scheduler at {address!r} sent no answer within {timeout_s:g} s: something "
                                 "there takes connections but does not answer as a Dask scheduler; check the host and port") from None
    except Exception as exc:  # another protocol: garbage lengths (MemoryError), a closed connection, bad data
        raise LabError("--dask", f"the Dask scheduler at {address!r} did not answer as a Dask scheduler ({_reason(exc)}); "
                                 f"check the host and port (a scheduler's is {DASK_PORT} by default; its dashboard's web "
                                 "page is not it)") from None
    if not isinstance(identity, dict) or identity.get("type") != "Scheduler":
        raise LabError("--dask", f"the Dask scheduler at {address!r} did not answer as a Dask scheduler (it answered as "
                                 f"{identity.get('type') if isinstance(identity, dict) else 'something else'!r})")
    return identity


class _Unreachable(Exception):
    """No TCP connection to the scheduler's address before the deadline."""


def _reason(exc):
    """An exception's first line, short (a MemoryError's "3.07 EiB" says nothing to a user)."""
    if isinstance(exc, MemoryError):
        return "its answer is not Dask's protocol"
    text = str(exc).splitlines()[0][:200] if str(exc).strip() else ""
    return text or type(exc).__name__
