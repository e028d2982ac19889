"""A static file server that keeps count of what it sends, for measuring a page's load.

    python tests/static_server.py ROOT PORT LOG

Serves ROOT on 127.0.0.1:PORT like `python -m http.server` (no compression, as many hosts
and a classroom's laptop serve it) and appends one line per response to LOG:
`<status> <body bytes> <path>`. The bytes are those written to the socket for the body,
so a browser's cache hits (which never reach the server) are not counted: what the log
sums to is what crossed the network. `sent_bytes(LOG)` reads it.
"""

import functools
import http.server
import sys

__all__ = ["sent_bytes", "responses", "main"]


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
