"""The mission checker: start run, cheapest winning setting per star, verdicts, budget."""

import itertools
import json

from lab.core import simulate, summarize
from lab.core.missions import Control, load_mission
from lab.core.solver import CheckReport, _coarse, check_mission


def star(label, *preds):
    return {"label": label, "when": [{"metric": m, "op": op, "value": v} for m, op, v in preds]}


def mini(controls=None, stars=None, **scenario_changes):
    """A small mission (15 s of traffic) that checks in well under a second."""
    scenario = {
        "workload": {"rate": 12, "duration_s": 15, "prompt_tokens": 2500, "output_tokens": 120},
        "fleet": {"layout": "colocated", "gpus": 2, "prefill_gpus": 1, "decode_gpus": 1},
        "slo": {"ttft_s": 1.5, "tpot_ms": 25},
        "seed": 3,
        "drain_s": 30,
    }
    for key, value in scenario_changes.items():
        scenario[key] = value
    return {
        "id": "mini",
        "title": "Mini",
        "order": 0,
        "summary": "A tiny mission for tests.",
        "brief": "Small.\n\n**Try:** anything.",
        "scenario": scenario,
        "controls": controls if controls is not None else {
            "layout": {"choices": ["colocated", "disaggregated"]},
            "gpus": {"min": 1, "max": 5},
            "prefill_gpus": {"min": 1, "max": 3},
            "decode_gpus": {"min": 1, "max": 3},
        },
        "stars": stars if stars is not None else [
            star("SLO", ("slo_attainment", ">=", 0.95)),
            star("SLO, smooth", ("slo_attainment", ">=", 0.95), ("worst_gap_p99_ms", "<=", 60)),
        ],
    }


def all_settings(m):
    """Every allowed setting of a small mission (its controls all have short grids)."""
    names = list(m.controls)
    for combo in itertools.product(*(m.controls[n].grid() for n in names)):
        yield dict(zip(names, combo, strict=True))


def brute_force(m):
    out = []
    seen = set()
    for settings in all_settings(m):
        s = m.apply(settings)
        f = s.fleet  # settings that don't matter in a layout give the same fleet
        key = (f.layout, f.gpus) if f.layout == "colocated" else (f.layout, f.prefill_gpus, f.decode_gpus)
        if key in seen:
            continue
        seen.add(key)
        out.append((settings, summarize(simulate(s))))
    return out


def test_cheapest_matches_brute_force():
    m = load_mission(mini())
    report = check_mission(m, time_budget_s=120)
    assert isinstance(report, CheckReport)
    assert report.ok, report.format()
    table = brute_force(m)
    for sol in report.solutions:
        winners = [(s, r) for s, r in table if sol.star.earned(r)]
        fewest = min(r["gpus"] for _, r in winners)
        assert sol.metrics["gpus"] == fewest, report.format()
        best_slo = max(r["slo_attainment"] for _, r in winners if r["gpus"] == fewest)
        assert sol.metrics["slo_attainment"] == best_slo
        assert sol.star.earned(sol.metrics)
        assert summarize(simulate(m.apply(sol.settings))) == sol.metrics


def test_report_contents_and_format():
    report = check_mission(mini(), time_budget_s=120)
    assert report.start_settings == {"layout": "colocated", "gpus": 2, "prefill_gpus": 1, "decode_gpus": 1}
    assert report.cheapest[0] == {"layout": "disaggregated", "gpus": 2, "prefill_gpus": 2, "decode_gpus": 1}
    assert report.start_metrics["gpus"] == 2
    assert report.start_stars == [False, False]
    assert report.cheapest == [s.settings for s in report.solutions]
    assert report.runs >= 2 and report.elapsed_s > 0 and report.start_run_s > 0
    text = report.format()
    lines = text.splitlines()
    assert lines[0] == "mini — Mini"
    assert lines[1].startswith("  start: layout=colocated, gpus=2")
    assert "slo_attainment" in lines[2]
    assert "stars at start: ☆☆ (0 of 2)" in text
    assert "1. SLO [slo_attainment >= 0.95]" in text
    assert "cheapest: " in text
    assert text.rstrip().endswith(": ok")
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is True and data["mission"] == "mini"
    assert [s["earned_at_start"] for s in data["stars"]] == [False, False]


def test_start_that_earns_every_star_is_not_ok():
    report = check_mission(mini(stars=[star("easy", ("gpus", ">=", 1))]), time_budget_s=60)
    assert report.start_stars == [True]
    assert not report.ok
    assert any("already earns every star" in p for p in report.problems)
    assert "NOT OK" in report.format()


def test_star_no_setting_can_earn_is_not_ok():
    report = check_mission(mini(stars=[
        star("possible", ("slo_attainment", ">=", 0.9)),
        star("impossible", ("slo_attainment", ">=", 0.99), ("ttft_p99_s", "<=", 0.05)),
    ]), time_budget_s=120)
    assert not report.ok
    assert report.solutions[0].settings is not None
    assert report.solutions[1].settings is None
    assert "no allowed setting earns it" in report.solutions[1].note
    assert any("star 2 ('impossible') cannot be earned" in p for p in report.problems)


def test_fleet_predicates_prune_without_running():
    """A star that needs fewer GPUs than any allowed fleet costs no runs at all."""
    report = check_mission(mini(
        controls={"gpus": {"min": 2, "max": 4}},
        stars=[star("one GPU", ("slo_attainment", ">=", 0.5), ("gpus", "<=", 1))],
    ), time_budget_s=60)
    assert report.runs == 1  # the start only
    assert not report.ok


def test_runs_are_shared_between_stars():
    one = check_mission(mini(stars=[star("a", ("slo_attainment", ">=", 0.95))]), time_budget_s=120)
    two = check_mission(mini(stars=[star("a", ("slo_attainment", ">=", 0.95)), star("b", ("slo_attainment", ">=", 0.9))]), time_budget_s=120)
    assert two.runs == one.runs


def test_time_budget():
    ticks = iter(range(10_000))

    def slow_clock():  # every reading is one second later
        return float(next(ticks))

    report = check_mission(mini(), time_budget_s=3, clock=slow_clock)
    assert report.timed_out
    assert not report.ok
    assert any("longer than the 3 s budget" in p for p in report.problems)
    assert any("not found within the 3 s budget" in s.note for s in report.solutions if s.settings is None)


def test_rate_is_searched_only_for_traffic_stars():
    controls = {"gpus": {"min": 1, "max": 5}, "rate": {"min": 2, "max": 16, "step": 2}}
    slo_only = check_mission(mini(controls=controls, stars=[star("SLO", ("slo_attainment", ">=", 0.95))]), time_budget_s=120)
    assert slo_only.ok, slo_only.format()
    # At the start's 12 req/s one or two GPUs miss; the solver does not turn the traffic down.
    assert slo_only.solutions[0].settings == {"gpus": 4, "rate": 12}
    assert any("lower the request rate" in n for n in slo_only.notes)
    traffic = check_mission(mini(controls=controls, stars=[
        star("Serve 3 req/s on one GPU", ("goodput_rps", ">=", 3), ("gpus", "<=", 1)),
    ]), time_budget_s=120)
    sol = traffic.solutions[0]
    assert sol.settings == {"gpus": 1, "rate": 4}, traffic.format()
    assert sol.metrics["goodput_rps"] >= 3
    assert not traffic.notes


def test_check_accepts_a_path(tmp_path):
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(mini()), encoding="utf-8")
    report = check_mission(str(path), time_budget_s=120)
    assert report.mission.path == str(path)
    assert report.format().startswith(f"{path}: mini — Mini")


def test_coarse_grids():
    chunk = Control.from_dict("chunk_tokens", {"min": 0, "max": 4096, "step": 128}, "c")
    assert _coarse(chunk, 0, 40) == chunk.grid()  # few enough: all of them
    few = _coarse(chunk, 384, 7)
    assert 0 in few and 4096 in few and 384 in few
    assert len(few) <= 9
    assert all(v % 128 == 0 for v in few)
    assert few == sorted(set(few))
    link = Control.from_dict("link_gbytes_per_s", {"min": 1, "max": 100}, "c")  # continuous
    points = _coarse(link, 6.25, 5)
    assert points[0] == 1 and points[-1] == 100 and 6.25 in points
    assert len(points) <= 7
    # Geometric spacing over a wide range: more points at the low end.
    assert sum(1 for p in points if p < 50) > sum(1 for p in points if p >= 50)
    layout = Control.from_dict("layout", {}, "c")
    assert _coarse(layout, "colocated", 1) == ["colocated", "disaggregated"]
