"""Time `summarize` on its pure path against numpy (lab/core/fast_metrics.py), in one process.

    python benchmarks/bench_metrics.py [--runs 5] [--traces DIR] [--no-pyodide] [--json FILE]

On every shipped mission's start, in CPython and in Pyodide under Node with numpy loaded
(the page's case: Panel has imported it), and on the Azure conversation trace on 1 + 1
GPUs and on 2 colocated GPUs (CPython only): the median of --runs calls of each path,
interleaved, after one untimed call of each (so numpy's import is not in the figures: a
fresh `lab run` pays it once, about 60-130 ms here). Each pair of summaries is checked
equal before it is timed. Figures, not assertions: speed is never a test.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HARNESS = REPO / "tests" / "pyodide" / "run_core.mjs"

# Runs unchanged in CPython and in Pyodide; argv: runs, then the trace folder (or "-");
# prints one JSON object {name: {"pure_ms": [...], "numpy_ms": [...], "requests", "steps"}}.
PROGRAM = r'''
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import numpy
import lab.core as core
from lab.core.missions import list_missions

RUNS, TRACES = int(sys.argv[1]), sys.argv[2]
runs = [(m.id, m.scenario) for m in list_missions()]
if TRACES != "-":
    trace = {"workload": {"trace": {"path": "azure_conv_2023.csv"}}, "model": {"cost": "linear"},
             "slo": {"ttft_s": 2.0, "tpot_ms": 50}}
    for name, fleet in (("azure-conversation 1P+1D", {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1}),
                        ("azure-conversation 2 colocated", {"layout": "colocated", "gpus": 2})):
        runs.append((name, core.load_scenario(dict(trace, fleet=fleet), base_dir=TRACES)))
out = {}
for name, scenario in runs:
    result = core.simulate(scenario)
    assert core.summarize(result, numpy=False) == core.summarize(result, numpy=True), name
    times = {False: [], True: []}
    for _ in range(RUNS):
        for path in (False, True):
            started = time.perf_counter()
            core.summarize(result, numpy=path)
            times[path].append((time.perf_counter() - started) * 1000)
    out[name] = {"pure_ms": times[False], "numpy_ms": times[True], "requests": len(result.requests),
                 "steps": sum(len(log) for log in result.gpus)}
print(json.dumps(out))
'''


def run(cmd):
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{cmd[0]} failed (exit {proc.returncode})")
    return json.loads(proc.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"),
                        help="the folder of azure_conv_2023.csv (default: ../shared/traces)")
    parser.add_argument("--no-pyodide", action="store_true", help="CPython only")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    traces = args.traces if (Path(args.traces) / "azure_conv_2023.csv").exists() else "-"
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        program = os.path.join(tmp, "bench_metrics_program.py")
        Path(program).write_text(PROGRAM, encoding="utf-8")
        figures = {"cpython": run([sys.executable, program, str(args.runs), traces])}
        if not args.no_pyodide:
            wheels = sorted(REPO.glob(".cache/pyodide-*/numpy-*.whl"))
            if not wheels:
                raise SystemExit("no .cache/pyodide-*/numpy-*.whl: run scripts/setup.sh (or --no-pyodide)")
            figures["pyodide"] = run(["node", str(HARNESS), "--wheel", str(wheels[-1]), program, str(args.runs), "-"])
    print(f"summarize, median of {args.runs} (ms), each path after one untimed call; the same values checked first")
    for where, rows in figures.items():
        print(f"\n{where}:")
        print(f"{'run':32s} {'requests':>9s} {'steps':>9s} {'pure':>8s} {'numpy':>8s} {'ratio':>6s}")
        total = [0.0, 0.0]
        for name, r in rows.items():
            pure, fast = statistics.median(r["pure_ms"]), statistics.median(r["numpy_ms"])
            if not name.startswith("azure"):
                total[0] += pure
                total[1] += fast
            print(f"{name:32s} {r['requests']:9,d} {r['steps']:9,d} {pure:8.1f} {fast:8.1f} {fast / pure:6.2f}")
        print(f"{'every mission, summed':32s} {'':9s} {'':9s} {total[0]:8.1f} {total[1]:8.1f} {total[1] / total[0]:6.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
