"""Mission text never runs, and stars never get lost: the renderer, the storage bridge, `lab serve`.

- The brief renderer (lab/ui/words/mission_text.py) on a corpus of XSS payloads: only the
  allowed elements, no on* attribute, no link outside http/https/mailto/relative.
- `lab serve --missions DIR` with hostile missions (brief, titles, summaries, star and
  control labels): every page visited and the payloads poked (hover, click, open),
  `window.__pwned` never set, the pages still render.
- A star earned by the first change on a fresh page is in localStorage once the page shows
  it, in 16 of 16 fresh browsers (the bridge resends until the page confirms); the first
  run itself earns nothing (stars count once the student changes a control).
- Storage edge cases on the `lab serve` hub: a near-quota corrupt value is kept, every
  backup is kept (two recoveries + a reset = three), Object.prototype names as keys.
"""

import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from mission_text_payloads import (CONSTRUCTOR_ID, DANGEROUS, EASY_ID, FILL_TO_QUOTA, HOSTILE_LABEL, HOSTILE_TITLE,
                                   PAYLOADS, poke, pwned, settle,  # noqa: E402
                                   write_hostile_missions)

from lab.core.missions import list_missions  # noqa: E402
from lab.ui.words.mission_text import ALLOWED_SCHEMES, ALLOWED_TAGS, brief_html, plain, safe_href  # noqa: E402
from lab.ui.stars.stars_bridge import BACKUP_KEY, STORAGE_KEY, StarsBridge, clean_stars  # noqa: E402
from site_build import pages  # noqa: E402  (build.py's hub page)
from site_build.missions import missions_index  # noqa: E402

REPO = TESTS.parent


# ---------------------------------------------------------------- the renderer


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []
        self.attrs = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [(tag, k, v) for k, v in attrs]

    handle_startendtag = handle_starttag


def _parsed(markup):
    c = _Collect()
    c.feed(markup)
    c.close()
    return c


def _scheme(url):
    m = re.match(r"^([^/?#]*?):", re.sub(r"[\x00-\x20]", "", url))
    return m.group(1).lower() if m else None


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_brief_payload_renders_to_allowed_elements_only(payload):
    out = brief_html(f"Intro.\n\n{payload}\n\nInline {payload} too.")
    found = _parsed(out)
    assert set(found.tags) <= ALLOWED_TAGS, (payload, out)
    for tag, name, value in found.attrs:
        assert not name.startswith("on"), (payload, out)
        assert name in ("href", "title", "target", "rel"), (payload, out)
        if name == "href":
            assert _scheme(value) in (None, *ALLOWED_SCHEMES), (payload, out)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_debrief_or_outro_payload_renders_to_allowed_elements_only(payload):
    # Both are shown once stars are earned (metrics_view.stars_html), through the brief's renderer.
    from lab.core.missions import load_mission
    from lab.ui.views.metrics_view import stars_html

    base = list_missions(REPO / "missions")[0].to_dict()
    star = {"label": "one", "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.5}],
            "debrief": f"Why: {payload}"}
    mission = load_mission({**base, "stars": [star], "outro": f"Next.\n\n{payload}"})
    out = stars_html(mission, {"slo_attainment": 0.9}, [True], [True])
    assert 'data-debrief="0"' in out and 'data-outro="true"' in out
    found = _parsed(out)
    assert not any(name.startswith("on") for _tag, name, _value in found.attrs), (payload, out)
    assert not set(found.tags) & set(DANGEROUS), (payload, out)


def test_the_brief_keeps_the_markdown_it_may_use():
    out = brief_html("# Head\n\n**bold** _it_ `code`\n\n- one\n- two\n\n1. first\n\n> quote\n\n"
                     "[web](https://example.org/a?b=1) [mail](mailto:a@example.org) [here](lab?mission=x)\n\n"
                     "```\n<b>fenced</b>\n```\n\n---\n\n![alt **text**](https://example.org/i.png)")
    found = _parsed(out)
    assert {"h1", "strong", "em", "code", "ul", "ol", "li", "blockquote", "a", "pre", "hr"} <= set(found.tags)
    hrefs = [v for t, k, v in found.attrs if k == "href"]
    assert hrefs == ["https://example.org/a?b=1", "mailto:a@example.org", "lab?mission=x"]
    assert ("a", "rel", "noopener noreferrer") in found.attrs  # a web link opens apart from the lab
    assert "&lt;b&gt;fenced&lt;/b&gt;" in out
    assert "img" not in found.tags and "alt text" in out  # images show as their alt text


@pytest.mark.parametrize("url, ok", [
    ("https://example.org", True), ("HTTP://x", True), ("mailto:a@b.c", True), ("lab?mission=x", True),
    ("../x/y.html", True), ("#part", True), ("/abs", True), ("a/b:c", True),
    ("javascript:alert(1)", False), ("JaVaScRiPt:1", False), ("java\tscript:1", False), (" javascript:1", False),
    ("jav%61script:1", False), ("data:text/html,x", False), ("vbscript:x", False), ("file:///etc/passwd", False),
    ("blob:x", False), ("x:1", False),
])
def test_links_are_limited_to_web_mail_and_relative_addresses(url, ok):
    assert safe_href(url) is ok


def test_plain_text_is_never_markup():
    for text in PAYLOADS + [HOSTILE_TITLE, HOSTILE_LABEL]:
        out = plain(text)
        assert "<" not in out and ">" not in out and '"' not in out and "'" not in out
    assert plain('a "b" <c> & d') == "a &quot;b&quot; &lt;c&gt; &amp; d"


def test_json_embedded_in_a_page_cannot_close_or_reopen_its_script_element():
    data = {"missions": [{"title": p, "summary": p + "\u2028", "stars": [p]} for p in PAYLOADS + ["&amp; a & b"]]}
    text = pages._json_for_html(data)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == data


def test_the_hub_page_embeds_hostile_missions_as_inert_json(tmp_path):
    missions = missions_index(write_hostile_missions(tmp_path / "m"))
    page = pages.hub_html(missions, version="0", pyodide_version="0")
    body = page.split('id="stf-missions-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body and json.loads(body)["missions"][0]["title"] == HOSTILE_TITLE


# ---------------------------------------------------------------- the stars bridge, Python side


def test_clean_stars_takes_object_prototype_names_as_plain_keys_or_drops_them():
    data = {"constructor": [True, False], "__proto__": [True], "toString": [True], "hasOwnProperty": [True],
            "valueof": [True], "mixing-hurts": [True]}
    out = clean_stars(data)
    assert out == {"constructor": [True, False], "valueof": [True], "mixing-hurts": [True]}
    assert type(out) is dict and {}.__class__ is dict  # nothing leaked into dict itself
    # The page sends pairs (Bokeh cannot serialize an object with a "constructor" key).
    assert clean_stars([[k, v] for k, v in data.items()] + [["x"], "y", [["a"], [True]]]) == out


class _Recorder(StarsBridge):
    """A bridge whose messages to the page are recorded instead of sent."""

    def __init__(self, **params):
        super().__init__(**params)
        self.sent = []

    def _send_msg(self, msg):
        self.sent.append(msg)


def test_the_bridge_keeps_an_earn_until_the_page_confirms_it_and_resends_on_render():
    bridge = _Recorder()
    bridge.earn("mixing-hurts", [True, False, False])  # before the page's component exists: lost
    assert bridge.pending == {"mixing-hurts": [True, False, False]}
    assert len(bridge.sent) == 1
    bridge.earn("mixing-hurts", [False, True, False])  # pending stars are OR-merged
    assert bridge.pending == {"mixing-hurts": [True, True, False]}
    bridge.sent.clear()
    # The component renders and says what storage holds: not these stars, so they go again.
    bridge._handle_msg({"type": "stars", "stars": {"other": [True]}, "status": "ok", "hello": True})
    assert bridge.sent == [{"type": "earn", "missions": [{"mission": "mixing-hurts", "stars": [True, True, False]}]}]
    assert bridge.pending and bridge.loaded
    # A timer tick resends while unconfirmed ...
    bridge._on_retry()
    assert len(bridge.sent) == 2
    # ... a reply holding only part of them keeps the rest pending; one holding all clears it.
    bridge._handle_msg({"type": "stars", "stars": {"mixing-hurts": [True]}, "status": "ok", "ack": True})
    assert bridge.pending == {"mixing-hurts": [True, True, False]}
    bridge._handle_msg({"type": "stars", "stars": {"mixing-hurts": [True, True, True]}, "status": "ok", "ack": True})
    assert bridge.pending == {} and bridge.stars == {"mixing-hurts": [True, True, True]}
    bridge.sent.clear()
    bridge._on_retry()
    bridge._handle_msg({"type": "stars", "stars": {}, "status": "ok", "hello": True})
    assert bridge.sent == []  # nothing pending: nothing resent


def test_the_bridge_lists_only_backup_keys():
    bridge = _Recorder()
    keys = [BACKUP_KEY, BACKUP_KEY + ":2", BACKUP_KEY + ":x", "other", STORAGE_KEY, None]
    bridge._handle_msg({"type": "stars", "stars": {}, "status": "recovered", "backups": keys})
    assert bridge.backups == [BACKUP_KEY, BACKUP_KEY + ":2"] and bridge.status == "recovered"


# ---------------------------------------------------------------- lab serve, in the browser


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, missions_server):
    folder = write_hostile_missions(tmp_path_factory.mktemp("hostile-missions"))
    return missions_server(folder), {m.id: m for m in list_missions(str(folder))}


def test_hostile_missions_never_run_on_the_lab_serve_hub(page, hostile):
    base, missions = hostile
    page.goto(base + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    cards = page.locator("a.stf-mission")
    assert cards.count() == len(missions) + 1
    for mid, m in missions.items():
        card = page.locator(f'a.stf-mission[data-mission="{mid}"]')
        assert card.locator(".name").inner_text() == m.title
        assert card.locator(".one").inner_text() == m.summary
    poke(page, "ul.stf-missions")
    for sel in DANGEROUS:
        assert page.locator(f"ul.stf-missions {sel}").count() == 0, sel
    assert pwned(page) == "undefined"


@pytest.mark.parametrize("query", ["mission=xss-brief", "mission=xss-brief&embed=1", "mission=xss-comment",
                                   "mission=xss-close"])
def test_hostile_briefs_titles_and_labels_never_run_in_the_lab(page, hostile, query):
    base, missions = hostile
    m = missions[re.search(r"mission=([a-z-]+)", query).group(1)]
    page.goto(f"{base}/lab?{query}")
    settle(page)
    assert page.locator("h1.stf-title").inner_text() == m.title
    brief = page.locator(".stf-brief")
    if "embed=1" in query:  # the brief is folded away in an embed: open it
        page.locator(".card-header", has_text="Brief").first.click()
    brief.wait_for()
    text = brief.inner_text()
    if m.id == "xss-brief":
        for p in ("<script>window.__pwned=1</script>", '<img src=x onerror="window.__pwned=1">',
                  "<!--<script>", "[a markdown javascript link](javascript:window.__pwned=1)"):
            assert p in text, p
        assert brief.locator("a").count() == 1 and brief.locator("a").get_attribute("href") == "#stf-safe"
        assert brief.locator("strong").count() >= 2
    for sel in DANGEROUS:
        assert page.locator(f".stf-brief {sel}").count() == 0, sel
        assert page.locator(f".stf-title {sel}").count() == 0, sel
    poke(page, ".stf-brief")
    for star in m.stars:  # the star list shows every label as text
        assert page.get_by_text(star.label, exact=True).count() >= 1, star.label
    page.locator(".stf-star, .stf-stars, [class*=stf-star]").first.hover()
    assert pwned(page) == "undefined"
    # The page still works: its link back to the hub shows the mission list.
    if "embed=1" not in query:
        page.goto(base + "/")
        page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
        assert page.locator("a.stf-mission").count() == len(missions) + 1
        assert pwned(page) == "undefined"


def test_a_star_earned_by_the_first_change_is_saved_in_16_fresh_browsers(browser, hostile):
    """The page shows the star at once; localStorage must hold it too, every time."""
    base, _ = hostile
    saved = 0
    failures = []
    for i in range(16):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            page.goto(f"{base}/lab?mission={EASY_ID}")
            settle(page)
            assert page.locator('.stf-head-stars[data-earned="0"]').count() == 1  # the start earns nothing
            page.get_by_role("button", name="Split (prefill | decode)").first.click()
            page.locator('.stf-head-stars[data-earned="1"]').wait_for(timeout=60_000)  # shown as earned
            settle(page)
            try:
                page.wait_for_function(
                    f"""() => {{ try {{ const s = JSON.parse(localStorage.getItem({json.dumps(STORAGE_KEY)}));
                        return s.stars[{json.dumps(EASY_ID)}][0] === true; }} catch (e) {{ return false; }} }}""",
                    timeout=15_000)
                saved += 1
            except Exception as exc:  # noqa: BLE001 - counted and reported below
                failures.append(f"browser {i}: {type(exc).__name__}")
        finally:
            context.close()
    assert saved == 16, failures


def _stored(page):
    raw = page.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})")
    return None if raw is None else json.loads(raw)


def _hub(page, base):
    page.goto(base + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()


def test_object_prototype_names_do_not_break_the_lab_serve_hub(page, hostile):
    base, missions = hostile
    _hub(page, base)
    raw = ('{"version": 1, "stars": {"__proto__": [true, true], "constructor": [true, false], "toString": [true], '
           '"hasOwnProperty": [true], "valueOf": [true], "' + EASY_ID + '": [true, false]}}')
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [STORAGE_KEY, raw])
    _hub(page, base)
    assert page.locator(f'a.stf-mission[data-mission="{CONSTRUCTOR_ID}"]').get_attribute("data-stars") == "1"
    assert page.locator(f'a.stf-mission[data-mission="{EASY_ID}"]').get_attribute("data-stars") == "1"
    # The total is its own pane, which may come a patch after the cards on a busy machine.
    page.locator('.stf-hub-total .stf-total[data-earned="2"]').wait_for()
    assert "could not be read" in page.locator(".stf-hub-note .stf-notes").inner_text()
    assert page.evaluate(f"localStorage.getItem({json.dumps(BACKUP_KEY)})") == raw
    assert _stored(page) == {"version": 1, "stars": {CONSTRUCTOR_ID: [True, False], EASY_ID: [True, False]}}
    # The mission named constructor plays and saves like any other; the other mission's stars stay.
    page.goto(f"{base}/lab?mission={CONSTRUCTOR_ID}")
    page.locator('.stf-head-stars[data-earned="1"]').wait_for()
    settle(page)
    _hub(page, base)
    assert page.locator(f'a.stf-mission[data-mission="{EASY_ID}"]').get_attribute("data-stars") == "1"
    assert _stored(page)["stars"][EASY_ID] == [True, False]


def _backup_keys(page):
    return page.evaluate("""() => Object.keys(localStorage).filter(k => k.startsWith(%s)).sort()""" % json.dumps(BACKUP_KEY))


def test_two_recoveries_and_a_reset_keep_three_backups_on_the_lab_serve_hub(page, hostile):
    base, _ = hostile
    _hub(page, base)
    first = '{"version": 1, "stars": {"' + EASY_ID + '": [true, "x"]}}'
    second = "{not json"
    for raw in (first, second):
        page.evaluate("([k, v]) => localStorage.setItem(k, v)", [STORAGE_KEY, raw])
        _hub(page, base)
        assert "could not be read" in page.locator(".stf-hub-note .stf-notes").inner_text()
    page.evaluate("([k, v]) => localStorage.setItem(k, v)",
                  [STORAGE_KEY, json.dumps({"version": 1, "stars": {EASY_ID: [True, True]}})])
    _hub(page, base)
    page.locator(f'a.stf-mission[data-mission="{EASY_ID}"][data-stars="2"]').wait_for()
    button = page.locator(".stf-reset-progress button")
    button.click()
    page.locator(".stf-reset-progress button", has_text="again").wait_for()
    button.click()
    page.locator(f'a.stf-mission[data-mission="{EASY_ID}"][data-stars="0"]').wait_for()
    keys = _backup_keys(page)
    assert len(keys) == 3, keys
    values = sorted(page.evaluate("(ks) => ks.map(k => localStorage.getItem(k))", keys))
    assert values == sorted([first, second, json.dumps({"version": 1, "stars": {EASY_ID: [True, True]}})])
    assert page.evaluate(f"localStorage.getItem({json.dumps(BACKUP_KEY)})") == json.dumps(
        {"version": 1, "stars": {EASY_ID: [True, True]}})  # the newest has the plain key
    listed = page.locator('.stf-hub-backups [data-backups="3"]')
    listed.wait_for()
    assert all(k in listed.inner_text() for k in keys)
    # Clearing them asks first, then removes every one.
    clear = page.locator(".stf-clear-backups button")
    clear.click()
    page.locator(".stf-clear-backups button", has_text="again").wait_for()
    assert len(_backup_keys(page)) == 3
    clear.click()
    page.wait_for_function("() => !Object.keys(localStorage).some(k => k.startsWith(%s))" % json.dumps(BACKUP_KEY))
    page.locator(".stf-hub-backups").wait_for(state="hidden")


# A corrupt value over half the quota: there is no room for a copy of it.
BIG_CORRUPT = """([key, n, id]) => {
    const raw = '{"version": 1, "stars": {"' + id + '": [true, false], "junk": "' + "j".repeat(n) + '"}}';
    localStorage.setItem(key, raw);
    return raw.length;
}"""
HELD = """([n, id]) => {
    const raw = '{"version": 1, "stars": {"' + id + '": [true, false], "junk": "' + "j".repeat(n) + '"}}';
    return Object.keys(localStorage).filter(k => localStorage.getItem(k) === raw);
}"""


def test_a_near_quota_corrupt_value_is_kept_not_dropped_on_the_lab_serve_hub(page, hostile):
    base, _ = hostile
    _hub(page, base)
    quota = page.evaluate(FILL_TO_QUOTA)
    n = int(quota * 0.6)
    page.evaluate(BIG_CORRUPT, [STORAGE_KEY, n, EASY_ID])
    _hub(page, base)
    assert page.locator(f'a.stf-mission[data-mission="{EASY_ID}"]').get_attribute("data-stars") == "1"
    held = page.evaluate(HELD, [n, EASY_ID])
    assert held == [BACKUP_KEY], held  # moved, whole, to the backup key
    assert _stored(page) == {"version": 1, "stars": {EASY_ID: [True, False]}}


def test_hostile_values_in_the_address_show_as_text_in_the_ignored_notes(page, hostile):
    base, _ = hostile
    page.goto(f"{base}/lab?mission=xss-brief&gpus=%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E"
              "&%3Csvg%20onload%3Dwindow.__pwned%3D1%3E=1")
    settle(page)
    notes = page.locator(".stf-notes-pane .stf-notes")
    notes.wait_for()
    text = notes.inner_text()
    assert "Ignored gpus=<img src=x onerror=window.__pwned=1>" in text
    assert "Ignored <svg onload=window.__pwned=1>" in text
    for sel in DANGEROUS:
        assert page.locator(f".stf-notes-pane .stf-notes {sel}").count() == 0, sel
    poke(page, ".stf-notes-pane .stf-notes")
    assert pwned(page) == "undefined"
