"""Page defects in a real browser (`lab serve` + Debian's Chromium through Playwright).

Hostile addresses, history (Back/Forward), next slow step, metric cards at common
widths, idle controls, failed runs, missions added while serving, the sandbox upload.
Waits are on DOM conditions, never sleeps. Set STF_SCREENSHOTS=DIR to keep screenshots.
"""

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("playwright.sync_api")

from lab.core.missions import list_missions  # noqa: E402
from siblings import sibling  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)
from screenshots import shot  # noqa: E402  (tests/ is on sys.path)





_server = sibling("conftest")
_browser = sibling("test_browser")
start_server, stop_server = _server.start_server, _server.stop_server
write_trace_mission = sibling("trace_mission").write_trace_mission
canvas_window, painted, settle = _browser.canvas_window, _browser.painted, _browser.settle

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
MISSIONS = list_missions()
M1 = MISSIONS[0]
HUGE = "9" * 10_000

DEEP_FOCUS = """() => {
    // The classes along the focus path, through shadow roots (Panel renders in shadow DOM).
    const out = [];
    let el = document.activeElement;
    while (el) {
        if (typeof el.className === "string" && el.className) out.push(el.className);
        el = el.shadowRoot && el.shadowRoot.activeElement;
    }
    return out.join(" > ");
}"""

HOST_INERT = """([cls, inert]) => {
    // Whether the host of control `cls` has (or lacks) the inert attribute.
    const stack = [document.body];
    while (stack.length) {
        const node = stack.pop();
        if (node.classList && node.classList.contains(cls)) return node.inert === inert;
        if (node.shadowRoot) stack.push(node.shadowRoot);
        for (const child of (node.children || [])) stack.push(child);
    }
    return false;
}"""

CARD_OVERFLOW = """() => {
    const out = [];
    const stack = [document.body];
    while (stack.length) {
        const node = stack.pop();
        if (node.classList && node.classList.contains("stf-card")) {
            const box = node.getBoundingClientRect();
            if (node.scrollWidth > node.clientWidth + 1) out.push([node.dataset.metric, "card scrolls", node.scrollWidth, node.clientWidth]);
            for (const el of node.querySelectorAll(".k, .v, .t, .stf-util > *")) {
                const b = el.getBoundingClientRect();
                if (b.width && (b.right > box.right + 0.5 || b.left < box.left - 0.5)) {
                    out.push([node.dataset.metric, el.className || el.tagName, el.textContent.slice(0, 30), b.right, box.right]);
                }
                if (el.classList.contains("v") && el.scrollWidth > el.clientWidth + 1) {
                    out.push([node.dataset.metric, "value scrolls", el.textContent.slice(0, 30)]);
                }
            }
        }
        if (node.shadowRoot) stack.push(node.shadowRoot);
        for (const child of (node.children || [])) stack.push(child);
    }
    return out;
}"""


def html_data(page, key):
    return page.evaluate(f"document.documentElement.dataset.{key} || ''")


# ---------------------------------------------------------------- 2 + 3. hostile addresses


def test_ten_thousand_digits_in_any_value_load_the_lab_with_a_note(page, server):
    for key in ("gpus", "rate", "mission", "window"):
        query = f"mission={M1.id}&{key}={HUGE}" if key != "mission" else f"mission={HUGE}"
        with urllib.request.urlopen(f"{server}/lab?{query}", timeout=60) as resp:  # raises on HTTP 500
            assert resp.status == 200, key
    response = page.goto(f"{server}/lab?mission={M1.id}&gpus={HUGE}&rate={HUGE}&window={HUGE}")
    assert response.status == 200
    settle(page)
    assert page.locator(".stf-control-gpus .noUi-handle").count() == 1
    notes = page.locator(".stf-notes-pane .stf-notes").inner_text()
    assert "Ignored gpus=9999" in notes and "expected a whole number" in notes
    assert "Ignored window: not a setting of the lab" in notes
    assert page.evaluate("location.search") == f"?mission={M1.id}"  # 3: only what the lab accepted


def test_a_rejected_value_leaves_the_address_by_replacement(page, server):
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    page.goto(f"{server}/lab?mission={M1.id}&gpus=abc&layout=disaggregated")
    settle(page)
    assert "Ignored gpus=abc" in page.locator(".stf-notes").inner_text()
    page.wait_for_function(f"location.search === {json.dumps(f'?mission={M1.id}&layout=disaggregated')}")
    page.go_back()  # the cleanup replaced the entry: Back leaves for the hub, not the bad address
    page.wait_for_url(f"{server}/")


# ---------------------------------------------------------------- 4. Back and Forward


def test_back_restores_each_change_then_leaves_the_lab(page, server):
    page.goto(server + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    page.goto(f"{server}/lab?mission={M1.id}")
    settle(page)
    handle = page.locator(".stf-control-gpus .noUi-handle")
    start = float(handle.get_attribute("aria-valuenow"))
    shown = []
    for _ in range(2):
        entry = html_data(page, "historyEntry")
        page.wait_for_function(f"document.documentElement.dataset.historySettled === {json.dumps(entry)}")
        before = painted(page)
        handle.focus()
        page.keyboard.press("ArrowRight")
        page.wait_for_function(f"document.documentElement.dataset.historyEntry !== {json.dumps(entry)}")
        settle(page, before)
        shown.append((page.evaluate("location.search"), float(handle.get_attribute("aria-valuenow"))))
    assert [v for _, v in shown] == [start + 1, start + 2]
    assert shown[0][0].endswith(f"gpus={start + 1:g}")

    before = painted(page)
    page.go_back()
    page.wait_for_function(f"location.search === {json.dumps(shown[0][0])}")
    settle(page, before)
    assert float(handle.get_attribute("aria-valuenow")) == start + 1  # the page shows the first change
    before = painted(page)
    page.go_back()
    page.wait_for_function(f"location.search === {json.dumps(f'?mission={M1.id}')}")
    settle(page, before)
    assert float(handle.get_attribute("aria-valuenow")) == start
    before = painted(page)
    page.go_forward()
    page.wait_for_function(f"location.search === {json.dumps(shown[0][0])}")
    settle(page, before)
    assert float(handle.get_attribute("aria-valuenow")) == start + 1
    page.go_back()
    page.wait_for_function(f"location.search === {json.dumps(f'?mission={M1.id}')}")
    page.go_back()  # from the entry the page opened with: out of the lab
    page.wait_for_url(f"{server}/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()


# ---------------------------------------------------------------- 5. next slow step


def test_next_slow_step_moves_on_when_slow_steps_are_dense(page, server):
    open_at = 10
    page.goto(f"{server}/lab?mission={M1.id}&t={open_at}")
    settle(page)
    assert canvas_window(page) == pytest.approx(open_at)
    page.locator("h1.stf-title").click()  # the focus off any slider (shortcuts ignore those)
    positions = [canvas_window(page)]
    for i in range(3):
        page.keyboard.press("n") if i != 1 else page.locator(".stf-next-slow button").click()
        page.wait_for_function(f"Number(document.documentElement.dataset.canvasWindow) > {positions[-1] + 1.25}")
        positions.append(canvas_window(page))
    assert positions == sorted(positions) and positions[-1] - positions[0] > 3.75
    shot(page.locator(".stf-canvas-card"), "next-slow-step.png")


# ---------------------------------------------------------------- 6. metric cards at common widths


@pytest.mark.parametrize("width", [1280, 1400, 1600])
def test_metric_values_stay_inside_their_cards(browser, new_page, server, width):
    ctx = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = new_page(ctx)
        for mission in ("mixing-hurts", "decode-drowns", "slow-link"):
            page.goto(f"{server}/lab?mission={mission}")
            settle(page)
            page.locator('[data-metric="ttft"] .v').wait_for()
            assert page.evaluate(CARD_OVERFLOW) == [], (mission, width)
        shot(page.locator(".stf-metrics-pane"), f"metrics-{width}.png")
    finally:
        ctx.close()


# ---------------------------------------------------------------- 7. idle controls


def saturation(rgb):
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3])
    return (max(r, g, b) - min(r, g, b)) / 255


def tab_path(page, presses=14):
    """What each Tab press from the layout buttons focuses (deep, through shadow roots)."""
    page.locator(".stf-control-layout button").first.focus()
    path = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        path.append(page.evaluate(DEEP_FOCUS))
    return path


def test_the_idle_gpu_slider_looks_disabled_and_is_never_a_tab_stop(page, server):
    mission = next(m for m in MISSIONS if m.scenario.fleet.layout == "disaggregated" and "gpus" in m.controls
                   and "layout" in m.controls)
    page.goto(f"{server}/lab?mission={mission.id}")
    settle(page)
    idle, live = page.locator(".stf-control-gpus").first, page.locator(".stf-control-decode_gpus").first
    look = "el => ({opacity: Number(getComputedStyle(el).opacity), bar: getComputedStyle(el.shadowRoot.querySelector('.noUi-connect')).backgroundColor})"
    idle_look, live_look = idle.evaluate(look), live.evaluate(look)
    assert idle_look["opacity"] < live_look["opacity"]
    assert saturation(idle_look["bar"]) < saturation(live_look["bar"]), (idle_look, live_look)
    shot(page.locator(".stf-controls"), "idle-controls.png")

    page.wait_for_function(HOST_INERT, arg=["stf-control-gpus", True])
    path = tab_path(page)
    assert any("stf-control-decode_gpus" in p for p in path), path  # Tab went through the sliders
    assert not any("stf-control-gpus" in p for p in path), path
    # Colocated: now the GPU slider applies, takes the focus, and the pools do not.
    before = painted(page)
    page.locator(".stf-control-layout").get_by_role("button", name="Colocated", exact=True).click()
    settle(page, before)
    page.wait_for_function(HOST_INERT, arg=["stf-control-decode_gpus", True])
    page.wait_for_function(HOST_INERT, arg=["stf-control-gpus", False])
    path = tab_path(page)
    assert any("stf-control-gpus" in p for p in path), path
    assert not any("stf-control-decode_gpus" in p for p in path), path


# ---------------------------------------------------------------- 1 + 9. a server on a temporary missions folder


@pytest.fixture(scope="module")
def folder_server(tmp_path_factory):
    if not os.path.exists("/usr/bin/chromium"):
        pytest.skip("/usr/bin/chromium is not installed")
    folder = tmp_path_factory.mktemp("missions")
    shutil.copy(REPO / "missions" / "01-mixing-hurts.json", folder / "01-mixing-hurts.json")
    trace_mission, trace = write_trace_mission(folder)
    proc, base = start_server(["--missions", str(folder)])
    try:
        yield base, folder, trace_mission, trace
    finally:
        stop_server(proc)


def test_a_run_that_fails_shows_why_and_a_change_runs_again(page, folder_server):
    base, _folder, mission, trace = folder_server
    hidden = trace.with_name(trace.name + ".away")
    trace.rename(hidden)  # the trace is gone at run time (the mission loaded with it)
    try:
        page.goto(f"{base}/lab?mission={mission['id']}")
        error = page.locator('.stf-metrics-pane [data-run-error="true"]')
        error.wait_for()
        assert "workload.trace.path: no trace file" in error.inner_text()
        page.locator('.stf-status[data-failed="true"]').wait_for()
        assert page.locator('.stf-status[data-busy="true"]').count() == 0  # not "Simulating…" forever
        shot(page, "run-error.png")
    finally:
        hidden.rename(trace)
    before = painted(page)
    name = next(iter(mission["controls"]))
    handle = page.locator(f".stf-control-{name} .noUi-handle")
    handle.focus()
    page.keyboard.press("ArrowRight")
    settle(page, before)
    page.locator('[data-metric="ttft"] .v').wait_for()
    assert error.count() == 0


def test_a_mission_added_while_serving_appears_on_the_hub(page, folder_server):
    base, folder, _mission, _trace = folder_server
    page.goto(base + "/")
    page.locator('ul.stf-missions[data-loaded="true"]').wait_for()
    ids = lambda: page.locator("a.stf-mission").evaluate_all("els => els.map(e => e.dataset.mission)")  # noqa: E731
    first = ids()
    assert "added-later" not in first
    added = json.loads((REPO / "missions" / "01-mixing-hurts.json").read_text(encoding="utf-8"))
    added.update(id="added-later", title="Added later", order=99)
    (folder / "50-added-later.json").write_text(json.dumps(added), encoding="utf-8")
    (folder / "60-broken.json").write_text('{"id": "broken", ', encoding="utf-8")
    try:
        page.reload()
        page.locator('a.stf-mission[data-mission="added-later"]').wait_for()
        assert ids() == [i for i in first if i != "sandbox"] + ["added-later", "sandbox"]
        assert "60-broken.json" in page.locator(".stf-hub-note .stf-notes").inner_text()
        shot(page, "hub-reloaded.png")
        page.goto(f"{base}/lab?mission=added-later")
        settle(page)
        assert page.locator("h1.stf-title").inner_text() == "Added later"
    finally:
        (folder / "50-added-later.json").unlink()
        (folder / "60-broken.json").unlink()


# ---------------------------------------------------------------- 10. the sandbox replays an upload


def test_the_sandbox_replays_an_uploaded_csv_and_refuses_garbage(page, server):
    page.goto(f"{server}/lab?mission=sandbox")
    first = settle(page)
    rows = "".join(f"{i * 0.25:.2f},{1000 + 10 * i},{50 + i}\n" for i in range(120))
    upload = page.locator(".stf-trace-upload input[type=file]")
    upload.set_input_files(files=[{"name": "mine.csv", "mimeType": "text/csv",
                                   "buffer": ("arrival_s,prompt_tokens,output_tokens\n" + rows).encode()}])
    replay = page.locator(".stf-replay")
    replay.wait_for()
    assert "Replaying mine.csv: 120 requests over 30 s" in replay.inner_text()
    run = settle(page, first)
    status = page.locator(f'.stf-status[data-run="{run}"]')
    status.wait_for()
    assert status.inner_text().startswith("120 requests")
    assert "AzurePublicDataset" in page.locator(".stf-trace-sources").inner_text()
    assert "kvcache-ai/Mooncake" in page.locator(".stf-trace-sources").inner_text()

    upload.set_input_files(files=[{"name": "<b>junk</b>.csv", "mimeType": "text/csv",
                                   "buffer": b"hello,<img src=x onerror=window.__pwned=1>\n1,2\n"}])
    error = page.locator(".stf-upload-error")
    error.wait_for()
    assert "does not name a known set of columns" in error.inner_text() and "<b>junk</b>.csv" in error.inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert "Replaying mine.csv" in replay.inner_text()  # the previous workload stays
    assert page.locator(".stf-status").inner_text().startswith("120 requests")
    shot(page.locator(".stf-sidebar"), "sandbox-upload.png")

    before = painted(page)
    page.locator(".stf-clear-replay button").click()
    settle(page, before)
    assert replay.count() == 0
    assert not page.locator(".stf-status").inner_text().startswith("120 requests")
