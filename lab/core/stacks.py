"""Serving stacks: the software half of the calibrated cost model (cost.py, `model.cost:
"calibrated"`). A GPU's datasheet says what the silicon could do; a stack says how much of
it the serving software reaches and what it adds per step. Each preset is fitted on its own
rows of the calibration table (calibration.json, docs/model.md "The calibrated model"), since no
one set of overheads fits a 2023 research build and a current optimised engine.

Per preset:
- step_overhead_us: host time each step pays whatever it holds (scheduling, kernel
  launches not hidden behind the GPU);
- host_us_per_seq: time per decoding sequence beyond its share of the reads and FLOPs
  (sampling, per-sequence bookkeeping and attention launches);
- host_us_per_prompt_token: time per prompt token the same way (building its inputs);
- hbm_share: the share of the GPU's STREAM bandwidth (its `stream_share` of the datasheet's)
  a step's reads reach;
- compute_share, fp8_compute_share: the share of the dense BF16 / FP8 peak that large
  matrix multiplies reach (FP8 reaches a smaller share of its doubled peak);
- ramp_tokens: the tokens at which a step's multiplies reach half of that share (tile and
  wave quantisation: small steps waste the tensor cores), so a step of n tokens computes
  as if it held n + ramp_tokens at full share;
- allreduce_hop_us: each step of a ring all-reduce on an H100 (2 (tp - 1) of them, 2
  all-reduces per layer): its launch and NVLink latency; other GPUs scale it by their
  `nccl_latency_scale`;
- nvlink_share: the share of NVLink bandwidth an all-reduce's payload reaches.
"""

__all__ = ["STACK_PRESETS", "DEFAULT_STACK"]

DEFAULT_STACK = "optimized"

STACK_PRESETS = {
    # A current optimised engine (TensorRT-LLM 0.14-1.0; vLLM and SGLang with CUDA graphs are
    # its kind): fitted on TensorRT-LLM's published rows.
    "optimized": {
        "step_overhead_us": 550.0,
        "host_us_per_seq": 0.0,
        "host_us_per_prompt_token": 1.8,
        "hbm_share": 0.88,
        "compute_share": 0.77,
        "fp8_compute_share": 0.50,
        "ramp_tokens": 160,
        "allreduce_hop_us": 9.4,
        "nvlink_share": 0.93,
    },
    # vLLM as Splitwise profiled it in 2023 (eager mode, Ray workers, Python per sequence):
    # fitted on the Splitwise authors' Llama-2-70B profile.
    "vllm-2023": {
        "step_overhead_us": 1840.0,
        "host_us_per_seq": 220.0,
        "host_us_per_prompt_token": 0.0,
        "hbm_share": 0.93,
        "compute_share": 0.82,
        "fp8_compute_share": 0.50,
        "ramp_tokens": 220,
        "allreduce_hop_us": 9.35,
        "nvlink_share": 0.31,
    },
}
