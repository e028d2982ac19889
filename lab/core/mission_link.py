"""Mission links: a whole mission carried in a lab address, so a teacher shares a draft
without hosting a file (`lab.html?draft=CODE`, `/lab?draft=CODE`).

    code = encode_mission(data)            # data: a mission as a JSON object (dict)
    data = decode_mission(code)            # raises LabError("draft", ...) for a bad link
    mission = mission_from_link(code, base_dir)   # validated; its id is draft_id(data)

The code is "1." then the mission's compact JSON, raw-deflated, in URL-safe base64 without
padding: the shipped missions take 1,600 to 2,400 characters. A link holds at most
MAX_CODE_CHARS characters of code and MAX_JSON_BYTES bytes of JSON once unpacked (checked
while unpacking, so a small link cannot unpack into a large one).

A shared mission's stars are kept under `draft_id(data)`: "draft-" and a hash of its JSON.
So no link can write a shipped mission's stars, and a changed draft starts afresh. Its text
is read exactly as a mission file's (every field checked, its brief safe Markdown, a trace
only from the lab's own mission folder).
"""

import base64
import binascii
import dataclasses
import hashlib
import json
import re
import zlib

from .errors import LabError
from .missions import Mission, parse_mission_text

__all__ = ["encode_mission", "decode_mission", "draft_id", "mission_from_link", "is_draft_id",
           "MAX_CODE_CHARS", "MAX_JSON_BYTES", "CODE_VERSION", "DRAFT_PREFIX"]

CODE_VERSION = "1."
MAX_CODE_CHARS = 8_000  # about three times the largest shipped mission's code; any browser and server takes it
MAX_JSON_BYTES = 32_000  # about eight times the largest shipped mission's compact JSON
DRAFT_PREFIX = "draft-"
_CODE_RE = re.compile(r"[A-Za-z0-9_-]*", re.ASCII)
_DRAFT_ID_RE = re.compile(r"draft-[0-9a-f]{12}", re.ASCII)


def _compact(data):
    # Key order kept: a mission's controls show in the order they are written.
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError):  # NaN, Infinity, a number past a float's (BigNumber): in a field no check reads
        raise LabError("draft", "the mission holds a number JSON cannot carry (NaN, Infinity or one past a "
                                "float's range)") from None


def encode_mission(data):
    """The link code of a mission given as a JSON object (not validated here: a draft may be
    shared with its mistakes, and the lab names them). Raises LabError when it is too big."""
    if not isinstance(data, dict):
        raise LabError("draft", "a mission link carries a mission object")
    raw = _compact(data)
    if len(raw) > MAX_JSON_BYTES:
        raise LabError("draft", f"the mission is {len(raw):,} bytes of JSON; a link carries at most {MAX_JSON_BYTES:,}")
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    packed = packer.compress(raw) + packer.flush()
    code = CODE_VERSION + base64.urlsafe_b64encode(packed).decode("ascii").rstrip("=")
    if len(code) > MAX_CODE_CHARS:
        raise LabError("draft", f"the mission packs into {len(code):,} characters; a link holds at most {MAX_CODE_CHARS:,} "
                                "(shorten the brief or the debriefs, or download the JSON instead)")
    return code


def decode_mission(code):
    """The mission object a link code carries. Raises LabError("draft", why) for anything else."""
    if not isinstance(code, str) or not code:
        raise LabError("draft", "the link carries no mission")
    if len(code) > MAX_CODE_CHARS:
        raise LabError("draft", f"the link's mission is longer than a link holds ({MAX_CODE_CHARS:,} characters), "
                                "so it was not read")
    if not code.startswith(CODE_VERSION):
        raise LabError("draft", "the link's mission is not in a format this lab reads (it should start with "
                                f"{CODE_VERSION!r}); it may have been cut or made by another version")
    body = code[len(CODE_VERSION):]
    if not _CODE_RE.fullmatch(body):
        raise LabError("draft", "the link's mission has characters a link code never holds; it was changed or cut")
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise LabError("draft", "the link's mission is cut short (its code does not decode); copy the whole link") from None
    unpacker = zlib.decompressobj(-15)
    try:
        raw = unpacker.decompress(packed, MAX_JSON_BYTES + 1)
    except zlib.error:
        raise LabError("draft", "the link's mission is damaged (it does not unpack); copy the whole link") from None
    if len(raw) > MAX_JSON_BYTES or unpacker.unconsumed_tail:
        raise LabError("draft", f"the link's mission unpacks to more than {MAX_JSON_BYTES:,} bytes, so it was not read")
    if not unpacker.eof:
        raise LabError("draft", "the link's mission is cut short (it ends early); copy the whole link")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LabError("draft", "the link's mission is not text") from None
    try:
        data = parse_mission_text(text, "the link's mission")
    except LabError as exc:  # malformed JSON, a repeated key: the link's own trouble, named where
        raise LabError("draft", str(exc)) from None
    if not isinstance(data, dict):
        raise LabError("draft", "the link does not carry a mission object")
    return data


def draft_id(data):
    """The id a shared mission's stars are kept under: "draft-" and 12 hex digits of its JSON's hash."""
    return DRAFT_PREFIX + hashlib.sha256(_compact(data)).hexdigest()[:12]


def is_draft_id(mission_id):
    return isinstance(mission_id, str) and bool(_DRAFT_ID_RE.fullmatch(mission_id))


def mission_from_link(code, base_dir=""):
    """(the Mission a link carries, its JSON object). Raises LabError: the link's own trouble
    as "draft: ...", a mistake in the mission as the field's path (several: LabErrors).
    A trace is read from `base_dir` (the lab's mission folder) as a mission file's would be."""
    data = decode_mission(code)
    mission = Mission.from_dict(data, base_dir, None)
    return dataclasses.replace(mission, id=draft_id(data)), data
