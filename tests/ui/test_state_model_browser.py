"""The page's one source of truth under `lab serve`, held by a model-based walk (state_model.py).

Seeded random walks of WALK_ACTIONS actions over each of MODEL_MISSIONS (300 in all), then
the reproduction the issue reported, as a named regression test. The seed is printed and
named in any failure; STF_MODEL_SEED=N replays a walk.
"""

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import list_missions  # noqa: E402
from state_model import MODEL_MISSIONS, SEED, WALK_ACTIONS, Failure, Page, shrink, walk  # noqa: E402

pytestmark = pytest.mark.browser

BY_ID = {m.id: m for m in list_missions()}


def url_of(server):
    return lambda query: f"{server}/lab?{query}"


@pytest.mark.parametrize("mission_id", MODEL_MISSIONS)
def test_a_random_walk_keeps_controls_address_and_run_equal(new_page, server, mission_id):
    mission = BY_ID[mission_id]
    print(f"state model: seed {SEED}, mission {mission_id}, {WALK_ACTIONS} actions (STF_MODEL_SEED={SEED} replays it)")
    try:
        walk(new_page(), url_of(server), mission, SEED, WALK_ACTIONS)
    except Failure as failure:
        short = shrink(new_page, url_of(server), mission, failure)
        pytest.fail(f"seed {SEED}: {short}\n(first seen after {failure.step + 1} actions)", pytrace=False)


# The reproductions of the report: a value, Back to the start, the same value again.
REPRODUCTIONS = {
    "gpus 4 -> 5 (mission 01)": ("mixing-hurts", [("key", "gpus", 1)], {"gpus": "5"}),
    "the 2 + 2 split (mission 01)": ("mixing-hurts", [("toggle", "layout", "disaggregated"), ("key", "decode_gpus", 1)],
                                     {"layout": "disaggregated", "decode_gpus": "2"}),
    "the link at 12.5 GB/s (mission 03)": ("slow-link", [("key", "link_gbytes_per_s", 1)], {"link_gbytes_per_s": "12.5"}),
}


@pytest.mark.parametrize("case", list(REPRODUCTIONS))
def test_back_to_the_start_then_the_same_change_again_runs_what_the_controls_show(page, server, case):
    """Each ran the start's fleet with the controls on the new one: the slider said 5, the fleet ran 4."""
    mission_id, change, want = REPRODUCTIONS[case]
    lab = Page(page, url_of(server), BY_ID[mission_id])
    lab.open()
    for action in change + [("reset",)] + change:
        lab.do(action)
        lab.check_run()
    assert {k: lab.shown["settings"].get(k) for k in want} == want


def test_a_second_pin_pins_the_fleet_now_shown(page, server):
    """Seed 522720's walk (mission 12): pin, 2 fewer decode GPUs, pin again. The twin must name
    the new fleet, and the address must carry it (the walk once read the first pin's address)."""
    lab = Page(page, url_of(server), BY_ID["tp-per-phase"])
    lab.open()
    for action in [("pin",), ("key", "decode_gpus", -2), ("pin",)]:
        lab.do(action)
        lab.check_run()
    assert "pin=decode_gpus" in page.evaluate("location.search")


def test_back_past_a_pin_then_unpin_waits_for_the_lab_to_drop_the_pin(page, server):
    """Seed 621494's walk (mission 02): reload, pin, Back, unpin. Back changed only the address's
    pin, so the page looked settled while Unpin still showed; the walk clicked it as the lab's
    answer hid it (Playwright waited 30 s for a button gone)."""
    lab = Page(page, url_of(server), BY_ID["decode-drowns"])
    lab.open()
    for action in [("reload",), ("pin",), ("back",)]:
        lab.do(action)
        lab.check_run()
        assert lab.shown["unpinShown"] == ("pin=" in lab.shown["search"])
    assert not lab.shown["unpinShown"] and "pin=" not in lab.shown["search"]


def test_keys_pressed_faster_than_the_lab_answers_leave_the_slider_on_what_runs(page, server):
    """Seed 774428's walk (mission 03): the link dragged to 37.5, then keyed to 31.25, then
    twice more at once. The page sent 25.000000000000004; the lab's grid value 25, sent back,
    crossed the page's 18.75 and the slider showed 25 while 18.75 ran."""
    lab = Page(page, url_of(server), BY_ID["slow-link"])
    lab.open()
    for action in [("drag", "link_gbytes_per_s", 0.738), ("key", "link_gbytes_per_s", -1),
                   ("key", "link_gbytes_per_s", -2)]:
        lab.do(action)
        lab.check_run()
    assert lab.shown["settings"]["link_gbytes_per_s"] == "18.75"
