"""The author page in a real browser under `lab serve` (/author): an instructor writes a mission
from the template, fixes three mistakes from what the page shows, checks it, plays it, and
shares its link, which a fresh browser opens and earns a star in. Keyboard and screen reader:
labelled fields, a live region for the verdict, and axe finds nothing serious.

Every page fails its test on a console error, an uncaught error, a dialog or a request
leaving the machine (conftest's PageWatch). The static site's author.html runs the same
Python in Pyodide: tests/test_site_offline.py drives it there.
"""

import json
import re

import pytest

pytest.importorskip("playwright.sync_api")

from axe_check import axe_missing, axe_violations, describe  # noqa: E402  (tests/ is on sys.path)
from lab.core.mission_link import decode_mission, draft_id  # noqa: E402
from lab.ui.stars.stars_bridge import STORAGE_KEY  # noqa: E402
from test_browser import apply_in_ui, settle  # noqa: E402

pytestmark = pytest.mark.browser

SUMMARY = ".stf-author-status .stf-author-summary"


def summary(page):
    return page.locator(SUMMARY).first.text_content() or ""


def wait_summary(page, text, timeout=30_000):
    page.wait_for_function(
        """(text) => {
            const find = (root) => {
                for (const el of root.querySelectorAll("*")) {
                    if (el.classList.contains("stf-author-summary") && el.closest && el.getAttribute("role") === "status"
                        && el.textContent.includes(text)) return true;
                    if (el.shadowRoot && find(el.shadowRoot)) return true;
                }
                return false;
            };
            return find(document);
        }""", arg=text, timeout=timeout)


def errors_of(page, section):
    return page.locator(f".stf-author-errors-{section} li").all_text_contents()


def open_author(page, server, query=""):
    page.goto(f"{server}/author{query}")
    wait_summary(page, "No mistakes. The start:")


def test_an_instructor_writes_checks_plays_and_shares_a_mission(browser, new_page, server):
    page = new_page()
    open_author(page, server)
    assert page.locator("h1.stf-title").inner_text() == "Write a mission"

    # Three mistakes, typed as an author would make them, each shown under its own field at once.
    page.locator(".stf-author-id input").fill("My Mission")
    workload = page.locator(".stf-author-workload textarea")
    workload.fill(workload.input_value().replace('"rate": 6', '"rate": -6'))
    stars = page.locator(".stf-author-stars textarea")
    stars.fill(stars.input_value().replace("slo_attainment", "slo_atainment", 1))
    wait_summary(page, "3 mistakes")
    assert "not a slug" in errors_of(page, "about")[0]
    assert errors_of(page, "workload")[0].startswith("scenario.workload.rate: -6")
    assert "did you mean 'slo_attainment'" in errors_of(page, "stars")[0]
    assert page.locator("a.stf-author-play").count() == 0  # no link to a mission that does not load

    # Fixed from the messages: the title too, so the played mission is this one.
    page.locator(".stf-author-id input").fill("my-rag-mission")
    page.locator(".stf-author-title input").fill("Retrieval, split or not")
    workload.fill(workload.input_value().replace('"rate": -6', '"rate": 6'))
    stars.fill(stars.input_value().replace("slo_atainment", "slo_attainment"))
    wait_summary(page, "No mistakes. The start:")
    assert all(errors_of(page, s) == [] for s in ("about", "workload", "stars"))

    # The checker's verdict, read out in the live region too.
    page.locator(".stf-author-check button").click()
    page.locator(".stf-author-verdict").wait_for(timeout=60_000)
    head = page.locator(".stf-author-verdict-head").text_content()
    assert head.startswith("The checker finds nothing wrong: ok."), head
    verdict = page.locator(".stf-author-verdict").text_content()
    assert "cheapest:" in verdict and "margin" in verdict and "seeds" in verdict and "in passing" in verdict
    page.wait_for_function("() => (document.getElementById('stf-announce') || {}).textContent?.includes('checker')")

    # The address keeps the draft: a reload loses nothing.
    page.wait_for_function("location.search.startsWith('?draft=')")
    page.reload()
    wait_summary(page, "No mistakes. The start:")
    assert page.locator(".stf-author-title input").input_value() == "Retrieval, split or not"

    # Play it: the lab, in a new tab, as students will see it.
    link = page.locator(".stf-author-share input").input_value()
    assert re.match(rf"^{re.escape(server)}/lab\?draft=1\.[A-Za-z0-9_-]+$", link)
    with page.context.expect_page() as opened:
        page.locator("a.stf-author-play").click()
    lab = opened.value
    settle(lab)
    assert lab.locator("h1.stf-title").inner_text() == "Retrieval, split or not"
    assert lab.locator(".stf-kicker").first.inner_text().lower() == "shared draft mission"
    lab.close()

    # The link in a fresh browser (nothing stored): a student earns a star, kept under the draft's id.
    data = decode_mission(link.split("draft=", 1)[1])
    fresh = browser.new_context(viewport={"width": 1366, "height": 800})
    try:
        student = new_page(fresh)
        student.goto(link)
        settle(student)
        assert "not one of this lab's missions" in student.locator(".stf-draft-mark").inner_text()
        from lab.core.missions import Mission

        mission = Mission.from_dict(data, "")
        apply_in_ui(student, mission, "gpus", 5)  # the template's first star: a fifth colocated GPU
        student.locator('.stf-star[data-earned="true"]').first.wait_for()
        student.wait_for_function(f"(localStorage.getItem({json.dumps(STORAGE_KEY)}) || '').includes('true')")
        saved = json.loads(student.evaluate(f"localStorage.getItem({json.dumps(STORAGE_KEY)})"))["stars"]
        assert saved == {draft_id(data): [True, False]}
        assert "draft=" in student.evaluate("location.search") and "gpus=5" in student.evaluate("location.search")
    finally:
        fresh.close()


def test_a_bad_draft_address_opens_the_template_with_a_note(new_page, server):
    page = new_page()
    open_author(page, server, "?draft=1.AAAA")
    assert "could not be opened" in page.locator(".stf-notes").inner_text()
    assert page.locator(".stf-author-id input").input_value() == "my-mission"


def test_loading_a_shipped_mission_fills_every_section(new_page, server):
    page = new_page()
    open_author(page, server)
    page.locator(".stf-author-start-from select").select_option(label="Mission 3: " + _title("03-slow-link.json"))
    page.locator(".stf-author-load button").click()
    page.locator(".stf-author-load button", has_text="Click again").wait_for()
    page.locator(".stf-author-load button").click()
    page.wait_for_function("() => true")
    page.locator(".stf-author-id input").wait_for()
    page.wait_for_function(
        """() => { const f = (r) => { for (const e of r.querySelectorAll('*')) {
             if (e.tagName === 'INPUT' && e.value === 'slow-link') return true;
             if (e.shadowRoot && f(e.shadowRoot)) return true; } return false; }; return f(document); }""")
    wait_summary(page, "No mistakes. The start:")


def _title(name):
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[2] / "missions" / name).read_text())["title"]


def test_the_author_page_is_usable_by_keyboard_and_screen_reader(new_page, server):
    reason = axe_missing()
    if reason:
        pytest.fail(reason)
    page = new_page()
    open_author(page, server)
    # Every editor has a visible label a screen reader reads as its name.
    for name in ("Title", "Brief", "Workload", "Starting fleet", "Controls", "Stars"):
        assert page.get_by_label(name, exact=True).count() >= 1, name
    # The verdict reaches the live region; the summary is a status.
    page.get_by_label("Title", exact=True).focus()
    page.keyboard.press("End")
    page.keyboard.type(" 2")
    wait_summary(page, "No mistakes. The start:")
    page.wait_for_function("() => (document.getElementById('stf-announce') || {}).textContent?.includes('The start')")
    page.locator(".stf-author-check button").focus()
    page.keyboard.press("Enter")
    page.locator(".stf-author-verdict").wait_for(timeout=60_000)
    found = axe_violations(page)
    assert found == [], describe(found)
