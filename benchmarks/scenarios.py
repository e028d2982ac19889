"""The benchmark scenarios: two mission-sized runs (60 s, 22 req/s, 2,000-token prompts, 220 out),
the Azure conversation trace's scenario, and the Mooncake conversation trace's first minutes."""

from pathlib import Path

_SLO = {"ttft_s": 1.5, "tpot_ms": 25}
_LENGTHS = {"prompt_tokens": {"dist": "fixed", "value": 2000}, "output_tokens": {"dist": "fixed", "value": 220}}

SCENARIOS = {
    # 4 prefill + 4 decode GPUs joined by one shared 50 GB/s link.
    "disagg-4p4d-22rps": {
        "seed": 1,
        "workload": {"rate": 22, "duration_s": 60, **_LENGTHS},
        "fleet": {"layout": "disaggregated", "prefill_gpus": 4, "decode_gpus": 4,
                  "link": {"gbytes_per_s": 50, "sharing": "fifo", "layerwise": False}},
        "model": {"cost": "linear"},
        "slo": _SLO,
    },
    # The same load on 10 colocated GPUs with 512-token chunked prefill.
    "colocated-10gpu-chunk512-22rps": {
        "seed": 1,
        "workload": {"rate": 22, "duration_s": 60, **_LENGTHS},
        "fleet": {"layout": "colocated", "gpus": 10, "chunk_tokens": 512},
        "model": {"cost": "linear"},
        "slo": _SLO,
    },
}

# The full Azure conversation trace (19,366 requests, about an hour) on 1 prefill + 1 decode GPU.
CONVERSATION_TRACE = {
    "workload": {"trace": {"path": "azure_conv_2023.csv"}},
    "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1},
    "model": {"cost": "linear"},
    "slo": {"ttft_s": 2.0, "tpot_ms": 50},
}


MOONCAKE_CONVERSATION = "mooncake_conversation_fast25.jsonl"


def mooncake_requests(traces, minutes):
    """The Mooncake conversation trace's requests arriving in its first `minutes` (as
    `core.simulate` takes them, with their block hashes); prints how many."""
    from lab import core  # the caller has put the repository on sys.path

    path = Path(traces) / MOONCAKE_CONVERSATION
    rows = core.parse_trace_text(path.read_text(), path.name)
    requests = [r for r in rows if r[0] < minutes * 60]
    print(f"{path.name}: {len(requests):,} requests over {requests[-1][0]:,.0f} s")
    return requests
