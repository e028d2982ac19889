"""lab.core.mission_link: a whole mission carried in a lab address (`?draft=CODE`).

Every shipped mission goes there and back unchanged, at the length the module's docstring
quotes; a link that was cut, changed, inflated or forged is refused as "draft: why"; a draft
with mistakes names each by its field path.
"""

import base64
import json
import random
import re
import zlib
from pathlib import Path

import pytest

from lab.core import mission_link
from lab.core.errors import LabError, LabErrors
from lab.core.mission_link import (CODE_VERSION, MAX_CODE_CHARS, MAX_JSON_BYTES, decode_mission, draft_id,
                                   encode_mission, is_draft_id, mission_from_link)
from lab.core.missions import default_missions_dir

REPO = Path(__file__).resolve().parent.parent
MISSION_FILES = sorted(p for p in (REPO / "missions").glob("*.json") if p.name != "schema.json")
SHIPPED_CODE_RANGE = (1_600, 2_400)  # the docstring's "the shipped missions take 1,600 to 2,400 characters"


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def pack(raw):
    """A link code of any bytes, packed exactly as encode_mission packs JSON."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return CODE_VERSION + base64.urlsafe_b64encode(packer.compress(raw) + packer.flush()).decode("ascii").rstrip("=")


def refused(code):
    """The LabError decode_mission raises for `code` (which must be "draft")."""
    with pytest.raises(LabError) as info:
        decode_mission(code)
    assert info.value.path == "draft", info.value
    return info.value.detail


BOOK_STORE = load(REPO / "missions" / "07-book-store.json")
CODE = encode_mission(BOOK_STORE)


# ---------------------------------------------------------------- round trips

def test_there_are_shipped_missions():
    assert len(MISSION_FILES) >= 20


@pytest.mark.parametrize("path", MISSION_FILES, ids=lambda p: p.stem)
def test_every_shipped_mission_goes_there_and_back_unchanged(path):
    data = load(path)
    code = encode_mission(data)
    assert code.startswith(CODE_VERSION) and re.fullmatch(r"1\.[A-Za-z0-9_-]+", code)
    back = decode_mission(code)
    assert back == data
    assert list(back) == list(data)  # key order too: controls show in the order they are written
    assert list(back["controls"]) == list(data["controls"])
    low, high = SHIPPED_CODE_RANGE
    assert low <= len(code) <= high, f"{path.name}: {len(code)} characters; the docstring says {low:,} to {high:,}"
    mission, carried = mission_from_link(code, default_missions_dir())
    assert carried == data and mission.id == draft_id(data) and mission.title == data["title"]


def test_the_docstring_quotes_the_range_the_test_keeps():
    low, high = SHIPPED_CODE_RANGE
    assert f"the shipped missions take {low:,} to {high:,} characters" in " ".join(mission_link.__doc__.split())


def test_key_order_is_kept_through_a_link():
    data = dict(BOOK_STORE)
    data["controls"] = dict(reversed(list(BOOK_STORE["controls"].items())))
    reordered = {k: data[k] for k in reversed(list(data))}
    back = decode_mission(encode_mission(reordered))
    assert list(back) == list(reordered) and list(back["controls"]) == list(reversed(list(BOOK_STORE["controls"])))


def test_text_beyond_ascii_goes_there_and_back():
    data = {**BOOK_STORE, "title": "Le magasin de livres — 書店 ✓", "brief": "Ünïcode, emoji 🚀, and \u2028 a line separator."}
    assert decode_mission(encode_mission(data)) == data


@pytest.mark.parametrize("doc", ["missions/README.md", "docs/page.md"])
def test_the_docs_quote_the_bounds(doc):
    text = " ".join((REPO / doc).read_text(encoding="utf-8").split())
    assert f"{MAX_CODE_CHARS:,} characters of code" in text and f"{MAX_JSON_BYTES:,} bytes of JSON" in text


# ---------------------------------------------------------------- draft ids

def test_draft_id_is_stable_and_shaped():
    one, two = draft_id(BOOK_STORE), draft_id(json.loads(json.dumps(BOOK_STORE)))
    assert one == two and re.fullmatch(r"draft-[0-9a-f]{12}", one) and is_draft_id(one)
    assert draft_id(decode_mission(CODE)) == one
    assert not is_draft_id(BOOK_STORE["id"]) and not is_draft_id("draft-XYZ") and not is_draft_id(None)


@pytest.mark.parametrize("change", [
    lambda d: d.update(title=d["title"] + "!"),
    lambda d: d["brief"].__setitem__(0, d["brief"][0].replace(".", ",", 1)),
    lambda d: d["stars"][0].update(label=d["stars"][0]["label"] + " "),
    lambda d: d["scenario"]["fleet"].update(gpus=d["scenario"]["fleet"]["gpus"] + 1),
    lambda d: d.update(order=d["order"] + 1),
    lambda d: d.update(id=d["id"] + "-2"),
], ids=["title", "brief", "star label", "a number", "order", "id"])
def test_any_change_makes_another_draft_id(change):
    data = json.loads(json.dumps(BOOK_STORE))
    change(data)
    assert draft_id(data) != draft_id(BOOK_STORE)


def test_no_shipped_mission_shares_a_draft_id():
    ids = [draft_id(load(p)) for p in MISSION_FILES]
    assert len(set(ids)) == len(ids)


# ---------------------------------------------------------------- bad links

def test_an_empty_or_missing_code_is_refused():
    assert "carries no mission" in refused("")
    assert "carries no mission" in refused(None)


@pytest.mark.parametrize("code", ["2." + CODE[2:], "1" + CODE[2:], CODE[2:], "1," + CODE[2:], "v1." + CODE[2:]])
def test_a_wrong_version_prefix_is_refused(code):
    assert "not in a format this lab reads" in refused(code)


@pytest.mark.parametrize("bad", ["+", "/", "=", " ", "%", ".", "é", "\x00", "<"])
def test_characters_a_code_never_holds_are_refused(bad):
    code = CODE[:100] + bad + CODE[101:]
    assert "characters a link code never holds" in refused(code)


@pytest.mark.parametrize("keep", [3, 4, 5, 10, 100, 1000, len(CODE) // 2, len(CODE) - 20, len(CODE) - 2, len(CODE) - 1])
def test_a_code_cut_anywhere_is_refused(keep):
    detail = refused(CODE[:keep])
    assert "cut short" in detail or "damaged" in detail or "does not carry" in detail, detail


def test_a_code_cut_to_its_prefix_is_refused():
    assert "cut short" in refused("1.")  # nothing after the version: a stream that never ends


def test_corrupted_bytes_are_refused():
    rng = random.Random(7)
    packed = bytearray(base64.urlsafe_b64decode(CODE[2:] + "=" * (-len(CODE[2:]) % 4)))
    for _ in range(40):
        spoilt = bytearray(packed)
        for _ in range(rng.randint(1, 4)):
            spoilt[rng.randrange(len(spoilt))] ^= rng.randint(1, 255)
        code = CODE_VERSION + base64.urlsafe_b64encode(bytes(spoilt)).decode("ascii").rstrip("=")
        try:
            data = decode_mission(code)
        except LabError as exc:
            assert exc.path == "draft", exc
        else:  # a flip deflate cannot notice (inside a literal): still an object, or a field error later
            assert isinstance(data, dict)


def test_a_code_past_the_bound_is_refused_before_it_is_read():
    assert "longer than a link holds (8,000 characters)" in refused("1." + "A" * (MAX_CODE_CHARS - 1))


def test_a_zip_bomb_is_refused_while_unpacking():
    bomb = pack(b" " * 1_000_000)  # a megabyte of spaces packs into about a kilobyte
    assert len(bomb) < MAX_CODE_CHARS
    assert "unpacks to more than 32,000 bytes" in refused(bomb)
    just_over = pack(b'{"a":"' + b"x" * (MAX_JSON_BYTES - 7) + b'"}')
    assert "unpacks to more than" in refused(just_over)
    at_bound = pack(b'{"a":"' + b"x" * (MAX_JSON_BYTES - 8) + b'"}')
    assert decode_mission(at_bound) == {"a": "x" * (MAX_JSON_BYTES - 8)}


def test_bytes_that_are_not_utf8_are_refused():
    assert "not text" in refused(pack(b'{"title": "caf\xe9"}'))
    assert "not text" in refused(pack(b"\xff\xfe{\x00}\x00"))


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"a mission"', b"42", b"null", b"true"])
def test_json_that_is_not_an_object_is_refused(raw):
    assert "does not carry a mission object" in refused(pack(raw))


def test_malformed_json_and_repeated_keys_are_refused_with_where():
    detail = refused(pack(b'{"id": "a", "title": "x", "id": "b"}'))
    assert "line 1, column" in detail and "'id' appears twice" in detail
    assert "malformed JSON" in refused(pack(b'{"id": '))
    assert "malformed JSON" in refused(pack(b""))
    assert "nested too deeply" in refused(pack(b"[" * 5_000 + b"]" * 5_000))


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "9" * 5_000])
def test_a_number_json_cannot_carry_is_refused_not_a_crash(value):
    """In a field no check reads ($schema), a NaN or a number past a float's range reached
    draft_id, whose json.dumps raised ValueError/TypeError past the page's LabError handler."""
    text = json.dumps(BOOK_STORE).replace('"$schema": "./schema.json"', f'"$schema": {value}')
    with pytest.raises(LabError) as info:
        mission_from_link(pack(text.encode()), default_missions_dir())
    assert info.value.path == "draft" and "number JSON cannot carry" in info.value.detail


# ---------------------------------------------------------------- a draft with mistakes

def test_mission_from_link_names_every_mistake_by_field_path():
    data = json.loads(json.dumps(BOOK_STORE))
    data.update(summary="one\ntwo", colour="blue")
    data["scenario"]["fleet"]["gpus"] = -3
    first = next(iter(data["controls"]))
    data["controls"][first]["nonsense"] = 1
    data["stars"][0]["when"][0]["metric"] = "latency"
    with pytest.raises(LabErrors) as info:
        mission_from_link(encode_mission(data), default_missions_dir())
    paths = [e.path for e in info.value.errors]
    assert paths == ["colour", "summary", "scenario.fleet.gpus", f"controls.{first}.nonsense",
                     "stars[0].when[0].metric"], paths


def test_a_trace_outside_the_missions_folder_is_refused():
    data = load(REPO / "missions" / "08-conversation-trace.json")
    for path in ("../../etc/passwd", "/etc/passwd", "traces/../../README.md"):
        data["scenario"]["workload"] = {"trace": {"path": path}}
        with pytest.raises(LabError) as info:
            mission_from_link(encode_mission(data), default_missions_dir())
        assert info.value.path == "scenario.workload.trace.path" and "outside" in info.value.detail


# ---------------------------------------------------------------- encoding refuses what no link carries

def test_encode_refuses_a_mission_past_the_bounds():
    rng = random.Random(1)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ") for _ in range(12_000))
    with pytest.raises(LabError) as info:
        encode_mission({**BOOK_STORE, "brief": noise})  # under 32,000 bytes of JSON, but it will not compress
    assert info.value.path == "draft" and "a link holds at most 8,000" in info.value.detail
    with pytest.raises(LabError) as info:
        encode_mission({**BOOK_STORE, "brief": "a" * MAX_JSON_BYTES})  # compresses well, but too much JSON
    assert info.value.path == "draft" and "at most 32,000" in info.value.detail
    with pytest.raises(LabError) as info:
        encode_mission([BOOK_STORE])
    assert info.value.path == "draft"
    with pytest.raises(LabError) as info:
        encode_mission({**BOOK_STORE, "order": float("nan")})
    assert info.value.path == "draft"
