"""A shared draft mission (`/lab?draft=CODE`) under `lab serve`, in Chromium.

A draft opens marked as one ("Shared draft mission" and the draft mark under its title),
its stars are kept under its own id (never the shipped mission's it was made from) and are
shown again after a reload; hostile, oversized and cut links open mission 1 with a note,
never a blank page, and nothing in them runs. The state side is in test_draft_state.py.

Every page fails its test on a console error, an uncaught error, a dialog or a request
leaving the machine (conftest.PageWatch). STF_SCREENSHOTS=DIR keeps the screenshot.
"""

import copy
import json
import re
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.mission_link import MAX_CODE_CHARS, draft_id, encode_mission  # noqa: E402
from lab.core.missions import list_missions, load_mission  # noqa: E402
from lab.ui.stars.stars_bridge import STORAGE_KEY  # noqa: E402
from lab.ui.words.draft_words import DRAFT_KICKER, DRAFT_MARK  # noqa: E402
from screenshots import shot  # noqa: E402  (tests/ is on sys.path)
from test_browser import apply_in_ui, settle, stored  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
SHIPPED = json.loads((REPO / "missions" / "07-book-store.json").read_text(encoding="utf-8"))
FIRST = list_missions()[0]
TITLE = "The book store, shared as a draft"
# Every payload that ran would set window.__pwned or open a dialog (PageWatch fails on one).
PAYLOADS = ['<script>window.__pwned=1; alert("script")</script>',
            '<img src=x onerror="window.__pwned=1; alert(\'img\')">',
            '[a javascript link](javascript:window.__pwned=1)',
            '<a href="javascript:window.__pwned=1">a javascript anchor</a>',
            '<svg onload="window.__pwned=1"><circle r="5"/></svg>']
# Elements the payloads would make, searched through every shadow root.
INJECTED = """() => {
    const found = [];
    const stack = [document];
    while (stack.length) {
        const root = stack.pop();
        for (const el of root.querySelectorAll('*')) {
            if (el.shadowRoot) stack.push(el.shadowRoot);
            const tag = el.tagName.toLowerCase();
            if ((tag === 'img' && el.getAttribute('src') === 'x') || tag === 'svg' && el.querySelector('circle[r="5"]')
                || (tag === 'script' && (el.textContent || '').includes('__pwned'))
                || (tag === 'a' && (el.getAttribute('href') || '').toLowerCase().startsWith('javascript:'))) {
                found.push(el.outerHTML.slice(0, 120));
            }
        }
    }
    return found;
}"""


def draft(change=None):
    """Mission 7 as a teacher's draft: another title and place (the star rules unchanged:
    one more colocated GPU, 5, earns star 1)."""
    data = copy.deepcopy(SHIPPED)
    data.update(title=TITLE, order=30)
    if change:
        change(data)
    return data


def open_draft(page, server, data=None, code=None, extra=""):
    code = code if code is not None else encode_mission(data)
    page.goto(f"{server}/lab?draft={code}{extra}")
    settle(page)
    return code


def the_note(page):
    notes = page.locator(".stf-notes-pane .stf-notes")
    notes.wait_for()
    return notes.inner_text()


def opened_mission_one(page):
    """The page opened mission 1 (not blank, not the draft) and names why in a note; returns the note."""
    assert page.locator("h1.stf-title").inner_text() == FIRST.title
    assert page.locator(".stf-kicker").text_content() != DRAFT_KICKER
    assert page.locator(".stf-draft-mark").count() == 0
    assert page.locator(".stf-brief").first.inner_text().strip()  # the mission's brief is there
    note = the_note(page)
    assert f"Opened mission {FIRST.order}, {FIRST.title} instead." in note
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert query.get("mission") == [FIRST.id] and "draft" not in query
    return note


def test_a_draft_link_opens_marked_and_keeps_its_stars_under_its_own_id(page, server):
    data = draft()
    mission = load_mission(data, str(REPO / "missions"))
    code = open_draft(page, server, data)
    assert page.locator(".stf-kicker").text_content() == DRAFT_KICKER
    assert page.locator("h1.stf-title").inner_text() == TITLE
    mark = page.locator(".stf-draft-mark")
    assert mark.is_visible() and mark.get_attribute("role") == "note" and mark.inner_text().startswith(DRAFT_MARK)
    assert page.locator(".stf-notes-pane .stf-notes").count() == 0
    assert page.locator('.stf-head-stars[data-earned="0"]').count() == 1
    page.set_viewport_size({"width": 1366, "height": 900})
    shot(page, "draft-lab-1366.png")

    apply_in_ui(page, mission, "gpus", 5)
    page.locator('.stf-head-stars[data-earned="1"]').wait_for()
    page.wait_for_function(f"(localStorage.getItem({json.dumps(STORAGE_KEY)}) || '').includes('true')")
    saved = stored(page)["stars"]
    assert saved[draft_id(data)][0] is True
    assert SHIPPED["id"] not in saved  # the shipped mission it came from earned nothing
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert query == {"draft": [code], "gpus": ["5"]}

    page.reload()
    settle(page)
    assert page.locator("h1.stf-title").inner_text() == TITLE and page.locator(".stf-draft-mark").is_visible()
    page.locator('.stf-head-stars[data-earned="1"]').wait_for()
    assert page.locator('.stf-star[data-earned="true"]').count() >= 1
    assert SHIPPED["id"] not in stored(page)["stars"]
    page.goto(f"{server}/lab?draft={code}")  # at its start, which earns nothing: the star shown is the stored one
    settle(page)
    page.locator('.stf-head-stars[data-earned="1"]').wait_for()

    page.goto(f"{server}/lab?mission={SHIPPED['id']}")  # the shipped mission: none of the draft's stars
    settle(page)
    assert page.locator('.stf-head-stars[data-earned="0"]').count() == 1


def test_a_draft_whose_brief_and_title_are_scripts_shows_them_as_text(page, server):
    def spoil(d):
        d["title"] = '"><img src=x onerror="window.__pwned=1"> Hostile <b>title</b>'
        d["brief"] = ["Every line below is hostile and shows as text.", ""] + [x for p in PAYLOADS for x in (p, "")] + [
            "**Try:** nothing here runs."]
        d["stars"][0]["label"] = '<script>window.__pwned=1</script> star'
    open_draft(page, server, draft(spoil))
    assert page.locator(".stf-kicker").text_content() == DRAFT_KICKER
    assert "<img src=x" in page.locator("h1.stf-title").inner_text()  # as text
    brief = page.locator(".stf-brief").first
    assert '<script>window.__pwned=1; alert("script")</script>' in brief.inner_text()
    for node in ("script", "img", "svg", "a"):
        assert page.locator(f".stf-brief {node}").count() == 0, node
    for i in range(page.locator(".stf-brief *").count()):
        if page.locator(".stf-brief *").nth(i).is_visible():
            page.locator(".stf-brief *").nth(i).hover(timeout=5_000)
    assert page.evaluate(INJECTED) == []
    assert page.evaluate("typeof window.__pwned") == "undefined"  # and no dialog: PageWatch


def test_an_oversized_draft_link_opens_mission_one_with_a_note(page, server):
    code = "1." + "A" * (9_000 - 2)
    assert len(code) == 9_000 > MAX_CODE_CHARS
    open_draft(page, server, code=code, extra="&gpus=5")
    note = opened_mission_one(page)
    assert "This mission link could not be opened: the link's mission is longer than a link holds (8,000 characters)" in note
    assert "gpus" not in urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)  # the draft's settings were not applied


@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_a_cut_draft_link_opens_mission_one_with_a_note(page, server, keep):
    code = encode_mission(draft())
    open_draft(page, server, code=code[: int(len(code) * keep)])
    note = opened_mission_one(page)
    assert "This mission link could not be opened: the link's mission is cut short" in note


def test_a_draft_with_mistakes_names_them_and_nothing_in_them_runs(page, server):
    def spoil(d):
        d["scenario"]["workload"] = {"trace": {"path": "../../etc/passwd"}}
        d["controls"]["layout"]["choices"] = ['<img src=x onerror="window.__pwned=1">', "colocated"]
    open_draft(page, server, draft(spoil), extra="&gpus=5")
    note = opened_mission_one(page)
    assert note.startswith("The mission in this link has 2 mistakes, so it was not opened")
    assert "controls.layout.choices[0]: '<img src=x onerror=\"window.__pwned=1\">' is not one of" in note  # as text
    assert "scenario.workload.trace.path: '../../etc/passwd' resolves to " in note and "outside" in note
    assert page.locator(".stf-notes img").count() == 0
    assert page.evaluate(INJECTED) == [] and page.evaluate("typeof window.__pwned") == "undefined"


def test_a_long_draft_keeps_a_changed_setting_in_its_address(page, server):
    import random

    rng = random.Random(3)
    data = draft(lambda d: d["brief"].append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz ") for _ in range(5_000))))
    code = open_draft(page, server, data)
    assert 4_000 < len(code) < MAX_CODE_CHARS
    page.locator(".stf-control-gpus .noUi-handle").focus()
    page.keyboard.press("ArrowRight")  # 4 -> 5 colocated GPUs: star 1
    page.locator('.stf-head-stars[data-earned="1"]').wait_for()  # the change ran
    settle(page)
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert query == {"draft": [code], "gpus": ["5"]}


def test_a_shared_drafts_edit_link_opens_it_on_the_author_page(new_page, server):
    page = new_page()
    code = open_draft(page, server, draft(lambda d: d.update(title="Edited elsewhere")))
    href = page.locator("a.stf-draft-edit").get_attribute("href")
    assert href == f"author?draft={code}"
    page.locator("a.stf-draft-edit").click()
    page.wait_for_url(re.compile(r"/author\?draft="))
    page.locator(".stf-author-title input").wait_for()
    page.wait_for_function("""() => { const f = (r) => { for (const e of r.querySelectorAll('*')) {
        if (e.tagName === 'INPUT' && e.value === 'Edited elsewhere') return true;
        if (e.shadowRoot && f(e.shadowRoot)) return true; } return false; }; return f(document); }""")
