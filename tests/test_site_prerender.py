"""The lab page's pre-rendered first view (lab/ui/prerender.py, site_build/prerender.py, loader.js).

Built into the site: one stamped .gz per mission and layout, listed in build-info.json, the same
document on every build. In Chromium, offline (test_site_offline's site, with a local Pyodide):
the pre-rendered page shows the numbers and stars the live page then shows; a click on it is
refused, visibly, and changes nothing; the live page replaces it and re-simulates on a control
change; a pre-render that is missing, corrupt or from another build means the normal load, no
error; an address with other settings never uses one.
"""

import gzip
import json
import re
from pathlib import Path

import pytest

from test_site_offline import LOADED, browser, mirror, site  # noqa: F401  (fixtures: the offline site)

REPO = Path(__file__).resolve().parent.parent
RAN = '.stf-status[data-busy="false"][data-run]'
MISSION = "mixing-hurts"


def _read(path):
    return json.loads(gzip.decompress(path.read_bytes()))


# ---------------------------------------------------------------- the build

def test_every_mission_has_a_stamped_prerender_for_both_layouts(site):
    from lab.core.missions import list_missions

    dist = Path(site.root)
    info = json.loads((dist / "build-info.json").read_text(encoding="utf-8"))
    ids = [m.id for m in list_missions(str(REPO / "missions"))] + ["sandbox"]
    expected = sorted(f"prerender/{i}{e}.json.gz" for i in ids for e in ("", ".embed"))
    assert sorted(info["prerender"]["files"]) == expected
    assert all(name in info["files"] for name in expected)  # hashed like every other file
    config = json.loads(re.search(r'id="stf-config">(.*?)</script>', (dist / "lab.html").read_text(encoding="utf-8"),
                                  re.S).group(1))
    assert config["prerender"]["stamp"] == info["prerender"]["stamp"]
    full, embed = _read(dist / f"prerender/{MISSION}.json.gz"), _read(dist / f"prerender/{MISSION}.embed.json.gz")
    for data, query in ((full, f"mission={MISSION}"), (embed, f"mission={MISSION}&embed=1")):
        assert data["stamp"] == config["prerender"]["stamp"] and data["query"] == query
        assert data["format"] == config["prerender"]["format"]
        assert list(data["docs_json"]) == ["stf-prerender"] and len(data["render_items"]) == 1
    # The first run is in it (not the "Simulating…" shell), and the embed is its own layout.
    assert 'data-run=\\"1\\"' in json.dumps(full) or "data-run=&quot;1&quot;" in json.dumps(full)
    assert full["docs_json"] != embed["docs_json"]


def test_a_prerender_is_the_same_bytes_on_every_run(tmp_path):
    import subprocess
    import sys

    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    env = {"PYTHONHASHSEED": "0", "PATH": "/usr/bin:/bin"}
    for out in outs:
        proc = subprocess.run([sys.executable, "-m", "lab.ui.prerender", str(out), f"mission={MISSION}&embed=1"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
    assert outs[0].read_bytes() == outs[1].read_bytes()


# ---------------------------------------------------------------- in the browser

def _text(page, root, css):
    return page.locator(f"{root} {css}").first.inner_text()


# Inside the panes' shadow roots (a locator pierces them; the panes' own text is empty).
SHOWN = {"metrics": ".stf-metrics", "stars": ".stf-stars", "header stars": ".stf-head-stars"}


def test_the_prerendered_view_shows_the_live_numbers_then_the_live_page_takes_over(browser, site):
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site.url(f"lab.html?mission={MISSION}"))
        page.wait_for_selector("html.stf-prerendered", state="attached", timeout=120_000)
        loader = page.locator("#stf-loader")
        assert loader.get_attribute("data-mode") == "prerendered"
        expect(page.locator("#stf-loader-title")).to_have_text(re.compile(r"^Starting the simulator… step [123] of 3 "))
        assert page.evaluate("() => document.getElementById('stf-prerender').inert") is True
        before = {k: _text(page, "#stf-prerender", css) for k, css in SHOWN.items()}
        assert re.search(r"TTFT p50 / p99\s+\d+\s*ms", before["metrics"]), before["metrics"]
        assert page.locator(f"#stf-prerender {RAN}").first.get_attribute("data-run") == "1"
        # A click on a control of the pre-rendered page: refused, and the bar says so.
        # (inert: out of the accessibility tree, so found by its text, and clicked where it is)
        box = page.locator("#stf-prerender").get_by_text("Split (prefill | decode)").first.bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        expect(page.locator("#stf-loader-detail")).to_contain_text("Nothing was changed", timeout=5_000)

        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        assert page.get_attribute("#stf-loader", "data-state") == "done", page.inner_text("#stf-error-message")
        assert page.locator("#stf-prerender").count() == 0
        assert "stf-prerendered" not in (page.get_attribute("html", "class") or "")
        after = {k: _text(page, "#stf-live", css) for k, css in SHOWN.items()}
        assert after == before  # the same numbers and stars: the click changed nothing
        assert page.locator(f"#stf-live {RAN}").first.get_attribute("data-run") == "1"
        stages = [e["stage"] for e in page.evaluate("() => STFLoader.state.timeline")]
        assert stages.index("prerendered") < stages.index("live") < stages.index("drawn"), stages

        # Live: a control change re-simulates.
        page.locator("#stf-live").get_by_role("button", name="Split (prefill | decode)").first.click()
        expect(page.locator(f"#stf-live {RAN}").first).not_to_have_attribute("data-run", "1", timeout=120_000)
        assert _text(page, "#stf-live", SHOWN["metrics"]) != before["metrics"]
        assert errors == []
    finally:
        context.close()


def _fake(kind, site):
    if kind == "missing":
        return {"status": 404, "body": b"not here"}
    if kind == "corrupt":
        return {"status": 200, "body": b"\x1f\x8b\x08 this is not gzip", "content_type": "application/gzip"}
    real = _read(Path(site.root) / f"prerender/{MISSION}.json.gz")
    real["stamp"] = "0" * 16  # another build's file
    return {"status": 200, "body": gzip.compress(json.dumps(real).encode()), "content_type": "application/gzip"}


@pytest.mark.parametrize("kind", ["missing", "corrupt", "stale"])
def test_a_missing_corrupt_or_stale_prerender_means_the_normal_load(browser, site, kind):
    context = browser.new_context(viewport={"width": 1000, "height": 800}, service_workers="block")
    fake = _fake(kind, site)
    asked = []

    def answer(route):
        asked.append(route.request.url)
        route.fulfill(**fake)

    context.route(re.compile(r".*/prerender/.*"), answer)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site.url(f"lab.html?mission={MISSION}"))
        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        assert page.get_attribute("#stf-loader", "data-state") == "done", page.inner_text("#stf-error-message")
        page.locator(RAN).first.wait_for(timeout=120_000)
        assert asked and asked[0].endswith(f"/prerender/{MISSION}.json.gz")
        stages = [e["stage"] for e in page.evaluate("() => STFLoader.state.timeline")]
        assert "prerendered" not in stages and "drawn" in stages, stages
        assert page.locator("#stf-prerender").count() == 0
        assert errors == []
    finally:
        context.close()


@pytest.mark.parametrize("query, expected", [
    (f"mission={MISSION}", f"./prerender/{MISSION}.json"),
    (f"mission={MISSION}&embed=1", f"./prerender/{MISSION}.embed.json"),
    (f"mission={MISSION}&gpus=6", None),        # other controls: not the mission's start
    (f"mission={MISSION}&hide=brief", None),
    (f"mission={MISSION}&embed=0", None),
    ("mission=no-such-mission", None),
    ("", None),
])
def test_only_a_mission_at_its_start_uses_a_prerender(browser, site, query, expected):
    context = browser.new_context(service_workers="block")
    page = context.new_page()
    try:
        page.goto(site.url("lab.html?" + query))
        assert page.evaluate("() => STFLoader.prerender.file") == expected
    finally:
        context.close()
