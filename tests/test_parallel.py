"""lab/parallel.py: sweeps and plans give the same answer in one process, over local processes,
and on a Dask cluster (a local one the test starts: 2 worker processes of 1 thread)."""

import json

import pytest
from distributed import LocalCluster

from lab import core
from lab.cli import main
from lab.core.spec import MAX_GPUS
from lab.core.sweep import run_point, sweep, sweep_task
from lab.parallel import check_dask_address, parse_workers, run_map

SCENARIO = {
    "seed": 4,
    "workload": {"rate": 5, "duration_s": 10, "prompt_tokens": 800, "output_tokens": {"dist": "uniform", "low": 20, "high": 90}},
    "fleet": {"layout": "colocated", "gpus": 1, "chunk_tokens": 512},
    "slo": {"ttft_s": 1.0, "tpot_ms": 25},
}
PLAN_FLAGS = ["--max-gpus", "3", "--chunks", "512", "--json"]


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    return path


@pytest.fixture(scope="module")
def dask_address():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        yield cluster.scheduler_address


def cli_json(capsys, *args):
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_a_sweep_point_task_is_the_same_run():
    scenario = core.load_scenario(SCENARIO)
    here = core.summarize(core.simulate(scenario.with_changes({"workload.rate": 7})))
    assert run_point(sweep_task(scenario, "workload.rate", 7)) == here


def test_sweep_over_processes_matches_in_process():
    scenario = core.load_scenario(SCENARIO)
    alone = sweep(scenario, "workload.rate", [3, 6, 9])
    with run_map(workers=2) as map_fn:
        spread = sweep(scenario, "workload.rate", [3, 6, 9], map_fn=map_fn)
    assert spread == alone
    assert [m["requests"] for _, m in alone] != [alone[0][1]["requests"]] * 3  # the points differ


def test_sweep_and_plan_on_dask_match_local(scenario_file, capsys, dask_address):
    sweep_args = ["sweep", str(scenario_file), "--vary", "workload.rate=3:9:3", "--json"]
    local = cli_json(capsys, *sweep_args, "--workers", "1")
    assert cli_json(capsys, *sweep_args, "--dask", dask_address) == local
    plan_local = cli_json(capsys, "plan", str(scenario_file), *PLAN_FLAGS, "--workers", "1")
    plan_dask = cli_json(capsys, "plan", str(scenario_file), *PLAN_FLAGS, "--dask", dask_address)
    for data in (plan_local, plan_dask):
        data.pop("seconds"), data.pop("seconds_by_phase")
    assert plan_dask == plan_local and plan_local["winner"] is not None


def test_an_unreachable_scheduler_is_a_clear_error():
    # Port 9 (discard) on localhost: nothing listens; the client gives up after its timeout
    # (the command line's is parallel.DASK_TIMEOUT_S; a short one here keeps the test quick).
    with pytest.raises(core.LabError) as caught:
        with run_map(dask_address="tcp://127.0.0.1:9", timeout_s=1):
            pass
    assert str(caught.value).startswith("--dask: cannot reach a Dask scheduler at 'tcp://127.0.0.1:9' within 1 s")


def test_a_bad_point_in_a_worker_is_a_clear_error(scenario_file, capsys):
    # 1 GPU is fine, one over spec.MAX_GPUS is not: the error is raised in a worker process and comes back whole.
    assert main(["sweep", str(scenario_file), "--vary", f"fleet.gpus=1,{MAX_GPUS + 1}", "--workers", "2"]) == 2
    assert capsys.readouterr().err.startswith("error: fleet.gpus: ")


@pytest.mark.parametrize("text", ["0", "-1", "2.5", "x", "100000"])
def test_workers_must_be_a_whole_number_in_range(text):
    with pytest.raises(core.LabError, match="--workers"):
        parse_workers(text)


@pytest.mark.parametrize("text", ["", "tcp://", "http ://x", "a b:1"])
def test_dask_address_is_checked_before_connecting(text):
    with pytest.raises(core.LabError, match="--dask"):
        check_dask_address(text)
