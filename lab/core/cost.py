"""Cost models: how long one GPU step takes.

A step decodes one token for each of `decode_seqs` running sequences (whose KV
caches hold `context_tokens` tokens in all) and processes `prefill_tokens` prompt
tokens. Both models return a function `step_s(decode_seqs, context_tokens,
prefill_tokens, attention_units=0.0, reread_tokens=0) -> seconds`; the engine and the
reference simulator call the same function, so their float results agree bit for bit.

`attention_units` and `reread_tokens` describe the step's prompt chunks for attention
(`model.attention`, roofline only): a chunk of c new tokens after p earlier tokens of
its prompt adds c * (p + c/2) units and p re-read tokens. `linear` ignores them.
"""

__all__ = ["step_time_fn", "kv_bytes_per_token", "attention_flops_per_unit"]


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

    def step_s(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
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
    # memory bandwidth and (derated) compute takes longer. Attention FLOPs are left out
    # unless model.attention is on (the source's published table leaves them out).
    hw = model.hardware
    bandwidth = hw["hbm_tb_s"] * 1e12
    flops_per_s = hw["peak_tflops"] * 1e12 * model.efficiency
    weights = model.weight_bytes
    kv_per_token = model.kv_bytes_per_token
    flops_per_token = 2.0 * model.shape["params"]

    def step_s(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
        tokens = decode_seqs + prefill_tokens
        memory_s = (weights + kv_per_token * (context_tokens + prefill_tokens)) / bandwidth
        compute_s = flops_per_token * tokens / flops_per_s
        return memory_s if memory_s > compute_s else compute_s

    if not model.attention:
        return step_s
    attention_flops = attention_flops_per_unit(model)

    def step_with_attention_s(decode_seqs, context_tokens, prefill_tokens, attention_units=0.0, reread_tokens=0):
        # A decode token attends to its whole context; a prompt chunk to its earlier tokens
        # (re-read from HBM) and, causally, to half of its own.
        tokens = decode_seqs + prefill_tokens
        memory_s = (weights + kv_per_token * (context_tokens + prefill_tokens + reread_tokens)) / bandwidth
        compute_s = (flops_per_token * tokens + attention_flops * (context_tokens + attention_units)) / flops_per_s
        return memory_s if memory_s > compute_s else compute_s

    return step_with_attention_s


def attention_flops_per_unit(model):
    """4 x layers x heads x head dim: attention FLOPs of one query token over one key token
    (QK^T and the weighted sum of V, 2 FLOPs per multiply-add each)."""
    shape = model.shape
    return 4.0 * shape["layers"] * shape["heads"] * shape["head_dim"]
