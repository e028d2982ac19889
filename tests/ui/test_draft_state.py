"""A shared draft mission (`?draft=CODE`) in the page's state, no browser: it opens with the
link's settings and writes its address back with `draft=`; a hostile draft is refused with
an escaped note or shown as text; a broken one opens mission 1 with a note and none of the
link's settings.

The browser side is in test_draft_browser.py; the link codes themselves in tests/test_mission_link.py.
"""

import base64
import copy
import json
import urllib.parse
import zlib
from pathlib import Path

import pytest

pytest.importorskip("panel")

from lab.core.mission_link import MAX_CODE_CHARS, draft_id, encode_mission  # noqa: E402
from lab.ui.catalog import Catalog  # noqa: E402
from lab.ui.state import LabState  # noqa: E402
from lab.ui.words.draft_words import DRAFT_KICKER, DRAFT_MARK, MAX_LISTED  # noqa: E402
from lab.ui.words.mission_text import brief_html  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BOOK_STORE = json.loads((REPO / "missions" / "07-book-store.json").read_text(encoding="utf-8"))
HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


@pytest.fixture(scope="module")
def shipped():
    cat = Catalog()  # the lab's own missions folder: what `lab serve` opens a draft against
    assert not cat.error, cat.error
    return cat


def draft(change=None):
    data = copy.deepcopy(BOOK_STORE)
    data.update(title="The book store, redrafted", order=3)
    if change:
        change(data)
    return data


def opened(catalog, data, extra=""):
    return LabState.from_query(catalog, f"?draft={encode_mission(data)}{extra}")


def page_markup(lab):
    """Every piece of markup a LabApp's layout holds, joined."""
    return " ".join(str(o.object) for o in lab.view.select() if isinstance(getattr(o, "object", None), str))


def pack(raw):
    """A link code of any bytes, packed as encode_mission packs JSON."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return "1." + base64.urlsafe_b64encode(packer.compress(raw) + packer.flush()).decode("ascii").rstrip("=")


def first_mission_note(state, catalog):
    """The state opened mission 1, with one note saying why; returns that note."""
    first = catalog.first()
    assert state.mission.id == first.id and state.draft_code is None
    assert state.settings == state.start_settings and not state.from_link
    assert state.query() == {"mission": first.id}
    (note,) = [n for n in state.notes if "link" in n]
    assert note.endswith(f"Opened mission {first.order}, {first.title} instead.")
    return note


# ---------------------------------------------------------------- a good draft

def test_a_draft_opens_with_the_links_settings_and_writes_its_address_back(shipped):
    data = draft()
    code = encode_mission(data)
    state = LabState.from_query(shipped, f"?draft={code}&gpus=5")
    assert state.notes == []
    assert state.mission.id == draft_id(data) != BOOK_STORE["id"]
    assert state.mission.title == "The book store, redrafted" and state.position == 0
    assert shipped.kicker(state.mission) == DRAFT_KICKER == "Shared draft mission"
    assert state.draft_code == code
    assert state.settings["gpus"] == 5 and state.scenario.fleet.gpus == 5 and state.from_link
    assert state.query() == {"draft": code, "gpus": "5"}
    assert state.change("layout", "disaggregated")
    query = state.query()
    assert list(query)[0] == "draft" and query["draft"] == code and query["layout"] == "disaggregated"
    assert "mission" not in query
    back = urllib.parse.parse_qs(state.search()[1:])
    assert back["draft"] == [code] and back["layout"] == ["disaggregated"]
    # The address it writes opens the same draft and settings again.
    again = LabState.from_query(shipped, state.search())
    assert again.mission.id == state.mission.id and again.settings == state.settings and again.notes == []


def test_a_drafts_stars_run_under_its_own_id(shipped):
    state = opened(shipped, draft(), "&gpus=5")
    assert state.run() is not None and state.metrics["requests"] > 0
    assert state.mission.id.startswith("draft-") and state.stars_now[0]


def test_a_draft_wins_over_a_mission_in_the_same_link(shipped):
    state = opened(shipped, draft(), "&mission=mixing-hurts")
    assert state.mission.id == draft_id(draft()) and state.notes == []


def test_the_draft_mark_and_kicker_reach_the_page(shipped):
    from lab.ui.app import LabApp

    shown = page_markup(LabApp(shipped, f"?draft={encode_mission(draft())}"))
    assert "Shared draft mission" in shown and 'class="stf-draft-mark" role="note"' in shown
    assert DRAFT_MARK.split(":")[0] in shown and "The book store, redrafted" in shown


# ---------------------------------------------------------------- hostile drafts

def test_a_hostile_brief_and_title_open_and_show_as_text(shipped):
    """Markup in a draft's text is no mistake (a mission file may hold it too): the draft opens
    and every payload reaches the page escaped."""
    def spoil(d):
        d["title"] = '"><img src=x onerror=window.__pwned=1> Hostile <b>title</b>'
        d["brief"] = [HOSTILE, "", '[click](javascript:window.__pwned=1) and <a href="javascript:alert(1)">this</a>',
                      "", "**Try:** nothing here runs."]
    data = draft(spoil)
    state = opened(shipped, data)
    assert state.mission.id == draft_id(data) and state.notes == []
    markup = brief_html(state.mission.brief)
    assert "<script" not in markup and "<img" not in markup and "<a " not in markup
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;img src=x onerror=" in markup  # shown, as text
    assert "<strong>Try:</strong>" in markup  # the Markdown still renders

    from lab.ui.app import LabApp

    page = page_markup(LabApp(shipped, f"?draft={encode_mission(data)}"))
    assert "<script" not in page and "<img" not in page and 'href="javascript:' not in page
    assert "&lt;img src=x onerror=window.__pwned=1&gt; Hostile &lt;b&gt;title&lt;/b&gt;" in page


def test_a_mistake_that_echoes_markup_is_escaped_in_the_note(shipped):
    def spoil(d):
        d["scenario"]["fleet"]["layout"] = "<script>alert(1)</script>"
        d["stars"][0]["label"] = 5
    state = opened(shipped, draft(spoil), "&gpus=5")
    note = first_mission_note(state, shipped)
    assert note.startswith("The mission in this link has 2 mistakes, so it was not opened")
    assert "<li>scenario.fleet.layout: &#x27;&lt;script&gt;alert(1)&lt;/script&gt;&#x27; is not one of" in note
    assert "<li>stars[0].label: expected text, got 5</li>" in note and "<script" not in note


@pytest.mark.parametrize("where, value, path", [
    ("rate", 1e308, "scenario.workload.rate"),
    ("rate", int("9" * 400), "scenario.workload.rate"),
    ("gpus", 10 ** 400, "scenario.fleet.gpus"),
])
def test_a_huge_number_is_refused_with_its_field_named(shipped, where, value, path):
    def spoil(d):
        if where == "rate":
            d["scenario"]["workload"]["rate"] = value
        else:
            d["scenario"]["fleet"]["gpus"] = value
    state = opened(shipped, draft(spoil), "&gpus=5")
    note = first_mission_note(state, shipped)
    assert note.startswith("The mission in this link has a mistake, so it was not opened")
    assert f"<li>{path}: " in note and len(note) < 2_000
    assert ("out of range" if value == 1e308 else "is too large") in note


@pytest.mark.parametrize("value", ["NaN", "1e999", "9" * 5_000])
def test_a_number_json_cannot_carry_where_no_check_reads_is_a_note_not_a_crash(shipped, value):
    text = json.dumps(draft()).replace('"$schema": "./schema.json"', f'"$schema": {value}')
    state = LabState.from_query(shipped, f"?draft={pack(text.encode())}&gpus=5")
    note = first_mission_note(state, shipped)
    assert note.startswith("This mission link could not be opened: the mission holds a number JSON cannot carry")


@pytest.mark.parametrize("trace", ["../../etc/passwd", "/etc/passwd", "traces/../../README.md"])
def test_a_trace_outside_the_missions_folder_is_refused(shipped, trace):
    data = json.loads((REPO / "missions" / "08-conversation-trace.json").read_text(encoding="utf-8"))
    data["scenario"]["workload"] = {"trace": {"path": trace}}
    state = LabState.from_query(shipped, f"?draft={encode_mission(data)}")
    note = first_mission_note(state, shipped)
    assert "<li>scenario.workload.trace.path: " in note and "outside" in note


def test_a_draft_with_many_mistakes_lists_some_and_counts_the_rest(shipped):
    names = ["gpus", "prefill_gpus", "decode_gpus", "chunk_tokens", "rate", "link_gbytes_per_s", "tp"]

    def spoil(d):
        d["controls"] = {name: {"nonsense": 1} for name in names}
        d["colour"] = "blue"
    state = opened(shipped, draft(spoil))
    note = first_mission_note(state, shipped)
    assert note.startswith(f"The mission in this link has {len(names) + 1} mistakes")
    assert note.count("<li>") == MAX_LISTED + 1 and f"<li>and {len(names) + 1 - MAX_LISTED} more</li>" in note
    assert "<li>colour: unknown field" in note and "<li>controls.gpus.nonsense: unknown field" in note


# ---------------------------------------------------------------- broken links

@pytest.mark.parametrize("cut", ["truncated", "oversized", "garbled", "empty", "not an object", "repeated key"])
def test_a_broken_draft_opens_mission_1_with_a_note_and_none_of_its_settings(shipped, cut):
    code = encode_mission(draft())
    bad = {"truncated": code[: len(code) // 2],
           "oversized": "1." + "A" * (MAX_CODE_CHARS + 998),
           "garbled": code[:50] + "<script>" + code[58:],
           "empty": "",
           "not an object": pack(b'["<img src=x onerror=alert(1)>"]'),
           "repeated key": pack(b'{"id": "a", "id": "<script>"}')}[cut]
    search = "?" + urllib.parse.urlencode({"draft": bad, "gpus": "5", "layout": "disaggregated", "pin": "start"})
    state = LabState.from_query(shipped, search)
    note = first_mission_note(state, shipped)
    assert note.startswith("This mission link could not be opened: ")
    assert "<script" not in note and "<img" not in note
    assert state.pin is None
    if cut == "oversized":
        assert "longer than a link holds (8,000 characters)" in note
    if cut == "truncated":
        assert "cut short" in note or "damaged" in note


def test_a_broken_draft_keeps_the_links_hide_but_not_its_settings_or_pin(shipped):
    state = LabState.from_query(shipped, "?draft=1.AAAA&hide=plots&gpus=5&pin=start")
    assert state.hidden == ("plots",) and state.pin is None and state.settings == state.start_settings
    assert state.mission.id == shipped.first().id and state.query() == {"mission": state.mission.id, "hide": "plots"}
    (note,) = state.notes
    assert note.startswith("This mission link could not be opened: ") and "cut short" in note
