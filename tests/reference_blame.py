"""The reference's blame (docs/model.md "Blame"), from the naive simulator's own records
(tests/reference_sim.py), independently of lab/core/blame.py."""

def token_gaps(seq):
    """A request's inter-token gaps in seconds: each the difference of its tokens' ticks,
    divided once by 10**12 (docs/model.md "Time base"), not a difference of rounded seconds."""
    ticks = seq.token_ticks
    return [(b - a) / 10**12 for a, b in zip(ticks, ticks[1:])]


def reference_blame(scenario, ref):
    """docs/model.md "Blame", from the reference's own records, for every request that got its
    first token: {id: {"parts": {name: s}, "worst_gap": (s, cause, prompt tokens, batch)
    or None, "met": bool, "dominant": cause or None}}. Written from the rules, not from
    lab/core/blame.py: the own-token pieces each step recorded, every token's timestamp,
    the transfer's chunks, and the step list of the decode GPU."""
    import math

    f = scenario.fleet
    slo = scenario.slo
    split_first_at_prefill = f.layout == "disaggregated" and f.first_token == "prefill"
    names = ("queue", "prefix_fetch", "prefill", "chunk_wait", "kv_wait", "link_wait", "wire", "join_wait")
    out = {}
    for s in ref.requests:
        if s.dropped or s.first_token is None:
            continue
        parts = dict.fromkeys(names, 0.0)
        parts["queue"] = s.prefill_start - s.arrival
        own = math.fsum(ref.gpus[s.prefill_gpu].step_s(0, 0, k, k * (p + k / 2), p) for k, p in s.prompt_pieces)
        parts["prefix_fetch"] = s.fetch
        parts["prefill"] = own
        parts["chunk_wait"] = max(0.0, (s.prefill_end - s.prefill_start) - own - s.fetch)
        if s.first_token > s.prefill_end:  # the KV crossed the link before the first token
            tr = ref.transfers[next(i for i, t in enumerate(ref.transfers) if t.request == s.id)]
            after = max(s.prefill_end, tr.reserved)
            if tr.chunks is None:
                spans = [(tr.start, tr.end)]
            else:
                spans = [(c.start, c.start + tr.layer_s) for c in tr.chunks]
            wire = math.fsum(min(e, tr.end) - max(b, after) for b, e in spans if e > after and b < tr.end)
            parts["kv_wait"] = after - s.prefill_end
            parts["wire"] = wire
            parts["link_wait"] = max(0.0, (tr.end - after) - wire)
            parts["join_wait"] = s.first_token - tr.end
        gaps = token_gaps(s)
        worst = None
        if gaps:
            k = gaps.index(max(gaps))  # the earliest of the largest
            g = ref.gpus[s.token_gpus[k + 1]]
            step = next(st for st in g.steps if st[1] == s.tokens[k + 1])
            if k + 1 in s.resumed_at:
                cause = "preemption"
            elif split_first_at_prefill and k == 0:
                cause = "transfer"
            elif step[3] > 0:
                cause = "prefill_interference"
            else:
                cause = "decode_batch"
            worst = (gaps[k], cause, step[3], step[2])
        ttft = s.first_token - s.arrival
        ttft_ok = slo.ttft_s is None or ttft <= slo.ttft_s
        token_ok = True  # the per-token terms (a finished request's)
        if s.finished and s.O > 1:
            tpot_ms = (s.finish - s.first_token) / (s.O - 1) * 1000.0
            token_ok = (slo.tpot_ms is None or tpot_ms <= slo.tpot_ms) and (
                slo.max_gap_ms is None or worst[0] * 1000.0 <= slo.max_gap_ms)
        met = s.finished and ttft_ok and token_ok
        # Late and also over a per-token term: the term it missed by more time (docs/model.md "Blame").
        per_token = slo.max_gap_ms if slo.max_gap_ms is not None else slo.tpot_ms
        gap_first = (not ttft_ok and s.finished and not token_ok and worst is not None and per_token is not None
                     and worst[0] * 1000.0 - per_token > (ttft - slo.ttft_s) * 1000.0)
        dominant = None
        if not met:
            if not ttft_ok and not gap_first:
                dominant = max(names, key=lambda n: (parts[n], -names.index(n)))
            elif not s.finished:
                dominant = "unfinished"
            else:
                dominant = worst[1]
        out[s.id] = {"parts": parts, "worst_gap": worst, "met": met, "dominant": dominant}
    return out
