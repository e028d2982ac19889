"""Progress codes: a student's stars as a short text to copy, paste or carry in a link.

    STF1-<base64url of {"mission-id": star bitmask, ...}>.<checksum>

The JSON is compact with sorted keys; bit i of the mask is star i; the checksum is the
FNV-1a 32-bit hash of the JSON, 8 lowercase hex digits. A code only ever adds stars
(`merge` ORs it in). The same format is written once more in JS (`STFStars.encodeCode`
/ `decodeCode` in stars_store.js) for the static hub, which has no Python; the tests run
both on each other's codes.
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


def _fnv1a(text):
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def _shown(text):
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…")


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


def decode(code):
    """code -> {mission id: [bool, ...]}. Raises LabError naming what is wrong with it."""
    if not isinstance(code, str):
        raise LabError(PATH, "expected text starting with STF1-")
    if len(code) > MAX_CODE_CHARS:
        raise LabError(PATH, f"{len(code):,} characters is far too long for a progress code "
                             f"(at most {MAX_CODE_CHARS:,})")
    code = code.strip()
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
    try:
        data = json.loads(text)
    except ValueError:
        raise LabError(PATH, "malformed: its content is not readable") from None
    if not isinstance(data, dict):
        raise LabError(PATH, "malformed: expected {mission id: star mask}")
    if len(data) > MAX_MISSIONS:
        raise LabError(PATH, f"{len(data):,} missions; at most {MAX_MISSIONS}")
    out = {}
    for mission, mask in data.items():
        if not _ID.fullmatch(mission):
            raise LabError(PATH, f"mission id {_shown(mission)} is not a plain id (lowercase letters, digits, -)")
        if type(mask) is not int or not 0 <= mask < (1 << MAX_STARS):
            raise LabError(PATH, f"{mission}: star mask {_shown(str(mask))} is not a whole number 0..{(1 << MAX_STARS) - 1}")
        if mask:
            out[mission] = [bool(mask >> i & 1) for i in range(mask.bit_length())]
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
