"""Replay the Mooncake FAST'25 conversation trace with prefix caching off, per_gpu and shared.

    python benchmarks/bench_prefix.py [--traces DIR] [--minutes 60] [--json FILE]

The trace (12,031 requests over an hour, prompts of 12,035 tokens on average, one block
hash per 512 tokens) is read from ../shared/traces (never copied into the tree). Each
fleet runs Llama-3-8B on H100s with the roofline cost model: a colocated fleet of 4 GPUs
and a split fleet of 2 prefill + 2 decode GPUs, each with the cache off, a per-GPU LRU
(fleet.prefix_cache_gb: the default 8 GB of each prefilling GPU's HBM, and 24 GB) and a shared host pool
(prefix_pool_gb: the default 200 GB, 2 TB and 20 TB, Mooncake-like; fetched at 25 GB/s). Reported: hit rate, prefill tokens saved,
TTFT p50/p99, SLO attainment, prefill GPU-seconds (each request's own prefill compute,
blame's `prefill` part, summed; a split fleet's prefill-pool busy GPU-seconds besides),
fetch p99 and the wall time of the run. Figures, not assertions.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from lab import core  # noqa: E402
from scenarios import mooncake_requests  # noqa: E402

FLEETS = {
    "colocated 4": {"layout": "colocated", "gpus": 4, "chunk_tokens": 2048},
    "split 2P+2D": {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2},
}
CACHES = {
    "off": {"prefix_cache": "off"},
    "per_gpu": {"prefix_cache": "per_gpu"},
    "gpu 24GB": {"prefix_cache": "per_gpu", "prefix_cache_gb": 24},
    "shared": {"prefix_cache": "shared"},
    "shared 2TB": {"prefix_cache": "shared", "prefix_pool_gb": 2000},
    "shared 20TB": {"prefix_cache": "shared", "prefix_pool_gb": 20000},
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=str(REPO.parent / "shared" / "traces"),
                        help="folder holding mooncake_conversation_fast25.jsonl (default ../shared/traces)")
    parser.add_argument("--minutes", type=float, default=60.0, help="replay this much of the trace")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    requests = mooncake_requests(args.traces, args.minutes)
    head = (f"{'fleet':<13} {'cache':<8} {'hit rate':>8} {'saved Mtok':>10} {'TTFT p50':>9} {'TTFT p99':>9} "
            f"{'SLO':>6} {'prefill GPU-s':>13} {'pool busy':>9} {'fetch p99':>9} {'wall s':>7}")
    print(head)
    figures = {}
    for fleet_name, fleet in FLEETS.items():
        for cache, fields in CACHES.items():
            raw = {"workload": {"rate": 1, "duration_s": max(1.0, requests[-1][0]), "prompt_tokens": 1, "output_tokens": 1},
                   "fleet": {**fleet, **fields}, "model": {"cost": "roofline", "gpu": "h100"},
                   "slo": {"ttft_s": 2.0, "tpot_ms": 50}, "drain_s": 600}
            scenario = core.load_scenario(raw)
            started = time.perf_counter()
            result = core.simulate(scenario, requests)
            wall = time.perf_counter() - started
            m = core.summarize(result)
            blames = core.request_blame(result)
            prefill_s = math.fsum(b.parts["prefill"] for b in blames)
            pool = None
            if fleet["layout"] == "disaggregated":
                pool = math.fsum(g.busy_s() * g.tp for g in result.gpus if g.role == "prefill")
            fetch = m["prefix_fetch_p99_ms"]
            print(f"{fleet_name:<13} {cache:<8} {m['prefix_hit_rate']:>8.3f} {m['prefill_tokens_saved'] / 1e6:>10.1f} "
                  f"{m['ttft_p50_s']:>9.3f} {m['ttft_p99_s']:>9.3f} {m['slo_attainment']:>6.3f} {prefill_s:>13,.0f} "
                  f"{'' if pool is None else f'{pool:,.0f}':>9} {'' if fetch is None else f'{fetch:.1f} ms':>9} {wall:>7.1f}")
            figures[f"{fleet_name}/{cache}"] = {
                "prefix_hit_rate": m["prefix_hit_rate"], "prefill_tokens_saved": m["prefill_tokens_saved"],
                "ttft_p50_s": m["ttft_p50_s"], "ttft_p99_s": m["ttft_p99_s"], "slo_attainment": m["slo_attainment"],
                "prefill_gpu_s": prefill_s, "prefill_pool_busy_gpu_s": pool, "prefix_fetch_p99_ms": fetch,
                "finished": m["finished"], "requests": m["requests"], "wall_s": wall,
            }
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
