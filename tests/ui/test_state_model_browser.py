"""The page's one source of truth under `lab serve`, held by a model-based walk (state_model.py).

Seeded random walks of WALK_ACTIONS actions over each of MODEL_MISSIONS (300 in all), then
the reproduction the issue reported, as a named regression test. The seed is printed and
named in any failure; STF_MODEL_SEED=N replays a walk.
"""

import os
import random

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import list_missions  # noqa: E402
from state_model import Failure, Page, shrink, walk  # noqa: E402

pytestmark = pytest.mark.browser

# Sliders by key and drag, the layout toggle, TP pools, a link, KV on demand, a trace.
MODEL_MISSIONS = ("mixing-hurts", "decode-drowns", "slow-link", "chunk-it", "tp-per-phase", "memory-on-demand")
WALK_ACTIONS = int(os.environ.get("STF_MODEL_ACTIONS") or 50)
SEED = int(os.environ.get("STF_MODEL_SEED") or random.SystemRandom().randrange(1, 10**6))
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


def test_back_to_the_start_then_the_same_value_again_runs_that_value(page, server):
    """Mission 01: GPUs 4 -> 5, Back to the start, 4 -> 5 again ran 4 GPUs with the slider on 5."""
    lab = Page(page, url_of(server), BY_ID["mixing-hurts"])
    lab.open()
    for action in (("key", "gpus", 1), ("reset",), ("key", "gpus", 1)):
        lab.do(action)
        lab.check_run()
    assert lab.shown["settings"]["gpus"] == "5" and "gpus=5" in page.url
