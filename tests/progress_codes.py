"""Hostile progress codes, and the static hub's decoder (stars_store.js) as a process to ask.

`codes` is a hypothesis strategy of codes a student could paste or a link could carry: valid
ones, codes with a valid checksum over hostile content (deep nesting, floats, duplicates,
odd ids and whitespace, too many missions), mangled codes and arbitrary text. `JSDecoder`
keeps one node process running `STFStars.decodeCode`, so each example costs a line each way.
`verdict(code)` is progress_code.decode's answer in the JS decoder's shape.
"""

import base64
import json
import shutil
import subprocess

from hypothesis import strategies as st

from lab.core.errors import LabError
from lab.ui.stars import progress_code as pc
from lab.ui.stars.stars_bridge import STORE_JS

__all__ = ["signed", "codes", "verdict", "JSDecoder", "REPORTED"]


def signed(content, prefix="STF1-"):
    """A code for any content, with the checksum it needs (content may be non-ASCII: then it does not decode)."""
    raw = content.encode("utf-8", "surrogatepass")
    body = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
    h = 0x811C9DC5
    for byte in raw:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{prefix}{body}.{h:08x}"


def nested(depth, opener="["):
    """Lists (or objects) `depth` deep."""
    return "[" * depth + "]" * depth if opener == "[" else '{"a":' * depth + "1" + "}" * depth


# The reported cases, and the neighbours a decoder would get wrong first.
REPORTED = {
    "5,000 nested lists": signed(nested(5_000)),
    "a mask of 5,000 nested lists": signed('{"a":' + nested(5_000) + "}"),
    "2,000 nested objects": signed(nested(2_000, "{")),
    "a float mask": signed('{"mixing-hurts": 1.0}'),
    "an exponent mask": signed('{"mixing-hurts":1e0}'),
    "a duplicate id": signed('{"a":1,"a":2}'),
    "a lone surrogate": "STF1-\ud800" + "x" * 30,
    "astral characters": "😀" * 10_001,
}

_IDS = st.one_of(
    st.sampled_from(["a", "mixing-hurts", "constructor", "__proto__", "A", "a--b", "", "-a", "\\u0061", 'a\\"b',
                     "x" * 300, "é", "a b"]),
    st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}", fullmatch=True),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=10),
)
_MASKS = st.one_of(
    st.sampled_from(["0", "1", "5", "1.0", "1e0", "1E2", "-0", "-1", "01", "65535", "65536", "99999", "100000", "true",
                     "false", "null", '"1"', '"a,b}"', "NaN", "Infinity", "1" * 400, "0x10", "+1", "[]", "{}"]),
    st.integers(min_value=0, max_value=70_000).map(str),
    st.sampled_from([1, 2, 50, 3_000]).map(nested),
    st.sampled_from([1, 2, 50, 1_000]).map(lambda d: nested(d, "{")),
)
_SPACE = st.sampled_from(["", "", " ", "\n", "\t", "\r\n", "\f", "\x1c", "\u00a0"])
_MEMBER = st.tuples(_IDS, _SPACE, _MASKS, _SPACE).map(lambda t: f'{t[1]}"{t[0]}"{t[1]}:{t[1]}{t[2]}{t[3]}')
_OBJECT = st.lists(_MEMBER, max_size=6).map(lambda ms: "{" + ",".join(ms) + "}")
_MANY = st.sampled_from([499, 500, 501, 1_200]).map(
    lambda n: "{" + ",".join(f'"m{i}":1' for i in range(n)) + "}")
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8))
_JSON = st.recursive(_SCALARS, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                      st.dictionaries(st.text(max_size=6), kids, max_size=3)),
                     max_leaves=8).map(json.dumps)


@st.composite
def _spliced(draw, content):
    """The content with a few characters inserted, deleted or doubled."""
    text = draw(content)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        i = draw(st.integers(min_value=0, max_value=len(text)))
        op = draw(st.sampled_from(["insert", "delete", "double"]))
        if op == "insert":
            text = text[:i] + draw(st.sampled_from(list('{}[]:,"\\ 0a.-'))) + text[i:]
        elif op == "delete":
            text = text[:i] + text[i + 1:]
        else:
            text = text[:i] + text[i:i + 7] * 2 + text[i + 7:]
    return text


_CONTENT = st.one_of(_OBJECT, _MANY, _JSON, _spliced(_OBJECT), st.text(max_size=30))
_CHARS = st.one_of(st.characters(), st.sampled_from(["\ud800", "\udfff", "😀", "\u00a0", "\ufeff", "\u2028", "\x00", "…"]))


@st.composite
def _mangled(draw):
    """A valid code cut, changed, padded or re-versioned."""
    code = pc.encode(draw(st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True),
                                          st.lists(st.booleans(), max_size=17), max_size=5)))
    how = draw(st.sampled_from(["cut", "char", "pad", "version", "case", "dot"]))
    if how == "cut":
        return code[:draw(st.integers(min_value=0, max_value=len(code)))]
    if how == "char":
        i = draw(st.integers(min_value=0, max_value=len(code)))
        return code[:i] + draw(_CHARS) + code[i + 1:]
    if how == "pad":
        pad = draw(st.text(alphabet=st.sampled_from(" \t\n\r\f\v\u00a0\ufeff\x1c\u3000\u200b\u2009\x85"), max_size=4))
        return pad + code + pad
    if how == "version":
        return code.replace("STF1-", draw(st.sampled_from(["STF2-", "STF01-", "STF12345-", "stf1-", "STF-"])), 1)
    if how == "case":
        return code.upper()
    return code.replace(".", draw(st.sampled_from(["", "..", ".x", "."])), 1)


codes = st.one_of(
    _CONTENT.map(signed),
    _CONTENT.map(lambda c: signed(c)[:-8] + "00000000"),
    st.sampled_from(sorted(REPORTED.values())),
    _mangled(),
    st.text(alphabet=_CHARS, max_size=40),
    st.text(alphabet=_CHARS, max_size=40).map(lambda t: "STF1-" + t),
    st.sampled_from([19_999, 20_000, 20_001, 200_000]).map(lambda n: "STF1-" + "A" * (n - 5)),
)


def verdict(code):
    """progress_code.decode's answer as {"ok": True, "stars"} or {"ok": False, "error"} (what decodeCode returns)."""
    try:
        return {"ok": True, "stars": pc.decode(code)}
    except LabError as exc:
        return {"ok": False, "error": str(exc)}


_LOOP = r"""
const lines = require("readline").createInterface({ input: process.stdin });
lines.on("line", (line) => { process.stdout.write(JSON.stringify(STFStars.decodeCode(JSON.parse(line))) + "\n"); });
"""


class JSDecoder:
    """`STFStars.decodeCode` in one node process: `decoder(code)` -> its answer. None when node is missing."""

    def __init__(self):
        node = shutil.which("node")
        self.proc = None if node is None else subprocess.Popen(
            [node, "-e", STORE_JS.read_text(encoding="utf-8") + _LOOP], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, encoding="utf-8")

    def __call__(self, code):
        self.proc.stdin.write(json.dumps(code) + "\n")  # ASCII: lone surrogates travel as \ud800
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
