"""Stars from a cross-site embed of `lab serve` (127.0.0.1 framed by a page on localhost):
Chromium gives the iframe no storage, so the lab keeps its stars for the visit and offers
the progress code, the "Open the full lab" link (#progress=CODE) and the storage request;
the top-level hub takes the code, and the link's fragment is merged and then removed."""

import json

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import list_missions  # noqa: E402
from lab.ui.stars.stars_bridge import STORAGE_KEY  # noqa: E402
from lab.ui.words.control_words import CHOICE_LABELS  # noqa: E402
from test_browser import winning_change  # noqa: E402
from progress_codes import REPORTED, verdict  # noqa: E402  (tests/ is on sys.path)

pytestmark = pytest.mark.browser


def _other_site(base):
    return base.replace("127.0.0.1", "localhost")


def _move_in(host, frame, mission, name, value):
    """Set one control in the framed lab the way a student would (a click, or arrow keys)."""
    control = mission.controls[name]
    if control.kind == "choice":
        label = CHOICE_LABELS.get(name, {}).get(value, str(value))
        frame.locator(f".stf-control-{name}").get_by_role("button", name=label, exact=True).click()
        return
    handle = frame.locator(f".stf-control-{name} .noUi-handle")
    steps = int(round((value - float(handle.get_attribute("aria-valuenow"))) / (control.step or 1)))
    handle.focus()
    for _ in range(abs(steps)):
        host.keyboard.press("ArrowRight" if steps > 0 else "ArrowLeft")


def test_a_cross_site_lab_embed_earns_a_star_and_the_hub_takes_its_code(browser, new_page, server):
    m1 = list_missions()[0]
    ctx = browser.new_context(viewport={"width": 900, "height": 900})
    ctx.set_default_timeout(30_000)
    try:
        host = new_page(ctx)
        host.goto(_other_site(server) + "/")  # another site ("the blog"): same server, other host name
        host.set_content(f'<iframe id="f" src="{server}/lab?mission={m1.id}&embed=1" width="760" height="860"></iframe>')
        frame = host.frame_locator("#f")
        frame.locator('.stf-status[data-busy="false"][data-run]').wait_for(state="attached")
        for name, value in winning_change(m1):  # stars count once the student changes a control
            _move_in(host, frame, m1, name, value)
        frame.locator('.stf-star[data-earned="true"]').first.wait_for()
        inner = next(f for f in host.frames if f != host.main_frame)
        assert inner.evaluate("() => { try { localStorage.length; return 'storage'; } catch (e) { return e.name; } }") \
            == "SecurityError"
        earned = frame.locator('.stf-star[data-earned="true"]').count()
        frame.locator(".stf-storage-access button").wait_for()  # offered: the embed has no storage
        frame.locator(".stf-copy-progress button").click()
        code = frame.locator(".stf-progress-code").get_attribute("data-code")
        assert code.startswith("STF1-")
        link = frame.locator("a.stf-open-full")
        link.wait_for()
        href = link.get_attribute("href")
        assert href == f"lab?mission={m1.id}#progress={code}"

        hub = new_page(ctx)
        hub.goto(server + "/")
        hub.locator('ul.stf-missions[data-loaded="true"]').wait_for()
        card = hub.locator(f'a.stf-mission[data-mission="{m1.id}"]')
        assert card.get_attribute("data-stars") == "0"
        hub.locator(".stf-paste-input input").fill(code)
        hub.locator(".stf-paste-progress button").click()
        hub.locator(f'a.stf-mission[data-mission="{m1.id}"][data-stars="{earned}"]').wait_for()
        assert f"{earned} star" in hub.locator(".stf-progress-status .stf-reset-status").inner_text()
        saved = json.loads(hub.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})"))
        assert sum(saved["stars"][m1.id]) == earned

        hub.evaluate(f"localStorage.removeItem({json.dumps(STORAGE_KEY)})")
        full = new_page(ctx)  # the embed's link, followed at top level
        full.goto(f"{server}/{href}")
        full.locator('.stf-star[data-earned="true"]').first.wait_for()
        full.wait_for_function("location.hash === ''")
        full.wait_for_function(f"(localStorage.getItem({json.dumps(STORAGE_KEY)}) || '').includes('true')")
        assert "from the embed" in full.locator(".stf-progress-status .stf-reset-status").inner_text()
    finally:
        ctx.close()


def _paste_refused(page, code):
    """Paste `code` in the lab's progress field once the first run is in; the refusal's note."""
    page.locator('.stf-status[data-busy="false"][data-run]').wait_for()
    field = page.locator(".stf-paste-input input")
    field.evaluate("(el, c) => { el.value = c; el.dispatchEvent(new Event('input', {bubbles: true})); "
                   "el.dispatchEvent(new Event('change', {bubbles: true})); }", code)
    page.locator(".stf-paste-progress button").click()
    status = page.locator('.stf-progress-status [data-ok="false"]')
    status.wait_for()
    return status


@pytest.mark.parametrize("case", ["5,000 nested lists", "a float mask"])
def test_a_code_with_a_valid_checksum_and_hostile_content_gets_the_hubs_verdict_in_the_lab(page, server, case):
    """Once a RecursionError and nothing shown (5,000 nested lists), or accepted by the static hub
    and refused here ({"mixing-hurts": 1.0}): now one note, the same words as the hub's."""
    code = REPORTED[case]
    page.goto(f"{server}/lab?mission=mixing-hurts")
    status = _paste_refused(page, code)
    assert status.inner_text() == f"Nothing changed: {verdict(code)['error']}."
    # The page's own copy of the hub's decoder (stars_store.js, in the storage bridge) says the same.
    assert page.evaluate("(c) => window.STFStars.decodeCode(c)", code) == {"ok": False, "error": verdict(code)["error"]}


@pytest.mark.parametrize("code", ['<img src=x onerror="window.__pwned=1">', "STF1-" + "A" * 30_000 + ".0000beef"])
def test_a_hostile_code_pasted_in_the_lab_changes_nothing(page, server, code):
    m1 = list_missions()[0]
    page.goto(f"{server}/lab?mission={m1.id}")
    page.locator('.stf-status[data-busy="false"][data-run]').wait_for()
    before = page.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})")
    status = _paste_refused(page, code)
    assert status.inner_text().startswith("Nothing changed: progress code:")
    assert len(status.inner_text()) < 300
    assert page.locator(".stf-progress-status img").count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert page.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})") == before
