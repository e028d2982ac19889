"""Serving stacks: the software half of the calibrated cost model (cost.py, `model.cost:
"calibrated"`). A GPU's datasheet says what the silicon could do; a stack says how much of
it the serving software reaches and what it adds per step. Each preset is fitted on its own
rows of the calibration table (calibration.json, README "The calibrated model"), since no
one set of overheads fits a 2023 research build and a current optimised engine.

Per preset:
- step_overhead_us: host time each step pays whatever it holds (scheduling, sampling,
  kernel launches not hidden behind the GPU);
- host_us_per_token: host time per token the step processes (building its inputs);
- hbm_share: the share of the datasheet's HBM bandwidth a step's reads reach;
- compute_share: the share of the dense peak that large matrix multiplies reach;
- ramp_tokens: the tokens at which a step's multiplies reach half of compute_share (tile
  and wave quantisation: small steps waste the tensor cores), so a step of n tokens
  computes as if it held n + ramp_tokens at full share;
- allreduce_latency_us: each tensor-parallel all-reduce's fixed cost (2 per layer);
- nvlink_share: the share of NVLink bandwidth an all-reduce's payload reaches.
"""

__all__ = ["STACK_PRESETS", "DEFAULT_STACK"]

DEFAULT_STACK = "optimized"

STACK_PRESETS = {
    # A current optimised engine (TensorRT-LLM 0.x, vLLM/SGLang with CUDA graphs): fitted on
    # TensorRT-LLM's published H100 throughput rows.
    "optimized": {
        "step_overhead_us": 400.0,
        "host_us_per_token": 0.0,
        "hbm_share": 0.80,
        "compute_share": 0.50,
        "ramp_tokens": 128,
        "allreduce_latency_us": 12.0,
        "nvlink_share": 0.80,
    },
    # vLLM as Splitwise measured it in 2023 (eager mode, Ray workers, Python input
    # preparation): fitted on Splitwise's Llama-2-70B rows.
    "vllm-2023": {
        "step_overhead_us": 2000.0,
        "host_us_per_token": 10.0,
        "hbm_share": 0.18,
        "compute_share": 0.70,
        "ramp_tokens": 128,
        "allreduce_latency_us": 12.0,
        "nvlink_share": 0.40,
    },
}
