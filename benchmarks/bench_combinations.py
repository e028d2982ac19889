"""Memory and control together on real traffic: the Mooncake FAST'25 conversation trace on a
split fleet with a shared prefix cache, fixed pools or a utilisation planner, KV reserved or
on demand.

    python benchmarks/bench_combinations.py [--traces DIR] [--minutes 20] [--kv-tokens N] [--json FILE]

The trace is read from ../shared/traces (never copied into the tree). Each run is Llama-3-8B
on H100s, roofline costs, 2 prefill + 2 decode GPUs, `prefix_cache: shared` (200 GB host pool);
`--kv-tokens` caps each instance's KV (default: what the H100 leaves) so on-demand KV has
something to preempt. Reported: hit rate, TTFT p50/p99, SLO attainment, preemptions, role
changes, each pool's $/hour (by time in each role) and the wall time of the run. Figures,
not assertions.
"""

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab import core  # noqa: E402
from scenarios import mooncake_requests  # noqa: E402

PLANNERS = {"fixed": None, "utilization": {"policy": "utilization", "interval_s": 30, "threshold": 0.2, "switch_s": 5}}
KV = ("reserve", "on_demand")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"),
                        help="folder holding mooncake_conversation_fast25.jsonl (default ../shared/traces)")
    parser.add_argument("--minutes", type=float, default=20.0, help="replay this much of the trace (default 20)")
    parser.add_argument("--kv-tokens", type=int, default=None, help="model.kv_capacity_tokens (default: derived)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    requests = mooncake_requests(args.traces, args.minutes)
    print(f"{'planner':<12} {'kv':<10} {'hit rate':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'SLO':>6} {'preempt':>8} "
          f"{'moves':>6} {'P $/h':>6} {'D $/h':>6} {'wall s':>7}")
    figures = {}
    for planner_name, planner in PLANNERS.items():
        for policy in KV:
            fleet = {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2, "prefix_cache": "shared",
                     "kv_policy": policy, "planner": planner}
            model = {"cost": "roofline", "gpu": "h100"}
            if args.kv_tokens:
                model["kv_capacity_tokens"] = args.kv_tokens
            raw = {"workload": {"rate": 1, "duration_s": max(1.0, requests[-1][0]), "prompt_tokens": 1, "output_tokens": 1},
                   "fleet": fleet, "model": model, "slo": {"ttft_s": 2.0, "tpot_ms": 50}, "drain_s": 600}
            scenario = core.load_scenario(raw)
            started = time.perf_counter()
            result = core.simulate(scenario, requests)
            wall = time.perf_counter() - started
            m = core.summarize(result)
            print(f"{planner_name:<12} {policy:<10} {m['prefix_hit_rate']:>8.3f} {m['ttft_p50_s']:>9.3f} "
                  f"{m['ttft_p99_s']:>9.3f} {m['slo_attainment']:>6.3f} {m['preemptions']:>8,} {m['reconfigurations']:>6} "
                  f"{m['prefill_usd_per_hour']:>6.2f} {m['decode_usd_per_hour']:>6.2f} {wall:>7.1f}")
            figures[f"{planner_name}/{policy}"] = {
                key: m[key] for key in ("prefix_hit_rate", "ttft_p50_s", "ttft_p99_s", "slo_attainment", "preemptions",
                                        "reconfigurations", "prefill_usd_per_hour", "decode_usd_per_hour",
                                        "finished", "requests")} | {"wall_s": wall}
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
