"""Requests: Poisson arrivals, phases, length distributions, trace CSVs."""

import json
import os
import math
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from lab.core import LabError, generate_requests, load_scenario, parse_trace_text
from lab.core.fields import number
from lab.core.spec import MAX_TOKENS, MAX_TRACE_TIME_S, Workload
from lab.core.workload import read_trace

# The public Azure traces live beside the repo (../shared/traces), never in it.
TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


def full_trace(name):
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"full trace {path} not available on this machine")
    return str(path)


def workload(**fields):
    raw = {"rate": 5, "duration_s": 60, "prompt_tokens": 1000, "output_tokens": 100}
    raw.update(fields)
    return Workload.from_dict(raw)


# ---------------------------------------------------------------- determinism


def test_same_seed_same_requests():
    wl = workload(prompt_tokens={"dist": "lognormal", "median": 900, "sigma": 1},
                  output_tokens={"dist": "uniform", "low": 1, "high": 500})
    assert generate_requests(wl, 7) == generate_requests(wl, 7)
    assert generate_requests(wl, 7) != generate_requests(wl, 8)


def test_generation_does_not_touch_the_global_random():
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    generate_requests(workload(), 1)
    assert random.random() == expected


def test_requests_are_sorted_inside_the_window_and_microsecond_rounded():
    reqs = generate_requests(workload(rate=20, duration_s=30), 3)
    times = [a for a, _, _ in reqs]
    assert times == sorted(times)
    assert all(0 < a < 30 for a in times)
    assert all(round(a, 6) == a for a in times)
    assert all(isinstance(p, int) and isinstance(o, int) for _, p, o in reqs)


def test_zero_rate_gives_no_requests():
    assert generate_requests(workload(rate=0), 1) == []


# ---------------------------------------------------------------- Poisson


def test_poisson_rate_over_a_long_run():
    rate, duration = 8.0, 5000.0
    reqs = generate_requests(workload(rate=rate, duration_s=duration), 11)
    expected = rate * duration
    # Poisson count: sd = sqrt(40,000) = 200; 4 sd
    assert abs(len(reqs) - expected) < 4 * math.sqrt(expected)
    gaps = [b[0] - a[0] for a, b in zip(reqs, reqs[1:])]
    mean = statistics.fmean(gaps)
    assert abs(mean - 1 / rate) < 4 * (1 / rate) / math.sqrt(len(gaps))
    # exponential gaps: standard deviation equals the mean (coefficient of variation 1)
    assert abs(statistics.pstdev(gaps) / mean - 1) < 0.03
    # memoryless: about e^-1 of gaps exceed the mean
    share = sum(g > 1 / rate for g in gaps) / len(gaps)
    assert abs(share - math.exp(-1)) < 0.01


def test_rate_scales_the_count():
    low = len(generate_requests(workload(rate=2, duration_s=2000), 5))
    high = len(generate_requests(workload(rate=6, duration_s=2000), 5))
    assert abs(high / low - 3) < 0.15


# ---------------------------------------------------------------- phases


def test_phases_change_the_rate():
    wl = workload(rate=2, duration_s=3000, phases=[{"start_s": 1000, "rate": 20}, {"start_s": 2000, "rate": 0}])
    reqs = generate_requests(wl, 4)
    counts = [sum(lo <= a < hi for a, _, _ in reqs) for lo, hi in ((0, 1000), (1000, 2000), (2000, 3000))]
    assert abs(counts[0] - 2000) < 4 * math.sqrt(2000)
    assert abs(counts[1] - 20000) < 4 * math.sqrt(20000)
    assert counts[2] == 0


def test_phase_lengths_apply_only_inside_the_phase():
    wl = workload(rate=10, duration_s=100, prompt_tokens=500, output_tokens=50,
                  phases=[{"start_s": 40, "prompt_tokens": 4000}, {"start_s": 70, "output_tokens": 7}])
    for a, p, o in generate_requests(wl, 2):
        if a < 40:
            assert (p, o) == (500, 50)
        elif a < 70:
            assert (p, o) == (4000, 50)
        else:
            # a phase that sets only the output keeps the base prompt, not the previous phase's
            assert (p, o) == (500, 7)


def test_phase_without_rate_keeps_the_base_rate():
    wl = workload(rate=10, duration_s=2000, phases=[{"start_s": 1000, "prompt_tokens": 5}])
    reqs = generate_requests(wl, 9)
    second = sum(a >= 1000 for a, _, _ in reqs)
    assert abs(second - 10_000) < 4 * math.sqrt(10_000)


# ---------------------------------------------------------------- lengths


def lengths(dist, n=20_000, seed=1):
    wl = workload(rate=n / 100, duration_s=100, prompt_tokens=dist)
    return [p for _, p, _ in generate_requests(wl, seed)]


def test_fixed():
    assert set(lengths(137, 500)) == {137}
    assert set(lengths({"dist": "fixed", "value": 3}, 500)) == {3}


def test_uniform_bounds_inclusive():
    xs = lengths({"dist": "uniform", "low": 10, "high": 20})
    assert min(xs) == 10 and max(xs) == 20
    assert set(xs) == set(range(10, 21))
    assert abs(statistics.fmean(xs) - 15) < 0.1
    assert set(lengths({"dist": "uniform", "low": 5, "high": 5}, 200)) == {5}


def test_lognormal_bounds_and_median():
    xs = lengths({"dist": "lognormal", "median": 1000, "sigma": 1.0, "min": 200, "max": 3000})
    assert min(xs) == 200 and max(xs) == 3000  # both clips are hit at sigma 1
    assert all(200 <= x <= 3000 for x in xs)
    assert abs(statistics.median(xs) - 1000) < 40
    # share clipped at the top: P(Z > ln 3) = 0.1363
    top = sum(x == 3000 for x in xs) / len(xs)
    assert abs(top - 0.1363) < 0.01


def test_lognormal_sigma_zero_is_the_median():
    assert set(lengths({"dist": "lognormal", "median": 812.4, "sigma": 0}, 300)) == {812}


def test_lognormal_default_bounds():
    xs = lengths({"dist": "lognormal", "median": 2, "sigma": 2})
    assert min(xs) == 1  # clipped at the default min of 1 token


def test_mix_weights():
    xs = lengths({"dist": "mix", "components": [
        {"weight": 3, "length": 100},
        {"weight": 1, "length": {"dist": "uniform", "low": 2000, "high": 2100}},
    ]})
    share = sum(x == 100 for x in xs) / len(xs)
    assert abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / len(xs))
    assert all(x == 100 or 2000 <= x <= 2100 for x in xs)


def test_mix_weights_need_not_sum_to_one():
    xs = lengths({"dist": "mix", "components": [{"weight": 0.2, "length": 1}, {"weight": 0.2, "length": 2},
                                                 {"weight": 0.4, "length": 3}]})
    shares = [xs.count(k) / len(xs) for k in (1, 2, 3)]
    for got, want in zip(shares, (0.25, 0.25, 0.5)):
        assert abs(got - want) < 0.015


def test_output_distribution_is_drawn_independently():
    wl = workload(rate=200, duration_s=50, prompt_tokens={"dist": "uniform", "low": 1, "high": 100},
                  output_tokens={"dist": "uniform", "low": 1, "high": 100})
    reqs = generate_requests(wl, 3)
    assert sum(p == o for _, p, o in reqs) < 0.05 * len(reqs)


# ---------------------------------------------------------------- traces


def test_trace_header_simple():
    rows = parse_trace_text("arrival_s,prompt_tokens,output_tokens\n1.5,100,20\n2.0,200,1\n")
    assert rows == [(0.0, 100, 20), (0.5, 200, 1)]


def test_trace_header_splitwise():
    rows = parse_trace_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,4808,10\n0.052,3180,8\n")
    assert rows == [(0.0, 4808, 10), (0.052, 3180, 8)]


def test_trace_header_azure_wall_clock_with_7_fractional_digits():
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2023-11-16 18:15:46.6805900,374,44\n"
            "2023-11-16 18:15:50.9951690,396,109\n"
            "2023-11-16 18:16:00,1000,5\n"
            "2023-11-17 00:00:00.5,7,3\n")
    rows = parse_trace_text(text)
    assert [r[1:] for r in rows] == [(374, 44), (396, 109), (1000, 5), (7, 3)]
    assert rows[0][0] == 0.0
    assert rows[1][0] == pytest.approx(4.314579, abs=1e-6)
    assert rows[2][0] == pytest.approx(60 - 46.68059, abs=1e-6)  # 18:16:00 - 18:15:46.68059
    assert rows[3][0] == pytest.approx(5 * 3600 + 44 * 60 + 13.31941 + 0.5, abs=1e-6)


def test_trace_columns_by_name_in_any_order_with_extras_bom_and_blank_lines():
    text = ("\ufeffid,output_tokens, prompt_tokens ,arrival_s,note\n"
            "a,5,50,3.0,x\n"
            "\n"
            "b,6,60,1.0,y\n")
    assert parse_trace_text(text) == [(0.0, 60, 6), (2.0, 50, 5)]  # sorted, re-based


def test_trace_token_counts_may_be_written_as_whole_floats():
    assert parse_trace_text("arrival_s,prompt_tokens,output_tokens\n0,100.0,2\n") == [(0.0, 100, 2)]


@pytest.mark.parametrize("body,line,column,bad,expected", [
    ("0.0,10,5\n0.5,abc,3\n", 3, "prompt_tokens", "abc", "expected a token count"),
    ("0.0,10,5\nsoon,10,3\n", 3, "arrival_s", "soon", "expected a number of seconds"),
    # Numbers go through the scenario fields' readers (core.fields), which name the number they read.
    ("0.0,10,5\n-1,10,3\n", 3, "arrival_s", None, "-1 is out of range: must be at least 0"),
    ("0.0,10,5\nnan,10,3\n", 3, "arrival_s", None, "expected a finite number, got nan"),
    ("0.0,10,5\ninf,10,3\n", 3, "arrival_s", None, "expected a finite number, got inf"),
    ("0.0,10,5\n1e306,10,3\n", 3, "arrival_s", None, "at most 1,000,000,000,000"),
    ("0.0,10,5\n1.0,10,0\n", 3, "output_tokens", None, "must be at least 1 and at most 1,000,000"),
    ("0.0,10,5\n1.0,10,2.5\n", 3, "output_tokens", None, "expected a whole number, got 2.5"),
    ("0.0,10,5\n1.0,10,inf\n", 3, "output_tokens", None, "expected a whole number, got inf"),
    ("0.0,10,5\n1.0,2000000,2\n", 3, "prompt_tokens", None, "at most 1,000,000"),
    ("0.0,10,5\n1.0,10," + "9" * 400 + "\n", 3, "output_tokens", None, "(a 400-character number) is too large: must be at least 1"),
    ("0.0,10,5\n0.1,1,1\n\n1.0,10,\n", 5, "output_tokens", None, "expected a token count"),
])
def test_bad_trace_value_names_line_and_column_without_echoing_it(body, line, column, bad, expected):
    with pytest.raises(LabError) as info:
        parse_trace_text("arrival_s,prompt_tokens,output_tokens\n" + body, "t.csv")
    assert info.value.path == f"t.csv: line {line}, column {column}"
    assert expected in info.value.detail
    # Text that is no number is never quoted back (a trace may be any file the user points at).
    assert bad is None or bad not in info.value.detail
    assert len(info.value.detail) < 200


TIME_CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-10, max_value=2 * 10**12).map(str),
    st.sampled_from(["-0.0", "+1.5", ".5", "5.", "1e12", "1.0000000000001e12", "1e-400", "1e400", "0x10", "1_0",
                     " 2.5", "nan", "-inf", "", "3,5", "\u0661.5"]),
    st.text(max_size=8))


@settings(max_examples=300, deadline=None)
@given(TIME_CELLS)
def test_a_time_cells_quick_reading_is_the_full_one(raw):
    """_parse_time takes a finite float in range without building its messages; every cell
    reads as the full rule (_csv_number, bounded 0 to MAX_TRACE_TIME_S) reads it, or is refused alike."""
    from lab.core import workload

    def outcome(read):
        try:
            value = read()
        except LabError as exc:
            return ("refused", exc.path, exc.detail)
        return ("read", repr(value), type(value))

    quick = outcome(lambda: workload._parse_time(raw, False, "t.csv", 2, "arrival_s"))
    full = outcome(lambda: workload._csv_number(raw, "t.csv: line 2, column arrival_s",
                                                f"expected a number of seconds from 0 to {MAX_TRACE_TIME_S:g}",
                                                lo=0, hi=MAX_TRACE_TIME_S))
    assert quick == full


def test_bad_azure_timestamp_names_line_and_column():
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 25:00:00,1,1\n"
    with pytest.raises(LabError) as info:
        parse_trace_text(text, "azure.csv")
    assert info.value.path == "azure.csv: line 3, column TIMESTAMP"
    assert "expected a timestamp like" in info.value.detail and "25:00" not in info.value.detail
    with pytest.raises(LabError) as info:
        parse_trace_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68x,1,1\n", "azure.csv")
    assert info.value.path == "azure.csv: line 2, column TIMESTAMP"


def test_short_row_names_its_line():
    with pytest.raises(LabError) as info:
        parse_trace_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n0.5,3\n", "t.csv")
    assert info.value.path == "t.csv: line 3"
    assert "3 columns" in str(info.value) and "got 2" in str(info.value)


def test_unknown_header_and_empty_trace():
    with pytest.raises(LabError) as info:
        parse_trace_text("time,in,out\n0,1,1\n", "t.csv")
    assert info.value.path == "t.csv: line 1"
    assert "time,in,out" not in str(info.value)  # the header is content: not echoed
    assert "arrival_s" in str(info.value) and "TIMESTAMP" in str(info.value)
    with pytest.raises(LabError) as info:
        parse_trace_text("", "t.csv")
    assert "empty" in str(info.value)
    with pytest.raises(LabError) as info:
        parse_trace_text("arrival_s,prompt_tokens,output_tokens\n\n", "t.csv")
    assert "no requests" in str(info.value)


def test_missing_trace_file_names_the_field(tmp_path):
    sc = load_scenario({"workload": {"trace": "nope.csv"}, "fleet": {"layout": "colocated", "gpus": 1}}, base_dir=str(tmp_path))
    with pytest.raises(LabError) as info:
        generate_requests(sc.workload, 0)
    assert info.value.path == "workload.trace.path"
    assert "nope.csv" in str(info.value)


@pytest.mark.parametrize("name,count", [("azure_conv_2023.csv", 19_366), ("azure_code_2023.csv", 8_819)])
def test_real_traces_parse(name, count):
    rows = read_trace(full_trace(name))
    assert len(rows) == count
    assert rows[0][0] == 0.0
    assert all(a <= b for (a, _, _), (b, _, _) in zip(rows, rows[1:]))
    assert 3400 < rows[-1][0] < 3600
    assert all(p >= 1 and o >= 1 for _, p, o in rows)


def test_trace_workload_window_and_time_scale(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,prompt_tokens,output_tokens\n" + "".join(f"{i},{100 + i},{1 + i}\n" for i in range(10)))
    scenario_file = tmp_path / "s.json"
    scenario_file.write_text(json.dumps({
        "workload": {"trace": {"path": "t.csv", "start_s": 2, "duration_s": 5, "time_scale": 0.5}},
        "fleet": {"layout": "colocated", "gpus": 1},
    }))
    sc = load_scenario(str(scenario_file))  # the trace path is relative to the scenario file
    reqs = generate_requests(sc.workload, 0)
    assert reqs == [(0.0, 102, 3), (0.5, 103, 4), (1.0, 104, 5), (1.5, 105, 6), (2.0, 106, 7)]
    assert generate_requests(sc.workload, 1) == reqs  # a trace ignores the seed


def test_trace_window_with_no_requests(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,1,1\n")
    sc = load_scenario({"workload": {"trace": {"path": "t.csv", "start_s": 50}}, "fleet": {"layout": "colocated", "gpus": 1}},
                       base_dir=str(tmp_path))
    with pytest.raises(LabError) as info:
        generate_requests(sc.workload, 0)
    assert info.value.path == "workload.trace"


def test_real_trace_window_through_a_scenario():
    path = full_trace("azure_code_2023.csv")
    sc = load_scenario({"workload": {"trace": {"path": "azure_code_2023.csv", "duration_s": 60}},
                        "fleet": {"layout": "colocated", "gpus": 4}}, base_dir=str(TRACES))
    reqs = generate_requests(sc.workload, 0)
    all_rows = read_trace(path)
    assert reqs == [(round(a, 6), p, o) for a, p, o in all_rows if a < 60]
    assert 60 < len(reqs) < 400


# ---------------------------------------------------------------- trace files are untrusted (issue 8)

HEADER = "arrival_s,prompt_tokens,output_tokens\n"


def trace_mission_scenario(folder, trace_path):
    """A mission-shaped dict whose trace path is `trace_path`, loaded from a file in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "m.json"
    path.write_text(json.dumps({"scenario": {"workload": {"trace": trace_path}, "fleet": {"layout": "colocated", "gpus": 1}}}))
    return load_scenario(str(path))


def test_a_trace_inside_the_mission_folder_is_read(tmp_path):
    (tmp_path / "m" / "traces").mkdir(parents=True)
    (tmp_path / "m" / "traces" / "t.csv").write_text(HEADER + "0,10,2\n1,20,3\n")
    sc = trace_mission_scenario(tmp_path / "m", "traces/t.csv")
    assert generate_requests(sc.workload, 0) == [(0.0, 10, 2), (1.0, 20, 3)]


@pytest.mark.parametrize("where", ["../outside.csv", "ABS", "sub/../../outside.csv"])
def test_a_trace_outside_the_mission_folder_is_refused(tmp_path, where):
    (tmp_path / "outside.csv").write_text(HEADER + "0,10,2\n")
    path = str(tmp_path / "outside.csv") if where == "ABS" else where
    sc = trace_mission_scenario(tmp_path / "m", path)
    with pytest.raises(LabError) as info:
        generate_requests(sc.workload, 0)
    assert info.value.path == "workload.trace.path"
    assert "outside" in info.value.detail and "must lie inside the mission's folder" in info.value.detail


def test_a_symlink_is_resolved_before_the_check(tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text(HEADER + "0,10,2\n")
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "link.csv").symlink_to(secret)
    sc = trace_mission_scenario(tmp_path / "m", "link.csv")
    with pytest.raises(LabError, match="outside"):
        generate_requests(sc.workload, 0)


def test_system_files_and_devices_are_refused(tmp_path):
    for target in ("/etc/passwd", "/dev/zero"):
        sc = trace_mission_scenario(tmp_path / "m", target)
        with pytest.raises(LabError) as info:
            generate_requests(sc.workload, 0)
        assert "outside" in info.value.detail and "root:x:" not in info.value.detail


def test_only_regular_files_are_traces(tmp_path):
    folder = tmp_path / "m"
    (folder / "dir.csv").mkdir(parents=True)
    os.mkfifo(folder / "fifo.csv")  # opening a FIFO would block: refused before open
    (folder / "null.csv").symlink_to("/dev/null")  # resolves outside anyway
    for name, fragment in (("dir.csv", "not a regular file"), ("fifo.csv", "not a regular file"), ("null.csv", "outside")):
        sc = trace_mission_scenario(folder, name)
        with pytest.raises(LabError, match=fragment):
            generate_requests(sc.workload, 0)


def test_a_bare_scenario_may_use_its_folder_or_the_working_directory(tmp_path, monkeypatch):
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "t.csv").write_text(HEADER + "0,10,2\n")
    (tmp_path / "elsewhere").mkdir()
    scenario = tmp_path / "elsewhere" / "s.json"
    scenario.write_text(json.dumps({"workload": {"trace": str(here / "t.csv")}, "fleet": {"layout": "colocated", "gpus": 1}}))
    monkeypatch.chdir(here)
    assert generate_requests(load_scenario(str(scenario)).workload, 0) == [(0.0, 10, 2)]
    # A mission file in the same place may not reach into the working directory.
    sc = trace_mission_scenario(tmp_path / "elsewhere", str(here / "t.csv"))
    with pytest.raises(LabError, match="outside"):
        generate_requests(sc.workload, 0)
    # Nor may a bare scenario reach anywhere else.
    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(LabError, match="outside"):
        generate_requests(load_scenario(str(scenario)).workload, 0)


def test_the_containment_survives_with_changes(tmp_path):
    (tmp_path / "outside.csv").write_text(HEADER + "0,10,2\n")
    sc = trace_mission_scenario(tmp_path / "m", "../outside.csv").with_changes({"fleet.gpus": 2})
    with pytest.raises(LabError, match="outside"):
        generate_requests(sc.workload, 0)


def test_trace_size_is_bounded(tmp_path, monkeypatch):
    from lab.core import workload as W

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "big.csv").write_text(HEADER + "0,10,2\n" * 200)
    monkeypatch.setattr(W, "MAX_TRACE_BYTES", 1000)
    sc = trace_mission_scenario(tmp_path / "m", "big.csv")
    with pytest.raises(LabError, match="larger than the limit"):
        generate_requests(sc.workload, 0)
    with pytest.raises(LabError, match="the limit is 1,000"):
        parse_trace_text(HEADER + "0,10,2\n" * 200, "upload.csv")


def test_trace_errors_never_echo_the_file(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/sh\n")
    sc = trace_mission_scenario(tmp_path / "m", "passwd")
    with pytest.raises(LabError) as info:
        generate_requests(sc.workload, 0)
    assert info.value.path == "passwd: line 1"
    assert "root:x:" not in str(info.value) and "bash" not in str(info.value)


def test_non_utf8_trace_is_a_lab_error(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "t.csv").write_bytes(HEADER.encode() + b"0,10,2\n\xff\xfe,1,1\n")
    sc = trace_mission_scenario(tmp_path / "m", "t.csv")
    with pytest.raises(LabError, match="not UTF-8"):
        generate_requests(sc.workload, 0)


@pytest.mark.parametrize("text,line", [
    (HEADER + "0,10,2\n" + "1" * 200_000 + ",1,1\n", 3),  # over csv's field-size limit
    (HEADER + "0,10,2\n0,1\0,1\n", 3),  # a NUL byte
    (HEADER + '0,10,2\n"unterminated,1,1\n', 3),
])
def test_hostile_trace_text_is_a_lab_error_naming_the_line(text, line):
    with pytest.raises(LabError) as info:
        parse_trace_text(text, "upload.csv")
    assert info.value.path.startswith("upload.csv: line ")
    assert "1111111111" not in str(info.value)


def scaled_trace_scenario(tmp_path, rows, time_scale=1000):
    """A scenario file replaying `rows` (after the header) with its arrival times stretched."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "t.csv").write_text(HEADER + rows)
    path = tmp_path / "m" / "m.json"
    path.write_text(json.dumps({"scenario": {"workload": {"trace": {"path": "t.csv", "time_scale": time_scale}},
                                             "fleet": {"layout": "colocated", "gpus": 1}}}))
    return load_scenario(str(path))


def test_arrivals_that_would_overflow_time_are_rejected_at_load(tmp_path):
    with pytest.raises(LabError) as info:
        generate_requests(scaled_trace_scenario(tmp_path, "0,10,2\n1e306,10,2\n").workload, 0)
    assert info.value.path == "t.csv: line 3, column arrival_s"


def test_a_replay_spans_at_most_the_run_limit(tmp_path):
    with pytest.raises(LabError) as info:
        generate_requests(scaled_trace_scenario(tmp_path, "0,10,2\n1000,10,2\n").workload, 0)
    assert info.value.path == "workload.trace.duration_s"
    assert "1,000,000 s" in info.value.detail and "604,800 s" in info.value.detail


# ---------------------------------------------------------------- Mooncake numbers past a float (issue 35)

MOONCAKE_OK = '{"timestamp": 0, "input_length": 10, "output_length": 2}\n'


@pytest.mark.parametrize("field, literal, says", [
    ("timestamp", "1" * 400, f"is too large: must be at least 0 and at most {number(MAX_TRACE_TIME_S * 1000)}"),
    ("timestamp", "-" + "9" * 400, "is too small: must be at least 0"),
    ("input_length", "1e309", f"1e309 is too large: must be at least 1 and at most {number(MAX_TOKENS)}"),
    ("input_length", "1" + "0" * 309, f"is too large: must be at least 1 and at most {number(MAX_TOKENS)}"),
    ("output_length", "1" * 5000, "(a 5,000-character number) is too large"),
    ("output_length", "NaN", "expected a whole number, got nan"),
    ("hash_ids", "[1, " + "7" * 400 + "]", "is too large: must be at least 0"),
])
def test_a_mooncake_number_past_a_float_names_its_line_and_field(field, literal, says):
    row = {"timestamp": 5, "input_length": 10, "output_length": 2}
    text = json.dumps({**row, field: "@"}).replace('"@"', literal)
    with pytest.raises(LabError) as info:  # was OverflowError for the first four
        parse_trace_text(MOONCAKE_OK + text + "\n", "t.jsonl")
    assert info.value.path == f"t.jsonl: line 2, field {field}" + ("[1]" if field == "hash_ids" else "")
    assert says in info.value.detail
