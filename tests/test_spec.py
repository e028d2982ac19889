"""Scenario spec: every field validated, errors naming the field path and the bad value;
`--set` overrides; to_dict round trips."""

import copy
import json

import pytest

from lab.core import LabError, load_scenario, simulate
from lab.core.spec import MAX_GPUS, Scenario, apply_overrides, parse_override

BASE = {
    "workload": {"rate": 4, "duration_s": 30, "prompt_tokens": 1000, "output_tokens": 100},
    "fleet": {"layout": "colocated", "gpus": 2},
}
DISAGG = {
    "workload": {"rate": 4, "duration_s": 30, "prompt_tokens": 1000, "output_tokens": 100},
    "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2},
}


def with_field(base, dotted, value):
    raw = copy.deepcopy(base)
    node = raw
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if value is DELETE:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value
    return raw


DELETE = object()


def rejected(raw, path, *fragments):
    with pytest.raises(LabError) as info:
        load_scenario(raw)
    err = info.value
    assert err.path == path, f"error names {err.path!r}, expected {path!r}: {err}"
    text = str(err)
    assert text.startswith(path)
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in {text!r}"
    return err


# (base, field, bad value, expected error path, fragments the message must contain)
BAD_FIELDS = [
    # scenario
    (BASE, "seed", -1, "seed", ["-1", "at least 0"]),
    (BASE, "seed", 1.5, "seed", ["1.5", "whole number"]),
    (BASE, "seed", "7", "seed", ["'7'", "whole number"]),
    (BASE, "seed", True, "seed", ["true", "whole number"]),
    (BASE, "drain_s", -5, "drain_s", ["-5", "at least 0"]),
    (BASE, "drain_s", 1e9, "drain_s", ["1,000,000,000", "at most 604,800"]),
    (BASE, "drain_s", "long", "drain_s", ["'long'", "number"]),
    (BASE, "drain_s", float("nan"), "drain_s", ["nan", "finite"]),
    (BASE, "colour", "red", "colour", ["unknown field", "workload"]),
    (BASE, "workload", 5, "workload", ["5", "object"]),
    (BASE, "workload", DELETE, "workload", ["required field is missing"]),
    (BASE, "fleet", DELETE, "fleet", ["required field is missing"]),
    (BASE, "fleet", [1], "fleet", ["a list", "object"]),
    (BASE, "model", "h100", "model", ["'h100'", "object"]),
    # workload
    (BASE, "workload.rate", DELETE, "workload.rate", ["required field is missing"]),
    (BASE, "workload.rate", -1, "workload.rate", ["-1", "at least 0"]),
    (BASE, "workload.rate", 20_000, "workload.rate", ["20,000", "at most 10,000"]),
    (BASE, "workload.rate", "fast", "workload.rate", ["'fast'", "expected a number"]),
    (BASE, "workload.rate", False, "workload.rate", ["false", "expected a number"]),
    (BASE, "workload.rate", float("inf"), "workload.rate", ["inf", "finite"]),
    (BASE, "workload.duration_s", 0, "workload.duration_s", ["0", "greater than 0"]),
    (BASE, "workload.duration_s", -3, "workload.duration_s", ["-3", "greater than 0"]),
    (BASE, "workload.duration_s", 1_000_000, "workload.duration_s", ["1,000,000", "at most 604,800"]),
    (BASE, "workload.prompt_tokens", DELETE, "workload.prompt_tokens", ["required field is missing"]),
    (BASE, "workload.output_tokens", DELETE, "workload.output_tokens", ["required field is missing"]),
    (BASE, "workload.prompt_tokens", 0, "workload.prompt_tokens.value", ["0", "at least 1"]),
    (BASE, "workload.prompt_tokens", 2.5, "workload.prompt_tokens.value", ["2.5", "whole number"]),
    (BASE, "workload.prompt_tokens", 2_000_000, "workload.prompt_tokens.value", ["2,000,000", "at most 1,000,000"]),
    (BASE, "workload.prompt_tokens", "long", "workload.prompt_tokens", ["'long'", "object"]),
    (BASE, "workload.output_tokens", True, "workload.output_tokens", ["true", "object"]),
    (BASE, "workload.phases", {"start_s": 1}, "workload.phases", ["an object", "list"]),
    (BASE, "workload.burst", 2, "workload.burst", ["unknown field", "rate"]),
    # too many requests
    (BASE, "workload.duration_s", 600_000, "workload.rate", ["about 2,400,000 requests", "1,048,576"]),
    # length distributions
    (BASE, "workload.prompt_tokens", {"dist": "poisson"}, "workload.prompt_tokens.dist", ["'poisson'", "'lognormal'"]),
    (BASE, "workload.prompt_tokens", {"value": 5}, "workload.prompt_tokens.dist", ["required field is missing"]),
    (BASE, "workload.prompt_tokens", {"dist": "fixed"}, "workload.prompt_tokens.value", ["required field is missing"]),
    (BASE, "workload.prompt_tokens", {"dist": "fixed", "value": -2}, "workload.prompt_tokens.value", ["-2", "at least 1"]),
    (BASE, "workload.prompt_tokens", {"dist": "uniform", "low": 10}, "workload.prompt_tokens.high", ["required field is missing"]),
    (BASE, "workload.prompt_tokens", {"dist": "uniform", "low": 10, "high": 5}, "workload.prompt_tokens.high", ["5", "below low (10)"]),
    (BASE, "workload.prompt_tokens", {"dist": "uniform", "low": 0, "high": 5}, "workload.prompt_tokens.low", ["0", "at least 1"]),
    (BASE, "workload.prompt_tokens", {"dist": "uniform", "value": 5, "low": 1, "high": 5}, "workload.prompt_tokens.value", ["not used by dist 'uniform'", "high, low"]),
    (BASE, "workload.prompt_tokens", {"dist": "lognormal", "median": 100, "sigma": 6}, "workload.prompt_tokens.sigma", ["6", "at most 5"]),
    (BASE, "workload.prompt_tokens", {"dist": "lognormal", "median": 0.5, "sigma": 1}, "workload.prompt_tokens.median", ["0.5", "at least 1"]),
    (BASE, "workload.prompt_tokens", {"dist": "lognormal", "sigma": 1}, "workload.prompt_tokens.median", ["required field is missing"]),
    (BASE, "workload.prompt_tokens", {"dist": "lognormal", "median": 100, "sigma": 1, "min": 50, "max": 10}, "workload.prompt_tokens.max", ["10", "below min (50)"]),
    (BASE, "workload.prompt_tokens", {"dist": "lognormal", "median": 100, "sigma": 1, "mean": 3}, "workload.prompt_tokens.mean", ["unknown field"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": []}, "workload.prompt_tokens.components", ["at least one component"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": {"a": 1}}, "workload.prompt_tokens.components", ["an object", "list"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": [{"weight": 0, "length": 5}]}, "workload.prompt_tokens.components[0].weight", ["0", "greater than 0"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": [{"weight": 1}]}, "workload.prompt_tokens.components[0].length", ["required field is missing"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": [{"weight": 1, "length": 5}, {"weight": "x", "length": 5}]}, "workload.prompt_tokens.components[1].weight", ["'x'", "number"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": [{"weight": 1, "length": 0}]}, "workload.prompt_tokens.components[0].length.value", ["0", "at least 1"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": [{"weight": 1, "length": {"dist": "mix", "components": [{"weight": 1, "length": 3}]}}]}, "workload.prompt_tokens.components[0].length.dist", ["cannot contain another mix"]),
    (BASE, "workload.prompt_tokens", {"dist": "mix", "components": [{"weight": 1, "length": 5, "name": "a"}]}, "workload.prompt_tokens.components[0].name", ["unknown field"]),
    # phases
    (BASE, "workload.phases", [{"rate": 2}], "workload.phases[0].start_s", ["required field is missing"]),
    (BASE, "workload.phases", [{"start_s": 10, "rate": 2}, {"start_s": 5, "rate": 3}], "workload.phases[1].start_s", ["5", "after the previous phase's start (10)"]),
    (BASE, "workload.phases", [{"start_s": 10, "rate": 2}, {"start_s": 10, "rate": 3}], "workload.phases[1].start_s", ["10", "after the previous"]),
    (BASE, "workload.phases", [{"start_s": 30, "rate": 2}], "workload.phases[0].start_s", ["30", "not before workload.duration_s (30)"]),
    (BASE, "workload.phases", [{"start_s": 5, "rate": -2}], "workload.phases[0].rate", ["-2", "at least 0"]),
    (BASE, "workload.phases", [{"start_s": 5, "prompt_tokens": {"dist": "fixed", "value": 0}}], "workload.phases[0].prompt_tokens.value", ["0", "at least 1"]),
    (BASE, "workload.phases", [{"start_s": 5, "duration_s": 3}], "workload.phases[0].duration_s", ["unknown field"]),
    (BASE, "workload.phases", [5], "workload.phases[0]", ["5", "object"]),
    # trace, and contradictions with generated arrivals
    (BASE, "workload.trace", "t.csv", "workload.rate", ["trace", "remove this field"]),
    ({"workload": {"trace": "t.csv", "prompt_tokens": 5}, "fleet": BASE["fleet"]}, "workload.trace", "t.csv", "workload.prompt_tokens", ["trace"]),
    ({"workload": {"trace": "t.csv", "phases": [{"start_s": 1}]}, "fleet": BASE["fleet"]}, "workload.trace", "t.csv", "workload.phases", ["trace"]),
    ({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]}, "workload.trace", {"path": ""}, "workload.trace.path", ["must not be empty"]),
    ({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]}, "workload.trace", {"path": 3}, "workload.trace.path", ["3", "text"]),
    ({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]}, "workload.trace", {"path": "t.csv", "time_scale": 0}, "workload.trace.time_scale", ["0", "at least 0.001"]),
    ({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]}, "workload.trace", {"path": "t.csv", "start_s": -1}, "workload.trace.start_s", ["-1", "at least 0"]),
    ({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]}, "workload.trace", {"path": "t.csv", "duration_s": 0}, "workload.trace.duration_s", ["0", "greater than 0"]),
    ({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]}, "workload.trace", {"path": "t.csv", "speed": 2}, "workload.trace.speed", ["unknown field"]),
    # model
    (BASE, "model.cost", "quadratic", "model.cost", ["'quadratic'", "'linear'", "'roofline'"]),
    (BASE, "model.llm", "gpt-5", "model.llm", ["'gpt-5'", "'llama3-8b'"]),
    (BASE, "model.gpu", "tpu", "model.gpu", ["'tpu'", "'h100'"]),
    (BASE, "model.prefill_ms_per_token", 0, "model.prefill_ms_per_token", ["0", "out of range"]),
    (BASE, "model.decode_step_ms", -1, "model.decode_step_ms", ["-1", "out of range"]),
    (BASE, "model.decode_ms_per_seq", -0.5, "model.decode_ms_per_seq", ["-0.5", "at least 0"]),
    (BASE, "model.decode_ms_per_context_token", 2, "model.decode_ms_per_context_token", ["2", "at most 1"]),
    (BASE, "model.efficiency", 0, "model.efficiency", ["0", "greater than 0"]),
    (BASE, "model.efficiency", 1.5, "model.efficiency", ["1.5", "at most 1"]),
    (BASE, "model.memory_utilization", 0, "model.memory_utilization", ["0", "greater than 0"]),
    (BASE, "model.kv_capacity_tokens", 0, "model.kv_capacity_tokens", ["0", "at least 1"]),
    (BASE, "model.kv_capacity_tokens", 10.5, "model.kv_capacity_tokens", ["10.5", "whole number"]),
    (BASE, "model.hbm", 80, "model.hbm", ["unknown field", "cost"]),
    (BASE, "model.llm", "llama3-70b", "fleet.tp", ["llama3-70b", "does not fit", "h100", "raise tp"]),
    # fleet
    (BASE, "fleet.layout", DELETE, "fleet.layout", ["required field is missing"]),
    (BASE, "fleet.layout", "mixed", "fleet.layout", ["'mixed'", "'colocated'", "'disaggregated'"]),
    (BASE, "fleet.gpus", DELETE, "fleet.gpus", ["required field is missing"]),
    (BASE, "fleet.gpus", 0, "fleet.gpus", ["0", "at least 1"]),
    (BASE, "fleet.gpus", MAX_GPUS + 1, "fleet.gpus", [str(MAX_GPUS + 1), f"at most {MAX_GPUS}"]),
    (BASE, "fleet.gpus", "4", "fleet.gpus", ["'4'", "whole number"]),
    (BASE, "fleet.gpus", 2.5, "fleet.gpus", ["2.5", "whole number"]),
    (BASE, "fleet.chunk_tokens", 8, "fleet.chunk_tokens", ["8", "at least 16"]),
    (BASE, "fleet.chunk_tokens", "big", "fleet.chunk_tokens", ["'big'", "whole number"]),
    (BASE, "fleet.prefill_batch_tokens", 0, "fleet.prefill_batch_tokens", ["0", "at least 1"]),
    (BASE, "fleet.max_batch_seqs", 0, "fleet.max_batch_seqs", ["0", "at least 1"]),
    (BASE, "fleet.first_token", "never", "fleet.first_token", ["'never'", "'decode'", "'prefill'"]),
    (BASE, "fleet.tpp", 2, "fleet.tpp", ["unknown field", "tp"]),
    # tensor parallelism, GPU types, power caps, routing (issue 11)
    (BASE, "fleet.tp", 0, "fleet.tp", ["0", "at least 1"]),
    (BASE, "fleet.tp", 16, "fleet.tp", ["16", "at most 8"]),
    (BASE, "fleet.tp", 4, "fleet.gpus", ["2 GPUs", "tp = 4", "multiple of 4"]),
    (DISAGG, "fleet.decode_tp", 4, "fleet.decode_gpus", ["2 GPUs", "decode_tp = 4"]),
    (DISAGG, "fleet.prefill_gpu", "b200", "fleet.prefill_gpu", ["'b200'", "'h100'", "'a100'"]),
    (DISAGG, "fleet.decode_gpu", 3, "fleet.decode_gpu", ["3", "'h100'"]),
    (BASE, "fleet.power_cap_w", 900, "fleet.power_cap_w", ["900 W", "TDP 700 W"]),
    (BASE, "fleet.power_cap_w", 100, "fleet.power_cap_w", ["100 W", "idle 100 W"]),
    (DISAGG, "fleet.decode_power_cap_w", "low", "fleet.decode_power_cap_w", ["'low'", "number"]),
    ({**DISAGG, "fleet": {**DISAGG["fleet"], "decode_gpu": "a100"}}, "fleet.decode_power_cap_w", 500, "fleet.decode_power_cap_w", ["500 W", "a100", "TDP 400 W"]),
    (BASE, "fleet.dispatch", "random", "fleet.dispatch", ["'random'", "'queue'", "'length_split'"]),
    (BASE, "fleet.dispatch", "length_split", "fleet.long_prompt_tokens", ["required field is missing", "length_split"]),
    ({**BASE, "fleet": {**BASE["fleet"], "long_prompt_tokens": 8000}}, "fleet.dispatch", "length_split", "fleet.long_gpus", ["required field is missing"]),
    ({**BASE, "fleet": {**BASE["fleet"], "dispatch": "length_split", "long_prompt_tokens": 8000}}, "fleet.long_gpus", 2, "fleet.long_gpus", ["2 leaves none of the 2 GPUs"]),
    ({**BASE, "fleet": {"layout": "colocated", "gpus": 4, "tp": 2, "dispatch": "length_split", "long_prompt_tokens": 8000}}, "fleet.long_gpus", 1, "fleet.long_gpus", ["1 GPUs", "tp = 2"]),
    (DISAGG, "fleet.decode_pick", "random", "fleet.decode_pick", ["'random'", "'most_free_kv'", "'fewest_seqs'"]),
    (DISAGG, "fleet.prefill_chunk_tokens", 8, "fleet.prefill_chunk_tokens", ["8", "at least 16"]),
    (BASE, "fleet.long_prefill_tokens", 8, "fleet.long_prefill_tokens", ["8", "at least 16"]),
    (BASE, "fleet.long_prefill_tokens", 0, "fleet.long_prefill_tokens", ["0", "at least 16"]),
    (DISAGG, "fleet.long_prefill_tokens", "512", "fleet.long_prefill_tokens", ["'512'", "whole number"]),
    (DISAGG, "fleet.long_prefill_tokens", True, "fleet.long_prefill_tokens", ["true", "whole number"]),
    (BASE, "fleet.long_prefill_tokens", 10**7, "fleet.long_prefill_tokens", ["10,000,000", "at most 1,000,000"]),
    (BASE, "model.attention", "yes", "model.attention", ["'yes'", "true or false"]),
    (BASE, "model.tp_efficiency", 0, "model.tp_efficiency", ["0", "greater than 0"]),
    (BASE, "model.gpu_overrides", {"tpu": {}}, "model.gpu_overrides.tpu", ["unknown field", "h100"]),
    (BASE, "model.gpu_overrides", {"h100": {"price": 3}}, "model.gpu_overrides.h100.price", ["unknown field", "usd_per_hour"]),
    (BASE, "model.gpu_overrides", {"h100": {"usd_per_hour": 0}}, "model.gpu_overrides.h100.usd_per_hour", ["0", "greater than 0"]),
    (BASE, "model.gpu_overrides", {"h100": 3}, "model.gpu_overrides.h100", ["3", "object"]),
    (BASE, "model.gpu_overrides", {"a100": {"idle_w": 500}}, "model.gpu_overrides.a100.idle_w", ["500 W", "below tdp_w (400 W)"]),
    ({**DISAGG, "model": {"llm": "llama3-70b"}, "fleet": {**DISAGG["fleet"], "prefill_tp": 1, "decode_gpus": 2, "decode_tp": 2}}, "fleet.prefill_tp", 1, "fleet.prefill_tp", ["llama3-70b", "does not fit on 1 h100", "raise prefill_tp"]),
    (DISAGG, "fleet.prefill_gpus", DELETE, "fleet.prefill_gpus", ["required field is missing"]),
    (DISAGG, "fleet.decode_gpus", DELETE, "fleet.decode_gpus", ["required field is missing"]),
    (DISAGG, "fleet.decode_gpus", 0, "fleet.decode_gpus", ["0", "at least 1"]),
    (DISAGG, "fleet.prefill_gpus", -2, "fleet.prefill_gpus", ["-2", "at least 1"]),
    (DISAGG, "fleet.decode_gpus", MAX_GPUS, "fleet.decode_gpus", [f"1 + {MAX_GPUS}", f"limit of {MAX_GPUS}"]),
    # link
    (DISAGG, "fleet.link", "fast", "fleet.link", ["'fast'", "object"]),
    (DISAGG, "fleet.link.gbytes_per_s", 0, "fleet.link.gbytes_per_s", ["0", "at least 0.001"]),
    (DISAGG, "fleet.link.gbytes_per_s", "50", "fleet.link.gbytes_per_s", ["'50'", "number"]),
    (DISAGG, "fleet.link.sharing", "round-robin", "fleet.link.sharing", ["'round-robin'", "'fifo'", "'independent'"]),
    (DISAGG, "fleet.link.layerwise", "yes", "fleet.link.layerwise", ["'yes'", "true or false"]),
    (DISAGG, "fleet.link.layerwise", 1, "fleet.link.layerwise", ["1", "true or false"]),
    (DISAGG, "fleet.link.latency_us", 5, "fleet.link.latency_us", ["unknown field", "gbytes_per_s"]),
    # slo
    (BASE, "slo.ttft_s", 0, "slo.ttft_s", ["0", "greater than 0"]),
    (BASE, "slo.tpot_ms", -25, "slo.tpot_ms", ["-25", "greater than 0"]),
    (BASE, "slo.max_gap_ms", "200ms", "slo.max_gap_ms", ["'200ms'", "number"]),
    (BASE, "slo.p99", 1, "slo.p99", ["unknown field", "ttft_s"]),
]


@pytest.mark.parametrize("base,field,value,path,fragments", BAD_FIELDS,
                         ids=[f"{f}={v!r}"[:60] if v is not DELETE else f"{f}-missing" for _, f, v, _, _ in BAD_FIELDS])
def test_bad_field_is_rejected_naming_path_and_value(base, field, value, path, fragments):
    rejected(with_field(base, field, value), path, *fragments)


def test_the_bases_are_valid():
    assert load_scenario(BASE).fleet.gpus == 2
    assert load_scenario(DISAGG).fleet.total_gpus == 3


def test_scenario_must_be_an_object():
    for bad in ([], "x", 3, None):
        with pytest.raises(LabError):
            load_scenario(bad)


def test_mission_file_paths_are_prefixed():
    mission = {"id": "m", "scenario": with_field(BASE, "fleet.gpus", 0)}
    err = rejected(mission, "scenario.fleet.gpus", "0")
    assert err.detail.startswith("0 is out of range")


def test_error_message_format():
    err = rejected(with_field(BASE, "fleet.gpus", -1), "fleet.gpus")
    assert str(err) == f"fleet.gpus: {err.detail}"
    assert isinstance(err, ValueError)


# ---------------------------------------------------------------- accepted forms


def test_defaults():
    sc = load_scenario(BASE)
    assert sc.seed == 0 and sc.drain_s == 120.0
    assert sc.model.cost == "linear" and sc.model.llm == "llama3-8b" and sc.model.gpu == "h100"
    assert sc.fleet.chunk_tokens is None and sc.fleet.prefill_batch_tokens == 8192 and sc.fleet.max_batch_seqs == 256
    assert sc.fleet.link.gbytes_per_s == 50.0 and sc.fleet.link.sharing == "fifo" and sc.fleet.link.layerwise is False
    assert sc.fleet.first_token == "decode"
    assert (sc.slo.ttft_s, sc.slo.tpot_ms, sc.slo.max_gap_ms) == (None, None, None)
    assert load_scenario(with_field(BASE, "workload.duration_s", DELETE)).workload.duration_s == 60.0


def test_bare_number_is_a_fixed_length():
    sc = load_scenario(BASE)
    assert sc.workload.prompt_tokens.dist == "fixed" and sc.workload.prompt_tokens.value == 1000
    assert load_scenario(with_field(BASE, "workload.prompt_tokens", 12.0)).workload.prompt_tokens.value == 12


def test_chunk_tokens_zero_or_null_means_whole_prefill():
    for value in (0, None):
        assert load_scenario(with_field(BASE, "fleet.chunk_tokens", value)).fleet.chunk_tokens is None
    assert load_scenario(with_field(BASE, "fleet.chunk_tokens", 16)).fleet.chunk_tokens == 16


def test_colocated_without_gpus_takes_the_split_size():
    raw = {"workload": BASE["workload"], "fleet": {"layout": "colocated", "prefill_gpus": 3, "decode_gpus": 2}}
    assert load_scenario(raw).fleet.gpus == 5


def test_disaggregated_at_the_gpu_limit():
    sc = load_scenario(with_field(DISAGG, "fleet.decode_gpus", MAX_GPUS - 1))
    assert sc.fleet.total_gpus == MAX_GPUS


def test_null_means_default():
    sc = load_scenario(with_field(BASE, "seed", None))
    assert sc.seed == 0


def test_big_model_fits_with_an_explicit_kv_capacity():
    sc = load_scenario(with_field(with_field(BASE, "model.llm", "llama3-70b"), "model.kv_capacity_tokens", 5000))
    assert sc.model.kv_tokens_per_gpu == 5000


def test_phase_inherits_unset_fields():
    raw = with_field(BASE, "workload.phases", [{"start_s": 10, "rate": 8}, {"start_s": 20, "prompt_tokens": 4000}])
    segs = load_scenario(raw).workload.segments()
    assert [(s, e, r) for s, e, r, _, _ in segs] == [(0.0, 10.0, 4.0), (10.0, 20.0, 8.0), (20.0, 30.0, 4.0)]
    assert segs[1][3].value == 1000 and segs[2][3].value == 4000 and segs[2][4].value == 100


def test_phase_at_zero_replaces_the_base_segment():
    raw = with_field(BASE, "workload.phases", [{"start_s": 0, "rate": 9}])
    segs = load_scenario(raw).workload.segments()
    assert [(s, e, r) for s, e, r, _, _ in segs] == [(0.0, 30.0, 9.0)]


def test_trace_shorthand_and_object():
    a = load_scenario({"workload": {"trace": "t.csv"}, "fleet": BASE["fleet"]})
    b = load_scenario({"workload": {"trace": {"path": "t.csv"}}, "fleet": BASE["fleet"]})
    assert a == b and a.workload.trace.path == "t.csv" and a.workload.rate is None


def test_scenarios_are_frozen():
    sc = load_scenario(BASE)
    with pytest.raises(Exception):
        sc.seed = 3
    with pytest.raises(Exception):
        sc.fleet.gpus = 3


# ---------------------------------------------------------------- overrides


def test_override_sets_a_field():
    sc = load_scenario(BASE, overrides=["fleet.gpus=5"])
    assert sc.fleet.gpus == 5
    assert BASE["fleet"]["gpus"] == 2  # the input is not modified


def test_override_values_are_json_or_text():
    sc = load_scenario(DISAGG, overrides=['fleet.link.sharing="independent"', "fleet.link.layerwise=true",
                                          "fleet.link.gbytes_per_s=6.25", "seed=42"])
    assert sc.fleet.link.sharing == "independent" and sc.fleet.link.layerwise is True
    assert sc.fleet.link.gbytes_per_s == 6.25 and sc.seed == 42
    # a bare word is not JSON, so it is taken as text
    assert load_scenario(DISAGG, overrides=["fleet.link.sharing=independent"]).fleet.link.sharing == "independent"
    assert load_scenario(BASE, overrides=["fleet.layout=disaggregated", "fleet.prefill_gpus=1",
                                          "fleet.decode_gpus=1"]).fleet.layout == "disaggregated"


def test_override_with_objects_and_new_sections():
    sc = load_scenario(BASE, overrides=['workload.prompt_tokens={"dist": "uniform", "low": 5, "high": 9}',
                                        "model.kv_capacity_tokens=1000", "slo.ttft_s=2"])
    assert sc.workload.prompt_tokens.dist == "uniform" and sc.workload.prompt_tokens.high == 9
    assert sc.model.kv_capacity_tokens == 1000 and sc.slo.ttft_s == 2.0


def test_override_null_restores_the_default():
    sc = load_scenario(with_field(BASE, "fleet.chunk_tokens", 256), overrides=["fleet.chunk_tokens=null"])
    assert sc.fleet.chunk_tokens is None


def test_later_override_wins():
    assert load_scenario(BASE, overrides=["fleet.gpus=5", "fleet.gpus=7"]).fleet.gpus == 7


def test_override_is_validated_like_the_file():
    with pytest.raises(LabError) as info:
        load_scenario(BASE, overrides=["fleet.gpus=0"])
    assert info.value.path == "fleet.gpus" and "0" in str(info.value)
    with pytest.raises(LabError) as info:
        load_scenario(BASE, overrides=["fleet.gpu=3"])
    assert info.value.path == "fleet.gpu" and "unknown field" in str(info.value)


@pytest.mark.parametrize("text", ["fleet.gpus", "=5", "fleet..gpus=3", ".gpus=3", "fleet.=3"])
def test_malformed_override(text):
    with pytest.raises(LabError) as info:
        load_scenario(BASE, overrides=[text])
    assert info.value.path == "--set"
    assert repr(text) in str(info.value)


def test_override_through_a_non_object():
    with pytest.raises(LabError) as info:
        load_scenario(BASE, overrides=["fleet.gpus.count=3"])
    assert info.value.path == "fleet.gpus"
    assert "fleet.gpus.count" in str(info.value)


def test_parse_override_and_apply_overrides():
    assert parse_override("fleet.gpus=5") == ("fleet.gpus", 5)
    assert parse_override("a.b=x=y") == ("a.b", "x=y")
    assert parse_override(" seed =3") == ("seed", 3)
    raw = apply_overrides(BASE, ["fleet.gpus=9"])
    assert raw["fleet"]["gpus"] == 9 and BASE["fleet"]["gpus"] == 2


def test_override_on_a_mission_applies_inside_its_scenario():
    mission = {"id": "m", "scenario": copy.deepcopy(BASE)}
    assert load_scenario(mission, overrides=["fleet.gpus=6"]).fleet.gpus == 6


def test_override_on_a_loaded_scenario():
    sc = load_scenario(BASE)
    assert load_scenario(sc) is sc
    assert load_scenario(sc, overrides=["fleet.gpus=3"]).fleet.gpus == 3


def test_with_changes():
    sc = load_scenario(DISAGG)
    changed = sc.with_changes({"fleet.decode_gpus": 4, "fleet.link.gbytes_per_s": 6.25})
    assert changed.fleet.decode_gpus == 4 and changed.fleet.link.gbytes_per_s == 6.25
    assert sc.fleet.decode_gpus == 2
    with pytest.raises(LabError):
        sc.with_changes({"fleet.decode_gpus": 0})


# ---------------------------------------------------------------- round trip

ROUND_TRIP = [
    BASE,
    DISAGG,
    {
        "workload": {
            "rate": 3.5, "duration_s": 90,
            "prompt_tokens": {"dist": "mix", "components": [
                {"weight": 3, "length": {"dist": "lognormal", "median": 800, "sigma": 0.7, "min": 10, "max": 8000}},
                {"weight": 1, "length": {"dist": "uniform", "low": 3000, "high": 6000}},
                {"weight": 0.5, "length": 42}]},
            "output_tokens": {"dist": "lognormal", "median": 150, "sigma": 1.1},
            "phases": [{"start_s": 30, "rate": 12, "prompt_tokens": 4000}, {"start_s": 60}],
        },
        "fleet": {"layout": "disaggregated", "prefill_gpus": 5, "decode_gpus": 3, "prefill_batch_tokens": 4096,
                  "max_batch_seqs": 64, "first_token": "prefill",
                  "link": {"gbytes_per_s": 6.25, "sharing": "independent", "layerwise": True}},
        "model": {"cost": "roofline", "gpu": "a100", "efficiency": 0.4, "memory_utilization": 0.8,
                  "kv_capacity_tokens": 300000},
        "slo": {"ttft_s": 1.5, "tpot_ms": 25, "max_gap_ms": 200},
        "seed": 99,
        "drain_s": 30,
    },
    {"workload": {"trace": {"path": "traces/x.csv", "start_s": 100, "duration_s": 60, "time_scale": 0.5}},
     "fleet": {"layout": "colocated", "gpus": 4, "chunk_tokens": 512}},
]


@pytest.mark.parametrize("raw", ROUND_TRIP, ids=range(len(ROUND_TRIP)))
def test_to_dict_round_trip(raw):
    sc = load_scenario(raw)
    out = sc.to_dict()
    again = Scenario.from_dict(json.loads(json.dumps(out)))
    assert again == sc
    assert again.to_dict() == out
    assert load_scenario(out) == sc


def test_trace_scenario_survives_with_changes():
    """The lab re-simulates on every control change via `with_changes`; a trace
    workload must come back from to_dict without the generated-workload fields
    (e.g. an empty `phases` list) that its validation rejects."""
    sc = load_scenario({"workload": {"trace": "x.csv"}, "fleet": {"layout": "colocated", "gpus": 1}})
    assert "phases" not in sc.to_dict()["workload"]
    assert sc.with_changes({"fleet.gpus": 2}).fleet.gpus == 2


def test_to_dict_is_minimal_json():
    out = load_scenario(BASE).to_dict()
    json.dumps(out)
    assert "chunk_tokens" not in out["fleet"]  # None is left out
    assert out["fleet"]["gpus"] == 2 and out["workload"]["rate"] == 4


# ---------------------------------------------------------------- hostile numbers (issue 8)

HUGE_INT = "1" + "0" * 5000  # over Python's 4,300-digit int-string limit
LONG_INT = "1" + "0" * 400  # fits an int, overflows a float


@pytest.mark.parametrize("override,path,fragment", [
    (f"fleet.gpus={HUGE_INT}", "fleet.gpus", "too large: must be at least 1 and at most 256"),
    (f"fleet.gpus={LONG_INT}", "fleet.gpus", "too large: must be at least 1 and at most 256"),
    (f"workload.rate={LONG_INT}", "workload.rate", "too large: must be at least 0 and at most 10,000"),
    ("workload.rate=1e999", "workload.rate", "1e999 is too large"),
    ("drain_s=-1e999", "drain_s", "-1e999 is too small"),
    (f"seed={HUGE_INT}", "seed", "too large"),
    (f"workload.prompt_tokens={LONG_INT}", "workload.prompt_tokens.value", "too large"),
    (f"slo.ttft_s={LONG_INT}.5", "slo.ttft_s", "too large"),
])
def test_huge_numbers_in_overrides_name_the_field(override, path, fragment):
    with pytest.raises(LabError) as info:
        load_scenario(BASE, [override])
    assert info.value.path == path
    assert fragment in info.value.detail
    assert len(str(info.value)) < 300  # the value is shortened, not printed in full


@pytest.mark.parametrize("literal", [HUGE_INT, LONG_INT, "1e999", "-" + LONG_INT])
def test_huge_numbers_in_a_file_name_the_field(tmp_path, literal):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(BASE).replace('"gpus": 2', f'"gpus": {literal}'))
    with pytest.raises(LabError) as info:
        load_scenario(str(path))
    assert info.value.path == "fleet.gpus"
    assert "at least 1 and at most 256" in info.value.detail


def test_huge_python_numbers_in_a_dict_name_the_field():
    rejected(with_field(BASE, "workload.rate", 10**400), "workload.rate", "too large")
    rejected(with_field(BASE, "seed", 10**5000), "seed", "too large")  # repr() of it would raise
    rejected(with_field(BASE, "fleet.gpus", -10**400), "fleet.gpus", "too small")
    rejected(with_field(BASE, "drain_s", float("inf")), "drain_s", "finite")


@pytest.mark.parametrize("field,value", [
    ("fleet.chunk_tokens", False),  # was silently "whole prefill": False == 0
    ("fleet.chunk_tokens", True),
    ("fleet.gpus", True),
    ("workload.rate", True),
    ("workload.prompt_tokens", True),  # not the shorthand for a fixed length of 1
    ("model.kv_capacity_tokens", True),
    ("slo.ttft_s", False),
])
def test_booleans_are_never_numbers(field, value):
    err = rejected(with_field(BASE, field, value), field)
    assert ("true" if value else "false") in err.detail


def test_deeply_nested_json_is_a_lab_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"workload": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(LabError) as info:
        load_scenario(str(path))
    assert info.value.path == "deep.json" and "nested too deeply" in info.value.detail
    # Too deep to parse as JSON, so --set takes it as text, which is no number.
    with pytest.raises(LabError, match="^workload.rate: expected a number, got '"):
        load_scenario(BASE, ["workload.rate=" + "[" * 100_000 + "]" * 100_000])


def test_unreadable_scenario_files_are_lab_errors(tmp_path):
    bad = tmp_path / "latin1.json"
    bad.write_bytes(b'{"workload": "caf\xe9"}')
    with pytest.raises(LabError) as info:
        load_scenario(str(bad))
    assert info.value.path == str(bad) and "not UTF-8" in info.value.detail
    with pytest.raises(LabError) as info:
        load_scenario("\0")
    assert "NUL" in info.value.detail
    with pytest.raises(LabError) as info:
        load_scenario(str(tmp_path))  # a folder
    assert "cannot read" in info.value.detail


def test_a_runaway_file_is_read_only_up_to_the_limit(monkeypatch):
    from lab.core import loading

    monkeypatch.setattr(loading, "MAX_JSON_BYTES", 1024)
    with pytest.raises(LabError) as info:
        load_scenario("/dev/zero")  # would fill memory with an unbounded read
    assert "larger than the limit" in info.value.detail


# ---------------------------------------------------------------- the request cap

def test_request_cap_is_checked_with_room_for_chance():
    from lab.core.spec import MAX_REQUESTS

    # 1,040,000 expected is under the cap, but a Poisson draw can cross it: rejected up front.
    err = rejected(with_field(with_field(BASE, "workload.rate", 130), "workload.duration_s", 8000), "workload.rate")
    assert "1,040,000 requests expected" in err.detail and f"{MAX_REQUESTS:,}" in err.detail
    # 10 standard deviations of room: expected + 10 sqrt(expected) <= cap is accepted.
    ok = load_scenario(with_field(with_field(BASE, "workload.rate", 129), "workload.duration_s", 8000))
    expected = ok.workload.expected_requests()
    assert expected + 10 * expected**0.5 <= MAX_REQUESTS


def test_request_cap_names_the_phase_that_brings_the_requests():
    raw = with_field(BASE, "workload.duration_s", 7200)
    raw["workload"]["phases"] = [{"start_s": 100, "rate": 5}, {"start_s": 200, "rate": 9000}]
    err = rejected(raw, "workload.phases[1].rate", "requests expected")
    assert "lower the rate or the duration" in err.detail


def test_generation_raises_lab_error_if_the_cap_is_ever_crossed():
    from lab.core import generate_requests
    from lab.core.spec import LengthDist, Workload

    # Built directly, skipping validation: the generator still stops with a LabError.
    wl = Workload(rate=10_000.0, duration_s=120.0, prompt_tokens=LengthDist("fixed", value=1), output_tokens=LengthDist("fixed", value=1))
    with pytest.raises(LabError) as info:
        generate_requests(wl, 0)
    assert info.value.path == "workload.rate"


def test_trace_start_is_bounded():
    rejected({"workload": {"trace": {"path": "t.csv", "start_s": 1e300}}, "fleet": {"layout": "colocated", "gpus": 1}},
             "workload.trace.start_s", "at most")


def test_the_per_token_target_is_the_max_gap_if_the_slo_sets_one_else_tpot():
    """The one rule for "over the target" (a step, a gap): the canvas, tables and plots all use it."""
    from lab.core.spec import Slo

    assert Slo.from_dict({"tpot_ms": 25}).per_token_target_ms == 25
    both = Slo.from_dict({"tpot_ms": 30, "max_gap_ms": 60})
    assert (both.per_token_target_ms, both.per_token_target_name) == (60, "max_gap_ms")
    assert Slo.from_dict({"max_gap_ms": 50}).per_token_target_name == "max_gap_ms"
    none = Slo.from_dict({"ttft_s": 1})
    assert (none.per_token_target_ms, none.per_token_target_name) == (None, None)
    assert "per_token_target_ms" not in both.to_dict()  # derived, not a field


def test_pools_count_gpus_in_instances_of_tp_with_each_pools_gpu_type():
    raw = {**DISAGG, "model": {"llm": "llama3-70b"},
           "fleet": {"layout": "disaggregated", "prefill_gpus": 4, "prefill_tp": 4, "decode_gpus": 4, "decode_tp": 2,
                     "decode_gpu": "h200", "decode_power_cap_w": 350}}
    sc = load_scenario(raw)
    prefill, decode = sc.pools()
    assert (prefill.role, prefill.gpus, prefill.tp, prefill.instances, prefill.gpu, prefill.first_gpu) == ("prefill", 4, 4, 1, "h100", 0)
    assert (decode.role, decode.instances, decode.gpu, decode.power_cap_w, decode.first_gpu) == ("decode", 2, "h200", 350, 4)
    # KV capacity: tp x usable HBM - weights (the weights are paid once per instance).
    m = sc.model
    usable = 2 * 141e9 * m.memory_utilization - m.weight_bytes
    assert m.kv_tokens_per_instance("h200", 2) == int(usable // m.kv_bytes_per_token)
    assert m.kv_tokens_per_instance("h100", 4) > 2 * m.kv_tokens_per_instance("h100", 2)
    # JSON round trip keeps every new field.
    assert Scenario.from_dict(sc.to_dict()) == sc


def test_gpu_overrides_change_only_the_named_keys():
    sc = load_scenario(with_field(BASE, "model.gpu_overrides", {"a100": {"usd_per_hour": 0.9}}))
    assert sc.model.gpu_spec("a100")["usd_per_hour"] == 0.9
    assert sc.model.gpu_spec("a100")["tdp_w"] == 400.0
    assert sc.model.gpu_spec("h100")["usd_per_hour"] == 2.5


def test_on_demand_kv_with_a_prefix_cache_loads_and_runs():
    """Once refused (what a preempted prompt finds cached): now modelled (docs/model.md "KV on demand")."""
    raw = {"workload": {"rate": 2, "duration_s": 5, "prompt_tokens": 500, "output_tokens": 50},
           "fleet": {"layout": "colocated", "gpus": 2, "kv_policy": "on_demand", "prefix_cache": "per_gpu"}}
    sc = Scenario.from_dict(raw)
    assert (sc.fleet.kv_policy, sc.fleet.prefix_cache) == ("on_demand", "per_gpu")
    assert all(r.finished for r in simulate(sc).requests)


@pytest.mark.parametrize("field, value", [("kv_policy", "on_demand"), ("prefix_cache", "shared"), ("prefix_cache", "per_gpu"),
                                          ("admission", {"reject_when": "predicted_ttft_over_slo"})])
def test_a_planner_with_a_memory_or_control_mechanism_loads_and_runs(field, value):
    """Once refused with a planner; now modelled (docs/model.md "Pools that change roles")."""
    raw = {"workload": {"rate": 2, "duration_s": 30, "prompt_tokens": 500, "output_tokens": 50},
           "fleet": {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2,
                     "planner": {"policy": "utilization", "interval_s": 5}, field: value},
           "slo": {"ttft_s": 1.0}}
    sc = Scenario.from_dict(raw)
    assert sc.fleet.planner_on and getattr(sc.fleet, field) is not None
    res = simulate(sc)
    assert all(r.finished or r.rejected for r in res.requests)
