"""Classroom links (`hide=`): which names a link may hide, the notes for the rest, the address
keeping the list, a hidden control keeping its value; and in a browser, a hidden control and
hidden panels are absent from the page."""

import pytest

pytest.importorskip("panel")

from lab.core.missions import CONTROL_SPECS  # noqa: E402
from lab.ui.state import HIDE_PANELS, LabState, parse_hide, parse_search  # noqa: E402

M1 = "ui-mixing-hurts"


def test_hide_takes_controls_and_panels_in_the_labs_order_once_each():
    names, notes = parse_hide(" plots, gpus ,,plots,brief,link_gbytes_per_s")
    assert notes == []
    assert names == ("gpus", "link_gbytes_per_s", "brief", "plots")
    assert set(parse_hide(",".join(HIDE_PANELS + tuple(CONTROL_SPECS)))[0]) == set(HIDE_PANELS) | set(CONTROL_SPECS)


@pytest.mark.parametrize("bad", ["<script>alert(1)</script>", "Plots", "x" * 500, "gpus=3", "__proto__"])
def test_an_unknown_name_is_ignored_with_an_escaped_note(bad):
    names, notes = parse_hide(f"plots,{bad}")
    assert names == ("plots",)
    assert len(notes) == 1 and notes[0].startswith("Ignored <code>hide=")
    assert "<script>" not in notes[0] and len(notes[0]) < 400


def test_a_huge_list_stops_with_one_note():
    names, notes = parse_hide(",".join(["plots"] * 1000))
    assert names == ("plots",)
    assert len(notes) == 1 and "at most" in notes[0]


def test_the_address_keeps_hide_and_a_hidden_control_keeps_the_links_value(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}&gpus=5&hide=gpus,plots,nonsense")
    assert state.hidden == ("gpus", "plots")
    assert state.settings["gpus"] == 5
    assert any("hide=nonsense" in n for n in state.notes)
    params = parse_search(state.search())
    assert params["hide"] == "gpus,plots" and params["gpus"] == "5"
    again = LabState.from_query(catalog, state.search())
    assert again.hidden == state.hidden and again.settings == state.settings and again.notes == []
    # "Back to the start" moves what the student can move; the hidden control stays.
    assert state.change("chunk_tokens", 512)
    assert state.reset()
    assert state.settings["gpus"] == 5 and state.settings["chunk_tokens"] == 0
    assert state.is_start


def test_no_hide_leaves_the_address_as_before(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}&gpus=5")
    assert state.hidden == ()
    assert "hide" not in parse_search(state.search())
    assert LabState.from_query(catalog, f"?mission={M1}&hide=").hidden == ()


@pytest.mark.browser
def test_a_classroom_link_hides_a_control_and_panels_in_the_page(page, server):
    pytest.importorskip("playwright.sync_api")
    from lab.core.missions import list_missions

    m1 = list_missions()[0]
    page.goto(f"{server}/lab?mission={m1.id}&gpus=5&hide=gpus,plots,brief,<img src=x onerror=window.__pwned=1>")
    page.locator('.stf-status[data-busy="false"][data-run]').wait_for()
    assert page.locator(".stf-control-layout").first.is_visible()  # the rest stays
    assert page.locator(".stf-stars-pane").is_visible()
    assert page.locator(".stf-control-gpus").count() == 0 or page.locator(".stf-control-gpus").is_hidden()
    assert page.locator(".stf-brief").count() == 0 or page.locator(".stf-brief").is_hidden()
    assert page.locator(".stf-plot, .stf-plots, [class*='stf-plot']").filter(visible=True).count() == 0
    hidden = page.locator(".stf-hidden-controls")
    assert "gpus" in hidden.inner_text() and "5" in hidden.inner_text()
    text = page.locator(".stf-notes").inner_text()
    assert "Ignored hide=<img src=x onerror=window.__pwned=1>: not a control or a panel the lab can hide" in text
    assert page.locator(".stf-notes img").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined"
    # Rewritten at load to the names it took, in the lab's order, commas kept readable.
    page.wait_for_function("location.search.includes('hide=gpus,brief,plots')")
    assert "gpus=5" in page.evaluate("location.search")
