"""The step cost model as a control (the sandbox offers it): the page says which model drew
each run, and a fleet pinned on one model is compared with the same fleet on another, on the
same requests (docs/model.md "The calibrated model", "Which lessons hold")."""

import pytest

pytest.importorskip("playwright.sync_api")

import lab.core as core  # noqa: E402
from lab.ui.catalog import sandbox_mission  # noqa: E402
from lab.ui.views.metrics_view import fmt_share  # noqa: E402
from siblings import sibling  # noqa: E402

pytestmark = pytest.mark.browser

_browser = sibling("test_browser")


def test_switching_the_model_redraws_says_so_and_compares_on_the_same_requests(page, server):
    mission = sandbox_mission()
    run = _browser.open_lab(page, server, "mission=sandbox")
    status = page.locator(".stf-status[data-run]").first
    assert status.get_attribute("data-model") == "linear" and "lab constants" in status.inner_text()
    assert "Step times: the lab's constants" in page.locator(".stf-model").first.inner_text()

    page.get_by_role("button", name="Pin this fleet").click()
    page.wait_for_function("location.search.includes('pin=')")
    before = run
    run = _browser.apply_in_ui(page, mission, "cost", "calibrated")
    assert run > before and "cost=calibrated" in page.evaluate("location.search")
    status = page.locator(f'.stf-status[data-run="{run}"]')
    assert status.get_attribute("data-model") == "calibrated" and "calibrated model" in status.inner_text()
    assert page.locator('.stf-model[data-model="calibrated"]').first.inner_text().startswith(
        "Step times: calibrated on published measurements (a current optimised engine), Llama 3 8B on H100")

    # The twin: the pinned fleet on the lab's constants, the same fleet now on the calibrated model.
    twin = page.locator(f'.stf-twin[data-run="{run}"]')
    twin.wait_for()
    cells = twin.locator('tr[data-metric="slo_attainment"] td')
    pinned = core.summarize(core.simulate(mission.scenario))
    now = core.summarize(core.simulate(mission.apply({**mission.settings(mission.scenario), "cost": "calibrated"})))
    assert cells.nth(0).inner_text() == fmt_share(pinned["slo_attainment"])
    assert cells.nth(1).inner_text() == fmt_share(now["slo_attainment"])
    counts = page.locator(".stf-twin-counts[data-same]")
    assert sum(int(counts.get_attribute(f"data-{k}")) for k in ("worse", "better", "same")) == now["requests"]
    assert ("Changed since the pin: Step cost model: Linear (lab constants) → Calibrated (measured GPUs)"
            in page.locator(".stf-twin-fleets").first.inner_text())
