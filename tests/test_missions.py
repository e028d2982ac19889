"""Missions: every shipped file loads, checks and is playable; broken files are rejected
with the field's path and a useful message; controls apply and validate; the schema agrees."""

import copy
import json
import shutil
from pathlib import Path

import pytest

from lab.core import Scenario, blame_summary, request_blame, simulate, summarize
from lab.core.errors import LabError
from lab.core.metrics import METRIC_NAMES
from lab.core.missions import (
    CONTROL_PATHS,
    CONTROL_SPECS,
    Control,
    Mission,
    default_missions_dir,
    list_missions,
    load_mission,
)
from lab.core.solver import check_mission
from lab.core.stars import Star

REPO = Path(__file__).resolve().parent.parent
MISSIONS = REPO / "missions"
CORPUS = Path(__file__).resolve().parent / "mission_corpus"
MISSION_FILES = sorted(p for p in MISSIONS.glob("*.json") if p.name != "schema.json")
# Not a timed test (performance is benchmarked elsewhere): a generous budget so a busy
# CI machine cannot fail a playable mission.
CHECK_BUDGET_S = 120.0


def run(scenario):
    return summarize(simulate(scenario))


# ---------------------------------------------------------------- the shipped missions

def test_there_are_missions_and_the_default_dir_finds_them():
    assert len(MISSION_FILES) >= 8
    assert Path(default_missions_dir()) == MISSIONS
    missions = list_missions()
    assert [m.path for m in missions] == [str(MISSIONS / p.name) for p in sorted(MISSION_FILES, key=lambda p: (load_mission(p).order, load_mission(p).id))]
    orders = [m.order for m in missions]
    assert orders == sorted(orders)
    assert len({m.id for m in missions}) == len(missions)
    assert len(set(orders)) == len(orders), "two missions share an order: the hub's sequence is ambiguous"


@pytest.mark.parametrize("path", MISSION_FILES, ids=lambda p: p.name)
def test_mission_loads(path):
    m = load_mission(path)
    assert isinstance(m, Mission)
    assert isinstance(m.scenario, Scenario)
    assert m.path == str(path)
    assert 1 <= len(m.stars) <= 3
    assert all(isinstance(s, Star) for s in m.stars)
    assert m.controls and all(isinstance(c, Control) for c in m.controls.values())
    assert "\n" not in m.summary and len(m.summary) <= 200
    # The brief is short, concrete, and ends with what to try.
    assert len(m.brief) < 1200
    assert m.brief.strip().split("\n\n")[-1].startswith("**Try:**")
    assert any(ch.isdigit() for ch in m.brief)
    # 60 s of arrivals unless a trace sets its own window.
    if m.scenario.workload.trace is None:
        assert m.scenario.workload.duration_s == 60
    # The file name carries the order and the id.
    assert path.name == f"{m.order:02d}-{m.id}.json"


@pytest.mark.parametrize("path", MISSION_FILES, ids=lambda p: p.name)
def test_mission_checks_ok_solvable_and_not_solved_at_start(path):
    report = check_mission(load_mission(path), time_budget_s=CHECK_BUDGET_S)
    assert report.ok, report.format()
    assert not all(report.start_stars)
    for sol in report.solutions:
        assert sol.settings is not None, report.format()
        assert sol.star.earned(sol.metrics)
        # The winning settings really are allowed: apply() accepts them.
        load_mission(path).apply(sol.settings)
    text = report.format()
    assert "stars at start" in text and "cheapest:" in text
    json.dumps(report.to_dict())


@pytest.mark.parametrize("path", MISSION_FILES, ids=lambda p: p.name)
def test_settings_round_trip(path):
    m = load_mission(path)
    start = m.settings()
    assert set(start) == set(m.controls)
    for name, c in m.controls.items():
        assert c.check(start[name]) == start[name]
    assert m.apply(start) == m.scenario
    assert m.apply({}) is m.scenario
    again = load_mission(m.to_dict(), base_dir=str(MISSIONS))
    assert again.to_dict() == m.to_dict()
    assert again.scenario == m.scenario


def test_the_tree_ships_no_trace_data():
    """Third-party traces stay in their public releases: missions are synthetic, shaped from published statistics."""
    data = [p for p in MISSIONS.rglob("*") if p.suffix.lower() in (".csv", ".jsonl", ".parquet")]
    assert data == []
    assert all(m.scenario.workload.trace is None for m in list_missions())
    for m in (by_id("conversation-trace"), by_id("code-trace")):
        assert "synthetic" in m.brief and "Azure/AzurePublicDataset" in m.brief and "CC-BY" in m.brief


def write_trace_mission(folder, trace_path="traces/t.csv", rows=40):
    """The book-store mission replaying a small CSV at `folder/traces/t.csv` (not the tree's traces)."""
    data = json.loads((MISSIONS / "07-book-store.json").read_text(encoding="utf-8"))
    data.update(id="trace-copy", order=99)
    data["scenario"]["workload"] = {"trace": {"path": trace_path}}
    (folder / "traces").mkdir(parents=True, exist_ok=True)
    (folder / "traces" / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i * 0.25},{500 + i},{20 + i}\n" for i in range(rows)))
    path = folder / "99-trace-copy.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_missions_load_from_a_copied_folder(tmp_path):
    """Like the wheel's lab/missions: trace paths resolve against the mission file."""
    target = tmp_path / "missions"
    shutil.copytree(MISSIONS, target)
    shipped = [m.id for m in list_missions(target)]
    assert shipped == [m.id for m in list_missions()]
    write_trace_mission(target)
    trace_mission = next(m for m in list_missions(target) if m.id == "trace-copy")
    assert trace_mission.scenario.workload.trace.base_dir == str(target)
    assert run(trace_mission.scenario)["requests"] == 40
    assert run(trace_mission.apply({"layout": "disaggregated"}))["requests"] == 40


def test_a_mission_trace_must_stay_in_its_folder(tmp_path):
    (tmp_path / "elsewhere.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n")
    for where in ("../elsewhere.csv", str(tmp_path / "elsewhere.csv"), "/etc/passwd"):
        with pytest.raises(LabError) as err:
            load_mission(write_trace_mission(tmp_path / "m", where))
        assert err.value.path == "scenario.workload.trace.path"
        assert "outside" in err.value.detail
    (tmp_path / "m" / "traces" / "dir.csv").mkdir()
    with pytest.raises(LabError, match="not a regular file"):
        load_mission(write_trace_mission(tmp_path / "m", "traces/dir.csv"))


def test_unreadable_mission_files_are_lab_errors(tmp_path):
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes((MISSIONS / "07-book-store.json").read_bytes().replace(b"book store", b"librair\xe9"))
    with pytest.raises(LabError, match="not UTF-8 text"):
        load_mission(latin1)
    deep = tmp_path / "deep.json"
    deep.write_text('{"brief": ' + "[" * 50_000 + "]" * 50_000 + "}")
    with pytest.raises(LabError, match="nested too deeply"):
        load_mission(deep)
    with pytest.raises(LabError, match="NUL"):
        load_mission("missions/\0.json")


def test_duplicate_ids_in_a_folder_are_rejected(tmp_path):
    shutil.copy(MISSIONS / "07-book-store.json", tmp_path / "07-book-store.json")
    shutil.copy(MISSIONS / "07-book-store.json", tmp_path / "70-copy.json")
    with pytest.raises(LabError) as err:
        list_missions(tmp_path)
    assert err.value.path == "70-copy.json: id"
    assert f"also the id of {tmp_path / '07-book-store.json'}" in err.value.detail


def test_schema_json_is_not_a_mission():
    with pytest.raises(LabError, match="this is a JSON Schema"):
        load_mission(MISSIONS / "schema.json")


# ---------------------------------------------------------------- the blog's numbers

def by_id(mid):
    return next(m for m in list_missions() if m.id == mid)


def on_seeds(m, settings, n=5):
    """The metrics of `settings` on the mission's seed and the next n - 1 (what `lab check` runs)."""
    scenario = m.apply(settings)
    return [run(scenario.with_changes({"seed": scenario.seed + k})) for k in range(n)]


def test_blog_mission_1_mixing_hurts():
    m = by_id("mixing-hurts")
    start = run(m.scenario)
    assert m.scenario.fleet.layout == "colocated" and m.scenario.fleet.gpus == 4
    assert m.scenario.workload.rate == 12
    assert 0.84 <= start["slo_attainment"] <= 0.90
    # On every seed: colocated misses 95% and stalls for over 200 ms; 2 + 2 meets it without stalls.
    starts = on_seeds(m, {})
    assert all(r["slo_attainment"] < 0.95 and r["worst_gap_p99_ms"] > 200 for r in starts)
    split = on_seeds(m, {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2})
    assert all(r["slo_attainment"] >= 0.95 and r["worst_gap_p99_ms"] < 50 for r in split)


def test_blog_mission_2_decode_drowns():
    m = by_id("decode-drowns")
    f = m.scenario.fleet
    assert (f.layout, f.prefill_gpus, f.decode_gpus, m.scenario.workload.rate) == ("disaggregated", 6, 2, 22)
    assert 0.10 <= run(m.scenario)["slo_attainment"] <= 0.16
    assert all(r["slo_attainment"] <= 0.16 for r in on_seeds(m, {}))  # 6% to 13% on other seeds
    assert all(r["slo_attainment"] >= 0.95 for r in on_seeds(m, {"prefill_gpus": 3, "decode_gpus": 3}))


def test_blog_mission_3_slow_link():
    m = by_id("slow-link")
    s = m.scenario
    assert s.fleet.link.gbytes_per_s == 50 / 8
    assert s.model.kv_bytes_per_token * 4000 == pytest.approx(524e6, rel=0.01)
    start = run(s)
    assert start["transfer_p99_ms"] > 2000  # transfers queue for seconds
    assert start["slo_attainment"] < 0.5
    assert all(r["transfer_p99_ms"] > 1000 and r["slo_attainment"] < 0.95 for r in on_seeds(m, {}))
    # No split fixes it on this link; colocated does, and so does a faster link.
    for p, d in ((2, 6), (3, 5), (5, 3), (6, 6)):
        assert run(m.apply({"prefill_gpus": p, "decode_gpus": d}))["slo_attainment"] < 0.95
    assert run(m.apply({"layout": "colocated", "gpus": 8}))["slo_attainment"] >= 0.95
    assert run(m.apply({"link_gbytes_per_s": 12.5}))["transfer_p99_ms"] < 500


def test_blog_mission_4_surge():
    m = by_id("long-document-surge")
    assert m.scenario.workload.phases
    assert run(m.scenario)["slo_attainment"] < 0.95
    assert run(m.apply({"gpus": 9}))["slo_attainment"] < 0.95
    assert run(m.apply({"gpus": 10}))["slo_attainment"] >= 0.95
    assert run(m.apply({"layout": "disaggregated", "prefill_gpus": 5, "decode_gpus": 3}))["slo_attainment"] >= 0.95
    # Across seeds: 9 colocated GPUs never do it, 10 do it on 4 of 5 seeds, 5 + 3 on all of them.
    assert all(r["slo_attainment"] < 0.95 for r in on_seeds(m, {"gpus": 9}))
    assert sum(r["slo_attainment"] >= 0.95 for r in on_seeds(m, {"gpus": 10})) >= 4
    split = {"layout": "disaggregated", "prefill_gpus": 5, "decode_gpus": 3}
    assert all(r["slo_attainment"] >= 0.95 for r in on_seeds(m, split))


def test_mission_5_marks_steps_against_the_gap_target_it_grades():
    """Chunk it sets max_gap_ms, so a red, hatched step is one over 60 ms, and a run where every
    request meets the SLO has none (the brief says so)."""
    from lab.core.report import gpu_rows

    m = by_id("chunk-it")
    assert m.scenario.slo.max_gap_ms == 60 and "red, hatched" in m.brief and "60 ms" in m.brief
    start = simulate(m.scenario)
    assert summarize(start)["slo_attainment"] < 0.1 and sum(r["slow_steps"] for r in gpu_rows(start, 60)) > 100
    chunked = simulate(m.apply({"chunk_tokens": 384}))
    assert summarize(chunked)["slo_attainment"] == 1
    assert sum(r["slow_steps"] for r in gpu_rows(chunked, 60)) == 0


@pytest.mark.parametrize("path", [p for p in MISSION_FILES if p.name[:2] in ("01", "02", "03", "04", "05")], ids=lambda p: p.name)
def test_briefs_name_the_timeline_colours(path):
    m = load_mission(path)
    assert "red, hatched" in m.brief and "amber" in m.brief.lower()
    assert " red " not in m.brief.replace("red, hatched", "")  # one colour word for a step over target


def split(mission, prefill, decode):
    """The mission's start with another split (outside the mission's control ranges too)."""
    return mission.scenario.with_changes({"fleet.prefill_gpus": prefill, "fleet.decode_gpus": decode})


def test_chat_and_code_missions_want_different_splits():
    conv, code = by_id("conversation-trace"), by_id("code-trace")
    assert conv.scenario.fleet == code.scenario.fleet
    assert run(split(conv, 2, 4))["slo_attainment"] >= 0.95
    assert run(split(code, 2, 4))["slo_attainment"] < 0.95
    assert run(split(code, 5, 1))["slo_attainment"] >= 0.95
    assert run(split(conv, 5, 1))["slo_attainment"] < 0.95


def test_mission_10_the_decode_pool_runs_out_of_kv_memory():
    m = by_id("memory-full")
    result = simulate(m.scenario)
    start = summarize(result)
    causes = blame_summary(request_blame(result))["missed_by_cause"]
    # Every miss waits for decode KV room while the prefill pool idles: memory binds, not compute.
    assert start["slo_attainment"] < 0.5 and causes["kv_wait"] >= 0.9
    assert start["util_prefill"] < 0.1
    kv_per_gpu = m.scenario.model.kv_tokens_per_gpu
    mean_need = 2 * 1500  # prompt + answer, both reserved on the decode GPU
    assert kv_per_gpu // mean_need < 50  # about 40 answers per decode GPU
    # Same four GPUs: as a split (1 + 3) the prefill GPU's memory holds no answers; colocated all four do.
    assert run(m.apply({"prefill_gpus": 1, "decode_gpus": 3}))["slo_attainment"] < 0.95
    assert run(m.apply({"layout": "colocated", "gpus": 4}))["slo_attainment"] >= 0.95


def test_mission_11_the_prefill_clock_moves_the_transfer_into_the_first_gap():
    m = by_id("first-token-clock")
    assert m.scenario.fleet.first_token == "decode" and "max_gap_ms" in m.scenario.slo.to_dict()
    honest, flipped = simulate(m.scenario), simulate(m.apply({"first_token": "prefill"}))
    a, b = summarize(honest), summarize(flipped)
    # The "improvement": TTFT drops by about a transfer...
    assert b["ttft_p90_s"] < a["ttft_p90_s"] - 0.05
    # ...but nothing the reader sees moved: same steps, every answer ends at the same time.
    assert [(g.start, g.end, g.decode_seqs) for g in honest.gpus] == [(g.start, g.end, g.decode_seqs) for g in flipped.gpus]
    assert [r.finish for r in honest.requests] == [r.finish for r in flipped.requests]
    # The transfer now sits in the first gap, so the SLO's gap term misses it and Blame names it.
    assert b["slo_attainment"] < a["slo_attainment"] - 0.2
    assert blame_summary(request_blame(flipped))["missed_by_cause"]["transfer"] >= 0.9
    # So no star can be earned by flipping the clock alone.
    assert not any(m.evaluate(b))



def test_mission_12_each_pool_takes_the_tensor_parallelism_its_target_needs():
    m = by_id("tp-per-phase")
    assert m.scenario.model.llm == "llama3-70b" and (m.scenario.fleet.prefill_tp, m.scenario.fleet.decode_tp) == (2, 2)
    result = simulate(m.scenario)
    # TP 2 leaves a decode instance KV room for only three or four answers: every miss waits for it.
    assert result.gpus[-1].tp == 2 and m.scenario.model.kv_tokens_per_instance("h100", 2) < 4 * 2200  # prompt + answer ~2,200
    assert summarize(result)["slo_attainment"] == 0
    assert blame_summary(request_blame(result))["missed_by_cause"]["kv_wait"] >= 0.9
    # The two 12-GPU answers mirror each other: the wide pool is the one whose target is tight.
    fast_tokens = on_seeds(m, {"prefill_tp": 4, "decode_gpus": 8, "decode_tp": 8})
    fast_first = on_seeds(m, {"prefill_gpus": 8, "prefill_tp": 8, "decode_tp": 4})
    assert all(r["tpot_p99_ms"] <= 10 < f["tpot_p99_ms"] for r, f in zip(fast_tokens, fast_first))
    assert all(f["ttft_p90_s"] <= 0.25 < r["ttft_p90_s"] for r, f in zip(fast_tokens, fast_first))
    # TP 8 everywhere also meets the TTFT target, on 16 GPUs: below star 3's goodput per GPU.
    wide = run(m.apply({"prefill_gpus": 8, "prefill_tp": 8, "decode_gpus": 8, "decode_tp": 8}))
    assert wide["ttft_p90_s"] <= 0.25 and wide["goodput_rps_per_gpu"] < m.stars[2].when[1].value


def test_mission_13_decode_on_the_cheaper_gpu_costs_less_per_good_answer():
    m = by_id("cheaper-decode")
    h100 = on_seeds(m, {"decode_gpus": 4})
    a100 = on_seeds(m, {"decode_gpus": 4, "decode_gpu": "a100"})
    # The same answers within the SLO, each cheaper, on every seed; the A100's slower steps still fit 30 ms.
    for h, a in zip(h100, a100):
        assert h["slo_attainment"] >= 0.95 and a["slo_attainment"] >= 0.95
        assert a["usd_per_good_request"] < 0.85 * h["usd_per_good_request"]
        assert h["tpot_p99_ms"] < 15 < a["tpot_p99_ms"] < 30
    # Prefill on A100s is the wrong way round: a third of the compute for half the price.
    swapped = run(m.apply({"decode_gpus": 4, "prefill_gpu": "a100"}))
    assert swapped["slo_attainment"] < 0.5 and swapped["ttft_p90_s"] > 2 * h100[0]["ttft_p90_s"]


def test_mission_14_a_decode_cap_is_free_and_a_prefill_cap_costs_ttft():
    m = by_id("power-cap")
    start = simulate(m.scenario)
    decode_capped = simulate(m.apply({"decode_power_cap_w": 200}))
    # The decode GPU waits on memory: capped to 200 W its steps take exactly as long, for fewer watts.
    assert [(g.start, g.end) for g in start.gpus] == [(g.start, g.end) for g in decode_capped.gpus]
    a, b = summarize(start), summarize(decode_capped)
    assert 195 < b["decode_power_w_mean"] <= 200 < a["decode_power_w_mean"] and b["power_w_mean"] < a["power_w_mean"]  # (idle between steps)
    # The prefill GPUs compute: capping them slows every prompt, so TTFT grows while the watts fall.
    prefill_capped = run(m.apply({"prefill_power_cap_w": 400}))
    assert prefill_capped["ttft_p90_s"] > 1.4 * a["ttft_p90_s"] and prefill_capped["prefill_power_w_mean"] < a["prefill_power_w_mean"]
    too_deep = run(m.apply({"prefill_power_cap_w": 300}))  # the queue runs away
    assert too_deep["ttft_p90_s"] > 2.5 * a["ttft_p90_s"] and too_deep["slo_attainment"] < 0.99


def test_mission_15_one_long_prompt_blocks_what_it_shares():
    m = by_id("one-long-prompt")
    fleet = m.scenario.fleet
    assert (fleet.dispatch, fleet.chunk_tokens, fleet.long_prompt_tokens, fleet.long_gpus) == ("round_robin", None, 8000, 1)
    result = simulate(m.scenario)
    longs = [r for r in result.requests if r.prompt_tokens == 30000]
    assert 3 <= len(longs) <= 12  # about one every 10 s
    # Bound at arrival, short prompts wait behind a long one's 1.5 s step, and the answers beside it freeze.
    start = summarize(result)
    assert start["ttft_p99_s"] > 1.0 and start["worst_gap_p99_ms"] > 1400
    queued = run(m.apply({"dispatch": "queue"}))
    assert queued["ttft_p99_s"] < 0.3 and queued["worst_gap_p99_ms"] > 1400  # the wait goes, the freeze stays
    chunked = run(m.apply({"chunk_tokens": 512}))
    assert chunked["worst_gap_p99_ms"] < 50 and chunked["ttft_p99_s"] > 1.0  # the freeze goes, the wait stays
    # Routed, no short prompt meets a long one: every long prompt prefills on the last GPU.
    routed = simulate(m.apply({"dispatch": "length_split"}))
    last = len(routed.gpus) - 1
    assert all((r.prefill_gpu == last) == (r.prompt_tokens >= 8000) for r in routed.requests if r.prefill_gpu >= 0)
    assert summarize(routed)["ttft_p99_s"] < 0.3
    # ...at the price of the short answers' GPUs: two of three, so their median TPOT rises.
    both = on_seeds(m, {"dispatch": "queue", "chunk_tokens": 512})
    split = on_seeds(m, {"dispatch": "length_split", "chunk_tokens": 512})
    assert all(b["tpot_p50_ms"] < 13 < s["tpot_p50_ms"] for b, s in zip(both, split))

def test_each_outro_names_the_next_mission_and_the_last_says_it_is_the_last():
    shipped = list_missions()
    assert [mm.order for mm in shipped] == list(range(1, len(shipped) + 1))
    for here, nxt in zip(shipped, shipped[1:]):
        assert nxt.title in here.outro, (here.id, here.outro)
    assert "last mission" in shipped[-1].outro


# ---------------------------------------------------------------- controls and apply()

@pytest.fixture(scope="module")
def book():
    return load_mission(MISSIONS / "07-book-store.json")


def test_controls_metadata(book):
    assert list(book.controls) == ["layout", "gpus", "prefill_gpus", "decode_gpus"]
    gpus = book.controls["gpus"]
    assert (gpus.name, gpus.path, gpus.kind, gpus.min, gpus.max, gpus.step) == ("gpus", "fleet.gpus", "int", 2, 8, 1)
    assert gpus.label == "GPUs (colocated)"
    assert gpus.grid() == [2, 3, 4, 5, 6, 7, 8]
    layout = book.controls["layout"]
    assert (layout.kind, layout.choices, layout.min) == ("choice", ("colocated", "disaggregated"), None)
    assert gpus.value(book.scenario) == 4
    assert book.settings() == {"layout": "colocated", "gpus": 4, "prefill_gpus": 3, "decode_gpus": 1}
    assert [c.name for c in book.active_controls()] == ["layout", "gpus"]
    split = book.apply({"layout": "disaggregated"})
    assert [c.name for c in book.active_controls(split)] == ["layout", "prefill_gpus", "decode_gpus"]
    assert set(CONTROL_PATHS) == set(CONTROL_SPECS)
    assert CONTROL_PATHS["link_gbytes_per_s"] == "fleet.link.gbytes_per_s"


def test_apply_changes_only_what_it_is_told(book):
    s = book.apply({"layout": "disaggregated", "prefill_gpus": 3, "decode_gpus": 1})
    assert (s.fleet.layout, s.fleet.prefill_gpus, s.fleet.decode_gpus, s.fleet.total_gpus) == ("disaggregated", 3, 1, 4)
    assert s.workload == book.scenario.workload and s.slo == book.scenario.slo
    assert book.settings(s) == {"layout": "disaggregated", "gpus": 4, "prefill_gpus": 3, "decode_gpus": 1}
    # From a base other than the start.
    s2 = book.apply({"decode_gpus": 2}, base=s)
    assert (s2.fleet.prefill_gpus, s2.fleet.decode_gpus) == (3, 2)
    assert book.apply({"gpus": 6.0}).fleet.gpus == 6  # 6.0 is a whole number


@pytest.mark.parametrize(
    "settings, path, message",
    [
        ({"gpus": 12}, "controls.gpus", "12 is out of range: must be at least 2 and at most 8"),
        ({"gpus": 1}, "controls.gpus", "1 is out of range: must be at least 2 and at most 8"),
        ({"gpus": 4.5}, "controls.gpus", "expected a whole number, got 4.5"),
        ({"gpus": "4"}, "controls.gpus", "expected a number, got '4'"),
        ({"gpus": True}, "controls.gpus", "expected a number, got true"),
        ({"layout": "split"}, "controls.layout", "'split' is not one of 'colocated', 'disaggregated'"),
        ({"chunk_tokens": 512}, "controls.chunk_tokens", "this mission does not let students change chunk_tokens; it allows: layout, gpus, prefill_gpus, decode_gpus"),
        ({"warp_drive": 1}, "controls.warp_drive", "unknown control; controls are: layout, gpus"),
    ],
)
def test_apply_rejects_bad_settings(book, settings, path, message):
    with pytest.raises(LabError) as err:
        book.apply(settings)
    assert err.value.path == path
    assert message in err.value.detail


def test_apply_respects_steps_and_choice_types():
    m = load_mission(MISSIONS / "05-chunk-it.json")
    assert m.apply({"chunk_tokens": 0}).fleet.chunk_tokens is None  # 0 = whole prompts
    assert m.apply({"chunk_tokens": 384}).fleet.chunk_tokens == 384
    with pytest.raises(LabError, match=r"^controls\.chunk_tokens: 300 is not a setting of this control: it moves from 0 in steps of 128$"):
        m.apply({"chunk_tokens": 300})
    with pytest.raises(LabError, match="expected an object of control settings"):
        m.apply([("chunk_tokens", 128)])
    lw = Control.from_dict("layerwise", {}, "controls.layerwise")
    assert lw.choices == (False, True)
    assert lw.check(True) is True
    with pytest.raises(LabError, match="is not one of false, true"):
        lw.check(1)


def test_apply_on_a_trace_mission(tmp_path):
    m = load_mission(write_trace_mission(tmp_path))
    s = m.apply({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 4})
    assert s.workload == m.scenario.workload
    assert s.workload.trace.base_dir == str(tmp_path)
    assert s.workload.trace.roots == (str(tmp_path),)  # still only the mission's folder
    assert (s.fleet.prefill_gpus, s.fleet.decode_gpus) == (2, 4)


def test_float_controls_and_grids():
    c = Control.from_dict("link_gbytes_per_s", {"min": 6.25, "max": 50, "step": 6.25}, "controls.link_gbytes_per_s")
    assert c.kind == "float"
    assert c.grid() == [6.25, 12.5, 18.75, 25.0, 31.25, 37.5, 43.75, 50.0]
    assert c.check(12.5) == 12.5 and c.check(50) == 50.0
    with pytest.raises(LabError, match="not a setting of this control"):
        c.check(10)
    free = Control.from_dict("rate", {"min": 1, "max": 30}, "controls.rate")
    assert free.grid() is None and free.check(7.3) == 7.3
    with pytest.raises(LabError, match="at most 30"):
        free.check(31)
    assert Control.from_dict("rate", {"min": 1, "max": 30, "label": "Traffic"}, "c").to_dict() == {"min": 1, "max": 30, "label": "Traffic"}


# ---------------------------------------------------------------- the broken corpus

# file -> (field path, substring of the message)
BROKEN = {
    "missing-id.json": ("id", "required field is missing"),
    "id-not-a-slug.json": ("id", "'Mixing Hurts' is not a slug"),
    "id-with-trailing-newline.json": ("id", "'mixing-hurts\\n' is not a slug"),  # the slug must match the whole id
    "order-too-large.json": ("order", "too large: must be at least 0 and at most 1,000,000"),
    "star-op-is-a-list.json": ("stars[0].when[0].op", "a list is not an operator"),
    "chunk-tokens-false.json": ("scenario.fleet.chunk_tokens", "expected a whole number, got false"),
    "trace-outside-the-folder.json": ("scenario.workload.trace.path", "outside"),
    "order-is-text.json": ("order", "expected a whole number, got '1'"),
    "brief-is-a-number.json": ("brief", "expected Markdown text or a list of lines, got 5"),
    "summary-two-lines.json": ("summary", "must be one line"),
    "unknown-top-field.json": ("control", "unknown field"),
    "unknown-metric.json": ("stars[0].when[0].metric", "'slo_attainmnet' is not a metric; did you mean 'slo_attainment'?"),
    "bad-op.json": ("stars[0].when[0].op", "'=>' is not an operator; use one of <, <=, >, >=, =="),
    "star-value-is-text.json": ("stars[1].when[1].value", "expected a number, got '8'"),
    "star-value-is-bool.json": ("stars[0].when[0].value", "expected a number, got true"),
    "no-stars.json": ("stars", "expected 1 to 3 stars, got 0"),
    "four-stars.json": ("stars", "expected 1 to 3 stars, got 4"),
    "star-without-predicates.json": ("stars[0].when", "a star needs at least one predicate"),
    "duplicate-star-label.json": ("stars[1].label", "'meet the SLO' is already the label of stars[0]"),
    "contradictory-star.json": ("stars[0].when", "slo_attainment >= 0.95 and slo_attainment < 0.9 cannot all hold"),
    "start-outside-control-range.json": ("scenario.fleet.gpus", "12 is outside the mission's own range controls.gpus (at least 2 and at most 8)"),
    "start-split-outside-range.json": ("scenario.fleet.prefill_gpus", "6 is outside the mission's own range controls.prefill_gpus (at least 1 and at most 4)"),
    "start-off-the-step-grid.json": ("scenario.fleet.chunk_tokens", "300 is not a setting of controls.chunk_tokens: it moves from 0 in steps of 256"),
    "start-layout-not-offered.json": ("scenario.fleet.layout", "'colocated' is not among controls.layout.choices ('disaggregated')"),
    "unknown-control.json": ("controls.link_speed", "'link_speed' is not a control; did you mean 'link_gbytes_per_s'?"),
    "control-choice-unknown.json": ("controls.layout.choices[1]", "'split' is not one of 'colocated', 'disaggregated'"),
    "control-min-above-max.json": ("controls.gpus.max", "2 is below min (8)"),
    "control-missing-max.json": ("controls.gpus.max", "required field is missing"),
    "control-beyond-scenario-limits.json": ("controls.gpus.max", "100 GPUs is more than a mission's slider offers: at most 64"),
    "chunk-control-below-16.json": ("controls.chunk_tokens.step", "a chunk is 0 (whole prompt) or at least 16 tokens"),
    "control-that-does-nothing.json": ("controls.link_gbytes_per_s", "only affects a disaggregated fleet, but this fleet is always colocated"),
    "switch-layout-without-split.json": ("scenario.fleet.prefill_gpus", "controls.layout lets the student switch to disaggregated"),
    "rate-control-with-trace.json": ("controls.rate", "the workload replays a trace"),
    "missing-trace-file.json": ("scenario.workload.trace.path", "no trace file 'traces/no-such-trace.csv'"),
    "slo-star-without-slo.json": ("stars[0].when[0].metric", "scenario.slo sets no target"),
    "link-star-on-colocated-fleet.json": ("stars[1].when[2].metric", "transfer_p99_ms is only defined for a disaggregated fleet"),
    "scenario-bad-layout.json": ("scenario.fleet.layout", "'split' is not one of 'colocated', 'disaggregated'"),
    "scenario-missing-workload.json": ("scenario.workload", "required field is missing"),
    "malformed-json.json": ("malformed-json.json: line 4, column 14", "malformed JSON"),
    "trailing-comma.json": ("trailing-comma.json: line 19, column 5", "malformed JSON"),
    "duplicate-key.json": ("duplicate-key.json: line 17, column 7", "the key 'gpus' appears twice in one object"),
}


def test_corpus_is_complete():
    on_disk = {p.name for p in CORPUS.glob("*.json")}
    assert on_disk == set(BROKEN), "every broken file needs an expected message, and every expectation a file"
    assert len(on_disk) >= 12


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_mission_is_rejected(name):
    path, message = BROKEN[name]
    with pytest.raises(LabError) as err:
        load_mission(CORPUS / name)
    first = getattr(err.value, "errors", [err.value])[0]  # (a file with more mistakes names each: LabErrors)
    assert first.path == path and err.value.path == path, str(err.value)
    assert message in first.detail, str(err.value)
    assert str(first) == f"{path}: {first.detail}"


TEXT_MISTAKES = {"malformed-json.json", "trailing-comma.json", "duplicate-key.json"}


@pytest.mark.parametrize("name", sorted(set(BROKEN) - TEXT_MISTAKES))
def test_broken_mission_as_a_dict_is_rejected_the_same_way(name):
    data = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    path, message = BROKEN[name]
    with pytest.raises(LabError) as err:
        load_mission(data, base_dir=str(CORPUS))
    assert err.value.path == path
    assert message in err.value.detail


def test_file_errors_remember_the_file():
    with pytest.raises(LabError) as err:
        load_mission(CORPUS / "unknown-metric.json")
    assert err.value.file == str(CORPUS / "unknown-metric.json")
    with pytest.raises(LabError, match="cannot read file"):
        load_mission(CORPUS / "no-such-file.json")
    with pytest.raises(LabError, match="expected a mission file path or object"):
        load_mission(42)
    with pytest.raises(LabError, match="expected a mission object"):
        Mission.from_dict([1, 2])


def test_duplicate_keys_are_found_at_any_depth():
    from lab.core.missions import parse_mission_text

    text = '{\n  "a": {"x": 1},\n  "b": {"x": 1, "y": {"x": 2}, "x": 3}\n}'
    with pytest.raises(LabError) as err:
        parse_mission_text(text, "m.json")
    assert err.value.path == "m.json: line 3, column 32"  # the second "x" of "b", not the nested one
    assert parse_mission_text('{"a": {"x": 1}, "b": {"x": 2}}') == {"a": {"x": 1}, "b": {"x": 2}}


def test_brief_as_lines_or_text():
    base = json.loads((MISSIONS / "07-book-store.json").read_text(encoding="utf-8"))
    as_text = copy.deepcopy(base)
    as_text["brief"] = "\n".join(base["brief"])
    assert load_mission(as_text).brief == load_mission(base).brief
    bad = copy.deepcopy(base)
    bad["brief"] = ["fine", 3]
    with pytest.raises(LabError, match=r"^brief\[1\]: expected a line of text, got 3$"):
        load_mission(bad)


def test_debrief_and_outro_are_read_checked_and_round_trip():
    base = json.loads((MISSIONS / "07-book-store.json").read_text(encoding="utf-8"))
    base.pop("outro", None)
    for s in base["stars"]:
        s.pop("debrief", None)
    plain = load_mission(base)  # both are optional for the loader (lab check requires them)
    assert plain.outro == "" and all(s.debrief == "" for s in plain.stars)
    assert "outro" not in plain.to_dict() and all("debrief" not in s for s in plain.to_dict()["stars"])
    told = copy.deepcopy(base)
    told["stars"][1]["debrief"] = ["Splitting moves prefill off the decode GPUs.", "No step waits for a prompt."]
    told["outro"] = "  Next: **the surge**.  "
    m = load_mission(told)
    assert m.stars[1].debrief == "Splitting moves prefill off the decode GPUs.\nNo step waits for a prompt."
    assert m.stars[0].debrief == "" and m.outro == "Next: **the surge**."
    assert load_mission(m.to_dict()).to_dict() == m.to_dict()
    cases = [
        (("stars", 0, "debrief"), 5, r"^stars\[0\]\.debrief: expected Markdown text or a list of lines, got 5$"),
        (("stars", 0, "debrief"), ["ok", None], r"^stars\[0\]\.debrief\[1\]: expected a line of text, got null$"),
        (("stars", 2, "debrief"), "  ", r"^stars\[2\]\.debrief: must not be empty$"),
        (("stars", 1, "debrief"), "x" * 501, r"^stars\[1\]\.debrief: is 501 characters \('xxx.*\.\.\.'\); keep it to 500$"),
        (("outro",), {"text": "hi"}, r"^outro: expected Markdown text or a list of lines, got an object$"),
        (("outro",), ["y" * 500, "y" * 400], r"^outro: is 901 characters .*; keep it to 800$"),
        (("stars", 0, "debreif"), "typo", r"^stars\[0\]\.debreif: unknown field; did you mean 'debrief'\?"),
    ]
    for where, value, message in cases:
        bad = copy.deepcopy(base)
        node = bad
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = value
        with pytest.raises(LabError, match=message):
            load_mission(bad)


# ---------------------------------------------------------------- schema.json

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra (pip install -e .[test])")


@pytest.fixture(scope="module")
def validator():
    schema = json.loads((MISSIONS / "schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("path", MISSION_FILES, ids=lambda p: p.name)
def test_schema_accepts_every_shipped_mission(validator, path):
    errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(json.loads(path.read_text(encoding="utf-8")))]
    assert not errors


SCHEMA_CATCHES = [
    "missing-id.json", "id-not-a-slug.json", "order-is-text.json", "brief-is-a-number.json", "summary-two-lines.json",
    "unknown-top-field.json", "unknown-metric.json", "bad-op.json", "star-value-is-text.json", "star-value-is-bool.json",
    "no-stars.json", "four-stars.json", "star-without-predicates.json", "unknown-control.json",
    "control-choice-unknown.json", "control-missing-max.json", "scenario-bad-layout.json",
    "scenario-missing-workload.json", "control-beyond-scenario-limits.json", "id-with-trailing-newline.json",
]


@pytest.mark.parametrize("name", SCHEMA_CATCHES)
def test_schema_rejects_broken_missions(validator, name):
    data = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    assert list(validator.iter_errors(data)), f"schema.json accepted {name}"


def test_schema_knows_debrief_and_outro(validator):
    data = json.loads((MISSIONS / "07-book-store.json").read_text(encoding="utf-8"))
    data["outro"] = ["Next: mission 8."]
    data["stars"][0]["debrief"] = "Why it works."
    assert not list(validator.iter_errors(data))
    for mutate in (lambda d: d.update(outro=3), lambda d: d["stars"][0].update(debrief="x" * 501),
                   lambda d: d["stars"][0].update(debrief=[1])):
        bad = copy.deepcopy(data)
        mutate(bad)
        assert list(validator.iter_errors(bad)), bad


def test_schema_enums_match_the_core():
    schema = json.loads((MISSIONS / "schema.json").read_text(encoding="utf-8"))
    assert schema["definitions"]["predicate"]["properties"]["metric"]["enum"] == list(METRIC_NAMES)
    assert list(schema["properties"]["controls"]["properties"]) == list(CONTROL_SPECS)
    for name, (kind, _, _, choices) in CONTROL_SPECS.items():
        props = schema["properties"]["controls"]["properties"][name]["properties"]
        if kind == "choice":
            assert props["choices"]["items"]["enum"] == list(choices)
        else:
            assert props["min"]["type"] == ("integer" if kind == "int" else "number")



def test_schema_knows_every_fleet_and_model_field():
    """The schema lists every field the spec reads, so an editor does not flag a valid
    mission (fleet.prefill_tp was missing while missions used it) and enums match the core."""
    import dataclasses

    from lab.core.spec import GPU_KEYS, GPU_PRESETS, LLM_PRESETS, Fleet, Model

    scenario = json.loads((MISSIONS / "schema.json").read_text(encoding="utf-8"))["definitions"]["scenario"]["properties"]
    fleet, model = scenario["fleet"]["properties"], scenario["model"]["properties"]
    assert set(fleet) == {f.name for f in dataclasses.fields(Fleet)}
    assert set(model) == {f.name for f in dataclasses.fields(Model)}
    for name in ("prefill_gpu", "decode_gpu"):
        assert fleet[name]["enum"] == list(GPU_PRESETS)
    assert model["gpu"]["enum"] == list(GPU_PRESETS) and model["llm"]["enum"] == list(LLM_PRESETS)
    assert fleet["dispatch"]["enum"] == list(Fleet.DISPATCH) and fleet["decode_pick"]["enum"] == list(Fleet.DECODE_PICK)
    overrides = model["gpu_overrides"]["properties"]
    assert list(overrides) == list(GPU_PRESETS)
    assert all(list(o["properties"]) == list(GPU_KEYS) for o in overrides.values())

# ---------------------------------------------------------------- issue 11's controls

def _fleet_mission(controls, fleet=None, model=None):
    """A small split-capable mission over a 70B roofline fleet, with the given controls."""
    return Mission.from_dict({
        "id": "fleet-controls", "title": "t", "order": 1, "summary": "s", "brief": "b",
        "scenario": {
            "workload": {"rate": 2, "duration_s": 5, "prompt_tokens": 1000, "output_tokens": 50},
            "fleet": {"layout": "colocated", "gpus": 4, "tp": 2, "prefill_gpus": 2, "decode_gpus": 2,
                      "prefill_tp": 2, "decode_tp": 2, **(fleet or {})},
            "model": {"cost": "roofline", "llm": "llama3-70b", **(model or {})},
            "slo": {"ttft_s": 1.0},
        },
        "controls": controls,
        "stars": [{"label": "meet", "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.9}]}],
    })


def test_tp_controls_offer_whole_servers_and_the_spec_refuses_partial_instances():
    m = _fleet_mission({"layout": {}, "tp": {}, "gpus": {"min": 2, "max": 8}, "prefill_tp": {"choices": [2, 4]}})
    assert m.controls["tp"].choices == (1, 2, 4, 8)
    assert m.controls["prefill_tp"].choices == (2, 4)
    assert m.settings()["tp"] == 2
    assert m.apply({"tp": 4, "gpus": 8}).fleet.tp == 4
    with pytest.raises(LabError, match=r"^controls\.tp: 3 is not one of 1, 2, 4, 8$"):
        m.apply({"tp": 3})
    # The count must hold whole instances: the spec names the count field and both numbers.
    with pytest.raises(LabError, match=r"^fleet\.gpus: 5 GPUs is not a whole number of instances of tp = 2 GPUs: use a multiple of 2$"):
        m.apply({"gpus": 5})
    with pytest.raises(LabError, match=r"^fleet\.tp: llama3-70b .* does not fit on 1 h100"):
        m.apply({"tp": 1})


def test_the_specs_refusals_carry_their_reason_and_the_values_their_message_says():
    """A page says these refusals in its own words (lab/ui/words/refusal.py) from `reason` and
    `facts`, not from the message's text: they must agree with the message, and survive the
    trip back from a worker process (pickle, lab/parallel.py)."""
    import pickle

    from lab.core.errors import WEIGHTS_DO_NOT_FIT, WHOLE_INSTANCES

    m = _fleet_mission({"layout": {}, "tp": {}, "gpus": {"min": 2, "max": 8}, "prefill_tp": {"choices": [2, 4]}})
    with pytest.raises(LabError) as info:
        m.apply({"gpus": 5})
    exc = info.value
    assert exc.reason == WHOLE_INSTANCES and exc.path == "fleet.gpus"
    assert exc.facts == {"gpus": 5, "tp_field": "tp", "tp": 2}
    assert f"{exc.facts['gpus']} GPUs is not a whole number of instances of tp = {exc.facts['tp']} GPUs" in exc.detail
    with pytest.raises(LabError) as info:
        m.apply({"tp": 1})
    exc = info.value
    assert exc.reason == WEIGHTS_DO_NOT_FIT and exc.path == "fleet.tp"
    f = exc.facts
    assert (f["llm"], f["tp"], f["gpu"]) == ("llama3-70b", 1, "h100") and f["usable_gb"] < f["weights_gb"]
    assert exc.detail.startswith(f"llama3-70b ({f['weights_gb']:.0f} GB of weights) does not fit on 1 h100 ")
    back = pickle.loads(pickle.dumps(exc))
    assert (back.path, back.detail, back.reason, back.facts, str(back)) == (exc.path, exc.detail, exc.reason, exc.facts, str(exc))
    with pytest.raises(LabError) as info:  # the rest carry no reason
        m.apply({"tp": 3})
    assert info.value.reason is None and info.value.facts == {}


def test_power_cap_controls_read_zero_as_no_cap():
    m = _fleet_mission({"layout": {}, "decode_power_cap_w": {"min": 0, "max": 700, "step": 50}})
    assert m.scenario.fleet.decode_power_cap_w is None and m.settings()["decode_power_cap_w"] == 0
    split = m.apply({"layout": "disaggregated", "decode_power_cap_w": 350})
    assert split.fleet.decode_power_cap_w == 350.0 and m.settings(split)["decode_power_cap_w"] == 350
    assert m.apply({"layout": "disaggregated", "decode_power_cap_w": 0}).fleet.decode_power_cap_w is None
    with pytest.raises(LabError, match=r"^fleet\.decode_power_cap_w: 50 W is outside h100's range"):
        m.apply({"layout": "disaggregated", "decode_power_cap_w": 50})
    # A control's end must be a valid cap for the pool's GPU (0 = none is always one).
    with pytest.raises(LabError, match=r"^controls\.decode_power_cap_w\.min: 50 is not a valid fleet\.decode_power_cap_w: 50 W is outside"):
        _fleet_mission({"layout": {}, "decode_power_cap_w": {"min": 50, "max": 700, "step": 50}},
                       fleet={"layout": "disaggregated", "decode_power_cap_w": 600})


def test_the_long_prefill_control_reads_zero_as_no_cap_and_offers_no_share_under_16():
    m = _fleet_mission({"chunk_tokens": {"min": 0, "max": 2048, "step": 512},
                        "long_prefill_tokens": {"min": 0, "max": 1024, "step": 256}})
    assert m.scenario.fleet.long_prefill_tokens is None and m.settings()["long_prefill_tokens"] == 0
    capped = m.apply({"chunk_tokens": 2048, "long_prefill_tokens": 512})
    assert (capped.fleet.chunk_tokens, capped.fleet.long_prefill_tokens) == (2048, 512)
    assert m.apply({"long_prefill_tokens": 0}).fleet.long_prefill_tokens is None
    with pytest.raises(LabError, match=r"^controls\.long_prefill_tokens\.step: offers long_prefill_tokens 8"):
        _fleet_mission({"long_prefill_tokens": {"min": 0, "max": 64, "step": 8}})


def test_gpu_type_controls_default_to_the_model_gpu():
    m = _fleet_mission({"layout": {}, "prefill_gpu": {}, "decode_gpu": {"choices": ["a100", "h100"]}})
    assert m.settings()["prefill_gpu"] == "h100" and m.settings()["decode_gpu"] == "h100"
    s = m.apply({"layout": "disaggregated", "decode_gpu": "a100"})
    assert [p.gpu for p in s.pools()] == ["h100", "a100"]
    with pytest.raises(LabError, match=r"^controls\.decode_gpu: 'h200' is not one of 'a100', 'h100'$"):
        m.apply({"decode_gpu": "h200"})


def test_long_prompt_and_attention_controls_apply_only_when_their_rule_is_on():
    m = _fleet_mission({"layout": {}, "dispatch": {}, "long_prompt_tokens": {"min": 1000, "max": 9000, "step": 1000},
                        "long_gpus": {"min": 2, "max": 2}, "attention": {}, "cost": {}, "prefill_chunk_tokens": {"min": 0, "max": 4096, "step": 512}},
                       fleet={"long_prompt_tokens": 4000, "long_gpus": 2})
    names = lambda s: [c.name for c in m.active_controls(s)]  # noqa: E731
    assert names(m.scenario) == ["layout", "dispatch", "attention", "cost"]
    routed = m.apply({"dispatch": "length_split"})
    assert names(routed) == ["layout", "dispatch", "long_prompt_tokens", "long_gpus", "attention", "cost"]
    linear = m.apply({"cost": "linear", "layout": "disaggregated"})
    assert names(linear) == ["layout", "dispatch", "cost", "prefill_chunk_tokens"]
    assert m.apply({"layout": "disaggregated", "prefill_chunk_tokens": 0}).fleet.prefill_chunk_tokens is None
    with pytest.raises(LabError, match=r"^controls\.prefill_chunk_tokens\.step: offers prefill_chunk_tokens 8; a chunk is 0"):
        _fleet_mission({"layout": {}, "prefill_chunk_tokens": {"min": 0, "max": 64, "step": 8}})


def test_a_gpu_count_control_end_needs_whole_instances_at_some_offered_tp():
    # decode_gpus 2 is no whole number of TP-4 instances, but TP 2 (offered) makes it one.
    m = _fleet_mission({"layout": {}, "decode_gpus": {"min": 2, "max": 8}, "decode_tp": {"choices": [2, 4]}},
                       fleet={"layout": "disaggregated", "decode_gpus": 4, "decode_tp": 4})
    assert m.controls["decode_gpus"].min == 2
    with pytest.raises(LabError, match=r"^controls\.decode_gpus\.min: 2 is not a valid fleet\.decode_gpus: 2 GPUs is not a whole "
                                       r"number of instances of decode_tp = 4 GPUs: use a multiple of 4$"):
        _fleet_mission({"layout": {}, "decode_gpus": {"min": 2, "max": 8}},
                       fleet={"layout": "disaggregated", "decode_gpus": 4, "decode_tp": 4})


def test_a_star_label_names_every_share_of_the_slo_its_tests_ask():
    """A star that asks for a share meeting the SLO says which (mission 12's star 3 left out its 90%)."""
    for mission in list_missions():
        for i, star in enumerate(mission.stars):
            for pred in star.when:
                if pred.metric == "slo_attainment" and pred.op in (">=", ">"):
                    pct = f"{pred.value * 100:g}%"
                    assert pct in star.label, (mission.id, i + 1, star.label, pct)


@pytest.mark.parametrize("path", MISSION_FILES, ids=lambda p: p.stem)
def test_every_brief_says_which_model_its_figures_come_from(path):
    """A brief quotes step times and shares; those are its model's, so it names the model
    (docs/model.md "The calibrated model": missions keep their model)."""
    m = load_mission(path)
    words = {"linear": "(Step times: lab constants.)", "roofline": "roofline", "calibrated": "calibrated"}
    assert words[m.scenario.model.cost] in m.brief, m.brief[:200]
