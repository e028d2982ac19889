"""What the command line prints from files and arguments shows control characters as escapes
(issue 35): a file name or a mission's text cannot clear the screen or fake a report line."""

import json

import pytest

from lab.cli import main
from lab.terminal import printable
from mini_missions import good_mini

ESC = "\x1b"


@pytest.mark.parametrize("text, shown", [
    ("plain — text ★", "plain — text ★"),
    ("a\x1b[2Jb", "a\\x1b[2Jb"),
    ("bell\x07 nul\x00 del\x7f csi\x9b", "bell\\x07 nul\\x00 del\\x7f csi\\x9b"),
    ("two\nlines\tand a tab\r", "two\\nlines\\tand a tab\\r"),
    ("back\\slash", "back\\slash"),
])
def test_printable_shows_control_characters_as_escapes(text, shown):
    assert printable(text) == shown


def test_printable_keeps_line_breaks_and_tabs_in_a_block():
    assert printable("one\n\ttwo\x1b]0;title\x07\r\n", block=True) == "one\n\ttwo\\x1b]0;title\\x07\\r\n"


def test_check_escapes_a_file_name_and_mission_text(tmp_path, capsys):
    bad = tmp_path / f"{ESC}[2J{ESC}[HOK all missions\nfake.json"
    bad.write_text("{ not json")
    mission = good_mini()
    mission["title"] = f"Mini{ESC}[31m red\x9b"
    (tmp_path / "good.json").write_text(json.dumps(mission))
    assert main(["check", str(tmp_path), "--seeds", "1"]) == 1
    out = capsys.readouterr().out
    assert ESC not in out and "\x9b" not in out
    assert "\\x1b[2J\\x1b[HOK all missions\\nfake.json" in out  # the name, on its FAIL line
    assert "Mini\\x1b[31m red\\x9b" in out
    assert not any(line.startswith("OK all missions") for line in out.splitlines())


def test_an_error_line_escapes_what_came_from_the_command_line(tmp_path, capsys):
    assert main(["run", str(tmp_path / f"x{ESC}[2J.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and ESC not in err and "x\\x1b[2J.json" in err
