"""`python -m lab run | sweep`: what an instructor types, and what they get back."""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab import core
from lab.cli import main
from lab.core import engine
from lab.core.metrics import METRIC_NAMES, RUN_NAMES
from mini_missions import good_mini, mini

REPO = Path(__file__).resolve().parent.parent

SCENARIO = {
    "seed": 3,
    "workload": {"rate": 6, "duration_s": 10, "prompt_tokens": 1500, "output_tokens": {"dist": "mix", "components": [
        {"weight": 1, "length": 1}, {"weight": 3, "length": {"dist": "uniform", "low": 2, "high": 120}}]}},
    "fleet": {"layout": "colocated", "gpus": 2},
    "slo": {"ttft_s": 1.5, "tpot_ms": 25},
}


@pytest.fixture
def scenario_file(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(SCENARIO))
    return path


def run_json(capsys, *args):
    assert main(["run", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_run_json_has_exactly_the_design_metric_names(scenario_file, capsys):
    metrics = run_json(capsys, str(scenario_file))
    assert list(metrics) == list(METRIC_NAMES) + list(RUN_NAMES) + list(core.BLAME_NAMES)
    assert metrics["run_cut"] is None and metrics["unfinished"] == 0
    result = core.simulate(core.load_scenario(SCENARIO))
    expected = {**core.summarize(result), **core.blame_summary(core.request_blame(result))}
    assert metrics == json.loads(json.dumps(expected))


def test_run_set_overrides_change_the_fleet(scenario_file, capsys):
    split = run_json(capsys, str(scenario_file), "--set", "fleet.layout=disaggregated",
                     "--set", "fleet.prefill_gpus=1", "--set", "fleet.decode_gpus=3")
    assert (split["gpus"], split["prefill_gpus"], split["decode_gpus"]) == (4, 1, 3)
    assert split["transfer_p50_ms"] is not None
    chunked = run_json(capsys, str(scenario_file), "--set", "fleet.chunk_tokens=256")
    whole = run_json(capsys, str(scenario_file))
    # Chunking 1,500-token prompts into 256-token slices shortens the worst stall.
    assert chunked["worst_gap_p99_ms"] < whole["worst_gap_p99_ms"]


def test_run_requests_csv_has_one_row_per_request(scenario_file, tmp_path, capsys):
    out = tmp_path / "requests.csv"
    assert main(["run", str(scenario_file), "--requests-csv", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    result = core.simulate(core.load_scenario(SCENARIO))
    assert len(rows) == len(result.requests)
    assert [int(r["id"]) for r in rows] == list(range(len(rows)))
    one_token = [r for r in rows if r["output_tokens"] == "1"]
    assert one_token and all(r["tpot_ms"] == "" for r in one_token)
    for row, rec in zip(rows, result.requests):
        assert float(row["arrival_s"]) == rec.arrival
        assert row["met_slo"] in ("True", "False")
        assert row["run_cut"] == ""  # the run ended by itself
    table = capsys.readouterr().out
    assert "Time to first token" in table and "p99" in table


# One GPU, 2,000-token prompts at 20 req/s for 2 s: hopelessly overloaded, so the drain
# cap (0.5 s after arrivals end) cuts it.
OVERLOADED = {"workload": {"rate": 20, "duration_s": 2, "prompt_tokens": 2000, "output_tokens": 200},
              "fleet": {"layout": "colocated", "gpus": 1}, "drain_s": 0.5}


@pytest.mark.parametrize("bound", ["drain_s", "max_steps"])
def test_a_cut_run_says_so_in_every_output(bound, tmp_path, capsys, monkeypatch):
    path = tmp_path / "overloaded.json"
    raw = dict(OVERLOADED)
    if bound == "max_steps":
        monkeypatch.setattr(engine, "MAX_STEPS", 5)  # the engine reads it at run time; 36,000,000 in earnest
        raw["drain_s"] = 600
    path.write_text(json.dumps(raw))
    out = tmp_path / "requests.csv"
    metrics = run_json(capsys, str(path), "--requests-csv", str(out))
    assert metrics["run_cut"] == bound and metrics["unfinished"] > 0
    if bound == "drain_s":
        assert metrics["run_end_s"] == 2.5
    else:
        assert 0 < metrics["run_end_s"] < 2.0  # 5 steps: before arrivals end
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == metrics["requests"]
    assert {r["run_cut"] for r in rows} == {bound}
    assert sum(1 for r in rows if r["finish_s"] == "") == metrics["unfinished"]
    # the table keeps its note, with the unfinished count
    assert main(["run", str(path)]) == 0
    table = capsys.readouterr().out
    assert "note:" in table and f"{metrics['unfinished']} requests unfinished" in table
    assert ("5 GPU steps" in table) == (bound == "max_steps")


def test_bad_override_is_named_with_its_value(scenario_file, capsys):
    assert main(["run", str(scenario_file), "--set", "fleet.gpus=abc"]) == 2
    assert "fleet.gpus: expected a whole number, got 'abc'" in capsys.readouterr().err
    assert main(["run", str(scenario_file), "--set", "fleet.gpu=3"]) == 2
    assert "did you mean 'gpus'" in capsys.readouterr().err
    assert main(["run", str(scenario_file), "--set", "nonsense"]) == 2
    assert "not of the form dotted.path=value" in capsys.readouterr().err


def test_a_scenario_with_mistakes_in_two_parts_names_both_one_a_line(scenario_file, tmp_path, capsys):
    data = json.loads(scenario_file.read_text())
    data["workload"]["rate"] = -1
    data.setdefault("slo", {})["ttft_s"] = "soon"
    bad = tmp_path / "two.json"
    bad.write_text(json.dumps(data))
    assert main(["run", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: 2 mistakes:",
        "  workload.rate: -1 is out of range: must be at least 0 and at most 10,000",
        "  slo.ttft_s: expected a number, got 'soon'"]


def test_malformed_and_missing_files_are_reported(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"workload": {\n  "rate": 3,\n}')
    assert main(["run", str(bad)]) == 2
    assert "bad.json: line 3, column 1: malformed JSON" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.json")]) == 2
    assert "cannot read file" in capsys.readouterr().err


def test_sweep_reports_each_rate_and_the_goodput_rate(scenario_file, capsys):
    assert main(["sweep", str(scenario_file), "--vary", "workload.rate=2:14:4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["value"] for p in out["points"]] == [2, 6, 10, 14]
    attainment = [p["metrics"]["slo_attainment"] for p in out["points"]]
    best = out["max_rate_meeting_slo"]
    assert best is not None
    # The goodput rate sits at or above the last swept rate that passed and below the first that failed.
    passing = [p["value"] for p in out["points"] if p["metrics"]["slo_attainment"] >= 0.9]
    failing = [p["value"] for p in out["points"] if p["metrics"]["slo_attainment"] < 0.9 and p["value"] > max(passing)]
    assert max(passing) <= best and (not failing or best < min(failing)), attainment
    assert out["max_rate_meeting_slo_per_gpu"] == best / 2
    at_best = core.summarize(core.simulate(core.load_scenario(SCENARIO, [f"workload.rate={best}"])))
    assert at_best["slo_attainment"] >= 0.9


def test_sweep_rejects_bad_ranges(scenario_file, capsys):
    assert main(["sweep", str(scenario_file), "--vary", "workload.rate=5:1:1"]) == 2
    assert "stop 1 is below start 5" in capsys.readouterr().err
    assert main(["sweep", str(scenario_file), "--vary", "workload.rate=0:1000:0.001"]) == 2
    assert "at most 200" in capsys.readouterr().err
    assert main(["sweep", str(scenario_file), "--vary", "fleet.gpus=1,x"]) == 2
    assert "--vary" in capsys.readouterr().err
    for bad in ("workload.rate=1:1e999:1", "workload.rate=nan:2:1", "workload.rate=1,1e400"):
        assert main(["sweep", str(scenario_file), "--vary", bad]) == 2  # was OverflowError / ValueError
        assert "finite number" in capsys.readouterr().err


def test_module_entry_point_runs_as_a_subprocess(scenario_file):
    proc = subprocess.run([sys.executable, "-m", "lab", "run", str(scenario_file), "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requests"] > 0


# ---------------------------------------------------------------- errors, not tracebacks (issue 8)

@pytest.mark.parametrize("override,fragment", [
    ("fleet.gpus=1" + "0" * 5000, "fleet.gpus: 10000000...00000 (a 5,001-character number) is too large"),
    ("fleet.gpus=1" + "0" * 400, "fleet.gpus: "),
    ("workload.rate=1e999", "workload.rate: 1e999 is too large"),
    ("fleet.chunk_tokens=false", "fleet.chunk_tokens: expected a whole number, got false"),
])
def test_hostile_overrides_are_errors_not_tracebacks(scenario_file, capsys, override, fragment):
    assert main(["run", str(scenario_file), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and fragment in err and "Traceback" not in err


def test_run_header_describes_this_scenario(tmp_path, capsys):
    raw = json.loads(json.dumps(SCENARIO))
    raw["workload"]["prompt_tokens"] = 6000
    raw["workload"]["rate"] = 2
    path = tmp_path / "long.json"
    path.write_text(json.dumps(raw))
    assert main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    header = out.split("\n")[:3]
    assert "prefill 6,000 tokens" in header[2] and "2,000" not in header[2]
    assert "Poisson 2 req/s" in header[1] and "prompts mean 6,000 tokens" in header[1]


def write_mission(folder, name, mutate=None):
    data = good_mini()  # passes every rule of `lab check` and solves in about a second
    data["id"] = "book-store"
    if mutate:
        mutate(data)
    (folder / name).write_text(json.dumps(data), encoding="utf-8")


def test_check_reports_every_file_and_duplicate_ids(tmp_path, capsys):
    write_mission(tmp_path, "a-first.json")
    (tmp_path / "b-broken.json").write_text('{"id": ', encoding="utf-8")
    write_mission(tmp_path, "c-same-id.json", lambda d: d.update(order=8))
    (tmp_path / "d-latin1.json").write_bytes(b'{"id": "caf\xe9"}')
    write_mission(tmp_path, "e-fine.json", lambda d: d.update(id="another", order=9))
    assert main(["check", str(tmp_path), "--time-budget", "60"]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {tmp_path / 'b-broken.json'}" in out and "malformed JSON" in out
    assert f"FAIL {tmp_path / 'c-same-id.json'}" in out
    assert f"'book-store' is also the id of {tmp_path / 'a-first.json'}" in out
    assert f"FAIL {tmp_path / 'd-latin1.json'}" in out and "not UTF-8" in out
    # The good files after the bad ones were checked too.
    assert f"{tmp_path / 'a-first.json'}: book-store" in out and f"{tmp_path / 'e-fine.json'}: another" in out
    assert "2 of 5 missions OK" in out
    assert main(["check", str(tmp_path / "b-broken.json"), str(tmp_path / "c-same-id.json"), "--json"]) == 1
    reports = json.loads(capsys.readouterr().out)
    assert [r["ok"] for r in reports] == [False, True]  # alone, the copy is fine


def test_check_names_every_mistake_of_a_file_in_one_run(tmp_path, capsys):
    """Nine mistakes in nine parts of one file: one `lab check` names all nine, one a line,
    in the file's order (it used to stop at the first: nine runs to fix nine mistakes; the
    scenario's parts, workload, fleet and SLO, each count)."""
    def spoil(d):
        d.update(id="My Mission", summary="one\ntwo", colour="blue")
        d["scenario"]["workload"]["duration_s"] = -1
        d["scenario"]["fleet"]["gpus"] = -3
        d["scenario"]["slo"]["tpot_ms"] = "fast"
        d["controls"]["gpus"]["max"] = "many"
        d["stars"][0]["when"][0]["metric"] = "latency"
        d["stars"][1]["when"][0]["op"] = "=>"

    write_mission(tmp_path, "spoilt.json", spoil)
    assert main(["check", str(tmp_path / "spoilt.json")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"FAIL {tmp_path / 'spoilt.json'}"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "colour", "id", "summary", "scenario.workload.duration_s", "scenario.fleet.gpus", "scenario.slo.tpot_ms",
        "controls.gpus.max", "stars[0].when[0].metric", "stars[1].when[0].op"]
    assert main(["check", str(tmp_path / "spoilt.json"), "--json"]) == 1
    (report,) = json.loads(capsys.readouterr().out)
    assert len(report["problems"]) == 9 and report["problems"][6] == "controls.gpus.max: expected a whole number, got 'many'"


def test_check_names_at_most_twenty_mistakes_and_counts_the_rest(tmp_path, capsys):
    from lab.core.missions import CONTROL_SPECS, MAX_MISTAKES

    names = list(CONTROL_SPECS)[:MAX_MISTAKES + 5]
    write_mission(tmp_path, "many.json", lambda d: d.update(controls={n: {"nonsense": 1} for n in names}))
    assert main(["check", str(tmp_path / "many.json")]) == 1
    lines = capsys.readouterr().out.splitlines()[1:]
    assert len(lines) == MAX_MISTAKES + 1 and all(line.startswith("  controls.") for line in lines[:MAX_MISTAKES])
    assert lines[-1] == f"  and {len(names) - MAX_MISTAKES} more (the first {MAX_MISTAKES} are above)"


def test_check_seeds_rules_and_margins_in_text_and_json(tmp_path, capsys):
    write_mission(tmp_path, "good.json")
    # Both stars share one fix, and the last one is a single move away (a 2 + 1 split is two: split, add).
    (tmp_path / "bad.json").write_text(json.dumps(dict(mini(), id="bad")), encoding="utf-8")
    assert main(["check", str(tmp_path / "good.json"), "--seeds", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("seeds: earned in 3 of 3 seeds (seeds 3-5); the start fails it in all 3") == 3
    assert "margin (worst seed): slo_attainment " in out and "worst_gap_p99_ms " in out and "vs <= 20: +" in out
    assert main(["check", str(tmp_path / "bad.json")]) == 1
    out = capsys.readouterr().out
    assert "problem: star 2's cheapest fix is star 1's (layout=disaggregated, prefill_gpus=2, decode_gpus=1)" in out
    assert "seeds: earned in 5 of 5 seeds (seeds 3-7)" in out and out.rstrip().splitlines()[-1].startswith("  problem: ")
    assert main(["check", str(tmp_path / "good.json"), "--seeds", "2", "--json"]) == 0
    (report,) = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["seeds"] == [3, 4]
    assert [s["seeds_earned"] for s in report["stars"]] == [2, 2, 2]
    margins = report["stars"][0]["margins"]
    assert margins[0]["predicate"] == "slo_attainment >= 0.95" and margins[0]["margin"] == margins[0]["value"] - 0.95
    assert report["stars"][0]["debrief"] == "Why this fix works."


@pytest.mark.parametrize("bad", ["0", "101", "abc", "2.5", "-1", "", "9" * 40])
def test_check_rejects_a_bad_seed_count(tmp_path, bad, capsys):
    write_mission(tmp_path, "good.json")
    assert main(["check", str(tmp_path / "good.json"), "--seeds", bad]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --seeds: expected a whole number from 1 to 100, got ") and "Traceback" not in err
    assert len(err) < 120


def test_serve_on_a_busy_port_is_an_error_not_a_traceback(capsys):
    pytest.importorskip("panel")
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--port", str(port), "--no-show"]) == 2
    err = capsys.readouterr().err
    assert f"error: --port: port {port} is in use" in err and "Traceback" not in err


def test_serve_stopped_by_sigterm_exits_cleanly_and_stops_its_workers():
    """A service manager's `kill` (SIGTERM) ends `lab serve` as Ctrl+C does: its `finally` runs,
    so the worker pools are stopped (offload.stop_pool), and it exits 0 (it used to die at once,
    leaving its workers to finish runs nobody waited for)."""
    pytest.importorskip("panel")
    import os
    import signal
    import time
    import urllib.request

    from static_server import free_port

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "lab", "serve", "--port", str(port), "--no-show", "--workers", "1"],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        while not proc.stdout.readline().startswith("Split the Fleet: http://"):  # (after the missions' line)
            assert proc.poll() is None, "lab serve ended before it served"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as resp:
            assert resp.status == 200
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        # At once: a handler that waited for the loop's next wake-up took 14 s (the test
        # servers' teardown, 50 s in one CI run).
        assert time.monotonic() - sent < 5
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert "Traceback" not in out


def test_overrides_on_a_non_object_and_an_unwritable_csv_are_errors(tmp_path, scenario_file, capsys):
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    assert main(["run", str(listed), "--set", "fleet.gpus=2"]) == 2  # was TypeError
    assert "error: expected a scenario object to apply --set to, got a list" in capsys.readouterr().err
    assert main(["run", str(scenario_file), "--requests-csv", str(tmp_path / "no-such-dir" / "r.csv")]) == 2
    assert "error: --requests-csv: cannot write" in capsys.readouterr().err


# ---------------------------------------------------------------- numeric flags are range-checked (issue 35)

@pytest.mark.parametrize("value", ["nan", "inf", "-5", "2", "0", "1e999", "x"])
def test_sweep_target_is_a_fraction_above_0_and_at_most_1(scenario_file, capsys, value):
    assert main(["sweep", str(scenario_file), "--vary", "workload.rate=2:4:2", "--target", value, "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --target: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e999"])
def test_check_time_budget_is_a_finite_number_above_0(tmp_path, capsys, value):
    (tmp_path / "good.json").write_text(json.dumps(good_mini()))
    assert main(["check", str(tmp_path / "good.json"), "--time-budget", value]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --time-budget: ") and err.count("\n") == 1, err


MISSION_01 = Path(__file__).resolve().parent.parent / "missions" / "01-mixing-hurts.json"
BUSY = ["--set", "workload.rate=120"]  # about 7,200 arrivals: more than one PROGRESS_ARRIVALS


def _lab_run(extra, after="0"):
    return subprocess.run([sys.executable, "-m", "lab", "run", str(MISSION_01), *BUSY, *extra], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, STF_PROGRESS_AFTER_S=after))


def test_a_long_run_shows_its_simulated_time_on_stderr_and_changes_nothing_else():
    quiet = _lab_run([])
    shown = _lab_run(["--progress"])
    assert quiet.returncode == shown.returncode == 0
    assert quiet.stderr == ""  # a pipe: nothing, unless asked
    assert _strip_timing(shown.stdout) == _strip_timing(quiet.stdout)
    lines = shown.stderr.splitlines()
    assert lines[-1] == "simulated; measuring the requests"
    times = [float(re.match(r"simulated ([\d,.]+) s of 60 s of arrivals \(\d+%\)$", line).group(1).replace(",", ""))
             for line in lines[:-1]]
    assert times and times == sorted(times) and times[-1] <= 60
    assert _lab_run(["--progress"], after="3600").stderr == ""  # a run quicker than the wait shows nothing
    assert _lab_run(["--progress", "--json"]).stderr == ""  # never with --json


def test_a_terminal_sees_the_progress_on_one_line():
    import pty

    main_fd, child_fd = pty.openpty()
    try:
        done = subprocess.run([sys.executable, "-m", "lab", "run", str(MISSION_01), *BUSY], stdout=subprocess.PIPE,
                              stderr=child_fd, text=True, timeout=300, env=dict(os.environ, STF_PROGRESS_AFTER_S="0"))
        os.close(child_fd)
        child_fd = None
        seen = b""
        while True:
            try:
                chunk = os.read(main_fd, 65536)
            except OSError:  # (the terminal's other end is closed: all read)
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if child_fd is not None:
            os.close(child_fd)
        os.close(main_fd)
    assert done.returncode == 0
    text = seen.decode()
    assert "\r" in text and text.count("of 60 s of arrivals") >= 1 and text.rstrip().endswith("simulated; measuring the requests")


def test_the_progress_callback_changes_no_result():
    scenario = core.load_mission(str(MISSION_01)).scenario.with_changes({"workload.rate": 120.0})
    heard = []
    with_progress = core.simulate(scenario, progress=lambda t, end: heard.append((t, end)))
    assert len(heard) == len(with_progress.requests) // engine.PROGRESS_ARRIVALS
    plain = core.simulate(scenario)
    assert core.summarize(with_progress, core.request_metrics(with_progress)) == core.summarize(plain, core.request_metrics(plain))


def _strip_timing(text):
    return re.sub(r"simulated ([\d.]+) s in \d+ ms", "simulated \\1 s in _ ms", text)


# ---------------------------------------------------------------- lab link: a mission in a lab address

def test_link_prints_the_labs_address_carrying_the_mission(tmp_path, capsys):
    from lab.core.mission_link import decode_mission, draft_id

    path = REPO / "missions" / "07-book-store.json"
    assert main(["link", str(path)]) == 0
    captured = capsys.readouterr()
    link = captured.out.strip()
    assert captured.out.count("\n") == 1 and link.startswith("http://localhost:5006/lab?draft=1.")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert decode_mission(link.split("?draft=", 1)[1]) == data
    assert f"the link is {len(link):,} characters" in captured.err and "lab.html" in captured.err
    assert draft_id(data) not in link  # the id is the page's to work out
    assert main(["link", str(path), "--base", "https://example.org/stf/lab.html"]) == 0
    assert capsys.readouterr().out.startswith("https://example.org/stf/lab.html?draft=1.")
    assert main(["link", str(path), "--base", "http://h:5006/lab?hide=plots"]) == 0
    assert capsys.readouterr().out.startswith("http://h:5006/lab?hide=plots&draft=1.")


def test_link_as_a_command_writes_only_the_link_to_stdout():
    proc = subprocess.run([sys.executable, "-m", "lab", "link", "missions/01-mixing-hurts.json"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and re.fullmatch(r"http://localhost:5006/lab\?draft=1\.[A-Za-z0-9_-]+\n", proc.stdout)
    assert "characters" in proc.stderr


def test_link_names_every_mistake_and_prints_no_link(tmp_path, capsys):
    def spoil(d):
        d["scenario"]["fleet"]["gpus"] = -3
        d["stars"][0]["when"][0]["metric"] = "latency"

    write_mission(tmp_path, "two.json", spoil)
    assert main(["link", str(tmp_path / "two.json")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0] == f"FAIL {tmp_path / 'two.json'}"
    assert [line.split(":")[0].strip() for line in lines[1:]] == ["scenario.fleet.gpus", "stars[0].when[0].metric"]
    (tmp_path / "broken.json").write_text('{"id": ', encoding="utf-8")
    assert main(["link", str(tmp_path / "broken.json")]) == 1
    assert "malformed JSON" in capsys.readouterr().err
    assert main(["link", str(tmp_path / "missing.json")]) == 1
    assert "cannot read file" in capsys.readouterr().err


def test_link_refuses_a_mission_too_big_for_a_link(tmp_path, capsys):
    import random

    rng = random.Random(5)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,") for _ in range(100_000))
    write_mission(tmp_path, "long.json", lambda d: d.update(brief=noise + "\n\n**Try:** reading it all."))
    assert main(["check", str(tmp_path / "long.json"), "--seeds", "1"]) == 0  # a good mission...
    capsys.readouterr()
    assert main(["link", str(tmp_path / "long.json")]) == 1  # ... that no link carries
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"FAIL {tmp_path / 'long.json'}\n  draft: the mission is ")
    assert "a link carries at most 32,000" in captured.err
    # Under 32,000 bytes of JSON, but random text packs into more than a link holds.
    write_mission(tmp_path, "long.json", lambda d: d.update(brief=noise[:12_000] + "\n\n**Try:** reading it all."))
    assert main(["link", str(tmp_path / "long.json")]) == 1
    err = capsys.readouterr().err
    assert "draft: the mission packs into " in err and "a link holds at most 8,000" in err


@pytest.mark.parametrize("base", ["", "  ", "http://h/lab#x", "http://h/ lab", "http://h/\x1blab"])
def test_link_rejects_a_bad_base(base, capsys):
    assert main(["link", str(REPO / "missions" / "07-book-store.json"), "--base", base]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "error: --base: expected the lab's address" in captured.err
