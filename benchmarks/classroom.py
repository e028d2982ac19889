"""A classroom on one `lab serve`: N students changing controls at once, with and without a heavy page.

    python benchmarks/classroom.py [--students 30] [--seconds 60] [--workers 4] [--port 6310]

Each student is a Bokeh client session (bokeh.client, the protocol a browser speaks, without a
browser's drawing: 30 Chromium pages on a laptop would measure Chromium; it decodes only the
status and the slider it times, as a browser decodes on its own machine). A student opens the
sandbox, then every 2 to 4 s (a student reads the result before the next change) moves the
request rate to a value it has not tried (so each change simulates), and times the answer:
from sending the change to the page's status saying the run of that rate is done (metrics and
stars in; no paint is reported by a client, so each run's second half starts after the page's
FINISH_WAIT_MS wait for one, as in a hidden tab). A change is lost if no answer comes within
60 s after the minute ends, or the last status names another rate.

The heavy page: one more session on a copy of mission 01 sized near the page's bound
(PAGE_MAX_REQUESTS), which changes its GPU count again each time its run is done, so a heavy
run is under way all the minute. The run is done twice, without and with it; the server is
restarted between, and its peak memory (VmHWM) is read from /proc at the end of each.

Prints, per run: changes sent and answered, lost, the answer's median, 95th percentile and
worst, the heavy page's runs, the server's peak memory, and the load average.
"""

import argparse
import html
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import panel  # noqa: E402,F401  (the page's model types, for the client to read its documents)
from bokeh.client import pull_session  # noqa: E402
from bokeh.core.serialization import Serialized  # noqa: E402
from bokeh.document.events import MessageSentEvent  # noqa: E402
from bokeh.events import DocumentReady  # noqa: E402
from tornado.ioloop import IOLoop  # noqa: E402

import lab.ui.app  # noqa: E402,F401  (the lab's own models, likewise)
from lab.ui.words.control_words import format_value  # noqa: E402
from lab.ui.runs.run_work import PAGE_MAX_REQUESTS  # noqa: E402

# Bokeh's client reads each message one call deeper than the last (ClientConnection._next ->
# _handle_messages -> _next ...), about three frames a message: past some 300 messages a
# session overflowed Python's default limit (a run of several minutes). Room for 6,000.
sys.setrecursionlimit(20_000)
threading.stack_size(256 * 1024 * 1024)  # (the students' threads: deep Python recursion needs C stack too)

SETTINGS_RE = re.compile(r'data-busy="false" data-run="(\d+)"[^>]*data-settings="([^"]*)"')
THINK_S = (2.0, 4.0)
GRACE_S = 60.0
HEAVY_S = 1_980.0


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _missions(folder):
    light = json.loads((REPO / "missions" / "01-mixing-hurts.json").read_text(encoding="utf-8"))
    heavy = json.loads(json.dumps(light))
    heavy.update(id="heavy-class", title="Heavy", order=99)
    heavy["scenario"]["workload"].update(rate=round(PAGE_MAX_REQUESTS * 0.99 / HEAVY_S, 3), duration_s=HEAVY_S)
    heavy["scenario"]["fleet"]["gpus"] = 32
    heavy["controls"]["gpus"].update(min=28, max=36)
    heavy["stars"] = heavy["stars"][:1]
    (Path(folder) / "99-heavy.json").write_text(json.dumps(heavy), encoding="utf-8")


def _model(doc, css):
    return next(m for m in doc.models if css in (getattr(m, "css_classes", None) or []))


class Student(threading.Thread):
    """One page, changed every THINK_S until `stop_at`; `answers` are seconds, change to done."""

    def __init__(self, url, arguments, control, values, stop_at, seed, again_at_once=False):
        super().__init__(daemon=True)
        self.url, self.arguments, self.control, self.values = url, arguments, control, list(values)
        self.stop_at, self.rng, self.again_at_once = stop_at, random.Random(seed), again_at_once
        self.answers, self.sent, self.error = [], 0, None
        self.ready = threading.Event()
        self.waiting = None  # (value, sent at) of the change not yet answered
        self.last_status = None

    def run(self):
        try:
            self.loop = IOLoop()
            self.session = pull_session(url=self.url, arguments=self.arguments, io_loop=self.loop)
            doc = self.session.document
            self.slider = _model(doc, f"stf-control-{self.control}")
            self.status = _model(doc, "stf-status-pane")
            doc.on_change(self._changed)
            self._read_only_what_is_timed()
            # What a browser sends once it has rendered the page: the lab's first run waits for it.
            doc.callbacks.trigger_on_change(MessageSentEvent(doc, "bokeh_event", DocumentReady()))
        except Exception as exc:  # reported by the driver
            self.error = exc
            self.ready.set()
            return
        self.ready.set()
        # The session's messages until close(): Bokeh's client reads them only inside this loop
        # (its public loop_until_closed went in Bokeh 3; the private one is what it called).
        self.session._loop_until_closed()

    def _read_only_what_is_timed(self):
        """Apply only the server's changes to the status and the slider.

        A browser in a real classroom decodes its own page's changes on its own machine; here
        30 clients share the server's two cores, and decoding every canvas and plot patch into
        Python models cost them about a third of the machine's CPU (measured: 49 s of CPU in
        the benchmark's process against 76 s in the server's, light run). Everything is still
        sent and received in full: only the client's decoding of what it does not time is
        skipped. (The session's patch handler is private Bokeh API, like the loop below.)"""
        session, doc = self.session, self.session.document
        timed = {self.slider.id, self.status.id}

        def handle_patch(message):
            events = [e for e in message.content.get("events", [])
                      if e.get("kind") == "ModelChanged" and (e.get("model") or {}).get("id") in timed]
            if events:
                doc.apply_json_patch(Serialized({"events": events}, message.buffers), setter=session)

        session._handle_patch = handle_patch

    def start_changing(self):
        self.loop.add_callback(self._change)

    def _change(self):
        if time.monotonic() > self.stop_at:
            return
        current = self.slider.value
        value = self.rng.choice([v for v in self.values if v != current])
        self.waiting = (value, time.monotonic())
        self.sent += 1
        self.slider.value = value
        self.slider.set_from_json("value_throttled", value)

    def _changed(self, event):
        if getattr(event, "model", None) is not self.status:
            return
        found = SETTINGS_RE.search(html.unescape(self.status.text or ""))
        if not found:
            return
        self.last_status = json.loads(html.unescape(found.group(2)))
        if self.waiting is None:
            return
        value, sent = self.waiting
        if self.last_status.get(self.control) == format_value(value):
            self.answers.append(time.monotonic() - sent)
            self.waiting = None
            think = 0.0 if self.again_at_once else self.rng.uniform(*THINK_S)
            self.loop.call_later(think, self._change)

    def close(self):
        if self.error is None:
            self.loop.add_callback(self.session.close)


def _peak_rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def _cpu_s(pid):
    """CPU seconds (user + system) of one process so far, from /proc (None where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(args, heavy):
    port = args.port or _free_port()
    with tempfile.TemporaryDirectory() as folder:
        _missions(folder)
        env = dict(os.environ, BOKEH_RESOURCES="server")
        server = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--port", str(port), "--no-show", "--missions", folder,
                                   "--workers", str(args.workers)], cwd=REPO, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("lab serve did not start")
                    time.sleep(0.3)
            url = f"http://127.0.0.1:{port}/lab"
            rates = [r / 2 for r in range(2, 81)]  # the sandbox's rate control: 1 to 40 by 0.5
            far = time.monotonic() + 3600
            students = [Student(url, {"mission": "sandbox"}, "rate", rates, far, seed) for seed in range(args.students)]
            heavy_page = Student(url, {"mission": "heavy-class"}, "gpus", range(28, 37), far, 99, again_at_once=True) if heavy else None
            opened = time.monotonic()
            for s in students + ([heavy_page] if heavy_page else []):
                s.start()
                s.ready.wait(120)
                if s.error is not None:
                    raise SystemExit(f"a session did not open: {s.error!r}")
            print(f"  {len(students)} sessions open in {time.monotonic() - opened:.1f} s", flush=True)
            stop_at = time.monotonic() + args.seconds
            cpu_at_start = (_cpu_s(server.pid), time.process_time())
            for s in students + ([heavy_page] if heavy_page else []):
                s.stop_at = stop_at
            if heavy_page:
                heavy_page.start_changing()
            for s in students:  # (IOLoop.add_callback is the one call safe from another thread)
                s.loop.add_callback(s.loop.call_later, s.rng.uniform(0, THINK_S[1]), s._change)
            time.sleep(args.seconds)  # the benchmark's minute (a benchmark, not a test: it may wait)
            end = time.monotonic() + GRACE_S
            while time.monotonic() < end and any(s.waiting for s in students):
                time.sleep(0.5)
            load = os.getloadavg()
            server_cpu, client_cpu = _cpu_s(server.pid), time.process_time()
            if server_cpu is not None and cpu_at_start[0] is not None:
                server_cpu -= cpu_at_start[0]
            client_cpu -= cpu_at_start[1]
            rss = _peak_rss_mb(server.pid)
            for s in students + ([heavy_page] if heavy_page else []):
                s.close()
        finally:
            server.terminate()
            server.wait(30)
    answers = sorted(a for s in students for a in s.answers)
    sent = sum(s.sent for s in students)
    lost = sum(1 for s in students if s.waiting)
    wrong_end = sum(1 for s in students if (s.last_status or {}).get("rate") != format_value(s.slider.value))

    def pct(p):
        return answers[min(len(answers) - 1, int(round(p * (len(answers) - 1))))] if answers else float("nan")

    label = "with a heavy page" if heavy else "light pages only"
    print(f"{label}: {sent} changes sent, {len(answers)} answered, {lost} lost, {wrong_end} ending on another rate; "
          f"answer median {pct(0.5):.2f} s, p95 {pct(0.95):.2f} s, worst {answers[-1] if answers else float('nan'):.2f} s"
          + (f"; heavy page: {len(heavy_page.answers)} runs done, median {sorted(heavy_page.answers)[len(heavy_page.answers) // 2] if heavy_page.answers else float('nan'):.1f} s" if heavy else "")
          + f"; server peak memory {rss:,.0f} MB; load average {load[0]:.2f}", flush=True)
    print(f"  CPU from the first change to the last answer: server {server_cpu or float('nan'):.1f} s "
          f"(its loop; workers apart), the {len(students)} clients {client_cpu:.1f} s", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--only", choices=("light", "heavy"), default=None)
    args = parser.parse_args(argv)
    print(f"classroom: {args.students} students, {args.seconds:g} s, lab serve --workers {args.workers}, "
          f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}", flush=True)
    for heavy in (False, True):
        if args.only in (None, "heavy" if heavy else "light"):
            one_run(args, heavy)


if __name__ == "__main__":
    main()
