"""Progress codes (lab/ui/stars/progress_code.py) and their JS twin in stars_store.js: round trip,
OR-merge, every class of bad code refused with a message naming the problem, and each side
reading the other's codes (the JS runs in node)."""

import json
import shutil
import subprocess

import pytest

from lab.core.errors import LabError
from lab.ui.stars import progress_code as pc
from lab.ui.stars.stars_bridge import STORE_JS

STARS = {"mixing-hurts": [True, False, True], "slow-link": [False, True], "none-yet": [False, False],
         "constructor": [True]}


def test_round_trip_keeps_every_earned_star_and_drops_empty_missions():
    code = pc.encode(STARS)
    assert code.startswith("STF1-") and len(code) < 120
    assert pc.decode(code) == {"mixing-hurts": [True, False, True], "slow-link": [False, True], "constructor": [True]}
    assert pc.decode("  " + code + "\n") == pc.decode(code)  # pasted with whitespace
    assert pc.decode(pc.encode({})) == {}


def test_merge_only_adds_stars():
    saved = {"mixing-hurts": [False, True, False], "other": [True]}
    merged = pc.merge(saved, pc.decode(pc.encode({"mixing-hurts": [True], "slow-link": [False, True]})))
    assert merged == {"mixing-hurts": [True, True, False], "other": [True], "slow-link": [False, True]}
    assert pc.count_new(saved, {"mixing-hurts": [True, True]}) == 1
    assert saved == {"mixing-hurts": [False, True, False], "other": [True]}  # input untouched


def _body(text):
    import base64
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _signed(text, prefix="STF1-"):
    return f"{prefix}{_body(text)}.{pc._fnv1a(text)}"


BAD = {
    "empty": ("", "empty"),
    "not a code": ("hello world", "not a progress code"),
    "unknown version": (_signed('{"a":1}', "STF2-"), "unknown version STF2"),
    "no checksum": ("STF1-" + _body('{"a":1}'), "malformed"),
    "bad letters": ("STF1-ab$cd.0123abcd", "malformed"),
    "wrong checksum": ("STF1-" + _body('{"a":3}') + "." + pc._fnv1a('{"a":1}'), "wrong checksum"),
    "not json": (_signed("{nope"), "not readable"),
    "not an object": (_signed("[1,2]"), "expected {mission id: star mask}"),
    "bad id": (_signed('{"<script>":1}'), "not a plain id"),
    "bad mask": (_signed('{"a":-1}'), "star mask"),
    "bool mask": (_signed('{"a":true}'), "star mask"),
    "float mask": (_signed('{"a":1.5}'), "star mask"),
    "huge mask": (_signed('{"a":65536}'), "star mask"),
    "huge": ("STF1-" + "A" * 1_000_000, "far too long"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_code_is_refused_naming_the_problem(case):
    code, words = BAD[case]
    with pytest.raises(LabError) as info:
        pc.decode(code)
    assert info.value.path == "progress code"
    assert words in str(info.value)
    assert len(str(info.value)) < 200  # a 1 MB code is not echoed back


def _node(script):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    src = STORE_JS.read_text(encoding="utf-8")
    out = subprocess.run([node, "-"], input=src + "\n" + script, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_python_and_js_write_the_same_code_and_read_each_others():
    py_code = pc.encode(STARS)
    got = _node(f"""
      const stars = {json.dumps(STARS)};
      const js = STFStars.encodeCode(stars);
      const back = STFStars.decodeCode({json.dumps(py_code)});
      console.log(JSON.stringify({{js, back}}));""")
    assert got["js"] == py_code
    assert got["back"] == {"ok": True, "stars": pc.decode(py_code)}
    assert pc.decode(got["js"]) == pc.decode(py_code)


def test_js_refuses_every_bad_code_python_refuses():
    codes = {case: code for case, (code, _w) in BAD.items()}
    got = _node(f"""
      const codes = {json.dumps(codes)};
      const out = {{}};
      for (const k of Object.keys(codes)) out[k] = STFStars.decodeCode(codes[k]);
      console.log(JSON.stringify(out));""")
    for case, (_code, words) in BAD.items():
        assert got[case]["ok"] is False, case
        assert words in got[case]["error"], (case, got[case]["error"])
        assert len(got[case]["error"]) < 200
