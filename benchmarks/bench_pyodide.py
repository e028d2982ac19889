"""Time lab.core's `simulate` inside bare Pyodide under Node (and, for comparison, CPython).

    python benchmarks/bench_pyodide.py [--runs 15] [--warmup 2] [--no-cpython] [--json FILE]

The scenarios are the two mission-sized benchmarks of benchmarks/scenarios.py.
Each gets `--warmup` untimed runs, then `--runs` timed ones; the table shows the
median (and min/max).

Needs node and node_modules/pyodide (scripts/setup.sh installs both).
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "tests" / "pyodide" / "run_core.mjs"

sys.path.insert(0, str(REPO / "benchmarks"))
from scenarios import SCENARIOS  # noqa: E402  (the same two mission-sized runs as bench_core.py)


def load_scenarios():
    """(source, {name: scenario dict}): the mission-sized runs of benchmarks/scenarios.py."""
    return "benchmarks/scenarios.py", dict(SCENARIOS)


# Runs unchanged in CPython and in Pyodide; prints one JSON object.
PROGRAM = r'''
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import lab.core as core

SCENARIOS = json.loads(%(scenarios)r)
RUNS, WARMUP = %(runs)d, %(warmup)d
out = {"python": sys.version.split()[0], "platform": sys.platform, "scenarios": {}}
for name, raw in SCENARIOS.items():
    scenario = core.load_scenario(raw)
    for _ in range(WARMUP):
        core.simulate(scenario)
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        result = core.simulate(scenario)
        times.append(time.perf_counter() - t0)
    out["scenarios"][name] = {
        "times_s": times,
        "requests": len(result.requests),
        "events": getattr(result, "events", None),
    }
print(json.dumps(out))
'''


def _run(cmd, label):
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{label} run failed (exit {proc.returncode})")
    return json.loads(proc.stdout), proc.stderr


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-cpython", action="store_true", help="skip the CPython comparison column")
    ap.add_argument("--json", metavar="FILE", help="also write the raw timings here")
    args = ap.parse_args(argv)

    if shutil.which("node") is None or not (REPO / "node_modules" / "pyodide" / "pyodide.mjs").exists():
        raise SystemExit("needs node and node_modules/pyodide: run scripts/setup.sh")

    source, scenarios = load_scenarios()
    code = PROGRAM % {"scenarios": json.dumps(scenarios), "runs": args.runs, "warmup": args.warmup}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        program = os.path.join(tmp, "bench_program.py")
        with open(program, "w", encoding="utf-8") as fh:
            fh.write(code)
        pyo, pyo_err = _run(["node", str(HARNESS), program], "Pyodide")
        cpy = None if args.no_cpython else _run([sys.executable, program], "CPython")[0]

    found = re.search(r"^pyodide-harness: pyodide (\S+)", pyo_err, re.M)
    print(f"scenarios from {source}; {args.warmup} warm-up + {args.runs} timed runs each")
    print(f"Pyodide: {found.group(1) if found else '?'} (Python {pyo['python']}) under Node {_node_version()}")
    if cpy:
        print(f"CPython: {cpy['python']}")
    header = ["scenario", "requests", "pyodide median", "min", "max"]
    if cpy:
        header += ["cpython median", "pyodide/cpython"]
    rows = []
    for name, r in pyo["scenarios"].items():
        t = r["times_s"]
        row = [name, str(r["requests"]), _ms(statistics.median(t)), _ms(min(t)), _ms(max(t))]
        if cpy:
            c = statistics.median(cpy["scenarios"][name]["times_s"])
            row += [_ms(c), f"{statistics.median(t) / c:.2f}x"]
        rows.append(row)
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))

    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"source": source, "pyodide": pyo, "cpython": cpy}, fh, indent=1)
    return 0


def _ms(seconds):
    ms = seconds * 1000
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.2f} ms"


def _node_version():
    try:
        return subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
