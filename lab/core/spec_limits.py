"""The scenario's hard limits and presets (LLMs, GPUs), shared by every part of lab/core/spec.py."""

import dataclasses

# Hard limits that keep every run bounded in time and memory (docs/architecture.md "Scale"): 2**20
# requests (a million, with the room for chance the rate check leaves), 256 GPUs, a week
# of arrivals; the engine's step bound (engine.MAX_STEPS)
# caps what a run can log whatever these allow.
MAX_REQUESTS = 1_048_576
MAX_GPUS = 256
MAX_DURATION_S = 604_800.0
MAX_TOKENS = 1_000_000
# Trace arrival times (and trace.start_s) in seconds; wall-clock timestamps are ~1.7e9.
# With time_scale <= 1000 every scaled arrival stays a finite float.
MAX_TRACE_TIME_S = 1e12
# The request cap is checked on the expected count plus this many standard deviations
# of the Poisson count, so a random draw cannot cross it during a run.
REQUEST_MARGIN_SD = 10

# Model shapes: KV bytes per token = 2 (K and V) x layers x KV heads x head dim x bytes.
# `hidden` sizes the tensor-parallel all-reduces; `heads` (query heads) the attention FLOPs.
# `bytes_per_value` is BF16's; `model.dtype: "fp8"` stores weights and KV in one byte.
LLM_PRESETS = {
    "llama3-8b": {"params": 8.03e9, "layers": 32, "kv_heads": 8, "head_dim": 128, "bytes_per_value": 2,
                  "hidden": 4096, "heads": 32},
    "llama3-70b": {"params": 70.6e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "bytes_per_value": 2,
                   "hidden": 8192, "heads": 64},
    # Splitwise's model (its calibration rows): the 70B shape with Llama 2's smaller vocabulary.
    "llama2-70b": {"params": 69.0e9, "layers": 80, "kv_heads": 8, "head_dim": 128, "bytes_per_value": 2,
                   "hidden": 8192, "heads": 64},
}
# GPUs: HBM capacity (GB), HBM bandwidth (TB/s), dense BF16 peak (TFLOP/s), NVLink
# bandwidth for tensor-parallel all-reduces (GB/s) and each all-reduce's fixed latency (us),
# board power at full load and idle (W), and an hourly price (USD). Power and prices are
# illustrative defaults, not quotes: a scenario overrides them with `model.gpu_overrides`.
# `fp8_tflops` is the dense FP8 peak (NVIDIA's H100 and H200 datasheets: 1,979, half the
# sparse figure); the A100 has no FP8 tensor cores, so FP8 weights are widened and
# multiplied at its BF16 peak there. Two measured figures serve the calibrated model only
# (docs/calibration.md): `stream_share`, the share of `hbm_tb_s` a STREAM triad reaches, and
# `nccl_latency_scale`, a small all-reduce's time relative to the H100's (the Azure
# AI-benchmarking-guide's NCCL bus bandwidth at 1 MB on 8 GPUs: 43.7, 36.2, 53.0 GB/s).
GPU_PRESETS = {
    "h100": {"memory_gb": 80.0, "hbm_tb_s": 3.35, "peak_tflops": 989.0, "fp8_tflops": 1979.0,
             "nvlink_gbytes_per_s": 450.0, "allreduce_latency_us": 10.0, "tdp_w": 700.0, "idle_w": 100.0,
             "usd_per_hour": 2.50, "stream_share": 0.89, "nccl_latency_scale": 1.0},
    "a100": {"memory_gb": 80.0, "hbm_tb_s": 2.039, "peak_tflops": 312.0, "fp8_tflops": 312.0,
             "nvlink_gbytes_per_s": 300.0, "allreduce_latency_us": 10.0, "tdp_w": 400.0, "idle_w": 60.0,
             "usd_per_hour": 1.30, "stream_share": 0.83, "nccl_latency_scale": 1.21},
    "h200": {"memory_gb": 141.0, "hbm_tb_s": 4.8, "peak_tflops": 989.0, "fp8_tflops": 1979.0,
             "nvlink_gbytes_per_s": 450.0, "allreduce_latency_us": 10.0, "tdp_w": 700.0, "idle_w": 100.0,
             "usd_per_hour": 3.50, "stream_share": 0.86, "nccl_latency_scale": 0.83},
}
GPU_KEYS = tuple(GPU_PRESETS["h100"])
MAX_TP = 8  # GPUs one instance spans (one NVLink domain)


def _frozen_dict_of(obj):
    """`to_dict` for our dataclasses: drop None so JSON stays minimal and reloadable."""
    out = {}
    for f in dataclasses.fields(obj):
        if f.metadata.get("derived"):
            continue
        value = getattr(obj, f.name)
        if value is None or value == ():
            continue
        if dataclasses.is_dataclass(value):
            value = value.to_dict()
        elif isinstance(value, tuple):
            value = [v.to_dict() if dataclasses.is_dataclass(v) else list(v) if isinstance(v, tuple) else v for v in value]
        out[f.name] = value
    return out
