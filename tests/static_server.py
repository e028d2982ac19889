"""A static file server that keeps count of what it sends, for measuring a page's load.

    python tests/static_server.py ROOT PORT LOG

Serves ROOT on 127.0.0.1:PORT like `python -m http.server` (no compression, as many hosts
and a classroom's laptop serve it) and appends one line per response to LOG:
`<status> <body bytes> <path>`. The bytes are those written to the socket for the body,
so a browser's cache hits (which never reach the server) are not counted: what the log
sums to is what crossed the network. `sent_bytes(LOG)` reads it.

`Server(root)` runs it in a subprocess, on a free port unless given one, for tests and
benchmarks; `url(path)`, `sent_bytes()`, `stop()`.
"""

import functools
import http.server
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["Server", "sent_bytes", "responses", "main"]


def responses(log_path):
    """[(status, bytes, path)] from a LOG, in order."""
    out = []
    try:
        with open(log_path, encoding="utf-8") as f:
            for line in f:
                status, size, path = line.rstrip("\n").split(" ", 2)
                out.append((int(status), int(size), path))
    except FileNotFoundError:
        pass
    return out


def sent_bytes(log_path):
    return sum(size for _, size, _ in responses(log_path))


def free_port():
    """A free port on 127.0.0.1: any, or one of STF_TEST_PORTS ("6200-6299") when a shared
    machine gives the tests a range of their own."""
    span = os.environ.get("STF_TEST_PORTS", "")
    if not span:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    first, _, last = span.partition("-")
    for port in range(int(first), int(last or first) + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"STF_TEST_PORTS={span}: no free port")


class Server:
    """This server in a subprocess on 127.0.0.1, serving `root`, until stop().

    `port`: a free one unless given (a person timing a run wants a known one); `host`: the
    name the URLs use (another name for 127.0.0.1 makes another site); `log`: where the
    record of what was sent goes (a temporary file unless given)."""

    def __init__(self, root, port=None, host="127.0.0.1", log=None):
        self.root = Path(root)
        self.port = port or free_port()
        self.host = host
        self.log = Path(log) if log else Path(tempfile.mkdtemp(prefix="stf-served-")) / "sent.log"
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), str(root), str(self.port),
                                      str(self.log)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"tests/static_server.py on port {self.port} did not start (port in use?)")
                time.sleep(0.05)

    def url(self, path=""):
        return f"http://{self.host}:{self.port}/{path}"

    def sent_bytes(self):
        return sent_bytes(self.log)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class CountingHandler(http.server.SimpleHTTPRequestHandler):
    log_path = None

    def copyfile(self, source, outputfile):
        sent = 0
        while chunk := source.read(64 * 1024):
            outputfile.write(chunk)
            sent += len(chunk)
        self._record(self._code, sent)

    def log_request(self, code="-", size="-"):
        self._code = int(code) if str(code).isdigit() else 0
        if self._code != 200:  # no body follows (304, errors): record it now
            self._record(self._code, 0)

    def _record(self, code, sent):
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(f"{code} {sent} {self.path}\n")

    def log_message(self, *args):  # quiet: the LOG is the record
        pass


def main(argv=None):
    root, port, log_path = (argv or sys.argv[1:])[:3]
    open(log_path, "w").close()
    handler = functools.partial(type("Handler", (CountingHandler,), {"log_path": log_path}), directory=root)
    with http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), handler) as httpd:
        httpd.serve_forever()


if __name__ == "__main__":
    main()
