"""Progress codes: a student's stars as a short text to copy, paste or carry in a link.

    STF1-<base64url of {"mission-id": star bitmask, ...}>.<checksum>

The JSON is compact with sorted keys; bit i of the mask is star i; the checksum is the
FNV-1a 32-bit hash of the JSON, 8 lowercase hex digits. A code only ever adds stars
(`merge` ORs it in).

The same format is written once more in JS (`STFStars.encodeCode` / `decodeCode` in
stars_store.js) for the static hub, which has no Python. The two decoders give every
code the same verdict, word for word (tests/test_hostile_input.py runs both on one
corpus), so neither uses its language's JSON parser: the content is read by one small
grammar, an object of plain ids to masks written in digits, which has no nesting to
recurse into and no float to round (`{"a":1.0}` is refused by both). Lengths are counted
in UTF-16 units and shown text is cut and quoted the way JS does.
"""

import base64
import binascii
import json
import re

from lab.core.errors import LabError
from lab.core.missions import ID_PATTERN

__all__ = ["PREFIX", "MAX_CODE_CHARS", "PATH", "encode", "decode", "merge", "count_new"]

PREFIX = "STF1-"
PATH = "progress code"
MAX_CODE_CHARS = 20_000  # 500 missions with long ids fit; anything longer is not a code
# What a code and the browser's stored stars hold at most (stars_bridge uses these too).
MAX_MISSIONS = 500
MAX_STARS = 16  # a mask is below 2**16
_ID = ID_PATTERN  # the missions' own id rule (use fullmatch)
_VERSION = re.compile(r"STF([0-9]{1,4})-")
_B64 = re.compile(r"[A-Za-z0-9_-]*")
_HEX = re.compile(r"[0-9a-f]{8}")
_SHOWN = 24
# Trimmed from a pasted code: whitespace, and the invisible spaces a web page or a chat adds
# (str.strip and JS trim each strip a different set beyond ASCII, so both name these).
_TRIM = " \t\n\r\f\v\u00a0\u200b\u2028\u2029\u3000\ufeff"
# The content's grammar, token by token (stars_store.js has the same expressions).
_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\[\s\S])*"')
_TOKEN = re.compile(r"[^,} \t\n\r]+")  # a mask as written, up to the next delimiter
_MASK = re.compile(r"0|[1-9][0-9]{0,4}")
_LONE = re.compile(r"[\ud800-\udfff]")


def _fnv1a(text):
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def _units(text):
    """The text's length as JS counts it: UTF-16 code units."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _shown(text):
    """`text` quoted for a message as JS's JSON.stringify would, cut to _SHOWN UTF-16 units."""
    if _units(text) > _SHOWN:
        text = text.encode("utf-16-le", "surrogatepass")[: 2 * (_SHOWN - 1)].decode("utf-16-le", "surrogatepass") + "…"
    quoted = json.dumps(text, ensure_ascii=False)
    return _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)  # as JS escapes a lone surrogate


def _grouped(n):
    return f"{n:,}"


def encode(stars):
    """{mission id: [bool, ...]} -> code. Missions without a star are left out."""
    masks = {}
    for mission, flags in (stars or {}).items():
        if not isinstance(mission, str) or not _ID.fullmatch(mission):
            continue
        mask = sum(1 << i for i, f in enumerate(list(flags)[:MAX_STARS]) if f is True)
        if mask:
            masks[mission] = mask
    text = json.dumps(dict(sorted(masks.items())[:MAX_MISSIONS]), separators=(",", ":"))
    body = base64.urlsafe_b64encode(text.encode("ascii")).decode("ascii").rstrip("=")
    return f"{PREFIX}{body}.{_fnv1a(text)}"


def _members(text):
    """[(raw id, raw mask)] of the content `{"id":mask,...}`, or the LabError that says why not.

    No recursion and no JSON parser: a value that opens a list or an object is refused where
    it starts, so a code of 5,000 nested lists costs one look at its first character."""
    pos = _SPACE.match(text).end()
    if not text.startswith("{", pos):
        return LabError(PATH, "malformed: expected {mission id: star mask}")
    pos = _SPACE.match(text, pos + 1).end()
    members = []
    if text.startswith("}", pos):
        pos += 1
    else:
        while True:
            key = _STRING.match(text, pos)
            if not key:
                return LabError(PATH, "malformed: its content is not readable")
            pos = _SPACE.match(text, key.end()).end()
            if not text.startswith(":", pos):
                return LabError(PATH, "malformed: its content is not readable")
            pos = _SPACE.match(text, pos + 1).end()
            if text[pos:pos + 1] in ("[", "{"):
                return LabError(PATH, f"mission id {_shown(key.group()[1:-1])}: a star mask is a whole number, "
                                      "not a nested list or object")
            value = _STRING.match(text, pos) or _TOKEN.match(text, pos)
            if not value:
                return LabError(PATH, "malformed: its content is not readable")
            members.append((key.group()[1:-1], value.group()))
            pos = _SPACE.match(text, value.end()).end()
            if text.startswith(",", pos):
                pos = _SPACE.match(text, pos + 1).end()
                continue
            if text.startswith("}", pos):
                pos += 1
                break
            return LabError(PATH, "malformed: its content is not readable")
    if _SPACE.match(text, pos).end() != len(text):
        return LabError(PATH, "malformed: its content is not readable")
    return members


def decode(code):
    """code -> {mission id: [bool, ...]}. Raises LabError naming what is wrong with it."""
    if not isinstance(code, str):
        raise LabError(PATH, "expected text starting with STF1-")
    if len(code) > MAX_CODE_CHARS or _units(code) > MAX_CODE_CHARS:
        raise LabError(PATH, f"{_grouped(_units(code))} characters is far too long for a progress code "
                             f"(at most {_grouped(MAX_CODE_CHARS)})")
    code = code.strip(_TRIM)
    if not code:
        raise LabError(PATH, "empty: paste a code starting with STF1-")
    version = _VERSION.match(code)
    if version and code[:len(PREFIX)] != PREFIX:
        raise LabError(PATH, f"unknown version STF{version.group(1)} (this lab reads STF1 codes)")
    if not code.startswith(PREFIX):
        raise LabError(PATH, f"{_shown(code)} is not a progress code: expected text starting with STF1-")
    body, dot, check = code[len(PREFIX):].rpartition(".")
    if not dot or not _B64.fullmatch(body) or not _HEX.fullmatch(check) or len(body) % 4 == 1:
        raise LabError(PATH, f"{_shown(code)} is malformed: expected STF1-<letters>.<8 hex digits>")
    try:
        text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        raise LabError(PATH, f"{_shown(code)} is malformed: its letters do not decode") from None
    if _fnv1a(text) != check:
        raise LabError(PATH, "wrong checksum: the code was changed or cut; copy it again in full")
    members = _members(text)
    if isinstance(members, LabError):
        raise members
    if len(members) > MAX_MISSIONS:
        raise LabError(PATH, f"{_grouped(len(members))} missions; at most {MAX_MISSIONS}")
    out = {}
    seen = set()
    for mission, mask in members:
        if not _ID.fullmatch(mission):
            raise LabError(PATH, f"mission id {_shown(mission)} is not a plain id (lowercase letters, digits, -)")
        if mission in seen:
            raise LabError(PATH, f"mission id {_shown(mission)} appears twice")
        seen.add(mission)
        if not _MASK.fullmatch(mask) or int(mask) >= 1 << MAX_STARS:
            raise LabError(PATH, f"{mission}: star mask {_shown(mask)} is not a whole number "
                                 f"0..{(1 << MAX_STARS) - 1} in digits")
        value = int(mask)
        if value:
            out[mission] = [bool(value >> i & 1) for i in range(value.bit_length())]
    return out


def merge(saved, added):
    """OR `added` into a copy of `saved` ({id: [bool]}): stars are never removed."""
    out = {m: list(f) for m, f in (saved or {}).items()}
    for mission, flags in added.items():
        have = out.get(mission, [])
        n = max(len(have), len(flags))
        out[mission] = [(i < len(have) and have[i] is True) or (i < len(flags) and flags[i] is True) for i in range(n)]
    return out


def count_new(saved, added):
    """How many stars of `added` are not in `saved` yet."""
    n = 0
    for mission, flags in added.items():
        have = (saved or {}).get(mission, [])
        n += sum(1 for i, f in enumerate(flags) if f and not (i < len(have) and have[i] is True))
    return n
