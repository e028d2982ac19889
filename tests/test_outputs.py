"""Output flags never overwrite an input, are checked before any run, and write whole files
(issue 35): `lab run --requests-csv`, `lab plan --write-scenario`, through lab/outputs.py."""

import json
import os

import pytest

from lab import core
from lab.cli import main
from lab.core.report import REQUESTS_CSV_COLUMNS
from lab.outputs import check_outputs, write_atomic

SCENARIO = {"seed": 3, "workload": {"rate": 4, "duration_s": 5, "prompt_tokens": 600, "output_tokens": 30},
            "fleet": {"layout": "colocated", "gpus": 1}, "slo": {"ttft_s": 1.5, "tpot_ms": 25}}
TRACE = "arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{t * 0.25},{400 + t},{20 + t % 7}\n" for t in range(40))
PLAN = ["--max-gpus", "2", "--chunks", "512", "--layouts", "colocated", "--workers", "1"]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(SCENARIO))
    (tmp_path / "t.csv").write_text(TRACE)
    (tmp_path / "ts.json").write_text(json.dumps({**SCENARIO, "workload": {"trace": "t.csv"}}))
    (tmp_path / "m.json").write_text(json.dumps({"id": "m", "title": "M", "scenario": SCENARIO}))
    return tmp_path


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if a run or a plan starts: a refused output must be found before any work."""
    def refuse(*args, **kwargs):
        raise AssertionError("the run started")
    monkeypatch.setattr(core, "simulate", refuse)
    import lab.plan
    monkeypatch.setattr(lab.plan, "plan", refuse)


def contents(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("args, flag, target", [
    (["plan", "t.csv", *PLAN, "--write-scenario", "t.csv"], "--write-scenario", "t.csv"),
    (["plan", "s.json", *PLAN, "--write-scenario", "./s.json"], "--write-scenario", "s.json"),
    (["plan", "ts.json", *PLAN, "--write-scenario", "t.csv"], "--write-scenario", "t.csv"),  # the scenario's trace
    (["run", "m.json", "--requests-csv", "m.json"], "--requests-csv", "m.json"),
    (["run", "ts.json", "--requests-csv", "t.csv"], "--requests-csv", "t.csv"),
    (["run", "s.json", "--requests-csv", "link.csv"], "--requests-csv", "link.csv"),  # a symlink to the input
    (["run", "s.json", "--requests-csv", "hard.csv"], "--requests-csv", "hard.csv"),  # a hard link to it
])
def test_an_output_that_is_an_input_is_refused_before_any_work(files, monkeypatch, capsys, no_work, args, flag, target):
    os.symlink(files / "s.json", files / "link.csv")
    os.link(files / "s.json", files / "hard.csv")
    monkeypatch.chdir(files)
    before = contents(files)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {flag}: ") and repr(target if target != "s.json" else "./s.json") in err
    assert "is an input of this command" in err
    assert contents(files) == before


@pytest.mark.parametrize("where, says", [
    ("missing/out.json", "there is no folder"),
    ("folder", "it is a folder"),
    ("s.json/out.json", "there is no folder"),  # a file where the folder should be
    ("fifo", "it is not a regular file"),
])
def test_an_unwritable_output_is_refused_before_any_work(files, monkeypatch, capsys, no_work, where, says):
    (files / "folder").mkdir()
    os.mkfifo(files / "fifo")
    monkeypatch.chdir(files)
    for args in (["plan", "t.csv", *PLAN, "--write-scenario", where], ["run", "s.json", "--requests-csv", where]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {args[-2]}: cannot write {where!r}: {says}"), err


def test_a_failed_write_leaves_the_old_file_whole(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("the old file\n")

    def half(fh):
        fh.write("half of a new")
        raise OSError(28, "No space left on device")

    with pytest.raises(core.LabError) as caught:
        write_atomic(str(out), "--requests-csv", half)
    assert str(caught.value) == f"--requests-csv: cannot write {str(out)!r}: No space left on device"
    assert out.read_text() == "the old file\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]


def test_a_written_file_replaces_the_old_one_and_keeps_its_mode(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("old\n")
    os.chmod(out, 0o640)
    write_atomic(str(out), "--requests-csv", lambda fh: fh.write("new\n"))
    assert out.read_text() == "new\n" and (os.stat(out).st_mode & 0o777) == 0o640
    fresh = tmp_path / "fresh.csv"
    write_atomic(str(fresh), "--requests-csv", lambda fh: fh.write("x\n"))
    umask = os.umask(0)
    os.umask(umask)
    assert (os.stat(fresh).st_mode & 0o777) == 0o666 & ~umask


def test_outputs_pass_when_they_are_new_files_beside_the_inputs(files):
    check_outputs([("--requests-csv", str(files / "r.csv"))], [str(files / "s.json"), None])
    assert not (files / "r.csv").exists()  # checked, not created


def test_run_and_plan_still_write_their_outputs(files, monkeypatch, capsys):
    monkeypatch.chdir(files)
    assert main(["run", "s.json", "--requests-csv", "r.csv", "--json"]) == 0
    requests = json.loads(capsys.readouterr().out)["requests"]
    lines = (files / "r.csv").read_text().splitlines()
    assert lines[0] == ",".join(REQUESTS_CSV_COLUMNS) and len(lines) == 1 + requests
    assert main(["plan", "t.csv", *PLAN, "--write-scenario", "w.json"]) == 0
    assert json.loads((files / "w.json").read_text())["workload"]["trace"]["path"] == "t.csv"
    assert sorted(p.name for p in files.iterdir() if p.name.startswith(".")) == []  # no temporary file left
