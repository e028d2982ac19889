"""The real lab page, offline: the built site with a local Pyodide folder, in Chromium.

The site is built with `--pyodide-dir` from the folder `scripts/pyodide_mirror.py` assembles
from the package registries (every file checked against scripts/pyodide_mirror.lock.json).
The browser resolves no host but 127.0.0.1, so every byte the page uses comes from the
site: Pyodide, its packages, Panel, Bokeh and the lab. A missing or damaged folder fails
these tests (it is never a reason to skip them): `bash scripts/setup.sh` assembles it.

What runs here is the page a student opens: the lab simulates and redraws on a control
change; a star the page shows (earned by a change, never by the first run) is in
localStorage once the page settles; mission text full of XSS payloads never runs; a visit
after the first return starts from the runtime's compiled code, which Chromium kept; a kept
runtime damaged in storage is dropped and the visit goes on; a runtime that will not start
is reported, not waited on; Retry after a kept download damaged in storage fetches it afresh.
"""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from mission_text_payloads import DANGEROUS, EASY_ID, PAYLOADS, poke, pwned, settle, write_hostile_missions
from site_run import CANVAS, PLOTS_IN, RAN, run_lab
from static_server import responses
from test_build import build_site
from test_site_browser import ARGS, CHROMIUM, KEY, Server, _cards

REPO = Path(__file__).resolve().parent.parent
MIRROR = REPO / ".cache" / "pyodide-0.29.3"
# Only the test's own server resolves: a request for anything else fails at once.
OFFLINE = "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"
LOADED = '#stf-loader[data-state="done"], #stf-loader[data-state="error"]'


@pytest.fixture(scope="module")
def mirror():
    """The local Pyodide folder, checked; assembled first if it is missing or damaged."""
    script = [sys.executable, str(REPO / "scripts" / "pyodide_mirror.py"), "--out", str(MIRROR)]
    if subprocess.run(script + ["--check"], capture_output=True, text=True).returncode != 0:
        made = subprocess.run(script, capture_output=True, text=True, timeout=1800)
        if made.returncode != 0:
            pytest.fail(f"could not assemble the local Pyodide folder {MIRROR} (see scripts/pyodide_mirror.py):\n"
                        f"{made.stdout[-3000:]}\n{made.stderr[-3000:]}")
    return MIRROR


@pytest.fixture(scope="module")
def browser(playwright_driver):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: bash scripts/setup.sh installs Debian's chromium")
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=ARGS + [OFFLINE])
    yield b
    b.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory, mirror):
    dist = build_site(tmp_path_factory, "--pyodide-dir", str(mirror))[0]
    srv = Server(dist)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory, mirror):
    """A site built (build.py --missions) from missions whose text is XSS payloads, plus one whose start earns a star."""
    folder = write_hostile_missions(tmp_path_factory.mktemp("hostile-missions"))
    dist = build_site(tmp_path_factory, "--missions", str(folder), "--pyodide-dir", str(mirror))[0]
    srv = Server(dist)
    yield srv
    srv.stop()


def _open_lab(page, url):
    page.goto(url)
    page.wait_for_selector(LOADED, state="attached", timeout=600_000)
    if page.get_attribute("#stf-loader", "data-state") == "error":
        pytest.fail(f"{page.inner_text('#stf-error-message')}\n{page.text_content('#stf-error-detail')}")
    page.locator(RAN).first.wait_for(state="attached", timeout=300_000)
    page.wait_for_function(PLOTS_IN, timeout=120_000)


def _run_marker(page):
    return page.locator(RAN).first.get_attribute("data-run")


def test_the_lab_runs_fully_offline_and_redraws_on_a_control_change(browser, site):
    def split_the_fleet(page):
        before = _run_marker(page)
        sent_before_change = site.sent_bytes()
        patches = page.evaluate("() => STFLoader.state.messages.patch || 0")
        page.get_by_role("button", name="Split (prefill | decode)").first.click()
        # Panel renders in shadow DOM: a locator sees the status line, document.querySelector does not.
        expect(page.locator(RAN).first).not_to_have_attribute("data-run", before, timeout=120_000)
        # The split's start: 3 prefill + 1 decode GPUs, the link's row and the two queue rows.
        # One patch per Python turn (lab.ui.browser.panel_shims.one_patch_per_update): the click's
        # ("Simulating…"), the run's canvas (LabState.simulate) and the run's metrics
        # (LabState.finish), the new status among the last one's events (with Panel's own one
        # patch per event, the run alone sent over 30, one event each).
        run = int(page.locator(RAN).first.get_attribute("data-run"))
        # The patch that carried this run, found by the run number it reports: timers (the
        # history entry settling, a deferred redraw) may send patches around it at any time.
        carried = page.evaluate("(run) => STFLoader.state.patches.filter(p => p.run === run)", run)
        assert len(carried) == 1, carried
        # The click's turn, the canvas's, the metrics' (+ up to three timers': on a loaded machine the
        # history entry settling and a deferred redraw both fell in between); one patch per event was over 30.
        assert 2 <= carried[0]["n"] - patches <= 6, (carried, patches)
        assert carried[0]["events"] >= 5, carried  # the run's metrics, stars, blame and tables in that one patch
        expect(page.locator(".stf-rows").first).to_have_attribute("data-rows", "7", timeout=60_000)
        # Playback ticks on a timer too: the window moves.
        start = page.evaluate("() => document.documentElement.dataset.canvasWindow")
        assert start is not None and float(start) >= 0, start  # the canvas reports its window start
        page.get_by_role("button", name="Play").first.click()
        page.wait_for_function("(start) => Number(document.documentElement.dataset.canvasWindow) > Number(start)",
                               arg=start, timeout=60_000)
        return {"canvas": page.locator(CANVAS).count(), "sent_before_change": sent_before_change}

    run = run_lab(browser, site.url("lab.html?mission=mixing-hurts"), timeout_s=600, then=split_the_fleet)
    print(f"\noffline lab: first canvas after {run.seconds_to_canvas} s; {run.unique_bytes:,} bytes in "
          f"{len({r['url'] for r in run.responses})} files")
    assert run.state == "canvas", run.error
    assert run.console_errors == [] and run.page_errors == [] and run.failed_requests == []
    assert run.then is not None, run.error  # the control change ran and redrew, and playback moved
    assert run.then["canvas"] >= 1
    # What the server sent up to the first canvas (the service worker's copies come from the
    # HTTP cache; the runtime, stdlib, wheels and page scripts come as .gz): a budget that
    # catches a dropped .gz, a package back in the load or a second download of everything.
    sent = run.then["sent_before_change"]
    print(f"offline lab: {sent:,} bytes sent to the first canvas")
    assert sent <= 17_500_000, sent
    origin = site.url("")
    elsewhere = sorted({r["url"] for r in run.responses if not r["url"].removeprefix("blob:").startswith(origin)})
    assert elsewhere == []  # blob: URLs are the page's own (made from files it fetched)


def test_a_star_the_static_lab_shows_is_in_storage_once_it_settles(browser, hostile_site):
    """The bridge resends until the page's storage confirms: a star earned is never lost (3 fresh browsers).
    The first run earns nothing (stars count once a control changes): the split earns star 1."""
    stored = f"""() => {{ try {{ const s = JSON.parse(localStorage.getItem({json.dumps(KEY)}));
                  return s.stars[{json.dumps(EASY_ID)}][0] === true; }} catch (e) {{ return false; }} }}"""
    for _ in range(3):
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        try:
            page = context.new_page()
            _open_lab(page, hostile_site.url(f"lab.html?mission={EASY_ID}"))
            assert page.locator('.stf-head-stars[data-earned="0"]').count() == 1  # the start is not the student's
            page.get_by_role("button", name="Split (prefill | decode)").first.click()
            page.locator('.stf-head-stars[data-earned="1"]').wait_for(timeout=120_000)  # shown as earned
            page.wait_for_function(stored, timeout=30_000)
            page.goto(hostile_site.url("index.html"))
            page.wait_for_selector('#stf-missions[data-loaded="true"]')
            card = next(c for c in _cards(page) if c["id"] == EASY_ID)
            assert card["stars"] == "1"
        finally:
            context.close()


def test_hostile_mission_text_never_runs_in_the_static_lab(browser, hostile_site):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        for mission in ("xss-brief", "xss-comment", "xss-close"):
            _open_lab(page, hostile_site.url(f"lab.html?mission={mission}"))
            settle(page)
            page.locator(".stf-brief").first.wait_for()
            for sel in DANGEROUS:
                assert page.locator(f".stf-brief {sel}").count() == 0, (mission, sel)
                assert page.locator(f".stf-title {sel}").count() == 0, (mission, sel)
            poke(page, ".stf-brief")
            assert pwned(page) == "undefined", mission
        assert "<script>window.__pwned=1</script>" in page.locator(".stf-title").first.inner_text()
        assert errors == []
    finally:
        context.close()


def test_an_address_of_1200_parameters_opens_the_static_lab_with_a_note(browser, site):
    """The static lab reads an address as `lab serve` does (state.query_note): 1,200 parameters (8 KB,
    which the test's server, like most hosts, takes) open the page with one note saying what was ignored."""
    query = "&".join(f"x{i}=1" for i in range(1_200))
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        _open_lab(page, site.url(f"lab.html?mission=mixing-hurts&{query}"))
        notes = page.locator(".stf-notes-pane .stf-notes")
        notes.wait_for()
        assert "The address has 1,201 parameters: the lab read the first 64 and ignored the rest." in notes.inner_text()
        assert "Mixing" in page.locator(".stf-title").first.inner_text()
    finally:
        context.close()


# ---------------------------------------------------------------- the author page and shared drafts

_SUMMARY_HAS = """(text) => { const f = (r) => { for (const e of r.querySelectorAll('*')) {
    if (e.classList.contains('stf-author-summary') && e.getAttribute('role') === 'status' && e.textContent.includes(text)) return true;
    if (e.shadowRoot && f(e.shadowRoot)) return true; } return false; }; return f(document); }"""


def _open_author(page, url):
    page.goto(url)
    page.wait_for_selector(LOADED, state="attached", timeout=600_000)
    if page.get_attribute("#stf-loader", "data-state") == "error":
        pytest.fail(f"{page.inner_text('#stf-error-message')}\n{page.text_content('#stf-error-detail')}")
    page.wait_for_function(_SUMMARY_HAS, arg="No mistakes. The start:", timeout=300_000)


def test_an_instructor_authors_checks_plays_and_shares_in_the_static_site(browser, site):
    """author.html in Pyodide: the template, a mistake shown and fixed, the checker's verdict, Play it, and
    the mission link in a fresh browser, where a student earns a star kept under the draft's id."""
    from lab.core.mission_link import decode_mission, draft_id

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _open_author(page, site.url("author.html"))
        page.locator(".stf-author-title input").fill("Static draft")
        controls = page.locator(".stf-author-controls textarea")
        controls.fill(controls.input_value().replace('"max": 8', '"max": "eight"'))
        page.wait_for_function(_SUMMARY_HAS, arg="1 mistake, in Controls", timeout=60_000)
        assert "controls.gpus.max" in page.locator(".stf-author-errors-controls li").first.inner_text()
        controls.fill(controls.input_value().replace('"max": "eight"', '"max": 8'))
        page.wait_for_function(_SUMMARY_HAS, arg="No mistakes. The start:", timeout=120_000)
        page.locator(".stf-author-check button").click()
        page.locator(".stf-author-verdict").wait_for(timeout=300_000)
        assert page.locator(".stf-author-verdict-head").inner_text().startswith("The checker finds nothing wrong: ok.")
        link = page.locator(".stf-author-share input").input_value()
        assert link.startswith(site.url("lab.html?draft=1."))
        with context.expect_page() as opened:
            page.locator("a.stf-author-play").click()
        lab = opened.value
        lab.locator(RAN).first.wait_for(state="attached", timeout=300_000)
        assert lab.locator(".stf-title").first.inner_text() == "Static draft"
        lab.close()
    finally:
        context.close()
    data = decode_mission(link.split("draft=", 1)[1])
    fresh = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = fresh.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _open_lab(page, link)
        assert "shared draft mission" in page.locator(".stf-kicker").first.inner_text().lower()
        handle = page.locator(".stf-control-gpus .noUi-handle")
        handle.focus()
        page.keyboard.press("ArrowRight")  # 4 -> 5 colocated GPUs: the template's first star
        page.locator('.stf-head-stars[data-earned="1"]').wait_for(timeout=120_000)
        stored = f"""() => {{ try {{ return JSON.parse(localStorage.getItem({json.dumps(KEY)})).stars[{json.dumps(draft_id(data))}][0]
                      === true; }} catch (e) {{ return false; }} }}"""
        page.wait_for_function(stored, timeout=30_000)
        assert "mixing-hurts" not in page.evaluate(f"localStorage.getItem({json.dumps(KEY)})")
    finally:
        fresh.close()
    assert errors == []


def test_hostile_mission_links_are_refused_or_inert_in_the_static_lab(browser, site):
    """A link's mission is read as a file's: script in its brief shows as text, a huge number or an
    oversized or cut link opens mission 1 with a note naming why; never a blank page."""
    from lab.core.mission_link import encode_mission
    from lab.ui.author.draft import template

    scripted = template()
    scripted["brief"] = "\n\n".join(PAYLOADS)
    huge = template()
    huge["scenario"]["workload"]["rate"] = 1e308
    cases = {
        "script": (encode_mission(scripted), None),
        "huge": (encode_mission(huge), "scenario.workload.rate"),
        "oversized": ("1." + "A" * 9_000, "longer than a link holds"),
        "cut": (encode_mission(template())[:400], "cut short"),
    }
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        for name, (code, why) in cases.items():
            _open_lab(page, site.url(f"lab.html?draft={code}"))
            settle(page)
            if why is None:
                assert page.locator(".stf-draft-mark").count() == 1, name
                for sel in DANGEROUS:
                    assert page.locator(f".stf-brief {sel}").count() == 0, (name, sel)
                poke(page, ".stf-brief")
                assert pwned(page) == "undefined", name
            else:
                note = page.locator(".stf-notes-pane .stf-notes")
                note.wait_for()
                assert why in note.inner_text() and "Opened mission 1" in note.inner_text(), (name, note.inner_text())
                assert "Mixing" in page.locator(".stf-title").first.inner_text(), name
                assert page.locator(".stf-draft-mark").count() == 0, name
    finally:
        context.close()
    assert errors == []


def test_a_draft_link_opens_in_the_static_lab_and_keeps_its_stars_under_its_own_id(browser, site):
    """`lab.html?draft=CODE` (lab.core.mission_link): mission 7 as a teacher's draft, another title
    and place. It opens marked as a draft; one more colocated GPU (5) earns star 1, which is
    stored under the draft's id (not mission 7's) and shown again after a reload."""
    import copy

    from lab.core.mission_link import draft_id, encode_mission

    data = copy.deepcopy(json.loads((REPO / "missions" / "07-book-store.json").read_text(encoding="utf-8")))
    data.update(title="The book store, shared as a draft", order=30)
    code = encode_mission(data)
    stars = f"() => {{ try {{ return JSON.parse(localStorage.getItem({json.dumps(KEY)})).stars; }} catch (e) {{ return null; }} }}"
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
        _open_lab(page, site.url(f"lab.html?draft={code}"))
        assert page.locator(".stf-kicker").first.text_content() == "Shared draft mission"
        assert page.locator(".stf-draft-mark").first.is_visible()
        assert page.locator("h1.stf-title").first.inner_text() == data["title"]
        assert page.locator('.stf-head-stars[data-earned="0"]').count() == 1
        handle = page.locator(".stf-control-gpus .noUi-handle").first
        handle.focus()
        page.keyboard.press("ArrowRight")  # 4 -> 5 GPUs
        page.wait_for_function("location.search.includes('gpus=5')", timeout=120_000)
        page.locator('.stf-head-stars[data-earned="1"]').wait_for(timeout=120_000)
        page.wait_for_function(f"() => {{ const s = ({stars})(); return !!s && (s[{json.dumps(draft_id(data))}] || [])[0] === true; }}",
                               timeout=30_000)
        assert data["id"] not in page.evaluate(stars)
        assert f"draft={code}" in page.url
        page.reload()
        page.wait_for_selector(LOADED, state="attached", timeout=600_000)
        page.locator(RAN).first.wait_for(state="attached", timeout=300_000)
        assert page.locator("h1.stf-title").first.inner_text() == data["title"]
        page.locator('.stf-head-stars[data-earned="1"]').wait_for(timeout=120_000)
        _open_lab(page, site.url(f"lab.html?draft={code}"))  # at its start, which earns nothing: the star is the stored one
        page.locator('.stf-head-stars[data-earned="1"]').wait_for(timeout=120_000)
        assert errors == []
    finally:
        context.close()


# Two ways a message from the page to the worker went missing, forced on every load: the stars
# bridge's first message (its hello) is dropped, as when the component renders before Panel's
# handler has linked the page to the worker; and every patch the page sends is followed at once
# by an empty one, as when two arrive before Python gets to the first (Panel's worker handler
# then applied the second twice and lost the first: static/site/lab-worker.js, applyPatch).
LOSSY_PAGE = """(() => {
  const post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (msg, ...rest) {
    if (!msg || msg.type !== "patch") return post.call(this, msg, ...rest);
    if (/"hello"[:,]true/.test(JSON.stringify(msg.patch))) return undefined;  // {"hello": true} or Bokeh's map entries
    post.call(this, msg, ...rest);
    return post.call(this, {type: "patch", patch: {events: []}});
  };
})();"""


def test_saved_stars_and_a_control_change_reach_python_when_page_messages_are_lost_or_crowded(browser, site):
    """The stars in storage are shown although the bridge's hello never arrives (the lab asks
    the page again, and the page's answers, sent from its message handler, must not be dropped
    as Panel's page handler drops what the page sends while it applies a patch); a control change
    followed at once by another patch still runs."""
    seeded = json.dumps({"version": 1, "stars": {"mixing-hurts": [True, False, True]}})
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.add_init_script(f"localStorage.setItem({json.dumps(KEY)}, {json.dumps(seeded)});")
    context.add_init_script(LOSSY_PAGE)
    errors = []
    try:
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        _open_lab(page, site.url("lab.html?mission=mixing-hurts"))
        page.locator('.stf-head-stars[data-earned="2"]').wait_for(timeout=60_000)
        before = _run_marker(page)
        page.get_by_role("button", name="Split (prefill | decode)").first.click()
        expect(page.locator(RAN).first).not_to_have_attribute("data-run", before, timeout=120_000)
        expect(page.locator(".stf-rows").first).to_have_attribute("data-rows", "7", timeout=60_000)  # the split's rows
        assert page.locator('.stf-head-stars[data-earned="2"]').count() == 1
        assert errors == []
    finally:
        context.close()


# Each .wasm the site's caches hold: [cache name, url, content type, bytes], read in the page.
KEPT_WASM = """async () => {
  const out = [];
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    for (const request of await cache.keys()) {
      if (!request.url.endsWith(".wasm")) continue;
      const kept = await cache.match(request);
      out.push([name, request.url, kept.headers.get("content-type"), (await kept.arrayBuffer()).byteLength]);
    }
  }
  return out;
}"""


def _trace_events(trace):
    events = json.loads(trace)
    return events.get("traceEvents", []) if isinstance(events, dict) else events


# A stale runtime (an empty module) where a site built with another Pyodide, or before the
# caches were named by version, kept its own: the service worker must never serve it.
PLANT_STALE_RUNTIME = """async (runtime) => {
  const scope = (await navigator.serviceWorker.ready).scope;
  const base = runtime.slice(0, runtime.lastIndexOf("/") + 1);
  for (const name of ["pyodide:", "pyodide:0.0.1:"]) {
    const cache = await caches.open("split-the-fleet:" + scope + ":" + name + base);
    await cache.put(runtime, new Response(new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0]),
                                         { headers: { "Content-Type": "application/wasm" } }));
  }
}"""


def _runtime(site):
    """The runtime's WebAssembly: its URL, its size on the site, and the site's Pyodide version."""
    version = json.loads((site.root / "build-info.json").read_text(encoding="utf-8"))["pyodide"]["version"]
    return site.url("pyodide/pyodide.asm.wasm"), (site.root / "pyodide" / "pyodide.asm.wasm").stat().st_size, version


def test_a_later_visit_starts_from_the_runtimes_compiled_code(browser, site):
    """The runtime's WebAssembly (8.6 MB; a 2.8 MB .gz on the first visit, unpacked in the worker)
    is unpacked from that .gz and kept by the service worker on the next visit, which it serves;
    Chromium keeps the machine code it compiles from that copy beside it, and the visit after
    starts from that code (sw.js `unpackedRuntime`; docs/architecture.md, "The runtime's compiled
    code"). The copy is kept under this site's Pyodide version: one kept for another version is
    never served. The server never sends the plain file; the lab works on every visit."""
    runtime, size, version = _runtime(site)
    url = site.url("lab.html?mission=mixing-hurts")
    context = browser.new_context()
    try:
        page = context.new_page()
        _open_lab(page, url)  # the first visit: the service worker arrives during it, controls nothing yet
        assert page.evaluate(KEPT_WASM) == []
        page.evaluate(PLANT_STALE_RUNTIME, runtime)
        page.close()
        page = context.new_page()
        _open_lab(page, url)
        kept = [k for k in page.evaluate(KEPT_WASM) if f":pyodide:{version}:" in k[0]]
        assert [k[1:] for k in kept] == [[runtime, "application/wasm", size]], kept
        page.close()
        browser.start_tracing(categories=["disabled-by-default-devtools.timeline"])
        try:
            page = context.new_page()
            _open_lab(page, url)
        finally:
            events = _trace_events(browser.stop_tracing())
        hits = [e["args"] for e in events if e.get("name") == "v8.wasm.moduleCacheHit"]
        assert any(h.get("url") == runtime and h.get("consumedCacheSize", 0) > 100_000 for h in hits), hits
        page.get_by_role("button", name="Split (prefill | decode)").first.click()  # and the lab runs on it
        expect(page.locator(".stf-rows").first).to_have_attribute("data-rows", "7", timeout=120_000)
        sent = [path for _, _, path in responses(site.log)]
        assert "/pyodide/pyodide.asm.wasm.gz" in sent and "/pyodide/pyodide.asm.wasm" not in sent, sent
    finally:
        context.close()


# This Pyodide version's cache in the service worker (sw.js, PYODIDE_CACHE), opened in the page;
# a kept runtime damaged in the browser's storage (`bytes` put there); that copy gone.
PYODIDE_CACHE_OF = """(async (runtime, version) => caches.open("split-the-fleet:" + (await navigator.serviceWorker.ready).scope
  + ":pyodide:" + version + ":" + runtime.slice(0, runtime.lastIndexOf("/") + 1)))"""
PLANT_KEPT_RUNTIME = f"""async ([runtime, version, bytes]) => (await {PYODIDE_CACHE_OF}(runtime, version)).put(runtime,
  new Response(new Uint8Array(bytes), {{ headers: {{ "Content-Type": "application/wasm" }} }}))"""
KEPT_RUNTIME_GONE = f"""async ([runtime, version]) => !(await (await {PYODIDE_CACHE_OF}(runtime, version)).match(runtime))"""
NOT_WASM = [1, 2, 3, 4]  # fails to compile
EMPTY_MODULE = [0, 97, 115, 109, 1, 0, 0, 0]  # compiles, fails to link (Pyodide wants its dylink section)


@pytest.mark.parametrize("damage", [NOT_WASM, EMPTY_MODULE], ids=["not-wasm", "empty-module"])
def test_a_damaged_kept_runtime_is_dropped_and_the_visit_goes_on(browser, site, damage):
    """The runtime the service worker kept, damaged (it will not compile, or will not link): the
    visit does not hang (Pyodide would wait for ever) but starts from the .gz as a first visit
    does, the damaged copy is dropped, and the next visit keeps a sound one again. The server
    never sends the plain 8.6 MB file."""
    runtime, size, version = _runtime(site)
    url = site.url("lab.html?mission=mixing-hurts")
    context = browser.new_context()
    try:
        page = context.new_page()
        _open_lab(page, url)
        page.evaluate(PLANT_KEPT_RUNTIME, [runtime, version, damage])
        page.close()
        page = context.new_page()
        _open_lab(page, url)  # (fails the test if the loader shows an error)
        failed = page.evaluate("() => window.STFLoader.state.keptRuntimeFailed")
        assert failed and ("magic word" in failed if damage is NOT_WASM else "dylink" in failed), failed
        page.get_by_role("button", name="Split (prefill | decode)").first.click()  # the lab runs on it
        expect(page.locator(".stf-rows").first).to_have_attribute("data-rows", "7", timeout=120_000)
        page.wait_for_function(KEPT_RUNTIME_GONE, arg=[runtime, version], timeout=30_000)  # dropped
        page.close()
        page = context.new_page()
        _open_lab(page, url)
        assert page.evaluate("() => window.STFLoader.state.keptRuntimeFailed") is None
        kept = [k for k in page.evaluate(KEPT_WASM) if f":pyodide:{version}:" in k[0]]
        assert [k[1:] for k in kept] == [[runtime, "application/wasm", size]], kept
        sent = [path for _, _, path in responses(site.log)]
        assert "/pyodide/pyodide.asm.wasm" not in sent, sent
    finally:
        context.close()


def test_a_runtime_that_will_not_start_is_reported_not_waited_on(browser, site, tmp_path):
    """A site whose runtime WebAssembly is damaged (both the plain file and its .gz): the loader
    says the runtime did not start and why, with the retry button, instead of waiting for ever."""
    root = tmp_path / "site"
    shutil.copytree(site.root, root)
    junk = b"not a WebAssembly module"
    (root / "pyodide" / "pyodide.asm.wasm").write_bytes(junk)
    (root / "pyodide" / "pyodide.asm.wasm.gz").write_bytes(gzip.compress(junk))
    server = Server(root)
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server.url("lab.html?mission=mixing-hurts"))
        page.wait_for_selector(LOADED, state="attached", timeout=120_000)
        assert page.get_attribute("#stf-loader", "data-state") == "error"
        expect(page.locator("#stf-error-message")).to_contain_text("The Python runtime (Pyodide)")
        expect(page.locator("#stf-error-message")).to_contain_text("did not start")
        assert "magic word" in page.text_content("#stf-error-detail")
        expect(page.locator("#stf-retry")).to_be_visible()
    finally:
        context.close()
        server.stop()


# A download the service worker keeps, damaged in the browser's storage wherever it is kept
# (valid gzip, junk inside). Returns how many caches held it.
DAMAGE_KEPT = """async ([url, bytes]) => {
  let n = 0;
  for (const name of await caches.keys()) {
    const cache = await caches.open(name);
    if (await cache.match(url)) { await cache.put(url, new Response(new Uint8Array(bytes))); n += 1; }
  }
  return n;
}"""
IS_KEPT = """async (url) => { for (const name of await caches.keys()) if (await (await caches.open(name)).match(url)) return true; return false; }"""
KEPT_SIZES = """async (url) => {
  const out = [];
  for (const name of await caches.keys()) {
    const hit = await (await caches.open(name)).match(url);
    if (hit) out.push((await hit.arrayBuffer()).byteLength);
  }
  return out;
}"""


@pytest.mark.parametrize("pattern, stage", [("pyodide/python_stdlib.zip.gz", "runtime"),
                                            ("wheels/split_the_fleet-*.whl.gz", "packages")],
                         ids=["standard-library", "lab-wheel"])
def test_retry_after_a_damaged_kept_download_fetches_it_afresh(browser, site, pattern, stage):
    """A file the service worker keeps (cache-first: never fetched again), damaged in storage: the
    visit says the lab could not start, and Retry has the service worker forget the runtime's
    and the packages' downloads first, so the lab starts; localStorage (the stars) is untouched."""
    [path] = [f.relative_to(site.root).as_posix() for f in site.root.glob(pattern)]
    url = site.url("lab.html?mission=mixing-hurts")
    damaged = site.url(path)
    context = browser.new_context()
    try:
        page = context.new_page()
        _open_lab(page, url)
        page.evaluate("() => localStorage.setItem('stf-test-kept', 'yes')")
        page.wait_for_function(IS_KEPT, arg=damaged, timeout=30_000)  # (handed over after the first visit)
        junk = gzip.compress(b"damaged " * 64)
        assert page.evaluate(DAMAGE_KEPT, [damaged, list(junk)]) >= 1
        page.close()
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector(LOADED, state="attached", timeout=120_000)
        assert page.get_attribute("#stf-loader", "data-state") == "error"
        assert page.evaluate("() => window.STFLoader.state.failedStage") == stage
        page.click("#stf-retry")
        page.wait_for_selector('#stf-loader[data-state="done"]', state="attached", timeout=300_000)
        page.get_by_role("button", name="Split (prefill | decode)").first.click()  # the lab runs
        expect(page.locator(".stf-rows").first).to_have_attribute("data-rows", "7", timeout=120_000)
        page.wait_for_function(IS_KEPT, arg=damaged, timeout=30_000)  # kept again: the sound file
        assert page.evaluate(KEPT_SIZES, damaged) == [(site.root / path).stat().st_size]
        assert page.evaluate("() => localStorage.getItem('stf-test-kept')") == "yes"
    finally:
        context.close()
