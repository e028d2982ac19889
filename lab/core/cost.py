"""Cost models: how long one GPU step takes.

A step decodes one token for each of `decode_seqs` running sequences (whose KV
caches hold `context_tokens` tokens in all) and processes `prefill_tokens` prompt
tokens. Both models return a function `step_s(decode_seqs, context_tokens,
prefill_tokens) -> seconds`; the engine and the reference simulator call the
same function, so their float results agree bit for bit.
"""

__all__ = ["step_time_fn", "kv_bytes_per_token"]


def kv_bytes_per_token(model):
    """2 (K and V) x layers x KV heads x head dim x bytes per value (GQA-aware)."""
    return model.kv_bytes_per_token


def step_time_fn(model):
    if model.cost == "linear":
        return _linear(model)
    return _roofline(model)


def _linear(model):
    # The lab's illustrative constants (milliseconds): a decode step costs a fixed
    # launch/weights-read term, a per-sequence term and a per-context-token term; a
    # step that also prefills adds time proportional to its prompt tokens.
    base = model.decode_step_ms
    per_seq = model.decode_ms_per_seq
    per_ctx = model.decode_ms_per_context_token
    per_prompt = model.prefill_ms_per_token

    def step_s(decode_seqs, context_tokens, prefill_tokens):
        ms = 0.0
        if decode_seqs:
            ms = base + per_seq * decode_seqs + per_ctx * context_tokens
        if prefill_tokens:
            ms += per_prompt * prefill_tokens
        return ms / 1000.0

    return step_s


def _roofline(model):
    # A step reads the weights once plus the KV cache of its decoding sequences, and
    # does 2 x params FLOPs per token it processes; it is bound by whichever of
    # memory bandwidth and (derated) compute takes longer. Attention FLOPs are ignored.
    hw = model.hardware
    bandwidth = hw["hbm_tb_s"] * 1e12
    flops_per_s = hw["peak_tflops"] * 1e12 * model.efficiency
    weights = model.weight_bytes
    kv_per_token = model.kv_bytes_per_token
    flops_per_token = 2.0 * model.shape["params"]

    def step_s(decode_seqs, context_tokens, prefill_tokens):
        tokens = decode_seqs + prefill_tokens
        memory_s = (weights + kv_per_token * (context_tokens + prefill_tokens)) / bandwidth
        compute_s = flops_per_token * tokens / flops_per_s
        return memory_s if memory_s > compute_s else compute_s

    return step_s
