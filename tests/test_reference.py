"""The engine must match the naive reference simulator (tests/reference_sim.py) exactly.

Exactly means `==` on floats: both call the same cost function and add step durations
to the previous step's end, in integer ticks (docs/model.md "Time base"), and turn ticks into
seconds by the same rule, so any difference is a difference in the model, not in
rounding. Compared: per request the GPUs, prefill start/end, first token, finish and
every inter-token gap; per GPU every step; every transfer.
"""

import copy
from operator import sub
from pathlib import Path

import pytest

from lab.core import load_scenario, request_gaps, simulate

from lab.core.blame import _prompt_pieces
from reference_sim import reference_simulate, token_gaps

# ---------------------------------------------------------------- comparison


def diff_engine_reference(scenario, requests=None, limit=8):
    """Every way the engine's result differs from the reference's (empty list = equal)."""
    res = simulate(scenario, requests=requests)
    ref = reference_simulate(scenario, requests=requests)
    out = []
    if len(res.requests) != len(ref.requests):
        out.append(f"request count: engine {len(res.requests)}, reference {len(ref.requests)}")
    for rec, seq in zip(res.requests, ref.requests):
        fields = ("prefill_gpu", "decode_gpu", "prefill_start", "prefill_end", "first_token", "finish")
        mine = {f: getattr(seq, f) for f in fields}
        theirs = {f: getattr(rec, f) for f in fields}
        if seq.dropped:
            mine = {f: (-1 if f.endswith("gpu") else None) for f in fields}
        for f in fields:
            if mine[f] != theirs[f]:
                out.append(f"request {rec.id} (P={rec.prompt_tokens}, O={rec.output_tokens}, arrival {rec.arrival}): "
                           f"{f} engine {theirs[f]!r}, reference {mine[f]!r}")
        if (rec.prefix_hit_tokens, rec.prefix_fetch_s) != (seq.hit, seq.fetch):
            out.append(f"request {rec.id}: prefix hit engine ({rec.prefix_hit_tokens}, {rec.prefix_fetch_s}), "
                       f"reference ({seq.hit}, {seq.fetch}) (hit tokens, fetch s)")
        if rec.preemptions != seq.preemptions:
            out.append(f"request {rec.id}: preemptions engine {rec.preemptions}, reference {seq.preemptions}")
        if bool(rec.dropped) != seq.dropped:
            out.append(f"request {rec.id}: dropped engine {rec.dropped!r}, reference {seq.dropped}")
        for f in ("rejected", "predicted_ttft_s"):  # early rejection (docs/model.md "Early rejection")
            if getattr(rec, f) != getattr(seq, f):
                out.append(f"request {rec.id} (P={rec.prompt_tokens}, arrival {rec.arrival}): "
                           f"{f} engine {getattr(rec, f)!r}, reference {getattr(seq, f)!r}")
        gaps = request_gaps(res, rec)
        ref_gaps = token_gaps(seq)
        if gaps != ref_gaps:
            k = next((i for i, (a, b) in enumerate(zip(gaps, ref_gaps)) if a != b), min(len(gaps), len(ref_gaps)))
            out.append(f"request {rec.id} (O={rec.output_tokens}, finish engine {rec.finish}): gaps differ at index {k}: "
                       f"engine has {len(gaps)} gaps ({gaps[k:k + 2]}), reference {len(ref_gaps)} ({ref_gaps[k:k + 2]}); "
                       f"reference tokens end at {seq.tokens[-1] if seq.tokens else None}, run cap {ref.cap}")
    if len(res.gpus) != len(ref.gpus):
        out.append(f"gpu count: engine {len(res.gpus)}, reference {len(ref.gpus)}")
    for log, rg in zip(res.gpus, ref.gpus):
        if log.role != rg.roles[0][1]:
            out.append(f"gpu {log.index}: role engine {log.role}, reference {rg.roles[0][1]}")
        if log.roles != rg.roles:
            out.append(f"gpu {log.index}: roles over time engine {log.roles}, reference {rg.roles}")
        steps = list(zip(log.start, log.end, log.decode_seqs, log.prefill_tokens, log.context_tokens))
        if steps != rg.steps:
            k = next((i for i, (a, b) in enumerate(zip(steps, rg.steps)) if a != b), min(len(steps), len(rg.steps)))
            out.append(f"gpu {log.index}: step {k} differs (engine {len(steps)} steps, reference {len(rg.steps)}): "
                       f"engine {steps[k] if k < len(steps) else None}, reference {rg.steps[k] if k < len(rg.steps) else None} "
                       "(start, end, decode_seqs, prefill_tokens, context_tokens)")
        # The engine's running sum of busy ticks (what the metrics read) is its steps' sum,
        # which the step comparison above ties to the reference.
        added_up = sum(map(sub, log.end_t, log.start_t))
        if (log.busy_t(), type(log.busy_t())) != (added_up, type(added_up)):
            out.append(f"gpu {log.index}: busy ticks engine {log.busy_t()!r}, its steps add up to {added_up!r}")
        if log.preempted != rg.preempted:
            out.append(f"gpu {log.index}: preemptions (step, request) engine {log.preempted[:4]}, reference {rg.preempted[:4]}")
        if canonical_kv(log.kv_used) != canonical_kv(rg.kv_trace):
            mine, theirs = canonical_kv(log.kv_used), canonical_kv(rg.kv_trace)
            k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
            out.append(f"gpu {log.index}: KV blocks in use differ from entry {k}: engine {mine[k:k + 2]}, "
                       f"reference {theirs[k:k + 2]} (time, blocks)")
        if log.attention_args != rg.attention:
            k = min(set(log.attention_args) ^ set(rg.attention) or
                    {j for j in log.attention_args if log.attention_args[j] != rg.attention[j]})
            out.append(f"gpu {log.index}: attention terms of step {k} differ: engine {log.attention_args.get(k)}, "
                       f"reference {rg.attention.get(k)} (attention_units, reread_tokens)")
        if log.fetch_s != rg.fetch_s:
            out.append(f"gpu {log.index}: prefix fetch per step differs: engine {sorted(log.fetch_s.items())[:3]}, "
                       f"reference {sorted(rg.fetch_s.items())[:3]}")
    if res.reconfigurations != ref.reconfigurations:
        out.append(f"reconfigurations: engine {res.reconfigurations}, reference {ref.reconfigurations}")
    engine_tr = [(t.request, t.src_gpu, t.dst_gpu, t.ready, t.reserved, t.start, t.end, t.bytes, t.layer_s,
                  None if t.layer_starts is None else tuple(t.layer_starts)) for t in res.transfers]
    ref_tr = [t.as_tuple() for t in ref.transfers]
    if engine_tr != ref_tr:
        k = next((i for i, (a, b) in enumerate(zip(engine_tr, ref_tr)) if a != b), min(len(engine_tr), len(ref_tr)))
        out.append(f"transfer {k} differs (engine {len(engine_tr)}, reference {len(ref_tr)}): "
                   f"engine {engine_tr[k] if k < len(engine_tr) else None}, reference {ref_tr[k] if k < len(ref_tr) else None} "
                   "(request, src, dst, ready, reserved, start, end, bytes, layer_s, layer_starts)")
    for rec in res.requests:
        if rec.transfer >= 0:
            tr = res.transfers[rec.transfer]
            if tr.request != rec.id:
                out.append(f"request {rec.id}: its transfer index {rec.transfer} points at request {tr.request}'s transfer")
    # Gap differences last, so that a field-level difference is always shown.
    out.sort(key=lambda line: "gaps differ" in line)
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])


def canonical_kv(trace):
    """(time, blocks in use) once everything at each time happened, only where it changed."""
    last = {}
    for t, used in trace:
        last[t] = used
    out = []
    for t in sorted(last):
        if (out[-1][1] if out else 0) != last[t]:
            out.append((t, last[t]))
    return out


def assert_matches(scenario, requests=None):
    problems = diff_engine_reference(scenario, requests)
    assert not problems, "engine != reference:\n  " + "\n  ".join(problems)


def scenario(base, base_dir=None, **changes):
    """A copy of `base` with dotted-path changes, loaded and validated (trace paths relative to `base_dir`)."""
    raw = copy.deepcopy(base)
    overrides = []
    for key, value in changes.items():
        overrides.append((key.replace("__", "."), value))
    for dotted, value in overrides:
        node = raw
        parts = dotted.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return load_scenario(raw, base_dir=base_dir)


# ---------------------------------------------------------------- scenarios

COLOCATED = {
    "workload": {"rate": 3, "duration_s": 20, "prompt_tokens": 1500, "output_tokens": 100},
    "fleet": {"layout": "colocated", "gpus": 2},
    "drain_s": 60,
    "seed": 1,
}
MIXED_LENGTHS = {
    "prompt_tokens": {"dist": "lognormal", "median": 900, "sigma": 0.9, "min": 1, "max": 7000},
    "output_tokens": {"dist": "mix", "components": [
        {"weight": 1, "length": 1},
        {"weight": 2, "length": {"dist": "uniform", "low": 1, "high": 150}},
        {"weight": 1, "length": {"dist": "lognormal", "median": 60, "sigma": 1.0, "min": 1, "max": 400}},
    ]},
}
DISAGG = {
    "workload": {"rate": 4, "duration_s": 20, **MIXED_LENGTHS},
    "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2},
    "drain_s": 60,
    "seed": 2,
}

# The public Azure traces live beside the repo (../shared/traces), never in it.
SHARED_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"

CASES = {
    "colocated-whole": scenario(COLOCATED),
    "colocated-whole-batched": scenario(COLOCATED, **{"workload.rate": 6, "fleet.prefill_batch_tokens": 3500}),
    "colocated-whole-batch-1-token": scenario(COLOCATED, **{"workload.rate": 6, "fleet.prefill_batch_tokens": 1}),
    "colocated-chunk-512": scenario(COLOCATED, **{"fleet.chunk_tokens": 512}),
    "colocated-chunk-64": scenario(COLOCATED, **{"fleet.chunk_tokens": 64, "workload.duration_s": 10}),
    "colocated-chunk-16-mixed": scenario(COLOCATED, **{"fleet.chunk_tokens": 16, "workload.duration_s": 8,
                                                       "workload.prompt_tokens": {"dist": "uniform", "low": 1, "high": 300},
                                                       "workload.output_tokens": {"dist": "uniform", "low": 1, "high": 40}}),
    "colocated-chunk-2048": scenario(COLOCATED, **{"fleet.chunk_tokens": 2048, "workload.rate": 5}),
    "colocated-chunk-mixed": scenario(COLOCATED, **{"fleet.chunk_tokens": 300, "workload.prompt_tokens": MIXED_LENGTHS["prompt_tokens"],
                                                    "workload.output_tokens": MIXED_LENGTHS["output_tokens"]}),
    "colocated-kv-limited": scenario(COLOCATED, **{"model.kv_capacity_tokens": 5000, "workload.rate": 4}),
    "colocated-kv-limited-chunked": scenario(COLOCATED, **{"model.kv_capacity_tokens": 4000, "fleet.chunk_tokens": 256, "workload.rate": 4}),
    "colocated-kv-drops": scenario(COLOCATED, **{"model.kv_capacity_tokens": 3000, **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}}),
    "colocated-max-seqs-2": scenario(COLOCATED, **{"fleet.max_batch_seqs": 2}),
    "colocated-max-seqs-1-chunked": scenario(COLOCATED, **{"fleet.max_batch_seqs": 1, "fleet.chunk_tokens": 128, "workload.rate": 1}),
    "colocated-mixed-lengths": scenario(COLOCATED, **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}),
    "colocated-output-1": scenario(COLOCATED, **{"workload.output_tokens": 1, "workload.rate": 8}),
    "colocated-phases": scenario(COLOCATED, **{"workload.phases": [{"start_s": 8, "rate": 8, "prompt_tokens": 3000},
                                                                   {"start_s": 12, "rate": 1}]}),
    "colocated-roofline": scenario(COLOCATED, **{"model.cost": "roofline", "workload.rate": 8}),
    "colocated-roofline-chunked-a100": scenario(COLOCATED, **{"model.cost": "roofline", "model.gpu": "a100",
                                                              "fleet.chunk_tokens": 512, "workload.rate": 6}),
    "colocated-overloaded-capped": scenario(COLOCATED, **{"workload.rate": 12, "fleet.gpus": 1, "drain_s": 2}),
    "colocated-chunked-overloaded-capped": scenario(COLOCATED, **{"workload.rate": 12, "fleet.gpus": 1, "drain_s": 1.5,
                                                                  "fleet.chunk_tokens": 256}),
    "disagg-fifo": scenario(DISAGG),
    "disagg-independent": scenario(DISAGG, **{"fleet.link.sharing": "independent"}),
    "disagg-slow-fifo-link": scenario(DISAGG, **{"fleet.link.gbytes_per_s": 0.5}),
    "disagg-slow-independent-link": scenario(DISAGG, **{"fleet.link.gbytes_per_s": 0.5, "fleet.link.sharing": "independent"}),
    "disagg-layerwise-fifo": scenario(DISAGG, **{"fleet.link.layerwise": True, "fleet.link.gbytes_per_s": 2}),
    "disagg-layerwise-independent": scenario(DISAGG, **{"fleet.link.layerwise": True, "fleet.link.sharing": "independent"}),
    "disagg-layerwise-fast-link": scenario(DISAGG, **{"fleet.link.layerwise": True, "fleet.link.gbytes_per_s": 5000}),
    "disagg-first-token-prefill": scenario(DISAGG, **{"fleet.first_token": "prefill"}),
    "disagg-first-token-prefill-layerwise": scenario(DISAGG, **{"fleet.first_token": "prefill", "fleet.link.layerwise": True,
                                                                 "fleet.link.gbytes_per_s": 3}),
    "disagg-decode-kv-limited": scenario(DISAGG, **{"model.kv_capacity_tokens": 4000, "workload.rate": 8}),
    "disagg-decode-kv-limited-layerwise": scenario(DISAGG, **{"model.kv_capacity_tokens": 4000, "workload.rate": 8,
                                                               "fleet.link.layerwise": True}),
    "disagg-decode-max-seqs-3": scenario(DISAGG, **{"fleet.max_batch_seqs": 3, "fleet.decode_gpus": 3}),
    "disagg-batched-prefill": scenario(DISAGG, **{"fleet.prefill_batch_tokens": 2500, "fleet.prefill_gpus": 2, "workload.rate": 6}),
    "disagg-roofline": scenario(DISAGG, **{"model.cost": "roofline", "model.gpu": "h200", "workload.rate": 6}),
    "disagg-output-1": scenario(DISAGG, **{"workload.output_tokens": 1}),
    "disagg-overloaded-capped": scenario(DISAGG, **{"workload.rate": 15, "drain_s": 2}),
    "disagg-overloaded-decode-capped": scenario(DISAGG, **{"workload.rate": 10, "drain_s": 1, "fleet.prefill_gpus": 3,
                                                           "fleet.decode_gpus": 1, "model.kv_capacity_tokens": 20000}),
    "disagg-layerwise-overloaded-capped": scenario(DISAGG, **{"workload.rate": 15, "drain_s": 0.3, "fleet.link.layerwise": True,
                                                               "fleet.prefill_batch_tokens": 20000}),
    "trace-conv-window-colocated": scenario({"workload": {"trace": {"path": "azure_conv_2023.csv", "start_s": 640, "duration_s": 25}},
                                             "fleet": {"layout": "colocated", "gpus": 2, "chunk_tokens": 1024}},
                                            base_dir=str(SHARED_TRACES)),
    "trace-code-whole-disagg": scenario({"workload": {"trace": {"path": "azure_code_2023.csv", "start_s": 1175, "duration_s": 200,
                                                                "time_scale": 0.5}},
                                         "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
                                                   "link": {"gbytes_per_s": 10}}},
                                        base_dir=str(SHARED_TRACES)),
    "disagg-70b": scenario(DISAGG, **{"model.llm": "llama3-70b", "model.kv_capacity_tokens": 50000, "workload.rate": 2}),
    # Routing, prefill-pool chunks and attention (docs/model.md "Routing", "Attention").
    "colocated-round-robin": scenario(COLOCATED, **{"fleet.dispatch": "round_robin", "fleet.gpus": 3, "workload.rate": 6}),
    "colocated-least-loaded-chunked": scenario(COLOCATED, **{"fleet.dispatch": "least_loaded", "fleet.gpus": 3,
                                                             "fleet.chunk_tokens": 512, "workload.rate": 6,
                                                             **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}}),
    "colocated-length-split": scenario(COLOCATED, **{"fleet.dispatch": "length_split", "fleet.gpus": 3,
                                                     "fleet.long_prompt_tokens": 2000, "fleet.long_gpus": 1,
                                                     **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}}),
    "colocated-least-loaded-kv-limited": scenario(COLOCATED, **{"fleet.dispatch": "least_loaded", "model.kv_capacity_tokens": 5000,
                                                                "workload.rate": 4}),
    "colocated-attention-chunked": scenario(COLOCATED, **{"model.cost": "roofline", "model.attention": True,
                                                          "fleet.chunk_tokens": 1024, "workload.rate": 8,
                                                          "workload.prompt_tokens": {"dist": "uniform", "low": 500, "high": 9000}}),
    "colocated-attention-whole": scenario(COLOCATED, **{"model.cost": "roofline", "model.attention": True, "workload.rate": 8}),
    "disagg-round-robin-fewest-seqs": scenario(DISAGG, **{"fleet.dispatch": "round_robin", "fleet.prefill_gpus": 2,
                                                          "fleet.decode_pick": "fewest_seqs", "workload.rate": 6}),
    "disagg-least-loaded-chunked": scenario(DISAGG, **{"fleet.dispatch": "least_loaded", "fleet.prefill_gpus": 2,
                                                       "fleet.prefill_chunk_tokens": 512, "workload.rate": 6}),
    "disagg-length-split-layerwise": scenario(DISAGG, **{"fleet.dispatch": "length_split", "fleet.prefill_gpus": 2,
                                                         "fleet.long_prompt_tokens": 1500, "fleet.long_gpus": 1,
                                                         "fleet.link.layerwise": True, "fleet.link.gbytes_per_s": 3}),
    "disagg-prefill-chunks": scenario(DISAGG, **{"fleet.prefill_chunk_tokens": 256}),
    "disagg-prefill-chunks-layerwise-fifo": scenario(DISAGG, **{"fleet.prefill_chunk_tokens": 700, "fleet.link.layerwise": True,
                                                                "fleet.link.gbytes_per_s": 2}),
    "disagg-prefill-chunks-layerwise-independent": scenario(DISAGG, **{"fleet.prefill_chunk_tokens": 300, "fleet.link.layerwise": True,
                                                                       "fleet.link.sharing": "independent",
                                                                       "fleet.first_token": "prefill"}),
    "disagg-fewest-seqs-kv-limited": scenario(DISAGG, **{"fleet.decode_pick": "fewest_seqs", "model.kv_capacity_tokens": 4000,
                                                         "workload.rate": 8, "fleet.decode_gpus": 3}),
    "disagg-attention-chunked": scenario(DISAGG, **{"model.cost": "roofline", "model.attention": True, "workload.rate": 6,
                                                    "fleet.prefill_chunk_tokens": 2048}),
    "disagg-prefill-chunks-overloaded-capped": scenario(DISAGG, **{"workload.rate": 15, "drain_s": 2, "fleet.prefill_chunk_tokens": 512,
                                                                   "fleet.dispatch": "least_loaded", "fleet.prefill_gpus": 2}),
}

# Fleets as they are built: tensor parallelism, a GPU type and a power cap per pool.
CASES.update({
    "colocated-tp2-roofline-chunked-capped": scenario(COLOCATED, **{"fleet.gpus": 4, "fleet.tp": 2, "fleet.chunk_tokens": 512,
                                                                   "fleet.power_cap_w": 350, "model.cost": "roofline",
                                                                   "workload.rate": 10}),
    "colocated-70b-tp4-kv-limited": scenario(COLOCATED, **{"fleet.gpus": 8, "fleet.tp": 4, "model.cost": "roofline",
                                                          "model.llm": "llama3-70b", "model.memory_utilization": 0.447,
                                                          "workload.rate": 4, **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}}),
    "disagg-tp-mixed-gpus-capped": scenario(DISAGG, **{"fleet.prefill_gpus": 2, "fleet.prefill_tp": 2, "fleet.decode_gpus": 4,
                                                       "fleet.decode_gpu": "a100", "fleet.decode_power_cap_w": 250,
                                                       "fleet.prefill_power_cap_w": 500, "model.cost": "roofline",
                                                       "workload.rate": 8}),
    "disagg-70b-prefill-tp2-decode-tp4-layerwise": scenario(DISAGG, **{"fleet.prefill_gpus": 4, "fleet.prefill_tp": 2,
                                                                      "fleet.decode_gpus": 4, "fleet.decode_tp": 4,
                                                                      "fleet.link.layerwise": True, "model.cost": "roofline",
                                                                      "model.llm": "llama3-70b", "model.memory_utilization": 0.89,
                                                                      "workload.rate": 3}),
    "disagg-linear-tp-h200-decode": scenario(DISAGG, **{"fleet.prefill_gpus": 1, "fleet.decode_gpus": 4, "fleet.decode_tp": 2,
                                                        "fleet.decode_gpu": "h200", "model.tp_efficiency": 0.7,
                                                        "workload.rate": 6}),
})

# Partial prefills (docs/model.md "Chunked prefill and partial prefills"): 200-800-token prompts
# with a 30,000-token one now and then, or many long ones at once.
WITH_LONG = {"dist": "mix", "components": [{"weight": 30, "length": {"dist": "uniform", "low": 200, "high": 800}},
                                           {"weight": 1, "length": 30_000}]}
MANY_LONG = {"dist": "mix", "components": [{"weight": 3, "length": {"dist": "uniform", "low": 200, "high": 800}},
                                           {"weight": 1, "length": {"dist": "uniform", "low": 9_000, "high": 30_000}}]}
PARTIAL = {"workload.prompt_tokens": WITH_LONG, "workload.rate": 8, "workload.duration_s": 12,
           "workload.output_tokens": {"dist": "uniform", "low": 1, "high": 120}}
CASES.update({
    "colocated-partial-prefills": scenario(COLOCATED, **{**PARTIAL, "fleet.chunk_tokens": 2048, "fleet.long_prefill_tokens": 512}),
    "colocated-partial-prefills-many-long-kv-limited": scenario(
        COLOCATED, **{**PARTIAL, "workload.prompt_tokens": MANY_LONG, "workload.rate": 3, "fleet.gpus": 1,
                                 "fleet.chunk_tokens": 1024, "fleet.long_prefill_tokens": 256,
                                 "model.kv_capacity_tokens": 70_000, "fleet.max_batch_seqs": 6, "drain_s": 20}),
    "colocated-partial-prefills-attention": scenario(COLOCATED, **{**PARTIAL,
        "fleet.chunk_tokens": 2048, "fleet.long_prefill_tokens": 700, "model.cost": "roofline", "model.attention": True,
        "workload.prompt_tokens": MANY_LONG, "workload.rate": 4}),
    "colocated-partial-prefills-threshold-over-budget": scenario(COLOCATED, **{**PARTIAL,
        "fleet.chunk_tokens": 256, "fleet.long_prefill_tokens": 4096}),
    "colocated-whole-long-prefill-ignored": scenario(COLOCATED, **{**PARTIAL, "fleet.long_prefill_tokens": 512}),
    "disagg-partial-prefills": scenario(DISAGG, **{**PARTIAL, "fleet.prefill_gpus": 2, "fleet.decode_gpus": 2,
                                                              "fleet.prefill_chunk_tokens": 2048, "fleet.long_prefill_tokens": 512}),
    "disagg-partial-prefills-many-long-layerwise": scenario(DISAGG, **{**PARTIAL,
        "workload.prompt_tokens": MANY_LONG, "workload.rate": 3, "fleet.prefill_chunk_tokens": 1500,
        "fleet.long_prefill_tokens": 300, "fleet.link.layerwise": True, "fleet.link.gbytes_per_s": 3,
        "fleet.first_token": "prefill", "drain_s": 20}),
    "disagg-partial-prefills-attention-least-loaded": scenario(DISAGG, **{**PARTIAL,
        "fleet.prefill_gpus": 2, "fleet.dispatch": "least_loaded", "fleet.prefill_chunk_tokens": 2048,
        "fleet.long_prefill_tokens": 512, "model.cost": "roofline", "model.attention": True,
        "workload.prompt_tokens": MANY_LONG, "workload.rate": 4}),
    "disagg-partial-prefills-overloaded-capped": scenario(DISAGG, **{**PARTIAL,
        "workload.prompt_tokens": MANY_LONG, "workload.rate": 10, "drain_s": 1.5, "fleet.prefill_chunk_tokens": 1024,
        "fleet.long_prefill_tokens": 128}),
})

# The calibrated model (docs/model.md "The calibrated model"): attention terms on every prompt
# step, decode lines whose compute bound grows with the context, per-step host overheads.
CASES.update({
    "colocated-calibrated-chunked": scenario(COLOCATED, **{"model.cost": "calibrated", "fleet.chunk_tokens": 512,
                                                           "workload.rate": 10}),
    "colocated-calibrated-fp8-tp2-capped-partial": scenario(COLOCATED, **{**PARTIAL,
        "model.cost": "calibrated", "model.dtype": "fp8", "fleet.gpus": 4, "fleet.tp": 2, "fleet.power_cap_w": 400,
        "fleet.chunk_tokens": 2048, "fleet.long_prefill_tokens": 512}),
    "disagg-calibrated-vllm-2023-70b-tp": scenario(DISAGG, **{"model.cost": "calibrated", "model.stack": "vllm-2023",
        "model.llm": "llama2-70b", "fleet.prefill_gpus": 4, "fleet.prefill_tp": 4, "fleet.decode_gpus": 4,
        "fleet.decode_tp": 4, "fleet.decode_gpu": "a100", "fleet.prefill_chunk_tokens": 1024, "workload.rate": 3}),
})


@pytest.mark.parametrize("name", sorted(CASES))
def test_engine_matches_reference(name):
    sc = CASES[name]
    if sc.workload.trace is not None and not SHARED_TRACES.is_dir():
        pytest.skip(f"the public traces folder {SHARED_TRACES} is not beside this checkout")
    assert_matches(sc)


def test_cases_exercise_what_they_claim():
    """Guard the scenario list itself: the special cases really are special."""
    from lab.core import simulate as sim

    res = sim(CASES["colocated-kv-drops"])
    assert any(r.dropped for r in res.requests)
    ref = reference_simulate(CASES["colocated-overloaded-capped"])
    assert any(not s.finished for s in ref.requests if not s.dropped)
    ref = reference_simulate(CASES["colocated-chunk-64"])
    # prompts of 1,500 tokens at 64 a step: each prompt spans many steps
    assert max(len([st for st in g.steps if st[3] > 0]) for g in ref.gpus) > 100
    # KV memory, not compute, limits admission: with ample memory the schedule differs
    limited = reference_simulate(CASES["colocated-kv-limited"])
    ample = reference_simulate(scenario(COLOCATED, **{"workload.rate": 4}))
    assert [s.prefill_start for s in limited.requests] != [s.prefill_start for s in ample.requests]
    assert not any(s.dropped for s in limited.requests)
    ref = reference_simulate(CASES["disagg-decode-kv-limited"])
    assert any(t.reserved > t.ready for t in ref.transfers)
    ref = reference_simulate(CASES["disagg-slow-fifo-link"])
    assert any(t.start > t.reserved for t in ref.transfers)
    ref = reference_simulate(CASES["disagg-layerwise-fifo"])
    assert any(t.reserved < t.ready for t in ref.transfers)
    # the built fleets really have instances of several GPUs, and the 70B one really drops
    # requests too big for an instance (the 8,544-token prefill instances) and queues on KV
    res = sim(CASES["disagg-70b-prefill-tp2-decode-tp4-layerwise"])
    assert [g.tp for g in res.gpus] == [2, 2, 4] and any(r.dropped for r in res.requests)
    assert any("prefill instance" in (r.dropped or "") for r in res.requests)
    res = sim(CASES["colocated-70b-tp4-kv-limited"])
    assert any(r.dropped for r in res.requests) and any(r.finished for r in res.requests)


# ---------------------------------------------------------------- exact ties


def _boundary_times(ref):
    times = set()
    for g in ref.gpus:
        for start, end, *_ in g.steps:
            times.add(start)
            times.add(end)
    for t in ref.transfers:
        times.add(t.end)
    return sorted(times)


@pytest.mark.parametrize("base", ["colocated-whole", "colocated-chunk-512", "colocated-kv-limited",
                                  "disagg-fifo", "disagg-independent", "disagg-layerwise-fifo", "disagg-first-token-prefill"])
def test_arrivals_exactly_at_step_boundaries_and_landings(base):
    """Arrivals placed on the exact float times of step boundaries and KV landings, and
    several arrivals at one instant, exercise every tie-break rule."""
    sc = CASES[base]
    from lab.core import generate_requests

    requests = [r for r in generate_requests(sc.workload, sc.seed) if r[0] < 10]
    for _ in range(2):
        ref = reference_simulate(sc, requests)
        times = [t for t in _boundary_times(ref) if 0 < t < 10]
        extra = []
        for i, t in enumerate(times[::7][:25]):
            extra.append((t, 200 + 37 * (i % 11), 1 + (i * 13) % 40))
            if i % 3 == 0:
                extra.append((t, 150, 1))  # two arrivals at one instant, one a single token
        requests = sorted(requests + extra, key=lambda r: r[0])
    assert_matches(sc, requests)


def test_simultaneous_burst():
    """Many requests at the same instant: FIFO by id across GPUs."""
    for base in ("colocated-whole", "colocated-chunk-512", "disagg-fifo", "disagg-independent"):
        sc = CASES[base]
        requests = [(1.0, 100 * (1 + i % 5), 1 + i % 7) for i in range(12)] + [(2.5, 700, 30)] * 5
        assert_matches(sc, requests)


# ---------------------------------------------------------------- hand-checked


def test_reference_on_a_hand_computed_colocated_run():
    """The reference itself, against numbers worked out from the linear constants."""
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 100, "output_tokens": 3},
                        "fleet": {"layout": "colocated", "gpus": 1}, "drain_s": 10})
    ref = reference_simulate(sc, [(0.0, 100, 3)])
    seq = ref.requests[0]
    # In picosecond ticks (docs/model.md "Time base"): 0.05 ms a prompt token, 8 ms + 0.25 ms a
    # sequence + 0.00004 ms a context token per decode step, added as integers.
    prefill = 50_000_000 * 100
    d1 = 8_000_000_000 + 250_000_000 + 40_000 * 101
    d2 = 8_000_000_000 + 250_000_000 + 40_000 * 102
    s = [t / 10**12 for t in (prefill, prefill + d1, prefill + d1 + d2)]
    assert seq.tokens == s
    assert ref.gpus[0].steps == [(0.0, s[0], 0, 100, 0), (s[0], s[1], 1, 0, 101), (s[1], s[2], 1, 0, 102)]


def test_reference_on_a_hand_computed_disaggregated_run():
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 100, "output_tokens": 3},
                        "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
                                  "link": {"gbytes_per_s": 1.0}}, "drain_s": 10})
    ref = reference_simulate(sc, [(0.0, 100, 3)])
    seq = ref.requests[0]
    prefill = 50_000_000 * 100  # ticks, as above
    wire = round(100 * 131072 / 1e9 * 1e12)  # 13.1072 ms on a 1 GB/s link
    land = prefill + wire
    d1 = 8_000_000_000 + 250_000_000 + 40_000 * 101
    d2 = 8_000_000_000 + 250_000_000 + 40_000 * 102
    prefill, land, s1, s2 = (t / 10**12 for t in (prefill, land, land + d1, land + d1 + d2))
    assert ref.transfers[0].as_tuple() == (0, 0, 1, prefill, prefill, prefill, land, 100 * 131072, 0.0, None)
    assert seq.tokens == [land, s1, s2]
    assert seq.first_token == land and seq.prefill_end == prefill
    assert_matches(sc, [(0.0, 100, 3)])


# ---------------------------------------------------------------- the drain cap


def test_unfinished_request_has_no_token_after_the_run_stopped():
    """Minimal case for the drain cap: one request, 10 output tokens, cap at 0.03 s.

    Tokens: first at 0.005 (100-token prefill), then every ~8.25 ms: 0.01325, 0.02155,
    0.0298, and the next step would end at ~0.0381, after the cap. The run stops there,
    the request is unfinished, so it has emitted 4 tokens: 3 gaps, all ending by the cap.
    """
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 0.01, "prompt_tokens": 100, "output_tokens": 10},
                        "fleet": {"layout": "colocated", "gpus": 1}, "drain_s": 0.02})
    res = simulate(sc, requests=[(0.0, 100, 10)])
    rec = res.requests[0]
    assert rec.finish is None
    gaps = request_gaps(res, rec)
    last_token = rec.first_token + sum(gaps)
    assert last_token <= res.end_time, (
        f"request_gaps counts a token at {last_token}, after the run stopped at {res.end_time}")
    assert len(gaps) == 3
    assert_matches(sc, [(0.0, 100, 10)])


@pytest.mark.parametrize("fleet", [
    {"layout": "colocated", "gpus": 1},
    {"layout": "colocated", "gpus": 1, "kv_policy": "on_demand"},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "kv_policy": "on_demand"},
], ids=["colocated", "colocated-on-demand", "disaggregated", "disaggregated-on-demand"])
def test_last_step_running_past_the_cap_with_nothing_after_it_is_cut(fleet):
    """Minimal case: one request with 2 output tokens, cap at 0.01 s. Its first token
    comes at about 0.005 s and its second would at about 0.0133 s, after the cap, with no
    event left on the heap. The decode run-ahead must not take that step's boundary as if
    it were inside the run: the run is cut at the cap and the request is unfinished."""
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 0.001, "prompt_tokens": 100, "output_tokens": 2},
                        "fleet": fleet, "drain_s": 0.009})
    res = simulate(sc, requests=[(0.0, 100, 2)])
    rec = res.requests[0]
    assert rec.first_token is not None and rec.first_token < 0.01
    assert rec.finish is None, f"finished at {rec.finish}, after the cap at 0.01 s"
    assert res.capped == "drain_s" and res.end_time == 0.01
    assert_matches(sc, [(0.0, 100, 2)])


def test_prefill_still_running_at_the_cap_has_no_prefill_end():
    """Minimal case: layerwise link, one 8,000-token prompt (0.4 s of prefill), run cap
    at 0.3 s. The prefill never ended inside the run, so the request has no prefill_end
    (the reference leaves it None); a provisional end time after the run must not leak
    into the record."""
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 0.1, "prompt_tokens": 8000, "output_tokens": 10},
                        "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
                                  "link": {"layerwise": True}},
                        "drain_s": 0.2})
    res = simulate(sc, requests=[(0.0, 8000, 10)])
    rec = res.requests[0]
    assert res.capped and rec.first_token is None
    assert rec.prefill_end is None or rec.prefill_end <= res.end_time, (
        f"prefill_end {rec.prefill_end} is after the run stopped at {res.end_time}")
    assert_matches(sc, [(0.0, 8000, 10)])


# ---------------------------------------------------------------- routing, prefill chunks, attention

ROUTING_GRID = (
    [("colocated", d, "most_free_kv", c, a) for d in ("queue", "round_robin", "least_loaded", "length_split")
     for c in (None, 256) for a in (False, True)]
    + [("disaggregated", d, p, c, a) for d in ("queue", "round_robin", "least_loaded", "length_split")
       for p in ("most_free_kv", "fewest_seqs") for c in (None, 384) for a in (False, True)]
)


def random_routed_scenario(index, layout, dispatch, decode_pick, chunk, attention):
    """A small random scenario for one combination of the grid (seeded by its index)."""
    import random

    rng = random.Random(1000 + index)
    prompt = {"dist": "mix", "components": [
        {"weight": 4, "length": {"dist": "uniform", "low": 20, "high": 1500}},
        {"weight": 1, "length": {"dist": "uniform", "low": 3000, "high": 9000}},
    ]}
    output = {"dist": "uniform", "low": 1, "high": rng.choice([40, 120])}
    fleet = {"layout": layout, "dispatch": dispatch, "max_batch_seqs": rng.choice([3, 256]),
             "prefill_batch_tokens": rng.choice([2000, 8192])}
    pool = rng.randint(2, 4)
    if layout == "colocated":
        fleet["gpus"] = pool
        fleet["chunk_tokens"] = chunk
    else:
        fleet.update(prefill_gpus=pool, decode_gpus=rng.randint(1, 3), decode_pick=decode_pick,
                     prefill_chunk_tokens=chunk, first_token=rng.choice(["decode", "prefill"]),
                     link={"gbytes_per_s": rng.choice([2.0, 50.0]), "sharing": rng.choice(["fifo", "independent"]),
                           "layerwise": rng.random() < 0.5})
    if dispatch == "length_split":
        fleet.update(long_prompt_tokens=rng.choice([1000, 3000]), long_gpus=rng.randint(1, pool - 1))
    model = {"cost": "roofline" if attention or rng.random() < 0.5 else "linear", "attention": attention}
    if rng.random() < 0.4:
        model["kv_capacity_tokens"] = rng.choice([12000, 20000])
    raw = {"workload": {"rate": rng.uniform(3, 10), "duration_s": rng.uniform(4, 8),
                        "prompt_tokens": prompt, "output_tokens": output},
           "fleet": fleet, "model": model, "seed": rng.randint(0, 10_000),
           "drain_s": rng.choice([1.0, 30.0])}
    return load_scenario(raw)


@pytest.mark.parametrize("index", range(len(ROUTING_GRID)),
                         ids=["-".join(str(x) for x in combo) for combo in ROUTING_GRID])
def test_engine_matches_reference_over_every_routing_combination(index):
    assert_matches(random_routed_scenario(index, *ROUTING_GRID[index]))


def test_routing_cases_exercise_what_they_claim():
    """The routed cases really route: bound dispatch spreads prompts differently from the
    fleet queue, length_split sends every long prompt to the long instances, chunks of the
    prefill pool split prompts over several steps, and attention lengthens prefill steps."""
    res = simulate(CASES["colocated-length-split"])
    long_gpu = res.gpus[-1].index
    served = [r for r in res.requests if r.prefill_gpu >= 0]
    assert served and all((r.prefill_gpu == long_gpu) == (r.prompt_tokens >= 2000) for r in served)
    assert any(r.prompt_tokens >= 2000 for r in served) and any(r.prompt_tokens < 2000 for r in served)
    rr = simulate(CASES["disagg-round-robin-fewest-seqs"])
    arrived = [r for r in rr.requests if r.prefill_gpu >= 0]
    assert [r.prefill_gpu for r in arrived] == [i % 2 for i in range(len(arrived))]
    chunked = reference_simulate(CASES["disagg-prefill-chunks"])
    assert any(len(s.prompt_pieces) > 1 for s in chunked.requests)
    plain = simulate(scenario(DISAGG, **{"model.cost": "roofline", "workload.rate": 6, "fleet.prefill_chunk_tokens": 2048}))
    att = simulate(CASES["disagg-attention-chunked"])
    assert att.gpus[0].attention_args and not plain.gpus[0].attention_args
    assert att.gpus[0].end[0] - att.gpus[0].start[0] > plain.gpus[0].end[0] - plain.gpus[0].start[0]


# ---------------------------------------------------------------- partial prefills


LONG_AND_SHORT = [(0.0, 30_000, 20), (0.004, 300, 8), (0.011, 650, 30), (0.02, 30_000, 5), (0.021, 200, 1),
                  (0.05, 799, 12), (0.3, 512, 4), (0.3, 513, 4), (0.31, 20_000, 9), (0.4, 250, 40)]


@pytest.mark.parametrize("fleet", [
    {"layout": "colocated", "gpus": 1, "chunk_tokens": 2048, "long_prefill_tokens": 512},
    {"layout": "colocated", "gpus": 2, "chunk_tokens": 600, "long_prefill_tokens": 100, "max_batch_seqs": 3},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "prefill_chunk_tokens": 2048,
     "long_prefill_tokens": 512},
    {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 1, "prefill_chunk_tokens": 1024,
     "long_prefill_tokens": 16, "link": {"layerwise": True, "gbytes_per_s": 5}},
], ids=["colocated-1", "colocated-2-slots-3", "prefill-pool-1", "prefill-pool-2-layerwise"])
@pytest.mark.parametrize("attention", [False, True])
def test_partial_prefills_match_the_reference_with_long_prompts_at_once(fleet, attention):
    """Two 30,000-token prompts at once and a 20,000-token one later, short ones around them."""
    sc = load_scenario({"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 1, "output_tokens": 1},
                        "fleet": fleet, "model": {"cost": "roofline", "attention": attention}, "drain_s": 60})
    assert_matches(sc, LONG_AND_SHORT)


def test_partial_prefill_cases_exercise_what_they_claim():
    """The partial-prefill cases really run several prompts' prefills in one step, and a
    short prompt admitted after a long one finishes its prefill first; without the field
    (or with whole prefill) they run as before."""
    for name in ("colocated-partial-prefills", "colocated-partial-prefills-many-long-kv-limited",
                 "disagg-partial-prefills", "disagg-partial-prefills-many-long-layerwise"):
        ref = reference_simulate(CASES[name])
        longs = [s for s in ref.requests if s.P > CASES[name].fleet.long_prefill_tokens and s.prefill_end is not None]
        overtaken = [(lg.id, s.id) for lg in longs for s in ref.requests
                     if s.id > lg.id and s.prefill_gpu == lg.prefill_gpu and s.prefill_end is not None
                     and s.prefill_end < lg.prefill_end]
        assert overtaken, name
        # a step carrying a piece of a long prompt that goes on and a piece of another prompt
        res = simulate(CASES[name])
        per_step = {}
        for rid, own in _prompt_pieces(res).items():
            rec = res.requests[rid]
            for j, _ in own:
                per_step.setdefault((rec.prefill_gpu, j), []).append(rec)
        assert any(len(recs) > 1 and any(r.prompt_tokens > 10_000 and res.gpus[r.prefill_gpu].end[j] < r.prefill_end
                                         for r in recs)
                   for (g, j), recs in per_step.items()), name
    ref = reference_simulate(CASES["colocated-partial-prefills-many-long-kv-limited"])
    assert any(s.prefill_start > s.arrival + 1 for s in ref.requests)  # KV room, not the budget, held some
    same = scenario(COLOCATED, **PARTIAL)
    assert simulate(CASES["colocated-whole-long-prefill-ignored"]).gpus[0].prefill_tokens == simulate(same).gpus[0].prefill_tokens
