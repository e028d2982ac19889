"""Time `lab plan` on the whole Azure conversation and code traces (figures, not assertions).

    python benchmarks/bench_plan.py [--traces DIR] [--max-gpus 16] [--workers N] [--json FILE]

Runs `python -m lab plan TRACE --max-gpus 16 --json` once per trace (a fresh process, as a
user would) and reports the wall time, the CPU time of the plan and its worker processes,
the machine's load average before the run (the figure means little on a busy machine),
the number of runs, the winner and the Pareto front. Then it runs the winner directly
(`lab run` of the scenario `--write-scenario` wrote) and prints its attainment, which must
equal the plan's. Traces are read where they are (never copied into the tree).
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACES = ("azure_conv_2023.csv", "azure_code_2023.csv")


def children_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"))
    parser.add_argument("--max-gpus", default="16")
    parser.add_argument("--workers", default=None, help="passed to lab plan (default: its own, one per CPU)")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    figures = []
    for name in TRACES:
        trace = Path(args.traces) / name
        if not trace.exists():
            print(f"skip {name}: not in {args.traces}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            winner_file = os.path.join(tmp, "winner.json")
            cmd = [sys.executable, "-m", "lab", "plan", str(trace), "--max-gpus", args.max_gpus, "--json",
                   "--write-scenario", winner_file]
            if args.workers:
                cmd += ["--workers", args.workers]
            load = os.getloadavg()[0]
            cpu0, started = children_cpu_s(), time.perf_counter()
            proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
            wall, cpu = time.perf_counter() - started, children_cpu_s() - cpu0
            if proc.returncode not in (0, 1):
                print(proc.stderr)
                raise SystemExit(f"lab plan failed on {name}")
            plan = json.loads(proc.stdout)
            direct = None
            if plan["winner"] is not None:
                # The trace's folder is the working directory: the written scenario names the trace by its absolute path.
                run = subprocess.run([sys.executable, "-m", "lab", "run", winner_file, "--json"], cwd=trace.parent,
                                     capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
                direct = json.loads(run.stdout)["slo_attainment"]
        w = plan["winner"]
        print(f"{name}: {plan['workload']['requests']:,} requests; plan {wall:.1f} s wall, {cpu:.1f} s CPU, "
              f"{plan['runs']} runs (load average {load:.1f} before); by phase "
              + ", ".join(f"{k} {v:.1f} s" for k, v in plan["seconds_by_phase"].items()))
        if w:
            print(f"  winner {w['fleet']}: ${w['usd_per_hour']:.2f}/h, {w['slo_attainment']:.2%} meet the SLO; "
                  f"direct lab run {direct:.2%}; robustness min {plan['robustness']['min']:.1%} "
                  f"median {plan['robustness']['median']:.1%}")
        for r in plan["pareto"]:
            print(f"    {r['fleet']:<46} {r['gpus']:>3} GPUs ${r['usd_per_hour']:>6.2f}/h {r['slo_attainment']:>7.1%}"
                  f"{'*' if r['measured'] == 'screen' else ' '} {r['goodput_rps_per_gpu']:.3f} req/s/GPU")
        figures.append({"trace": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_average": load,
                        "runs": plan["runs"], "seconds_by_phase": plan["seconds_by_phase"], "winner": w and w["fleet"], "attainment": w and w["slo_attainment"],
                        "direct_attainment": direct, "pareto": plan["pareto"]})
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
