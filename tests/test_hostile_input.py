"""Property: whatever JSON (or bytes) reaches the scenario and mission loaders, a trace's
CSV or Mooncake lines, a plan's input file or a numeric flag, the only exception raised is
LabError, naming where. Huge integers, over-long or inf-like number literals, deep nesting,
wrong types at every known field and non-UTF-8 bytes included."""

import copy
import json
import math
import os
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.core import LabError, load_mission, load_scenario
from lab.core.missions import parse_mission_text

REPO = Path(__file__).resolve().parent.parent
MISSION = json.loads((REPO / "missions" / "07-book-store.json").read_text(encoding="utf-8"))
SCENARIO = {
    "workload": {"rate": 4, "duration_s": 30, "prompt_tokens": {"dist": "lognormal", "median": 900, "sigma": 1},
                 "output_tokens": {"dist": "mix", "components": [{"weight": 1, "length": 10}, {"weight": 2, "length": 200}]},
                 "phases": [{"start_s": 10, "rate": 6, "prompt_tokens": 3000}]},
    "fleet": {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2, "chunk_tokens": 512,
              "link": {"gbytes_per_s": 50, "sharing": "fifo", "layerwise": False}},
    "model": {"cost": "roofline", "llm": "llama3-8b", "gpu": "h100", "kv_capacity_tokens": 100000},
    "slo": {"ttft_s": 1.5, "tpot_ms": 25, "max_gap_ms": 200},
    "seed": 3,
    "drain_s": 60,
}
TRACE_SCENARIO = {"workload": {"trace": {"path": "t.csv", "start_s": 0, "duration_s": 10, "time_scale": 1}},
                  "fleet": {"layout": "colocated", "gpus": 2}}


def field_paths(node, prefix=()):
    """Every path into a JSON value: ("fleet", "link", "sharing"), ("stars", 0, "when", 0, "op"), ..."""
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from field_paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from field_paths(value, prefix + (i,))


SCENARIO_PATHS = [p for p in field_paths(SCENARIO) if p] + [p for p in field_paths(TRACE_SCENARIO) if p]
MISSION_PATHS = [p for p in field_paths(MISSION) if p]

# Number literals json.dumps cannot write: kept as text and spliced in after dumping.
RAW_NUMBERS = ["1" + "0" * 5000, "-" + "9" * 400, "1e999", "-1e999", "1e308", "4.9e-324", "NaN", "Infinity", "-Infinity",
               "0." + "0" * 500 + "1", "1" * 4301, "123456789012345678901234567890"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.sampled_from([0, -1, 1, 16, 2**63]),
    # Built by map: hypothesis cannot repr an int of over 4,300 digits in its strategy list.
    st.sampled_from([400, 4_400, 5_000]).map(lambda digits: 10**digits),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "\0", "\ud800", "colocated", "../../etc/passwd", "/dev/zero", "=", ">=", "fifo"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)),
    max_leaves=12,
)


def _has(node, key):
    if isinstance(node, dict):
        return isinstance(key, str)
    return isinstance(node, list) and isinstance(key, int) and key < len(node)


def set_path(data, path, value):
    """Set `path` to `value` if an earlier mutation has not replaced one of its parents."""
    node = data
    for key in path[:-1]:
        if not _has(node, key) or key not in (node if isinstance(node, dict) else range(len(node))):
            return
        node = node[key]
    if _has(node, path[-1]):
        node[path[-1]] = value


def mutated(base, paths, draw):
    data = copy.deepcopy(base)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        set_path(data, draw(st.sampled_from(paths)), draw(json_values))
    return data


def as_text(data, draw):
    """JSON text of `data`, with a few values replaced by raw literals or deep nesting."""
    marks = {}

    def mark(value):
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mark(v) for v in value]
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**300:
            token = f"@@{len(marks)}@@"
            marks[f'"{token}"'] = draw(st.sampled_from(RAW_NUMBERS))
            return token
        return value

    text = json.dumps(mark(data))
    for token, literal in marks.items():
        text = text.replace(token, literal)
    choice = draw(st.integers(min_value=0, max_value=5))
    if choice == 0:  # splice a raw literal in place of the first number
        literal = draw(st.sampled_from(RAW_NUMBERS))
        text = text.replace(": 4", ": " + literal, 1).replace(": 2", ": " + literal, 1)
    elif choice == 1:  # deep nesting, deeper than Python's recursion limit
        depth = draw(st.sampled_from([50, 2_000, 100_000]))
        text = text.replace('"fleet": ', '"fleet": ' + "[" * depth + "]" * depth + ", \"x\": ", 1)
    return text


def only_lab_errors(call):
    try:
        call()
    except LabError:
        pass


HOSTILE = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@HOSTILE
@given(st.data())
def test_scenario_dicts_raise_only_lab_error(data):
    base = data.draw(st.sampled_from([SCENARIO, TRACE_SCENARIO, {"scenario": SCENARIO}]))
    paths = [p for p in field_paths(base) if p]
    only_lab_errors(lambda: load_scenario(mutated(base, paths, data.draw)))


@HOSTILE
@given(st.data())
def test_scenario_files_raise_only_lab_error(data):
    raw = mutated(SCENARIO, [p for p in field_paths(SCENARIO) if p], data.draw)
    text = as_text(raw, data.draw)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(text)
        only_lab_errors(lambda: load_scenario(path))


@HOSTILE
@given(st.data())
def test_overrides_raise_only_lab_error(data):
    path = ".".join(str(p) for p in data.draw(st.sampled_from(SCENARIO_PATHS)))
    value = data.draw(st.one_of(st.sampled_from(RAW_NUMBERS), st.text(max_size=30),
                                json_values.map(lambda v: json.dumps(v, default=str) if not _huge(v) else "1" + "0" * 5000)))
    only_lab_errors(lambda: load_scenario(SCENARIO, [f"{path}={value}"]))


def _huge(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) > 10**4000
    if isinstance(value, list):
        return any(_huge(v) for v in value)
    if isinstance(value, dict):
        return any(_huge(v) for v in value.values())
    return False


@HOSTILE
@given(st.data())
def test_mission_dicts_and_texts_raise_only_lab_error(data):
    raw = mutated(MISSION, MISSION_PATHS, data.draw)
    only_lab_errors(lambda: load_mission(raw, base_dir=str(REPO / "missions")))
    text = as_text(raw, data.draw)
    only_lab_errors(lambda: parse_mission_text(text, "m.json"))


@HOSTILE
@given(st.data())
def test_mission_files_raise_only_lab_error(data):
    raw = mutated(MISSION, MISSION_PATHS, data.draw)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(as_text(raw, data.draw))
        only_lab_errors(lambda: load_mission(path))


@HOSTILE
@given(st.binary(max_size=300), st.sampled_from(["random", "corrupted"]))
def test_random_bytes_as_files_raise_only_lab_error(blob, kind):
    if kind == "corrupted":  # a valid file with bytes spliced in: mostly invalid UTF-8
        good = json.dumps(MISSION).encode()
        cut = len(blob) % len(good)
        blob = good[:cut] + blob + good[cut:]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "f.json")
        with open(path, "wb") as fh:
            fh.write(blob)
        only_lab_errors(lambda: load_scenario(path))
        only_lab_errors(lambda: load_mission(path))


def test_the_bases_are_valid():
    """The mutations start from valid inputs, so a LabError comes from the mutation."""
    load_scenario(SCENARIO)
    load_scenario(TRACE_SCENARIO)
    load_mission(MISSION, base_dir=str(REPO / "missions"))


TRACE_HEADERS = ["arrival_s,prompt_tokens,output_tokens", "arrived_at,num_prefill_tokens,num_decode_tokens",
                 "TIMESTAMP,ContextTokens,GeneratedTokens", "x,y", ""]
cells = st.one_of(st.sampled_from(["0", "1", "-1", "1e306", "1e999", "nan", "inf", "2.5", "", "1" * 5000, '"', "\0",
                                   "2023-11-16 18:15:46.6805900", "2023-11-16 18:15:46." + "9" * 400, "9999-12-31 23:59:59"]),
                  st.text(max_size=12))


@HOSTILE
@given(st.sampled_from(TRACE_HEADERS), st.lists(st.lists(cells, max_size=4), max_size=8), st.booleans())
def test_trace_text_raises_only_lab_error_and_never_echoes_it(header, rows, huge_field):
    from lab.core import parse_trace_text

    text = header + "\n" + "\n".join(",".join(row) for row in rows) + "\n"
    if huge_field:
        text += "0," + "7" * 200_000 + ",1\n"  # over csv's field-size limit
    try:
        parse_trace_text(text, "upload.csv")
    except LabError as exc:
        assert "7777777777" not in str(exc) and "1111111111" not in str(exc)


# ---------------------------------------------------------------- Mooncake lines and plan inputs (issue 35)

MOONCAKE_ROW = {"timestamp": 20, "input_length": 40, "output_length": 2, "hash_ids": [0, 1]}
MOONCAKE_PATHS = [p for p in field_paths(MOONCAKE_ROW) if p]
# Where a refusal may point: the file, a line, or one of the line's fields (a hash by its index).
JSONL_WHERE = re.compile(r"upload\.jsonl(: line \d+(, field (timestamp|input_length|output_length|hash_ids(\[\d+\])?))?)?")


@HOSTILE
@given(st.data())
def test_mooncake_lines_raise_only_lab_error_naming_the_line_and_field(data):
    from lab.core import parse_trace_text

    lines = [json.dumps({**MOONCAKE_ROW, "timestamp": 0})]  # a good first line: the text is read as JSON lines
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        if data.draw(st.integers(min_value=0, max_value=5)) == 0:
            lines.append(data.draw(st.text(max_size=30)).replace("\n", " "))
        else:
            lines.append(as_text(mutated(MOONCAKE_ROW, MOONCAKE_PATHS, data.draw), data.draw))
    try:
        parse_trace_text("\n".join(lines) + "\n", "upload.jsonl")
    except LabError as exc:
        assert JSONL_WHERE.fullmatch(exc.path), exc.path


PLAN_BASES = [SCENARIO, {"scenario": SCENARIO}, MISSION]


@HOSTILE
@given(st.data())
def test_plan_files_raise_only_lab_error(data):
    from lab.plan import plan_scenario

    if data.draw(st.booleans()):
        base = data.draw(st.sampled_from(PLAN_BASES))
        raw = mutated(base, [p for p in field_paths(base) if p], data.draw)
    else:  # anything at all, a JSON string (once read as a path) included
        raw = data.draw(st.one_of(json_values, st.sampled_from(["/dev/zero", "/dev/stdin", ".", "s.json"])))
    slo = data.draw(st.sampled_from([None, {"ttft_s": 1.0}, {"tpot_ms": 20.0, "max_gap_ms": 100.0}]))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(as_text(raw, data.draw))
        only_lab_errors(lambda: plan_scenario(path, slo))


@HOSTILE
@given(st.sampled_from([("--target", 1), ("--time-budget", None), ("--dask-timeout", None), ("--budget", None)]),
       st.one_of(st.text(max_size=30), st.sampled_from(RAW_NUMBERS + ["nan", "inf", "-0", "1_0", "١", "0x10", " 5 "])))
def test_numeric_flags_raise_only_lab_error_naming_the_flag(flag, text):
    from lab.cli import flag_number

    name, hi = flag
    try:
        value = flag_number(text, name, hi=hi)
    except LabError as exc:
        assert exc.path == name
    else:
        assert math.isfinite(value) and value > 0 and (hi is None or value <= hi)


# ---------------------------------------------------------------- progress codes
# The lab (lab/ui/stars/progress_code.py) and the static hub (stars_store.js) decode the same codes:
# each one gets the same verdict from both, word for word, and Python raises only LabError.

import pytest  # noqa: E402

from progress_codes import REPORTED, JSDecoder, codes, verdict  # noqa: E402  (tests/ is on sys.path)


@pytest.fixture(scope="module")
def js_decode():
    decoder = JSDecoder()
    if decoder.proc is None:
        pytest.skip("node is not installed")
    yield decoder
    decoder.close()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(codes)
def test_a_progress_code_gets_the_same_verdict_in_the_lab_and_the_hub(js_decode, code):
    lab = verdict(code)
    assert lab == js_decode(code)
    if not lab["ok"]:
        assert lab["error"].startswith("progress code: ") and len(lab["error"]) < 200


@pytest.mark.parametrize("case", sorted(REPORTED))
def test_a_reported_progress_code_gets_one_verdict_naming_what_is_wrong(js_decode, case):
    code = REPORTED[case]
    lab = verdict(code)
    assert lab == js_decode(code)
    assert lab["ok"] is False and len(lab["error"]) < 200, lab


def test_a_code_pasted_with_the_spaces_a_web_page_adds_is_read_the_same_by_both(js_decode):
    from lab.ui.stars import progress_code as pc

    code = pc.encode({"mixing-hurts": [True, False, True]})
    for pad in ("\u00a0", "\ufeff", " \r\n", "\u200b\u3000"):
        lab = verdict(pad + code + pad)
        assert lab == js_decode(pad + code + pad) == {"ok": True, "stars": {"mixing-hurts": [True, False, True]}}
