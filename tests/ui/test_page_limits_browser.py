"""The page at its limits, under `lab serve` (issue 35, second pass): what a student or an
author can throw at it, and the page still says what happened and keeps working.

- A mission whose text holds a 300-character word: it wraps, nothing scrolls sideways, at
  1366 px and at 390 px, on the lab page, the hub and the static site's pre-rendered first
  view (lab/ui/prerender.py, shown alone).
- An address of 1,200 parameters, or one over 64 KB (to 250,000 characters: the lab reads
  200,000): `lab serve` answers with the page, the page says what it ignored, and a control
  change still runs.
- A trace upload under the file bound (16 MB) but over the message bound (20 MB as sent): a
  fully quoted CSV with CRLF line ends, 15.6 MB and 25.2 MB as JSON, past Bokeh's 20 MiB
  websocket limit. Refused with a note, the earlier trace still replays, the page still runs.
- A full localStorage: a star earned is shown, named as not saved because storage is full
  (not as storage being disabled), still there on the hub in the same tab, and saved once
  there is room.
"""

import json
import random
import string
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from mission_text_payloads import EASY_ID, FILL_ALL, FILL_TO_QUOTA, settle, write_hostile_missions  # noqa: E402
from screenshots import shot  # noqa: E402

pytestmark = pytest.mark.browser

WORD = ("Disaggregation" * 22)[:300]  # one word of 300 letters: no break opportunity in it
LONG_ID = "long-words"


def _long_word_mission():
    return {
        "id": LONG_ID, "order": 1, "title": f"Title {WORD}", "summary": WORD[:190],
        "brief": [f"A brief with {WORD} in it.", "", f"**Try:** {WORD}"],
        "scenario": {
            "workload": {"rate": 4, "duration_s": 20, "prompt_tokens": 1000, "output_tokens": 100},
            "fleet": {"layout": "colocated", "gpus": 2, "prefill_gpus": 1, "decode_gpus": 1},
            "slo": {"ttft_s": 1.5, "tpot_ms": 25}, "seed": 3, "drain_s": 30,
        },
        "controls": {"layout": {"choices": ["colocated", "disaggregated"]},
                     "gpus": {"min": 1, "max": 4, "label": f"GPUs {WORD}"}},
        "stars": [{"label": f"Star {WORD}", "when": [{"metric": "gpus", "op": ">=", "value": 1}]}],
    }


@pytest.fixture(scope="module")
def long_words(tmp_path_factory, missions_server):
    folder = tmp_path_factory.mktemp("long-word-missions")
    (folder / f"01-{LONG_ID}.json").write_text(json.dumps(_long_word_mission()), encoding="utf-8")
    return missions_server(folder)


# Every element showing mission text, and the page: (what, scrollWidth, clientWidth) of each that scrolls sideways.
OVERFLOWING = """() => {
    const out = [];
    const doc = document.documentElement;
    if (doc.scrollWidth > doc.clientWidth) out.push(["page", doc.scrollWidth, doc.clientWidth]);
    const walk = (root) => {
        for (const el of root.querySelectorAll("*")) {
            if (el.shadowRoot) walk(el.shadowRoot);
            const cls = typeof el.className === "string" ? el.className : "";
            if (/stf-(brief|title|star\\b|stars|mission|hub)/.test(cls) && el.scrollWidth > el.clientWidth + 1
                && getComputedStyle(el).overflowX === "visible") {
                out.push([cls, el.scrollWidth, el.clientWidth]);
            }
        }
    };
    walk(document);
    return out;
}"""


@pytest.mark.parametrize("width", [1366, 390])
def test_a_300_character_word_in_a_mission_wraps_and_nothing_scrolls_sideways(browser, long_words, width):
    ctx = browser.new_context(viewport={"width": width, "height": 800})
    try:
        pg = ctx.new_page()
        errors = []
        pg.on("pageerror", lambda e: errors.append(str(e)))
        pg.goto(f"{long_words}/lab?mission={LONG_ID}")
        settle(pg)
        brief = pg.locator(".stf-brief").first
        brief.wait_for()
        assert WORD in brief.inner_text()
        shot(pg, f"long-word-lab-{width}.png")
        assert pg.evaluate(OVERFLOWING) == []
        box = brief.bounding_box()
        assert box["x"] + box["width"] <= width  # the brief ends inside the screen
        pg.goto(f"{long_words}/")
        pg.locator('ul.stf-missions[data-loaded="true"]').wait_for()
        shot(pg, f"long-word-hub-{width}.png")
        assert pg.evaluate(OVERFLOWING) == []
        assert errors == []
    finally:
        ctx.close()


@pytest.mark.parametrize("width", [1366, 390])
def test_a_300_character_word_wraps_in_the_static_sites_first_view_too(browser, tmp_path, width):
    from lab.ui.prerender import first_view_html

    folder = tmp_path / "missions"
    folder.mkdir()
    (folder / f"01-{LONG_ID}.json").write_text(json.dumps(_long_word_mission()), encoding="utf-8")
    view = first_view_html(f"mission={LONG_ID}", missions_dir=str(folder))
    ctx = browser.new_context(viewport={"width": width, "height": 800})
    try:
        pg = ctx.new_page()
        pg.set_content(f'<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">'
                       f'</head><body style="margin:0">{view}</body></html>')
        assert WORD in pg.locator(".stf-first .stf-brief").inner_text()
        shot(pg, f"long-word-first-view-{width}.png")
        assert pg.evaluate(OVERFLOWING.replace("stf-(brief|", "stf-(fv-label|fv-control|fv-side|brief|")) == []
    finally:
        ctx.close()


def _notes(pg):
    notes = pg.locator(".stf-notes-pane .stf-notes")
    notes.wait_for()
    return notes.inner_text()


def _ran_after(pg, run):
    """Wait (bounded) for a run newer than `run` to be drawn; returns its number."""
    status = pg.locator('.stf-status[data-busy="false"][data-run]')
    pg.wait_for_function("""(run) => {
        const find = (root) => { for (const el of root.querySelectorAll("*")) {
            if (el.matches('.stf-status[data-busy="false"][data-run]')) return el;
            if (el.shadowRoot) { const got = find(el.shadowRoot); if (got) return got; } } return null; };
        const el = find(document);
        return el !== null && Number(el.dataset.run) > run;
    }""", arg=run)
    return int(status.get_attribute("data-run"))


def _letters(n, seed=35):
    """Random letters: what compresses worst in Bokeh's session token (url_limits.py)."""
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters) for _ in range(n))


@pytest.mark.parametrize("query, needle", [
    ("&".join(f"x{i}=1" for i in range(1_200)), "The address has 1,201 parameters"),
    ("junk=" + "j" * 70_000, "Ignored junk: not a setting of the lab"),
    ("&".join(f"x{i}=" + _letters(146, i) for i in range(1_300)), "The address has 1,301 parameters"),
    ("junk=" + _letters(250_000), "The address is 250,026 characters long"),
], ids=["1,200 parameters", "a 70 KB value", "a 199 KB query", "a 250 KB query"])
def test_an_oversized_address_opens_the_page_with_a_note(server, page, query, needle):
    page.goto(f"{server}/lab?mission=mixing-hurts&{query}")
    settle(page)
    assert "Mixing" in page.locator(".stf-title").inner_text()  # the mission the address names
    text = _notes(page)
    assert needle in text, text
    shot(page, f"long-url-{len(query)}.png")
    # The page works: a control change runs.
    run = int(page.locator('.stf-status[data-busy="false"][data-run]').get_attribute("data-run"))
    page.locator(".stf-control-layout button", has_text="Split").click()
    assert _ran_after(page, run) > run


QUOTED_HEADER = '"arrival_s","prompt_tokens","output_tokens"\r\n'


def test_a_trace_that_grows_past_the_message_limit_is_refused_and_the_page_runs_on(server, page):
    from lab.ui.browser.trace_upload import MAX_SENT_BYTES, MAX_UPLOAD_BYTES, sent_bytes

    page.goto(f"{server}/lab?mission=sandbox")
    first = settle(page)
    upload = page.locator(".stf-trace-upload input[type=file]")
    small = QUOTED_HEADER + "".join(f'"{i * 0.25:.2f}","{1000 + 10 * i}","{50 + i}"\r\n' for i in range(120))
    upload.set_input_files(files=[{"name": "quoted.csv", "mimeType": "text/csv", "buffer": small.encode()}])
    replay = page.locator(".stf-replay")
    replay.wait_for()
    assert "Replaying quoted.csv: 120 requests" in replay.inner_text()  # quotes and CRLF are fine in themselves
    run = _ran_after(page, first)

    big = QUOTED_HEADER + '"1","2","3"\r\n' * 1_200_000
    size, sent = len(big.encode()), sent_bytes("big.csv", big)
    assert size < MAX_UPLOAD_BYTES < MAX_SENT_BYTES < sent  # under the file bound, over the message bound
    upload.set_input_files(files=[{"name": "big.csv", "mimeType": "text/csv", "buffer": big.encode()}])
    error = page.locator(".stf-upload-error")
    error.wait_for()
    text = error.inner_text()
    assert f"big.csv is {size / 1e6:.1f} MB, but {sent / 1e6:.1f} MB as the page sends it" in text, text
    assert f"the limit is {MAX_SENT_BYTES / 1e6:g} MB" in text
    assert "Replaying quoted.csv" in replay.inner_text()  # the previous workload stays
    shot(page.locator(".stf-sidebar"), "upload-refused.png")
    # The connection is alive: a control change still runs, on the replayed trace.
    page.locator(".stf-control-layout button", has_text="Split").click()
    later = _ran_after(page, run)
    assert page.locator(f'.stf-status[data-run="{later}"]').inner_text().startswith("120 requests")


def test_a_star_earned_in_full_storage_is_named_not_saved_kept_for_the_tab_and_saved_once_there_is_room(
        tmp_path_factory, missions_server, page):
    from lab.ui.stars.stars_bridge import STORAGE_KEY, STORAGE_NOTES

    base = missions_server(write_hostile_missions(tmp_path_factory.mktemp("easy-missions")))
    page.goto(f"{base}/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    quota = page.evaluate(FILL_TO_QUOTA)
    filled = page.evaluate(FILL_ALL, quota)
    assert filled is not None and filled[1] == "QuotaExceededError", filled  # full: not one more character
    keys = filled[0]

    page.goto(f"{base}/lab?mission={EASY_ID}")
    settle(page)
    page.get_by_role("button", name="Split (prefill | decode)").first.click()
    page.locator('.stf-head-stars[data-earned="1"]').wait_for()  # earned, and shown
    notes = page.locator(".stf-notes-pane .stf-notes", has_text="storage for this site is full")
    notes.wait_for()
    assert "not saved" in notes.inner_text() and "does not let the page store data" not in notes.inner_text()
    assert page.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})") is None  # no room for it
    shot(page, "storage-full-lab.png")

    page.goto(f"{base}/")  # the same tab: the star is still there, still named as not saved
    # (the card is drawn before the stars bridge has read the tab's stars: wait for them)
    page.locator(f'a.stf-mission[data-mission="{EASY_ID}"][data-stars="1"]').wait_for()
    hub_note = page.locator(".stf-hub-note .stf-notes", has_text="storage for this site is full")
    hub_note.wait_for()
    assert hub_note.inner_text().strip() == STORAGE_NOTES["full"]
    shot(page, "storage-full-hub.png")

    page.evaluate("(keys) => keys.forEach((k) => localStorage.removeItem(k))", keys)  # room again
    page.goto(f"{base}/")
    page.locator(f'a.stf-mission[data-mission="{EASY_ID}"][data-stars="1"]').wait_for()
    page.wait_for_function(f"""() => {{ try {{ const s = JSON.parse(localStorage.getItem({json.dumps(STORAGE_KEY)}));
        return s.stars[{json.dumps(EASY_ID)}][0] === true; }} catch (e) {{ return false; }} }}""")
    page.locator(".stf-hub-note").wait_for(state="hidden")
