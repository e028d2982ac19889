"""Time and weigh big runs: simulate and summarize seconds and peak memory, each case in
its own process (so one run's peak is its own).

    python benchmarks/bench_scale.py [--cases 100k-32,1m-128] [--json FILE]
    pypy3 benchmarks/bench_scale.py ...      (the same under PyPy: each case runs in the interpreter
                                              that runs this script, named on the first line)

Cases are synthetic Poisson workloads of 2,000-token prompts and 220-token answers at
2.2 requests/s per GPU (the mission-sized load: busy, not overloaded) on colocated GPUs
with 512-token chunked prefill, linear cost:

    100k-32   100,000 requests on 32 GPUs (the issue's 4.8 GB case)
    1m-128    1,000,000 requests on 128 GPUs (the issue's out-of-memory case)
    20k-32    20,000 requests on 32 GPUs (a quick look)
    100k-128, 200k-128   a tenth and a fifth of 1m-128 on its 128 GPUs (proxies that
              scale like it: the same GPUs, so the same arrivals per step)

A case name ending in "-rr" is the same run with `fleet.dispatch` round_robin (each prompt
bound to its instance at arrival): a GPU's decode-only run-ahead then stops only at the
arrivals bound to it, not at every arrival (docs/architecture.md "Scale"), so compare its events.

Peak memory is the process's maximum resident set (`resource.getrusage`), read after the
simulation and again after the metrics; times are wall seconds and CPU seconds (user +
system, which a shared machine's load disturbs less); "steps" are logged GPU steps, "events" the
engine's heap events. Figures, not assertions: speed is never a test.
"""

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CASES = {
    "20k-32": (20_000, 32),
    "100k-32": (100_000, 32),
    "1m-128": (1_000_000, 128),
    "100k-128": (100_000, 128),
    "200k-128": (200_000, 128),
}

# Runs in a fresh interpreter: argv = repo, requests, gpus; prints one JSON line.
_CHILD = r'''
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from lab import core
n, gpus, dispatch = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rate = 2.2 * gpus
raw = {"seed": 1,
       "workload": {"rate": rate, "duration_s": n / rate,
                    "prompt_tokens": {"dist": "fixed", "value": 2000}, "output_tokens": {"dist": "fixed", "value": 220}},
       "fleet": {"layout": "colocated", "gpus": gpus, "chunk_tokens": 512, "dispatch": dispatch},
       "model": {"cost": "linear"}, "slo": {"ttft_s": 1.5, "tpot_ms": 25}}
scenario = core.load_scenario(raw)
requests = core.generate_requests(scenario.workload, scenario.seed)
mb = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])  # user + system seconds
base = mb()
started, cpu0 = time.perf_counter(), cpu()
result = core.simulate(scenario, requests)
sim_s, sim_cpu = time.perf_counter() - started, cpu() - cpu0
sim_mb = mb()
started, cpu0 = time.perf_counter(), cpu()
metrics = core.summarize(result)
metrics_s, metrics_cpu = time.perf_counter() - started, cpu() - cpu0
print(json.dumps({"requests": len(requests), "gpus": gpus, "steps": sum(len(g) for g in result.gpus),
                  "events": result.events, "simulate_s": sim_s, "metrics_s": metrics_s,
                  "simulate_cpu_s": sim_cpu, "metrics_cpu_s": metrics_cpu,
                  "peak_mb_before": base, "peak_mb_simulate": sim_mb, "peak_mb_metrics": mb(),
                  "run_cut": result.capped, "slo_attainment": metrics["slo_attainment"]}))
'''


def run_case(name):
    dispatch = "queue"
    if name.endswith("-rr"):
        name, dispatch = name[:-3], "round_robin"
    n, gpus = CASES[name]
    out = subprocess.run([sys.executable, "-c", _CHILD, str(REPO), str(n), str(gpus), dispatch],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def interpreter():
    """Which Python runs the cases, e.g. "PyPy 7.3.11 (Python 3.9.16), /usr/bin/pypy3"."""
    name = platform.python_implementation()
    if name == "PyPy":
        pypy = ".".join(map(str, sys.pypy_version_info[:3]))
        return f"PyPy {pypy} (Python {platform.python_version()}), {sys.executable}"
    return f"{name} {platform.python_version()}, {sys.executable}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="100k-32,1m-128", help=f"comma-separated, of {', '.join(CASES)} (each also with -rr)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    figures = {"interpreter": interpreter()}
    print(f"interpreter: {figures['interpreter']}")
    # Wall seconds, then CPU seconds (user + system: what a shared machine's load disturbs
    # less); peak MB after the simulation and after the metrics.
    print(f"{'case':<12} {'requests':>9} {'steps':>11} {'events':>10} {'simulate':>9} {'metrics':>9} "
          f"{'sim CPU':>8} {'met CPU':>8} {'MB sim':>7} {'MB met':>7}")
    for name in args.cases.split(","):
        fig = figures[name] = run_case(name.strip())
        if "error" in fig:
            print(f"{name:<12} failed: {fig['error']}")
            continue
        print(f"{name:<12} {fig['requests']:>9,} {fig['steps']:>11,} {fig['events']:>10,} {fig['simulate_s']:>8.1f}s "
              f"{fig['metrics_s']:>8.1f}s {fig['simulate_cpu_s']:>7.1f}s {fig['metrics_cpu_s']:>7.1f}s "
              f"{fig['peak_mb_simulate']:>7,.0f} {fig['peak_mb_metrics']:>7,.0f}"
              + (f"  (cut: {fig['run_cut']})" if fig["run_cut"] else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
