"""Prefix caching in a real browser (`lab serve --missions missions` + Chromium), on mission 17
"The cache remembers": no cache card at the start, the cache control turning it on, the
per-GPU size waiting for a per-GPU cache, and the page at 1366 and 390 px (STF_SCREENSHOTS=DIR
keeps the screenshots); and the sandbox replaying an uploaded Mooncake JSON-lines trace whose
hashes a shared pool finds. Waits are on DOM conditions, never sleeps."""

from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from screenshots import shot  # noqa: E402  (tests/ is on sys.path)
from siblings import sibling  # noqa: E402

pytestmark = pytest.mark.browser

MISSIONS = Path(__file__).resolve().parents[2] / "missions"
MISSION = "cache-remembers"

B = sibling("test_browser")
settle = B.settle


@pytest.fixture
def shipped(missions_server):
    return missions_server(MISSIONS)


def _pick_cache(page, label):
    group = page.get_by_role("group", name="Prefix cache")
    before = settle(page)
    group.get_by_role("button", name=label, exact=True).click()
    return settle(page, before)


def test_turning_the_cache_on_shows_what_it_saved(page, shipped):
    page.goto(f"{shipped}/lab?mission={MISSION}")
    settle(page)
    assert page.locator('[data-metric="prefix"]').count() == 0
    size = page.get_by_role("slider", name="Prefix cache per GPU")
    assert size.count() == 1
    _pick_cache(page, "Shared pool (host)")
    card = page.locator('[data-metric="prefix"]')
    card.wait_for()
    text = card.inner_text()
    assert "Prefix cache hits" in text and "prompt tokens not computed" in text and "fetch p99" in text
    share = float(card.locator(".v").inner_text().rstrip("%"))
    assert 30 <= share <= 45  # mission 17's shared pool skips about 37% of the prompt tokens
    shot(page, "prefix-cache-shared-1366.png")
    _pick_cache(page, "Per GPU (HBM)")
    per_gpu = float(page.locator('[data-metric="prefix"] .v').inner_text().rstrip("%"))
    assert 0 < per_gpu < share
    assert "fetch p99" not in page.locator('[data-metric="prefix"]').inner_text()


def test_the_cache_card_fits_a_phone(browser, new_page, shipped):
    ctx = browser.new_context(viewport={"width": 390, "height": 900})
    try:
        page = new_page(ctx)
        page.goto(f"{shipped}/lab?mission={MISSION}")
        settle(page)
        _pick_cache(page, "Shared pool (host)")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"the page scrolls sideways ({width}px)"
        box = page.locator('[data-metric="prefix"]').bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
        shot(page, "prefix-cache-shared-390.png")
    finally:
        ctx.close()


def test_the_sandbox_replays_mooncake_json_lines_and_its_cache_finds_them(page, missions_server):
    from conftest import UI_MISSIONS  # noqa: E402  (tests/ui is on sys.path)

    import json

    base = missions_server(UI_MISSIONS)
    page.goto(f"{base}/lab?mission=sandbox")
    first = settle(page)
    # Eight conversations of five turns, each turn resending the one before (hashes shared).
    rows = []
    for turn in range(5):
        for conv in range(8):
            blocks = [1000 * conv + k for k in range(2 + 2 * turn)]
            rows.append({"timestamp": (turn * 8 + conv) * 400, "input_length": 512 * len(blocks) - 100,
                         "output_length": 40, "hash_ids": blocks})
    text = "\n".join(json.dumps(r) for r in rows) + "\n"
    upload = page.locator(".stf-trace-upload input[type=file]")
    upload.set_input_files(files=[{"name": "chat.jsonl", "mimeType": "application/jsonl", "buffer": text.encode()}])
    page.locator(".stf-replay").wait_for()
    assert "Replaying chat.jsonl: 40 requests" in page.locator(".stf-replay").inner_text()
    run = settle(page, first)
    assert page.locator('[data-metric="prefix"]').count() == 0  # the sandbox starts without a cache
    group = page.get_by_role("group", name="Prefix cache")
    group.get_by_role("button", name="Shared pool (host)", exact=True).click()
    settle(page, run)
    card = page.locator('[data-metric="prefix"]')
    card.wait_for()
    assert float(card.locator(".v").inner_text().rstrip("%")) > 40  # later turns find their earlier blocks
