"""`lab plan`: the search's pure parts (sizing, levels, Pareto), its end-to-end answer, and its flags."""

import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lab import core
from lab.cli import main
from lab.core.cost import PoolCost
from lab.core.spec import MAX_GPUS
from lab.parallel import run_map
from lab.plan import Constraints, Config, Candidate, configs, levels, lower_bounds, pareto_front, plan, workload_load
from lab.plan import evaluate as E
from lab.plan.sizing import instance_throughput
from lab.plan.space import parse_number_list

# Small enough to plan in a few seconds on two cores: 20 s at 6 req/s, 1,000-token prompts.
SCENARIO = {
    "seed": 2,
    "workload": {"rate": 6, "duration_s": 20, "prompt_tokens": 1000,
                 "output_tokens": {"dist": "uniform", "low": 40, "high": 160}},
    "fleet": {"layout": "colocated", "gpus": 1},
    "slo": {"ttft_s": 1.0, "tpot_ms": 25},
}
SMALL = Constraints(max_gpus=4, chunks=(512,))


@pytest.fixture
def scenario():
    return core.load_scenario(SCENARIO)


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    return path


def attainment(scenario, changes):
    return core.summarize(core.simulate(scenario.with_changes(changes)))["slo_attainment"]


# ---------------------------------------------------------------- sizing

def test_load_counts_the_workloads_own_tokens(scenario):
    load = workload_load(scenario)
    reqs = core.generate_requests(scenario.workload, scenario.seed)
    assert load.requests == len(reqs)
    assert load.prompt_tps == pytest.approx(1000 * len(reqs) / 20)
    assert load.output_tps == pytest.approx(sum(r[2] for r in reqs) / 20)


def test_decode_throughput_is_the_largest_batch_within_the_per_token_target(scenario):
    load = workload_load(scenario)
    _, decode = instance_throughput(scenario, "h100", 1, load)
    step = PoolCost(scenario.model).step_s
    context = load.mean_prompt + load.mean_output / 2
    # decode = seqs / step(seqs): recover seqs and check it is the largest batch within 25 ms.
    seqs = next(b for b in range(1, 257) if math.isclose(b / step(b, round(b * context), 0), decode))
    assert step(seqs, round(seqs * context), 0) <= 0.025 < step(seqs + 1, round((seqs + 1) * context), 0)


def test_bounds_grow_with_the_rate_and_split_by_the_pools_loads(scenario):
    split = Config("disaggregated", prefill_gpu="h100", decode_gpu="h100", link=50.0)
    low = lower_bounds(split, scenario, workload_load(scenario))
    busy = scenario.with_changes({"workload.rate": 24})
    high = lower_bounds(split, busy, workload_load(busy))
    assert high.loads[0] == pytest.approx(4 * low.loads[0], rel=0.15)  # prompt tokens/s ~ rate
    assert all(h >= lo for h, lo in zip(high.instances, low.instances))
    colo = lower_bounds(Config("colocated", gpu="h100", chunk=512), busy, workload_load(busy))
    assert colo.loads[0] == pytest.approx(sum(high.loads))  # one instance does both


def test_a_fleet_below_the_bound_misses_the_target(scenario):
    """The bound is a lower bound: one instance fewer than it (when it asks for 2 or more) cannot keep up."""
    busy = scenario.with_changes({"workload.rate": 30})
    bounds = lower_bounds(Config("colocated", gpu="h100", chunk=512), busy, workload_load(busy))
    n = bounds.instances[0]
    assert n >= 2
    assert attainment(busy, {"fleet.gpus": n - 1, "fleet.chunk_tokens": 512}) < 0.9


# ---------------------------------------------------------------- the search space

def test_colocated_levels_walk_up_from_the_bound_to_max_gpus(scenario):
    config = Config("colocated", gpu="h100", tp=2, chunk=512)
    bounds = lower_bounds(config, scenario, workload_load(scenario))
    sizes = [level[0].gpus for level in levels(config, bounds, 8)]
    assert sizes == list(range(bounds.instances[0] * 2, 9, 2))


def test_split_levels_stay_near_the_load_ratio_and_within_bounds(scenario):
    config = Config("disaggregated", prefill_gpu="h100", decode_gpu="h100", link=50.0)
    bounds = lower_bounds(config, scenario, workload_load(scenario))
    seen = list(levels(config, bounds, 10))
    assert seen, "at least the bound's own level"
    totals = [sum(level[0].instances) for level in seen]
    assert totals == list(range(sum(bounds.instances), sum(bounds.instances) + len(seen)))
    for level in seen:
        assert 1 <= len(level) <= 3
        for cand in level:
            p, d = cand.instances
            assert p >= bounds.instances[0] and d >= bounds.instances[1] and cand.gpus <= 10


def test_configs_follow_the_constraints(scenario):
    got = configs(scenario, Constraints(gpu_types=("h100", "a100"), chunks=(0, 512), max_gpus=8))
    colo = [c for c in got if c.layout == "colocated"]
    split = [c for c in got if c.layout == "disaggregated"]
    assert {(c.gpu, c.chunk) for c in colo} == {("h100", 0), ("h100", 512), ("a100", 0), ("a100", 512)}
    assert {(c.prefill_gpu, c.decode_gpu) for c in split} == {(a, b) for a in ("h100", "a100") for b in ("h100", "a100")}


def test_a_70b_model_gets_the_smallest_tp_that_fits_and_can_meet_the_tpot(scenario):
    big = scenario.with_changes({"model.llm": "llama3-70b", "model.cost": "roofline", "fleet.tp": 2, "fleet.gpus": 2})
    got = configs(big, Constraints(layouts=("colocated",), chunks=(512,)))
    assert [c.tp for c in got] == [2]  # its weights do not fit one H100; two read them in 21 ms < 25 ms
    strict = big.with_changes({"slo.tpot_ms": 20})
    assert [c.tp for c in configs(strict, Constraints(layouts=("colocated",), chunks=(512,)))] == [4]
    with pytest.raises(core.LabError, match="--tp"):
        configs(big, Constraints(layouts=("colocated",), chunks=(512,), tps=(1,)))


def test_a_candidates_changes_build_its_fleet(scenario):
    cand = Candidate(Config("disaggregated", prefill_gpu="h100", decode_gpu="a100", decode_tp=2, link=25.0), (1, 2))
    built = scenario.with_changes(cand.changes())
    assert (built.fleet.prefill_gpus, built.fleet.decode_gpus, built.fleet.decode_tp) == (1, 4, 2)
    assert built.fleet.link.gbytes_per_s == 25.0 and cand.gpus == 5
    assert cand.usd_per_hour(scenario.model) == pytest.approx(2.50 + 4 * 1.30)


# ---------------------------------------------------------------- Pareto

def row(cost, goodput, met):
    return {"usd_per_hour": cost, "goodput_rps_per_gpu": goodput, "slo_attainment": met}


def test_pareto_front_keeps_only_undominated_rows():
    rows = [row(5, 1.0, 0.5), row(5, 0.9, 0.4), row(7.5, 1.2, 0.95), row(10, 1.1, 0.99), row(10, 1.0, 0.9)]
    front = pareto_front(rows)
    assert front == [rows[0], rows[2], rows[3]]  # row 1 is beaten by row 0; row 4 by row 3


# ---------------------------------------------------------------- variants

def test_long_traces_are_screened_on_windows_and_short_ones_whole(tmp_path):
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t * 0.5},{300 + t % 7},{20 + t % 5}" for t in range(4000)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    long = core.load_scenario({"workload": {"trace": {"path": "t.csv"}}, "fleet": {"layout": "colocated", "gpus": 1}},
                              base_dir=str(tmp_path))
    windows = E.screen_variants(long, workload_load(long))
    assert len(windows) == E.SCREEN_WINDOWS
    starts = [w["workload.trace.start_s"] for w in windows]
    assert starts[0] == 0 and starts[-1] + E.SCREEN_S == pytest.approx(1999.5) and starts == sorted(starts)
    short = long.with_changes({"workload.trace.duration_s": 300})
    assert E.screen_variants(short, workload_load(short)) == [{}]
    # A trace's arrivals do not depend on the seed: its robustness varies the rate only.
    assert [c for _, c in E.robustness_variants(long)] == [{"workload.trace.time_scale": 1 / 0.8},
                                                          {"workload.trace.time_scale": 1 / 1.2}]


def test_screening_leaves_out_a_window_of_a_quiet_gap(tmp_path):
    # Busy for 500 s, silent until 1,500 s, busy to 2,000 s: windows that start in the gap hold nothing.
    times = [t * 0.5 for t in range(1000)] + [1500 + t * 0.5 for t in range(1000)]
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t},{300},{20}" for t in times]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    gappy = core.load_scenario({"workload": {"trace": {"path": "t.csv"}}, "fleet": {"layout": "colocated", "gpus": 1}},
                               base_dir=str(tmp_path))
    windows = E.screen_variants(gappy, workload_load(gappy))
    starts = [w["workload.trace.start_s"] for w in windows]
    step = (1999.5 - E.SCREEN_S) / (E.SCREEN_WINDOWS - 1)
    every = [i * step for i in range(E.SCREEN_WINDOWS)]
    busy = [s for s in every if s < 500 or s + E.SCREEN_S > 1500]
    assert starts == pytest.approx(busy) and len(starts) < E.SCREEN_WINDOWS
    for w in windows:  # each window left is a run the spec and the workload accept
        assert core.generate_requests(gappy.with_changes(w).workload, 0)


def test_robustness_of_a_generated_workload_varies_seeds_and_rates(scenario):
    variants = dict(E.robustness_variants(scenario))
    assert [variants[f"seed {s}"] for s in (3, 4, 5, 6)] == [{"seed": s} for s in (3, 4, 5, 6)]
    assert variants["rate x0.8"]["workload.rate"] == pytest.approx(4.8)
    assert variants["rate x1.2"]["workload.rate"] == pytest.approx(7.2)


# ---------------------------------------------------------------- the plan end to end

def test_the_winner_is_the_cheapest_fleet_meeting_the_target(scenario):
    result = plan(scenario, SMALL)
    w = result.winner
    assert w is not None and w["slo_attainment"] >= 0.9
    # Its figures are a direct run's, its price the run's own.
    direct = core.summarize(core.simulate(scenario.with_changes(w["changes"])))
    assert (direct["slo_attainment"], direct["usd_per_hour"]) == (w["slo_attainment"], pytest.approx(w["usd_per_hour"]))
    # No evaluated fleet at most as costly met the target on the whole workload unless it costs more GPUs.
    cheaper = [r for r in result.rows if (r["usd_per_hour"], r["gpus"]) < (w["usd_per_hour"], w["gpus"])]
    assert all(r["slo_attainment"] < 0.9 for r in cheaper)
    assert w["fleet"] in {r["fleet"] for r in result.pareto}
    rob = result.robustness
    assert len(rob["runs"]) == 7 and rob["min"] <= rob["median"] <= max(r["slo_attainment"] for r in rob["runs"])


def test_a_budget_below_every_fleet_finds_no_winner(scenario):
    result = plan(scenario, Constraints(max_gpus=4, chunks=(512,), budget_usd_per_hour=2.0))
    assert result.winner is None and result.rows == []


def test_results_are_identical_whatever_the_workers(scenario):
    alone = plan(scenario, SMALL)
    with run_map(workers=2) as map_fn:
        spread = plan(scenario, SMALL, map_fn=map_fn)
    assert json.dumps([alone.rows, alone.winner, alone.robustness, alone.pareto]) == \
        json.dumps([spread.rows, spread.winner, spread.robustness, spread.pareto])


def test_plan_json_on_stdout_and_progress_on_stderr(scenario_file, capsys):
    code = main(["plan", str(scenario_file), "--max-gpus", "4", "--chunks", "512", "--workers", "1", "--json", "--progress"])
    out, err = capsys.readouterr()
    assert code == 0
    data = json.loads(out)
    assert data["winner"]["slo_attainment"] >= 0.9 and data["target"] == 0.9
    assert "screening fleets" in err and "robustness" in err


def test_plan_writes_the_winner_for_lab_run(scenario_file, tmp_path, capsys):
    out = tmp_path / "winner.json"
    assert main(["plan", str(scenario_file), "--max-gpus", "4", "--chunks", "512", "--workers", "1", "--json",
                 "--write-scenario", str(out)]) == 0
    winner = json.loads(capsys.readouterr().out)["winner"]
    assert main(["run", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slo_attainment"] == winner["slo_attainment"]


def test_plan_replays_a_trace_with_the_default_slo(tmp_path, capsys):
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t * 0.25},{400 + 37 * (t % 9)},{30 + t % 11}" for t in range(80)]
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    assert main(["plan", str(tmp_path / "trace.csv"), "--max-gpus", "3", "--chunks", "512", "--layouts", "colocated",
                 "--workers", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["slo"] == {"ttft_s": 1.0, "tpot_ms": 20.0} and data["workload"]["requests"] == 80
    assert data["robustness"]["note"].startswith("a trace replays")
    # A trace names no model: the plan runs Llama-3-8B on H100s on the calibrated step times,
    # and says how far those are from the calibration table's measurements.
    model = data["model"]
    assert (model["cost"], model["llm"], model["gpu"], model["stack"]) == ("calibrated", "llama3-8b", "h100", "optimized")
    assert 0 < model["expected_error"] <= 0.2 and model["calibration_rows"] >= 1
    assert model["note"].startswith("calibrated step times (optimized stack), llama3-8b on H100, BF16: within ")


def test_the_plan_text_names_its_model(scenario_file, tmp_path, capsys):
    assert main(["plan", str(scenario_file), "--max-gpus", "2", "--chunks", "512", "--workers", "1"]) in (0, 1)
    assert "\n  model: the lab's illustrative linear constants, not a real GPU" in capsys.readouterr().out
    assert main(["plan", str(scenario_file), "--max-gpus", "2", "--chunks", "512", "--workers", "1",
                 "--set", "model.cost=roofline"]) in (0, 1)
    assert "\n  model: the textbook roofline, llama3-8b on H100" in capsys.readouterr().out


def test_a_trace_plans_winner_runs_from_the_written_scenario(tmp_path, capsys):
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t * 0.2},{600 + 41 * (t % 7)},{25 + t % 13}" for t in range(100)]
    (tmp_path / "trace.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "winner.json"
    assert main(["plan", str(tmp_path / "trace.csv"), "--max-gpus", "3", "--chunks", "256", "--workers", "1",
                 "--json", "--write-scenario", str(out)]) == 0
    winner = json.loads(capsys.readouterr().out)["winner"]
    assert json.loads(out.read_text())["workload"]["trace"]["path"] == "trace.csv"  # beside OUT: relative
    assert main(["run", str(out), "--json"]) == 0  # from the repository's folder, not the trace's
    assert json.loads(capsys.readouterr().out)["slo_attainment"] == winner["slo_attainment"]


def test_a_written_winner_whose_trace_lies_elsewhere_says_where_to_run_it(tmp_path, monkeypatch, capsys):
    """OUT in one folder, the trace in another, the working directory a third: `lab run OUT`
    would refuse the trace there (Trace files), so the plan prints the command that runs it."""
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t * 0.2},{600 + 41 * (t % 7)},{25 + t % 13}" for t in range(100)]
    traces, outs, elsewhere = (tmp_path / name for name in ("traces", "out dir", "elsewhere"))
    for folder in (traces, outs, elsewhere):
        folder.mkdir()
    (traces / "trace.csv").write_text("\n".join(lines) + "\n")
    out = outs / "winner.json"
    monkeypatch.chdir(elsewhere)
    assert main(["plan", str(traces / "trace.csv"), "--max-gpus", "3", "--chunks", "256", "--workers", "1",
                 "--json", "--write-scenario", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    command = data["winner_scenario"]["run"]
    assert command == f"cd {shlex.quote(str(traces))} && python -m lab run {shlex.quote(str(out))}"
    assert f"'{out}'" in command  # (the space in OUT's folder, quoted)
    assert main(["run", str(out), "--json"]) == 2  # from here: the trace is outside its roots
    assert "workload.trace.path" in capsys.readouterr().err
    monkeypatch.chdir(traces)  # as the command says
    assert main(["run", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["slo_attainment"] == data["winner"]["slo_attainment"]
    monkeypatch.chdir(elsewhere)  # the text form prints the same command
    assert main(["plan", str(traces / "trace.csv"), "--max-gpus", "3", "--chunks", "256", "--workers", "1",
                 "--write-scenario", str(out)]) == 0
    assert f"wrote its scenario to {out}: {command}" in capsys.readouterr().out


@pytest.mark.parametrize("flags, field", [
    (["--max-gpus", "0"], "--max-gpus"),
    (["--max-gpus", str(MAX_GPUS + 1)], "--max-gpus"),
    (["--max-gpus", "two"], "--max-gpus"),
    (["--target", "1.5"], "--target"),
    (["--target", "nan"], "--target"),
    (["--gpu-types", "b200"], "--gpu-types"),
    (["--layouts", "mixed"], "--layouts"),
    (["--tp", "3"], "--tp"),
    (["--chunks", "8"], "--chunks"),
    (["--links", "0"], "--links"),
    (["--budget", "-1"], "--budget"),
    (["--ttft-s", "0"], "--ttft-s"),
    (["--workers", "0"], "--workers"),
    (["--workers", "2", "--dask", "tcp://127.0.0.1:8786"], "--workers"),
    (["--dask", "not an address!"], "--dask"),
])
def test_bad_flags_name_themselves(scenario_file, capsys, flags, field):
    assert main(["plan", str(scenario_file), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}: ")


def test_parse_number_list_takes_zero_only_where_allowed():
    assert parse_number_list("0,512,512", "--chunks", 16, 10**6, zero_ok=True) == (0, 512)
    with pytest.raises(core.LabError, match="--links"):
        parse_number_list("0", "--links", 0.001, 10**4, whole=False)


def test_confirm_steps_up_when_the_whole_trace_undoes_a_screened_pass(tmp_path):
    """The search's phases over a stand-in map: the windows pass 2 GPUs, the whole trace needs 3."""
    lines = ["arrival_s,prompt_tokens,output_tokens"] + [f"{t * 0.5},{300 + t % 7},{20 + t % 5}" for t in range(4000)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    long = core.load_scenario({"workload": {"trace": {"path": "t.csv"}}, "fleet": {"layout": "colocated", "gpus": 1},
                               "slo": {"ttft_s": 1, "tpot_ms": 20}}, base_dir=str(tmp_path))
    calls = []

    def fake_map(fn, tasks):
        assert fn is E.run_task
        for _, _, _, changes in tasks:
            gpus = changes["fleet.gpus"]
            if "workload.trace.time_scale" in changes:
                met = 0.93  # robustness runs
            elif "workload.trace.start_s" in changes:
                met = 1.0 if gpus >= 2 else 0.5  # a screening window
            else:
                met = 1.0 if gpus >= 3 else 0.6  # the whole trace
            calls.append((gpus, "workload.trace.start_s" in changes))
            yield {k: None for k in E.KEPT_METRICS} | {"requests": 100, "unfinished": 0, "slo_attainment": met,
                                                      "goodput_rps": met, "goodput_rps_per_gpu": met / gpus}

    result = plan(long, Constraints(max_gpus=6, layouts=("colocated",), chunks=(512,)), map_fn=fake_map)
    assert result.winner["gpus"] == 3 and result.winner["measured"] == "full"
    by_gpus = {r["gpus"]: r for r in result.rows}
    assert by_gpus[2]["measured"] == "full" and by_gpus[2]["slo_attainment"] == 0.6
    assert by_gpus[1]["measured"] == "screen"
    assert result.robustness["min"] == 0.93 and result.robustness["median"] == pytest.approx(0.93)
    assert (4, True) not in calls  # 1 and 2 were screened; the walk stopped at its first pass


# ---------------------------------------------------------------- plan files are validated like lab run's (issue 35)

@pytest.mark.parametrize("text, says", [
    ("[1]", "x.json: expected a scenario or mission object, got a list"),
    ('"abc"', "x.json: expected a scenario or mission object, got 'abc'"),
    ("5", "x.json: expected a scenario or mission object, got 5"),
    ('{"slo": 5, "workload": {"rate": 1}, "fleet": {"layout": "colocated", "gpus": 1}}', "slo: expected an object, got 5"),
    ('{"scenario": 5}', "scenario: expected an object, got 5"),
    ('{"scenario": {"slo": [1], "fleet": {"layout": "colocated", "gpus": 1}}}', "scenario.slo: expected an object, got a list"),
])
def test_a_plan_file_that_is_no_scenario_is_named(tmp_path, capsys, text, says):
    (tmp_path / "x.json").write_text(text)
    assert main(["plan", str(tmp_path / "x.json"), "--ttft-s", "1", "--workers", "1"]) == 2  # was a traceback
    assert capsys.readouterr().err == f"error: {says}\n"


def test_a_plan_file_holding_a_path_is_not_read_as_one(tmp_path):
    # The JSON string names a FIFO: read as a path, the plan would block on it forever.
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "x.json").write_text(json.dumps(str(tmp_path / "fifo")))
    proc = subprocess.run([sys.executable, "-m", "lab", "plan", str(tmp_path / "x.json")],
                          capture_output=True, text=True, timeout=30,
                          cwd=Path(__file__).resolve().parent.parent)
    assert proc.returncode == 2 and proc.stderr.startswith("error: x.json: expected a scenario or mission object, got '")
