"""Early rejection (`fleet.admission`, docs/model.md "Early rejection"): the spec, the rule
(lab/core/admission.py), the engine against the naive reference, the accounting
(finished, unfinished or rejected, exactly once), metrics, blame and the CSV."""

import copy
import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.core import (LabError, admission, blame_summary, load_scenario, request_blame, request_metrics, simulate,
                      step_time_fn, summarize)
from lab.core.report import REQUESTS_CSV_COLUMNS, write_requests_csv

from reference_sim import reference_simulate
from test_properties import PROPERTY_SETTINGS, scenarios
from test_reference import COLOCATED, DISAGG, MIXED_LENGTHS, diff_engine_reference

ON = {"reject_when": "predicted_ttft_over_slo"}
ROOT = Path(__file__).resolve().parents[1]


def with_admission(base, ttft_s, **changes):
    """`base` (a scenario dict) with admission on, an SLO TTFT target and dotted changes."""
    raw = copy.deepcopy(base)
    raw["fleet"]["admission"] = dict(ON)
    raw.setdefault("slo", {})["ttft_s"] = ttft_s
    for dotted, value in changes.items():
        node = raw
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return load_scenario(raw)


ONE_GPU = {"workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 1, "output_tokens": 1},
           "fleet": {"layout": "colocated", "gpus": 1}, "drain_s": 30}

# ---------------------------------------------------------------- the spec


@pytest.mark.parametrize("off", [None, "off", {"reject_when": "off"}])
def test_every_way_of_saying_off_is_no_admission(off):
    raw = copy.deepcopy(ONE_GPU)
    raw["fleet"]["admission"] = off
    sc = load_scenario(raw)
    assert sc.fleet.admission is None
    assert "admission" not in sc.to_dict()["fleet"]
    assert simulate(sc) == simulate(load_scenario(ONE_GPU))


def test_admission_round_trips_and_takes_set_overrides():
    sc = with_admission(ONE_GPU, 1.0)
    assert sc.fleet.admission.reject_when == "predicted_ttft_over_slo"
    assert load_scenario(sc.to_dict()) == sc
    assert sc.with_changes({"fleet.admission": "off"}).fleet.admission is None
    plain = load_scenario(dict(ONE_GPU, slo={"ttft_s": 1.0}))
    assert plain.with_changes({"fleet.admission.reject_when": "predicted_ttft_over_slo"}) == sc


@pytest.mark.parametrize("value, path, words", [
    ("on", "fleet.admission", ["'on'", "reject_when", "null", '"off"']),
    (5, "fleet.admission", ["5", "reject_when"]),
    ({"reject_when": "always"}, "fleet.admission.reject_when", ["'always'", "'predicted_ttft_over_slo'", "'off'"]),
    ({"rule": "off"}, "fleet.admission.rule", ["reject_when"]),
    ({}, "fleet.admission.reject_when", ["missing"]),
])
def test_bad_admission_is_refused_naming_field_value_and_choices(value, path, words):
    raw = copy.deepcopy(ONE_GPU)
    raw["fleet"]["admission"] = value
    raw["slo"] = {"ttft_s": 1.0}
    with pytest.raises(LabError) as err:
        load_scenario(raw)
    assert err.value.path == path
    for word in words:
        assert word in err.value.detail


@pytest.mark.parametrize("slo", [None, {}, {"tpot_ms": 25}])
def test_admission_needs_an_slo_ttft_target(slo):
    raw = copy.deepcopy(ONE_GPU)
    raw["fleet"]["admission"] = dict(ON)
    if slo is not None:
        raw["slo"] = slo
    with pytest.raises(LabError) as err:
        load_scenario(raw)
    assert err.value.path == "fleet.admission.reject_when"
    assert "slo.ttft_s" in err.value.detail and "off" in err.value.detail


# ---------------------------------------------------------------- the rule


def test_prefill_rate_follows_the_cost_model():
    """Linear: a prompt token alone costs prefill_ms_per_token, so the rate is instances / that."""
    sc = load_scenario(ONE_GPU)
    step_s = step_time_fn(sc.model)
    per_token_s = sc.model.prefill_ms_per_token / 1000.0
    for instances in (1, 3):
        assert admission.prefill_rate(instances, step_s, 4096) == pytest.approx(instances / per_token_s, rel=1e-12)
    # roofline: a one-token step reads every weight, so it is far slower per token than a full batch
    roof = step_time_fn(load_scenario(dict(ONE_GPU, model={"cost": "roofline"})).model)
    assert admission.prefill_rate(1, roof, 1) * 100 < admission.prefill_rate(1, roof, 8192)


def test_step_tokens_is_the_chunk_budget_else_the_batch():
    col = load_scenario(ONE_GPU).fleet
    assert admission.step_tokens(col) == col.prefill_batch_tokens
    chunked = load_scenario(dict(ONE_GPU, fleet={"layout": "colocated", "gpus": 1, "chunk_tokens": 512})).fleet
    assert admission.step_tokens(chunked) == 512
    split = load_scenario({**ONE_GPU, "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
                                                "chunk_tokens": 512, "prefill_chunk_tokens": 256}}).fleet
    assert admission.step_tokens(split) == 256


def test_transfer_is_the_wire_time_of_its_kv_or_its_last_layer():
    whole = admission.transfer_s(1000, 131072, 50.0)
    assert whole == 1000 * 131072 / 50e9
    assert admission.transfer_s(1000, 131072, 50.0, layerwise=True, layers=32) == pytest.approx(whole / 32)


def test_predicted_ttft_and_the_strict_threshold():
    assert admission.predicted_ttft_s(3000, 1000, 20000.0) == 0.2
    assert admission.predicted_ttft_s(3000, 1000, 20000.0, 0.05) == 0.25
    assert not admission.rejects(0.2, 0.2) and admission.rejects(0.2000001, 0.2)


# ---------------------------------------------------------------- the engine, by hand


def test_a_burst_on_one_gpu_is_cut_where_the_queue_passes_the_target():
    """Five 2,000-token prompts at once on one GPU: each sees the admitted ones queued ahead
    (a rejected one adds nothing), so with a target between 2 and 3 prompts' worth the first
    two are admitted and each later one predicts 3 x 2,000 / rate and is turned away."""
    sc = with_admission(ONE_GPU, 1.0)
    rate = admission.prefill_rate(1, step_time_fn(sc.model), sc.fleet.prefill_batch_tokens)
    predictions = [n * 2000 / rate for n in (1, 2, 3, 3, 3)]
    target = (predictions[1] + predictions[2]) / 2
    sc = with_admission(ONE_GPU, target)
    res = simulate(sc, [(0.0, 2000, 4)] * 5)
    assert [r.predicted_ttft_s for r in res.requests] == predictions
    assert [r.rejected for r in res.requests] == [False, False, True, True, True]
    for r in res.requests[2:]:
        assert r.prefill_gpu == r.decode_gpu == -1 and r.prefill_start is None and r.first_token is None
        assert not r.finished
    assert all(r.finished for r in res.requests[:2])
    # the GPU prefilled only the admitted prompts, in one batch
    assert res.gpus[0].prefill_tokens[0] == 4000 and sum(res.gpus[0].prefill_tokens) == 4000


def test_prompts_under_way_count_as_ahead():
    """A long prompt still prefilling (chunked) counts whole for a later arrival, so it is
    rejected even though the queue itself is empty."""
    raw = dict(ONE_GPU, fleet={"layout": "colocated", "gpus": 1, "chunk_tokens": 256})
    sc = with_admission(raw, 0.252)  # the long one alone predicts 0.25 s, so it is admitted
    res = simulate(sc, [(0.0, 5000, 2), (0.1, 100, 2)])
    rate = admission.prefill_rate(1, step_time_fn(sc.model), 256)
    late = res.requests[1]
    assert res.requests[0].prefill_start < late.arrival < res.requests[0].prefill_end  # under way
    assert late.predicted_ttft_s == (5000 + 100) / rate and late.rejected
    assert not res.requests[0].rejected and res.requests[0].finished


def test_a_split_fleet_adds_the_transfer_only_when_the_first_token_waits_for_it():
    base = {**ONE_GPU, "fleet": {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
                                 "link": {"gbytes_per_s": 0.5}}}
    at_decode = simulate(with_admission(base, 10.0), [(0.0, 3000, 3)]).requests[0]
    at_prefill = simulate(with_admission(base, 10.0, **{"fleet.first_token": "prefill"}), [(0.0, 3000, 3)]).requests[0]
    sc = with_admission(base, 10.0)
    wire = 3000 * sc.model.kv_bytes_per_token / 0.5e9
    assert at_decode.predicted_ttft_s - at_prefill.predicted_ttft_s == pytest.approx(wire, rel=1e-9)
    assert wire > 0.5  # the slow link dominates: the difference is not rounding


def test_round_robin_counts_rejected_arrivals():
    """docs/model.md "Routing": the n-th arriving prompt goes to instance n mod instances, and a
    rejected request arrived too: the next admitted one goes to the instance after its."""
    raw = dict(ONE_GPU, fleet={"layout": "colocated", "gpus": 2, "dispatch": "round_robin"})
    sc = with_admission(raw, 0.15)  # one 2,000-token prompt ahead on an instance is 0.2 s: over
    res = simulate(sc, [(0.0, 2000, 2), (0.0, 2000, 2), (0.0, 2000, 2), (0.0, 100, 2)])
    assert [r.rejected for r in res.requests] == [False, False, True, False]
    assert [r.prefill_gpu for r in res.requests] == [0, 1, -1, 1]


# ---------------------------------------------------------------- engine == reference

ADMITTING = {
    "colocated-whole": with_admission(COLOCATED, 0.3, **{"workload.rate": 32}),
    "colocated-chunk-512": with_admission(COLOCATED, 0.5, **{"workload.rate": 32, "fleet.chunk_tokens": 512}),
    "colocated-round-robin": with_admission(COLOCATED, 0.3, **{"workload.rate": 45, "fleet.gpus": 3,
                                                               "fleet.dispatch": "round_robin"}),
    "colocated-least-loaded-chunked-mixed": with_admission(COLOCATED, 0.4, **{
        "workload.rate": 50, "fleet.gpus": 3, "fleet.dispatch": "least_loaded", "fleet.chunk_tokens": 384,
        **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}}),
    "colocated-length-split": with_admission(COLOCATED, 0.2, **{
        "workload.rate": 14, "fleet.gpus": 3, "fleet.dispatch": "length_split", "fleet.long_prompt_tokens": 2000,
        "fleet.long_gpus": 1, **{f"workload.{k}": v for k, v in MIXED_LENGTHS.items()}}),
    "colocated-kv-limited-roofline": with_admission(COLOCATED, 0.6, **{"workload.rate": 40, "model.cost": "roofline",
                                                                       "model.kv_capacity_tokens": 6000}),
    "colocated-overloaded-capped": with_admission(COLOCATED, 0.3, **{"workload.rate": 20, "fleet.gpus": 1,
                                                                     "drain_s": 2}),
    "disagg-fifo": with_admission(DISAGG, 0.3, **{"workload.rate": 14}),
    "disagg-slow-link": with_admission(DISAGG, 0.6, **{"workload.rate": 10, "fleet.link.gbytes_per_s": 0.5}),
    "disagg-layerwise": with_admission(DISAGG, 0.3, **{"workload.rate": 14, "fleet.link.layerwise": True,
                                                       "fleet.link.gbytes_per_s": 2}),
    "disagg-first-token-prefill": with_admission(DISAGG, 0.3, **{"workload.rate": 14, "fleet.first_token": "prefill"}),
    "disagg-round-robin-chunked": with_admission(DISAGG, 0.25, **{"workload.rate": 20, "fleet.prefill_gpus": 2,
                                                                  "fleet.dispatch": "round_robin",
                                                                  "fleet.prefill_chunk_tokens": 512}),
    "disagg-least-loaded-kv-limited": with_admission(DISAGG, 0.3, **{"workload.rate": 20, "fleet.prefill_gpus": 2,
                                                                     "fleet.dispatch": "least_loaded",
                                                                     "model.kv_capacity_tokens": 4000}),
    "disagg-length-split-partial": with_admission(DISAGG, 0.3, **{
        "workload.rate": 20, "fleet.prefill_gpus": 2, "fleet.dispatch": "length_split",
        "fleet.long_prompt_tokens": 1500, "fleet.long_gpus": 1, "fleet.prefill_chunk_tokens": 1024,
        "fleet.long_prefill_tokens": 256}),
}


@pytest.mark.parametrize("name", sorted(ADMITTING))
def test_engine_matches_reference_with_early_rejection(name):
    problems = diff_engine_reference(ADMITTING[name])
    assert not problems, "engine != reference:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize("name", sorted(ADMITTING))
def test_admitting_cases_reject_some_and_serve_some(name):
    """Guard the list: each case turns some arrivals away and serves others."""
    res = simulate(ADMITTING[name])
    rejected = sum(r.rejected for r in res.requests)
    assert 0 < rejected < len(res.requests), (name, rejected, len(res.requests))
    assert any(r.finished for r in res.requests)


@st.composite
def admitting_scenarios(draw, **kwargs):
    """test_properties' random scenarios, mostly with admission on, loaded more (the rate up
    to 10x), with a TTFT target of a few mean prompts' prefill on one instance of the pool
    that takes them (so the queue ahead, not the prompt alone, decides), or a fixed one."""
    raw = draw(scenarios(**kwargs))
    raw["workload"]["rate"] = raw["workload"]["rate"] * draw(st.sampled_from([1, 4, 10]))
    sc = load_scenario(raw)
    pool = sc.pools()[0]
    one = admission.prefill_rate(1, step_time_fn(sc.model, pool.gpu, pool.tp, pool.power_cap_w),
                                 admission.step_tokens(sc.fleet))
    prompts = sc.workload.prompt_tokens.mean_estimate() / one
    target = draw(st.sampled_from([0.7, 1.5, 3.0, 6.0, None]))
    raw["slo"] = {"ttft_s": max(target * prompts, 1e-4) if target else draw(st.sampled_from([0.005, 0.1, 1.0]))}
    raw["fleet"]["admission"] = draw(st.sampled_from([dict(ON), dict(ON), dict(ON), None, "off"]))
    return raw


# Twice the usual examples: about one in five runs both rejects and serves (measured).
ADMISSION_SETTINGS = settings(PROPERTY_SETTINGS, max_examples=100)


@ADMISSION_SETTINGS
@given(admitting_scenarios(max_duration=4.0))
def test_engine_equals_reference_with_early_rejection(raw):
    problems = diff_engine_reference(load_scenario(raw))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- accounting


def check_accounting(res):
    """Every request ends as exactly one of finished, unfinished or rejected (dropped ones
    are unfinished, as ever); a rejected one holds nothing and appears nowhere."""
    m = summarize(res)
    on = res.scenario.fleet.admission is not None
    for r in res.requests:
        outcomes = [r.finished, not r.finished and not r.rejected, r.rejected]
        assert sum(outcomes) == 1, r
        if r.rejected:
            assert on and not r.dropped
            assert (r.prefill_gpu, r.decode_gpu, r.transfer, r.decode_first_step) == (-1, -1, -1, -1)
            assert r.prefill_start is r.prefill_end is r.first_token is r.finish is None
            assert r.predicted_ttft_s > res.scenario.slo.ttft_s
        elif on and not r.dropped:
            assert r.predicted_ttft_s <= res.scenario.slo.ttft_s
        else:  # off, or dropped (a dropped request never arrives)
            assert r.predicted_ttft_s is None
    assert not [t for t in res.transfers if res.requests[t.request].rejected]
    assert m["finished"] + m["unfinished"] + m["rejected"] == m["requests"] == len(res.requests)
    assert m["rejected"] == sum(r.rejected for r in res.requests)
    served = m["requests"] - m["rejected"]
    if served:
        assert m["served_slo_attainment"] == pytest.approx(m["slo_attainment"] * m["requests"] / served)
    else:
        assert m["served_slo_attainment"] is None


@ADMISSION_SETTINGS
@given(admitting_scenarios(drain=st.sampled_from([0.0, 0.3, 30.0]), max_duration=5.0))
def test_every_request_ends_finished_unfinished_or_rejected_once(raw):
    check_accounting(simulate(load_scenario(raw)))


@pytest.mark.parametrize("name", sorted(ADMITTING))
def test_accounting_on_the_named_cases(name):
    check_accounting(simulate(ADMITTING[name]))


@pytest.mark.parametrize("name", ["colocated-whole", "colocated-chunk-512", "colocated-least-loaded-chunked-mixed",
                                  "disagg-fifo", "disagg-layerwise", "disagg-least-loaded-kv-limited"])
def test_a_rejected_request_leaves_no_trace(name):
    """Without round robin (whose counter counts every arrival), a run that rejects requests
    is exactly the run of the admitted requests alone: step for step, token for token."""
    sc = ADMITTING[name]
    res = simulate(sc)
    kept = [(r.arrival, r.prompt_tokens, r.output_tokens) for r in res.requests if not r.rejected]
    alone = simulate(sc.with_changes({"fleet.admission": None}), kept)
    assert [g.end for g in res.gpus] == [g.end for g in alone.gpus]
    assert [g.decode_seqs for g in res.gpus] == [g.decode_seqs for g in alone.gpus]
    served = [r for r in res.requests if not r.rejected]
    assert [(r.first_token, r.finish, r.prefill_gpu) for r in served] == [
        (r.first_token, r.finish, r.prefill_gpu) for r in alone.requests]


# ---------------------------------------------------------------- metrics, blame, the CSV


def test_metrics_count_rejections_as_misses_and_serve_the_rest():
    sc = ADMITTING["disagg-fifo"]
    res = simulate(sc)
    rows = request_metrics(res)
    m = summarize(res, rows)
    rejected = [row for row in rows if row["rejected"]]
    assert rejected and all(row["ttft_s"] is None and not row["met_slo"] and not row["finished"] for row in rejected)
    met = sum(row["met_slo"] for row in rows)
    assert m["slo_attainment"] == met / len(rows)
    assert m["served_slo_attainment"] == met / (len(rows) - len(rejected))
    assert m["served_slo_attainment"] > m["slo_attainment"]
    assert m["goodput_rps"] == met / res.arrivals_end  # goodput: the good ones, as ever
    # latency percentiles are over the requests that were not turned away
    served_ttfts = sorted(row["ttft_s"] for row in rows if not row["rejected"])
    assert m["ttft_p99_s"] <= served_ttfts[-1]


def test_admission_off_reports_no_rejections():
    m = summarize(simulate(load_scenario(dict(COLOCATED, slo={"ttft_s": 0.3}))))
    assert m["rejected"] == 0 and m["served_slo_attainment"] == m["slo_attainment"]


def test_blame_names_rejection_and_its_parts_are_zero():
    res = simulate(ADMITTING["colocated-whole"])
    rows = request_metrics(res)
    blames = request_blame(res, rows)
    for rec, blame in zip(res.requests, blames):
        if rec.rejected:
            assert blame.missed and blame.dominant_cause == "rejected"
            assert set(blame.parts.values()) == {0.0} and blame.open_part is None and blame.worst_gap_cause is None
        else:
            assert blame.dominant_cause != "rejected"
    summary = blame_summary(blames)
    assert summary["missed_by_cause"]["rejected"] == sum(r.rejected for r in res.requests) / summary["missed"]


def test_requests_csv_carries_rejection_and_the_prediction():
    res = simulate(ADMITTING["colocated-whole"])
    rows = request_metrics(res)
    m = summarize(res, rows)
    out = io.StringIO()
    write_requests_csv(out, rows, m, request_blame(res, rows))
    table = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert list(table[0]) == list(REQUESTS_CSV_COLUMNS)
    for rec, line in zip(res.requests, table):
        assert line["rejected"] == str(rec.rejected)
        assert float(line["predicted_ttft_s"]) == rec.predicted_ttft_s
        assert (line["ttft_s"] == "") == rec.rejected
        assert (line["dominant_cause"] == "rejected") == rec.rejected


def test_cli_json_and_table_report_rejections(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(ADMITTING["disagg-fifo"].to_dict()))
    run = subprocess.run([sys.executable, "-m", "lab", "run", str(path), "--json"], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    out = json.loads(run.stdout)
    expected = summarize(simulate(ADMITTING["disagg-fifo"]))
    assert out["rejected"] == expected["rejected"] > 0
    assert out["served_slo_attainment"] == expected["served_slo_attainment"]
    assert out["missed_by_cause"]["rejected"] > 0
    table = subprocess.run([sys.executable, "-m", "lab", "run", str(path)], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout
    assert f"rejected {expected['rejected']:,}" in table
    plain = subprocess.run([sys.executable, "-m", "lab", "run", str(path), "--set", "fleet.admission=off"],
                           capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "Early rejection" not in plain


def test_cli_refuses_admission_without_a_ttft_target(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(dict(ONE_GPU, fleet={"layout": "colocated", "gpus": 1, "admission": ON})))
    run = subprocess.run([sys.executable, "-m", "lab", "run", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("error: fleet.admission.reject_when: ")


def test_reference_rejects_independently():
    """The reference's own records agree on which requests were turned away (checked field by
    field in diff_engine_reference); here, that it really turns some away by itself."""
    ref = reference_simulate(ADMITTING["disagg-fifo"])
    assert any(s.rejected for s in ref.requests) and any(s.finished for s in ref.requests)
    assert all(not s.tokens for s in ref.requests if s.rejected)


def test_the_pyodide_admission_scenarios_reject_some_and_serve_some():
    """tests/test_pyodide_core.py's early-rejection scenarios exercise both outcomes (so the
    CPython == Pyodide comparison covers the rule)."""
    from test_pyodide_core import SCENARIOS as PYODIDE

    names = [n for n, raw in PYODIDE.items() if raw["fleet"].get("admission")]
    assert len(names) >= 2
    for name in names:
        res = simulate(load_scenario(PYODIDE[name]))
        assert 0 < sum(r.rejected for r in res.requests) < len(res.requests), name


def test_a_star_on_the_served_share_needs_an_slo_target(tmp_path):
    from lab.core import load_mission

    mission = json.loads((ROOT / "missions" / "18-say-no-early.json").read_text(encoding="utf-8"))
    mission["scenario"]["slo"] = {}
    mission["scenario"]["fleet"].pop("admission", None)
    mission["controls"].pop("admission")
    mission["stars"][0]["when"] = [{"metric": "served_slo_attainment", "op": ">=", "value": 0.9}]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(mission), encoding="utf-8")
    with pytest.raises(LabError) as err:
        load_mission(str(path))
    assert "served_slo_attainment" in str(err.value) and "sets no target" in str(err.value)
