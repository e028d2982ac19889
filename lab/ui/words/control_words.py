"""A control's value in words, with no widgets: how the page and the address write it.

Owns the words only: how choice values read on the buttons (`CHOICE_LABELS`), each
slider's unit (`UNITS`), what 0 reads as where 0 means none (`ZERO_WORDS`),
`control_words(name, value)` ("Split (prefill | decode)", "8 GPUs", "no cap") and
`format_value(value)` (the value as the address writes it, and the words for a choice
without a label). The controls (controls.py, which builds the widgets), the state's
refusals (state.py) and the first view (prerender.py) all read them here, so the state
needs no widget library. Standard library only.
"""

__all__ = ["CHOICE_LABELS", "UNITS", "ZERO_WORDS", "control_words", "format_value"]

_GPU_NAMES = {"h100": "H100", "a100": "A100", "h200": "H200"}
CHOICE_LABELS = {
    "layout": {"colocated": "Colocated", "disaggregated": "Split (prefill | decode)"},
    "link_sharing": {"fifo": "One shared link (FIFO)", "independent": "Independent"},
    "layerwise": {False: "Off", True: "On"},
    "first_token": {"decode": "Decode GPU", "prefill": "Prefill GPU"},
    "gpu": _GPU_NAMES,
    "prefill_gpu": _GPU_NAMES,
    "decode_gpu": _GPU_NAMES,
    "dispatch": {"queue": "One queue", "round_robin": "Round robin", "least_loaded": "Least loaded",
                 "length_split": "By length", "cache_affinity": "Cache affinity"},
    "decode_pick": {"most_free_kv": "Most free KV", "fewest_seqs": "Fewest sequences"},
    "attention": {False: "Off", True: "On"},
    "prefix_cache": {"off": "Off", "per_gpu": "Per GPU (HBM)", "shared": "Shared pool (host)"},
    "llm": {"llama3-8b": "Llama 3 8B", "llama3-70b": "Llama 3 70B", "llama2-70b": "Llama 2 70B"},
    "cost": {"linear": "Linear (lab constants)", "roofline": "Roofline (textbook)", "calibrated": "Calibrated (measured GPUs)"},
    "admission": {"off": "Off", "predicted_ttft_over_slo": "Reject if predicted TTFT > SLO"},
    "kv_policy": {"reserve": "Reserve (prompt + answer)", "on_demand": "On demand (blocks)"},
    "planner": {"off": "Fixed pools", "utilization": "By utilisation", "schedule": "By hand"},
}
UNITS = {
    "gpus": "GPUs", "prefill_gpus": "GPUs", "decode_gpus": "GPUs", "chunk_tokens": "tokens",
    "link_gbytes_per_s": "GB/s", "rate": "req/s", "prefill_batch_tokens": "tokens",
    "power_cap_w": "W", "prefill_power_cap_w": "W", "decode_power_cap_w": "W", "long_prompt_tokens": "tokens",
    "long_gpus": "GPUs", "prefill_chunk_tokens": "tokens", "long_prefill_tokens": "tokens",
    "prefix_cache_gb": "GB", "prefix_pool_gb": "GB",
    "kv_block_tokens": "tokens",
    "plan_at_s": "s", "plan_prefill_gpus": "GPUs",
}
# What 0 reads as, for the controls whose 0 is "none" (NONE_AS_ZERO).
ZERO_WORDS = {"chunk_tokens": "whole prompt", "prefill_chunk_tokens": "whole prompt", "long_prefill_tokens": "no cap",
              "power_cap_w": "no cap", "prefill_power_cap_w": "no cap", "decode_power_cap_w": "no cap"}


def format_value(value):
    """A control value as it is written in the URL (and read back by `state.parse_settings`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return str(value)


def control_words(name, value):
    """A control's value as the page shows it ("Split (prefill | decode)", "8 GPUs", "no cap")."""
    if value is None:
        return "—"
    if name in CHOICE_LABELS:
        return CHOICE_LABELS[name].get(value, format_value(value))
    if name in ZERO_WORDS and not value:
        return ZERO_WORDS[name]
    unit = UNITS.get(name, "")
    if value == 1 and unit in ("GPUs", "tokens"):
        unit = unit[:-1]  # "1 GPU"
    if isinstance(value, float):
        text = f"{value:,.2f}".rstrip("0").rstrip(".")
    else:
        text = f"{value:,}"
    return f"{text} {unit}".strip()
