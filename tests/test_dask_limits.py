"""`--dask` is bounded (issue 35): an endpoint that never answers, or answers in another
protocol, is a one-line error within `--dask-timeout`; a cluster without workers, or a run
that never comes back, is an error within its own limit; every address form either works as
docs/cli.md ("Parallel runs") says or is refused by the lab's own check, naming the forms it takes.

The servers here are sockets the test owns, on ports 6100-6199."""

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from distributed import LocalCluster

from lab import core
from lab.cli import main
from lab.parallel import DASK_PORT, check_dask_address, run_map

REPO = Path(__file__).resolve().parent.parent
SCENARIO = {"seed": 4, "workload": {"rate": 5, "duration_s": 5, "prompt_tokens": 800, "output_tokens": 40},
            "fleet": {"layout": "colocated", "gpus": 1}, "slo": {"ttft_s": 1.0, "tpot_ms": 25}}
TIMEOUT_S = 3
# Starting Python and importing the lab and distributed, and leaving: well under this here.
MARGIN_S = 3


def listening_socket():
    """A listening TCP socket on the first free port from 6100 to 6199."""
    for port in range(6100, 6200):
        sock = socket.socket()
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            continue
        sock.listen(8)
        return sock
    pytest.skip("no free port from 6100 to 6199")


@contextlib.contextmanager
def server(answer):
    """Accept connections on a port and hand each to `answer(conn)`; yields the port."""
    sock = listening_socket()
    conns, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            conns.append(conn)
            answer(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        sock.close()
        for conn in conns:
            conn.close()


def silent(conn):
    """Accept and never answer (the connection stays open)."""


def garbage_http(conn):
    """A web server's reply to bytes it does not understand, then more bytes that mean nothing."""
    with contextlib.suppress(OSError):
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<html>garbage\x00\xff" * 4)


def run_cli(*args):
    """`python -m lab ARGS` in a subprocess: (exit code, stderr, seconds to exit)."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "lab", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=TIMEOUT_S + 60)
    return proc.returncode, proc.stderr, time.monotonic() - started


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    return path


@pytest.mark.parametrize("answer, says", [(silent, f"no answer within {TIMEOUT_S} s"),
                                          (garbage_http, "did not answer as a Dask scheduler")])
@pytest.mark.parametrize("command", ["sweep", "plan"])
def test_a_silent_or_foreign_endpoint_is_one_error_line_within_the_timeout(scenario_file, answer, says, command):
    with server(answer) as port:
        flags = ["--vary", "workload.rate=3:6:3"] if command == "sweep" else ["--max-gpus", "2", "--chunks", "512"]
        code, err, seconds = run_cli(command, str(scenario_file), *flags, "--dask", f"tcp://127.0.0.1:{port}",
                                     "--dask-timeout", str(TIMEOUT_S))
    assert code == 2
    # One line, and the process left at once: no traceback, no stall while a client closes.
    assert err.count("\n") == 1 and err.startswith(f"error: --dask: the Dask scheduler at 'tcp://127.0.0.1:{port}' "), err
    assert says in err
    assert seconds < TIMEOUT_S + MARGIN_S, f"took {seconds:.1f} s"


def test_a_scheduler_without_workers_is_an_error_within_the_timeout():
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        started = time.monotonic()
        with pytest.raises(core.LabError) as caught:
            with run_map(dask_address=cluster.scheduler_address, timeout_s=1) as map_fn:
                list(map_fn(abs, [-1]))
        seconds = time.monotonic() - started
    assert str(caught.value).startswith(f"--dask: the Dask scheduler at {cluster.scheduler_address!r} has no workers")
    assert seconds < 1 + MARGIN_S


RELEASE = threading.Event()  # a run on the in-process cluster below waits for this


def wait_for_release(value):
    RELEASE.wait(60)  # (released by the test when it is done; the 60 s is only a backstop)
    return value


def test_a_run_that_never_returns_is_an_error_within_the_run_timeout():
    RELEASE.clear()
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp", dashboard_address=None) as cluster:
        try:
            started = time.monotonic()
            with pytest.raises(core.LabError) as caught:
                with run_map(dask_address=cluster.scheduler_address, timeout_s=5, run_timeout_s=1) as map_fn:
                    list(map_fn(wait_for_release, [1, 2]))
            seconds = time.monotonic() - started
        finally:
            RELEASE.set()
    assert str(caught.value).startswith("--dask-run-timeout: no run finished on the Dask cluster at "), caught.value
    assert "within 1 s" in str(caught.value)
    assert seconds < 1 + MARGIN_S


@pytest.mark.parametrize("text, address", [
    ("localhost", f"tcp://localhost:{DASK_PORT}"),
    ("tcp://localhost", f"tcp://localhost:{DASK_PORT}"),
    ("10.0.0.5:1234", "tcp://10.0.0.5:1234"),
    (" tcp://Node-7.cluster.local:8786 ", "tcp://Node-7.cluster.local:8786"),
    ("[::1]:8786", "tcp://[::1]:8786"),
    ("tcp://[fe80::1]", f"tcp://[fe80::1]:{DASK_PORT}"),
])
def test_the_documented_address_forms_become_tcp_addresses(text, address):
    assert check_dask_address(text) == address


@pytest.mark.parametrize("text", ["inproc://foo", "ucx://10.0.0.5:8786", "tls://10.0.0.5:8786", "ws://h:1", "-", "[",
                                  "h:0", "h:65536", "h:", "::1", "[zz]:1", "-h:1", "a..b", "http://h:8786", "h:1:2"])
def test_other_address_forms_are_refused_naming_the_accepted_ones(text):
    with pytest.raises(core.LabError) as caught:
        check_dask_address(text)
    assert caught.value.path == "--dask"
    assert "tcp://HOST:PORT, HOST:PORT or HOST" in caught.value.detail


def test_a_bare_host_means_the_default_port(capsys):
    # Nothing listens on localhost:8786 here: the error names the address the bare host stands for.
    with pytest.raises(core.LabError) as caught:
        with run_map(dask_address="localhost", timeout_s=1):
            pass
    assert str(caught.value).startswith(f"--dask: cannot reach a Dask scheduler at 'tcp://localhost:{DASK_PORT}' within 1 s")


@pytest.mark.parametrize("flags, field", [
    (["--dask-timeout", "nan"], "--dask-timeout"),
    (["--dask-timeout", "0"], "--dask-timeout"),
    (["--dask-timeout", "-1"], "--dask-timeout"),
    (["--dask-run-timeout", "inf"], "--dask-run-timeout"),
    (["--dask", "inproc://foo"], "--dask"),
])
def test_the_dask_flags_are_checked(scenario_file, capsys, flags, field):
    assert main(["sweep", str(scenario_file), "--vary", "workload.rate=3:6:3", "--dask", "tcp://127.0.0.1:6199", *flags]) == 2
    assert capsys.readouterr().err.startswith(f"error: {field}: ")


def test_a_dask_timeout_without_dask_is_refused(scenario_file, capsys):
    assert main(["sweep", str(scenario_file), "--vary", "workload.rate=3:6:3", "--dask-timeout", "5"]) == 2
    assert capsys.readouterr().err.startswith("error: --dask-timeout: ")
