"""Time the simulation core in CPython: engine vs the naive reference, and a real trace.

    python benchmarks/bench_core.py [--runs 15] [--traces DIR] [--json FILE]

For each mission-sized scenario (benchmarks/scenarios.py) it reports the median of
`simulate` and of `summarize` over --runs runs (after one warm-up), and the median of
the naive per-token reference simulator (tests/reference_sim.py) on the same requests.
Then it runs the whole Azure conversation trace (19,366 requests) on 1 prefill + 1
decode GPU and on 2 colocated GPUs, with the process's peak memory after each (maximum
resident set, `resource.getrusage`). Figures, not assertions: speed is never a test.
"""

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from lab import core  # noqa: E402
from scenarios import CONVERSATION_TRACE, SCENARIOS  # noqa: E402


def median_ms(fn, runs):
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), min(times), max(times)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--reference-runs", type=int, default=3)
    parser.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"),
                        help="folder holding azure_conv_2023.csv (default ../shared/traces)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    from reference_sim import reference_simulate

    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"{'scenario':<34} {'steps':>7} {'simulate':>10} {'summarize':>10} {'reference':>10} {'speed-up':>9}")
    figures = {}
    for name, raw in SCENARIOS.items():
        scenario = core.load_scenario(raw)
        requests = core.generate_requests(scenario.workload, scenario.seed)
        result = core.simulate(scenario, requests)  # warm-up
        steps = sum(len(g) for g in result.gpus)
        sim = median_ms(lambda: core.simulate(scenario, requests), args.runs)
        summ = median_ms(lambda: core.summarize(result), args.runs)
        ref = median_ms(lambda: reference_simulate(scenario, requests), args.reference_runs)
        figures[name] = {"steps": steps, "simulate_ms": sim, "summarize_ms": summ, "reference_ms": ref}
        print(f"{name:<34} {steps:>7} {sim[0]:>8.1f}ms {summ[0]:>8.1f}ms {ref[0]:>8.0f}ms {ref[0] / sim[0]:>8.0f}x")

    trace_dir = Path(args.traces)
    trace_file = trace_dir / "azure_conv_2023.csv"
    if trace_file.exists():
        print()
        colocated = dict(CONVERSATION_TRACE, fleet={"layout": "colocated", "gpus": 2})
        for key, raw, where in (("azure_conv_2023", CONVERSATION_TRACE, "1P+1D"),
                                ("azure_conv_2023_colocated2", colocated, "2 colocated GPUs")):
            scenario = core.load_scenario(raw, base_dir=str(trace_dir))
            requests = core.generate_requests(scenario.workload, scenario.seed)
            started = time.perf_counter()
            result = core.simulate(scenario, requests)
            sim_s = time.perf_counter() - started
            metrics = core.summarize(result)
            total_s = time.perf_counter() - started
            steps = sum(len(g) for g in result.gpus)
            peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            figures[key] = {"requests": len(requests), "steps": steps, "simulate_s": sim_s,
                            "simulate_and_summarize_s": total_s, "simulated_s": result.end_time, "peak_mb": peak_mb}
            # The targets: simulate + metrics <= 0.15 s, metrics never more than simulate.
            print(f"Azure conversation trace: {len(requests):,} requests over {result.end_time:,.0f} s simulated, "
                  f"{steps:,} steps on {where}: simulate {sim_s:.2f} s, with metrics {total_s:.2f} s "
                  f"(metrics {total_s - sim_s:.2f} s = {(total_s - sim_s) / sim_s:.2f} x simulate; "
                  f"SLO met {metrics['slo_attainment']:.1%}); peak memory so far {peak_mb:,.0f} MB")
    else:
        print(f"\n(skipped the conversation trace: {trace_file} not found; pass --traces DIR)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
