"""The built static site in Debian's Chromium (Playwright), served by `python -m http.server`.

The hub lists the missions and shows the stars the lab page's storage bridge writes;
corrupt or blocked storage never breaks it; reset asks first. The lab page shows its
loading screen and then, with Pyodide's CDN unreachable (made certain here by mapping
its host to "not found" in this browser), a clear error with a Retry button, never a
blank page. From file:// it says to serve the site over HTTP. A self-hosted Pyodide
folder is used (the runtime loads, from the site). The site works at a sub-path and a
second visit works offline. A cross-site embed gets no storage in Chromium; its progress code
and its full-lab link carry its stars to the site; a hostile code changes nothing.

`test_lab_loads_fully_from_the_cdn` needs Pyodide's CDN and is skipped offline.
"""

import base64
import urllib.parse
import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from mission_text_payloads import FILL_ALL, FILL_TO_QUOTA
from screenshots import shot
from static_server import Server
from test_build import build_site

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
# Pyodide's CDN, unreachable for certain (it is here anyway, but not on every machine).
BLOCK_CDN = "--host-resolver-rules=MAP cdn.jsdelivr.net ~NOTFOUND"
KEY = "split-the-fleet:stars:v1"
BACKUP = KEY + ":backup"


def _missing():
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} missing (apt-get install chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "playwright (Python) not installed"
    return None


@pytest.fixture(scope="module", autouse=True)
def _need_chromium():
    reason = _missing()
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"browser tests cannot run in CI: {reason}")
        pytest.skip(reason)


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    return build_site(tmp_path_factory)[0]


@pytest.fixture(scope="module")
def server(dist):
    srv = Server(dist)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser(playwright_driver):
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=ARGS + [BLOCK_CDN])
    yield b
    b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1200, "height": 820})
    pg = context.new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    context.close()


def _missions():
    from lab.core.missions import list_missions

    return list_missions(str(REPO / "missions"))


def _open_hub(page, url):
    page.goto(url)
    page.wait_for_selector('#stf-missions[data-loaded="true"]')


def _cards(page):
    return page.eval_on_selector_all(
        "#stf-missions a.stf-mission",
        "els => els.map(a => ({id: a.dataset.mission, href: a.getAttribute('href'), stars: a.dataset.stars,"
        " name: a.querySelector('.name').textContent, text: a.textContent}))")


# ------------------------------------------------------------------ hub


def test_hub_lists_every_mission_in_order_with_the_sandbox(page, server):
    _open_hub(page, server.url("index.html"))
    cards = _cards(page)
    missions = _missions()
    assert [c["id"] for c in cards] == [m.id for m in missions] + ["sandbox"]
    for card, m in zip(cards, missions):
        assert card["href"] == f"lab.html?mission={m.id}"
        assert card["name"] == m.title and card["stars"] == "0"
        assert f"0/{len(m.stars)}" in card["text"]
    total = sum(len(m.stars) for m in missions)
    assert page.inner_text("#stf-total").strip() == f"★ 0 of {total} stars earned in this browser"
    assert page.is_hidden("#stf-note") and page.is_hidden("#stf-file-note")
    assert page.title() == "Split the Fleet"
    shot(page, "hub.png")
    assert page.errors == []


def test_stars_written_by_the_lab_page_appear_on_the_hub(page, server):
    """The lab's StarsBridge (its own ES module, from lab/ui/stars/stars_bridge.py) saves stars on this
    origin; the hub shows them, live in another tab and after a reload."""
    from lab.ui.stars.stars_bridge import _ESM

    _open_hub(page, server.url("index.html"))
    lab_tab = page.context.new_page()
    lab_tab.goto(server.url("missions/index.json"))  # any page of the site: same origin, same storage
    module = "data:text/javascript;base64," + base64.b64encode(_ESM.encode()).decode()
    replies = lab_tab.evaluate("""async (module) => {
        const bridge = await import(module);
        const handlers = {};
        const sent = [];
        const model = {send_msg: (m) => sent.push(JSON.parse(JSON.stringify(m))), on: (n, f) => { handlers[n] = f; }};
        bridge.render({model});
        handlers["msg:custom"]({type: "earn", missions: [{mission: "mixing-hurts", stars: [true, false, true]}]});
        handlers["msg:custom"]({type: "earn", missions: [{mission: "decode-drowns", stars: [false, true]}]});
        const atOnce = sent.length;
        await new Promise((resolve) => setTimeout(resolve, 0));  // the next task: the answers have left
        return {atOnce, sent};
    }""", module)
    # Nothing leaves from inside render or a message handler (lab/ui/browser/bridge.py: on the
    # static site Panel's page handler drops what is sent while it applies the worker's patch).
    assert replies["atOnce"] == 0, replies
    replies = [r for r in replies["sent"] if r["type"] == "stars"]  # not the storage-access report
    assert replies[0]["hello"] is True and replies[0]["stars"] == []  # on render: what storage holds
    assert replies[-1]["ack"] is True and dict(replies[-1]["stars"])["mixing-hurts"] == [True, False, True]
    stored = json.loads(lab_tab.evaluate(f"localStorage.getItem({json.dumps(KEY)})"))
    assert stored == {"version": 1, "stars": {"mixing-hurts": [True, False, True], "decode-drowns": [False, True]}}
    # The hub, open in the first tab, updates on the storage event; and after a reload.
    page.wait_for_selector('a[data-mission="mixing-hurts"][data-stars="2"]')
    page.reload()
    page.wait_for_selector('#stf-missions[data-loaded="true"]')
    cards = {c["id"]: c for c in _cards(page)}
    assert cards["mixing-hurts"]["stars"] == "2" and cards["decode-drowns"]["stars"] == "1"
    assert "★☆★" in cards["mixing-hurts"]["text"]
    assert page.get_attribute("#stf-total .stf-total", "data-earned") == "3"
    shot(page, "hub-with-stars.png")
    assert page.errors == []


CORRUPT = {
    "not-json": ("{not json", {}),
    "json-null": ("null", {}),
    "an-array": ("[1, 2, 3]", {}),
    "stars-not-an-object": ('{"version": 1, "stars": [true]}', {}),
    "partly-bad": ('{"version": 1, "stars": {"mixing-hurts": [true, "yes", true], "BAD ID": [true], '
                   '"decode-drowns": [true, true], "slow-link": "three"}}',
                   {"mixing-hurts": [True, False, True], "decode-drowns": [True, True]}),
    "future-version": ('{"version": 2, "stars": {"chunk-it": [true]}}', {"chunk-it": [True]}),
}


@pytest.mark.parametrize("case", sorted(CORRUPT))
def test_corrupt_storage_never_breaks_the_hub_nor_loses_readable_stars(page, server, case):
    raw, kept = CORRUPT[case]
    page.goto(server.url("site.webmanifest"))
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, raw])
    _open_hub(page, server.url("index.html"))
    cards = {c["id"]: c for c in _cards(page)}
    assert len(cards) == len(_missions()) + 1
    for mid, flags in kept.items():
        assert cards[mid]["stars"] == str(sum(flags)), mid
    assert page.is_visible("#stf-note")
    assert "could not be read" in page.inner_text("#stf-note")
    assert page.evaluate(f"localStorage.getItem({json.dumps(BACKUP)})") == raw  # the raw text is kept aside
    assert json.loads(page.evaluate(f"localStorage.getItem({json.dumps(KEY)})")) == {"version": 1, "stars": kept}
    if case == "partly-bad":
        shot(page, "hub-recovered.png")
    assert page.errors == []


def test_blocked_storage_still_shows_the_hub(browser, server):
    context = browser.new_context()
    context.add_init_script("""Object.defineProperty(window, 'localStorage', {
        get() { throw new DOMException('The operation is insecure.', 'SecurityError'); }});""")
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    _open_hub(pg, server.url("index.html"))
    assert len(_cards(pg)) == len(_missions()) + 1
    assert "does not let the page store data" in pg.inner_text("#stf-note")
    assert errors == []
    context.close()


def test_full_storage_is_named_full_on_the_static_hub_and_the_star_waits_for_room(page, server):
    from lab.ui.stars.stars_bridge import STORAGE_NOTES

    page.goto(server.url("site.webmanifest"))
    filled = page.evaluate(FILL_ALL, page.evaluate(FILL_TO_QUOTA))
    assert filled is not None and filled[1] == "QuotaExceededError", filled
    _open_hub(page, server.url("index.html"))
    page.evaluate("STFStars.earn('mixing-hurts', [true])")  # as a lab in this tab would
    page.wait_for_selector('#stf-note[data-status="full"]')
    assert page.inner_text("#stf-note").strip() == STORAGE_NOTES["full"]
    assert page.evaluate(f"localStorage.getItem({json.dumps(KEY)})") is None
    _open_hub(page, server.url("index.html"))  # the next page of this tab still has it
    assert page.get_attribute('a[data-mission="mixing-hurts"]', "data-stars") == "1"
    assert page.get_attribute("#stf-note", "data-status") == "full"
    page.evaluate("(keys) => keys.forEach((k) => localStorage.removeItem(k))", filled[0])
    _open_hub(page, server.url("index.html"))  # room again: saved, and the note goes
    assert json.loads(page.evaluate(f"localStorage.getItem({json.dumps(KEY)})")) == {
        "version": 1, "stars": {"mixing-hurts": [True]}}
    assert page.get_attribute("#stf-note", "data-status") == "ok" and page.is_hidden("#stf-note")
    assert page.errors == []


def test_reset_progress_asks_first_and_keeps_a_backup(page, server):
    saved = {"version": 1, "stars": {"mixing-hurts": [True, True, False]}}
    page.goto(server.url("site.webmanifest"))
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, json.dumps(saved)])
    _open_hub(page, server.url("index.html"))
    page.click("#stf-reset")
    assert page.get_attribute("#stf-reset", "aria-pressed") == "true"
    assert "Click again" in page.inner_text("#stf-reset")
    assert page.get_attribute('a[data-mission="mixing-hurts"]', "data-stars") == "2"  # nothing lost yet
    page.keyboard.press("Escape")
    assert page.inner_text("#stf-reset") == "Reset progress"
    page.click("#stf-reset")
    page.click("#stf-reset")
    page.wait_for_selector('a[data-mission="mixing-hurts"][data-stars="0"]')
    assert page.evaluate(f"localStorage.getItem({json.dumps(KEY)})") is None
    assert json.loads(page.evaluate(f"localStorage.getItem({json.dumps(BACKUP)})")) == saved
    assert "Progress reset" in page.inner_text("#stf-reset-status")
    assert page.errors == []


# ------------------------------------------------------------------ the lab page

_RECORD_LOADER = """
window.__stf = [];
new MutationObserver(() => {
  const l = document.getElementById('stf-loader');
  if (!l) return;
  const entry = [l.dataset.state, l.dataset.stage, (document.getElementById('stf-loader-detail') || {}).textContent || ''].join('|');
  if (window.__stf[window.__stf.length - 1] !== entry) window.__stf.push(entry);
}).observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
"""


def test_lab_shows_the_loading_screen_then_a_clear_error_with_retry(page, server):
    page.context.add_init_script(_RECORD_LOADER)
    page.goto(server.url("lab.html?mission=mixing-hurts"), wait_until="commit")
    page.wait_for_selector("#stf-loader", state="visible")
    page.wait_for_selector('#stf-loader[data-state="error"]', timeout=60_000)
    trail = page.evaluate("window.__stf")
    assert trail[0].startswith("loading|runtime"), trail
    assert any("Downloading Python" in t for t in trail), trail
    assert page.inner_text("#stf-loader-title") == "The lab could not start"
    assert page.inner_text("#stf-loader-mission") == "Mission: Mixing hurts"
    message = page.inner_text("#stf-error-message")
    assert "Could not download the Python runtime" in message and "cdn.jsdelivr.net" in message
    assert "offline" in page.inner_text("#stf-error-hint")
    assert page.get_attribute('li[data-step="runtime"]', "data-status") == "failed"
    assert page.is_visible("#stf-retry") and page.is_visible("a.stf-back")
    assert page.evaluate("document.activeElement.id") == "stf-retry"
    box = page.locator(".stf-loader-card").bounding_box()
    assert box["width"] > 300 and box["height"] > 200  # not a blank page
    shot(page, "lab-error.png")
    # Retry loads everything again (a fresh start), and fails the same clear way.
    with page.expect_navigation():
        page.click("#stf-retry")
    page.wait_for_selector('#stf-loader[data-state="error"]', timeout=60_000)
    assert page.evaluate("window.__stf")[0].startswith("loading|runtime")
    assert page.errors == []


def test_lab_opened_from_a_file_says_to_serve_it_over_http(page, dist):
    page.goto((dist / "lab.html").as_uri() + "?mission=chunk-it")
    page.wait_for_selector('#stf-loader[data-state="error"]')
    assert page.inner_text("#stf-loader-title") == "Serve the site over HTTP to run the lab"
    hint = page.inner_text("#stf-error-hint")
    assert "python -m http.server 8000" in hint and "HTTP" in hint
    assert page.is_hidden("#stf-retry")
    shot(page, "lab-file-url.png")
    # The hub itself works from a file, and says the same.
    page.goto((dist / "index.html").as_uri())
    page.wait_for_selector('#stf-missions[data-loaded="true"]')
    assert len(_cards(page)) == len(_missions()) + 1
    assert page.is_visible("#stf-file-note") and "python -m http.server" in page.inner_text("#stf-file-note")
    assert page.errors == []


def test_lab_in_an_iframe_shows_its_compact_loading_screen(page, server):
    page.set_content(f'<iframe src="{server.url("lab.html?mission=slow-link&embed=1")}" width="700" height="600"></iframe>')
    frame = page.frame_locator("iframe")
    frame.locator('#stf-loader[data-state="error"]').wait_for(timeout=60_000)
    assert frame.locator("html.stf-embed").count() == 1
    assert "Could not download the Python runtime" in frame.locator("#stf-error-message").inner_text()
    assert frame.locator("a.stf-back").get_attribute("target") == "_blank"  # leaves the blog's iframe
    shot(page, "lab-embed-error.png")


def test_self_hosted_pyodide_folder_is_used(browser, tmp_path_factory):
    """--pyodide-base ./pyodide/ with npm's Pyodide (the runtime, no packages) copied in:
    the runtime loads from the site itself, then the loader names the missing packages."""
    npm = REPO / "node_modules" / "pyodide"
    if not (npm / "pyodide.asm.wasm").is_file():
        pytest.skip("node_modules/pyodide missing (npm ci)")
    dist, _ = build_site(tmp_path_factory, "--pyodide-base", "./pyodide/", "--quiet")
    target = dist / "pyodide"
    target.mkdir(exist_ok=True)
    for name in ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"):
        shutil.copyfile(npm / name, target / name)
    srv = Server(dist)
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.goto(srv.url("lab.html?mission=chunk-it"))
        pg.wait_for_selector('#stf-loader[data-state="error"]', timeout=120_000)
        assert pg.get_attribute('li[data-step="runtime"]', "data-status") == "done"
        assert pg.get_attribute('li[data-step="packages"]', "data-status") == "failed"
        assert "Could not download Python packages" in pg.inner_text("#stf-error-message")
        assert "./pyodide/" in pg.inner_text("#stf-error-hint")
        shot(pg, "lab-self-hosted-packages-missing.png")
    finally:
        context.close()
        srv.stop()


def _stand_in_pyodide(folder, files):
    """npm's Pyodide runtime + stand-in wheels for every package the lab loads from Pyodide
    (each top-level module raises ImportError), with a lock file whose hashes match them."""
    import hashlib
    import importlib.util as iu

    spec = iu.spec_from_file_location("stf_build", REPO / "build.py")
    stf_build = iu.module_from_spec(spec)
    spec.loader.exec_module(stf_build)
    npm = REPO / "node_modules" / "pyodide"
    folder.mkdir(exist_ok=True)
    for name in ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip"):
        shutil.copyfile(npm / name, folder / name)
    lock = json.loads((npm / "pyodide-lock.json").read_text(encoding="utf-8"))
    by_file = {p["file_name"]: key for key, p in lock["packages"].items()}
    for file_name in files:
        if not file_name.endswith(".whl"):
            continue
        entry = lock["packages"][by_file[file_name]]
        name, version = file_name.split("-")[:2]
        dist_info = f"{name}-{version}.dist-info"
        stub = {f"{mod}/__init__.py": f"raise ImportError('{mod} is a stand-in for an offline test')\n".encode()
                for mod in entry.get("imports") or [name.lower()]}
        stub[f"{dist_info}/METADATA"] = f"Metadata-Version: 2.1\nName: {entry['name']}\nVersion: {version}\n".encode()
        stub[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        stf_build.write_wheel(folder / file_name, stub, dist_info)
        entry["sha256"] = hashlib.sha256((folder / file_name).read_bytes()).hexdigest()
    (folder / "pyodide-lock.json").write_text(json.dumps(lock), encoding="utf-8")


def test_lab_runs_python_in_the_browser_worker_up_to_the_packages_it_lacks(browser, tmp_path_factory):
    """Everything the browser can do offline, for real: Pyodide starts in the worker from the
    site, pyodide.loadPackage installs every package (stand-ins here: Pyodide's numpy etc. need
    its CDN), the site's wheels are unpacked, and Python runs build.py's setup, which imports
    Panel until the first stand-in stops it with a clear error at the "lab" step."""
    if not (REPO / "node_modules" / "pyodide" / "pyodide.asm.wasm").is_file():
        pytest.skip("node_modules/pyodide missing (npm ci)")
    dist, _ = build_site(tmp_path_factory, "--pyodide-base", "./stand-in-pyodide/", "--quiet")
    info = json.loads((dist / "build-info.json").read_text(encoding="utf-8"))
    _stand_in_pyodide(dist / "stand-in-pyodide", info["pyodide"]["files"])
    srv = Server(dist)
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.context.add_init_script(_RECORD_LOADER)
        pg.goto(srv.url("lab.html?mission=mixing-hurts"))
        pg.wait_for_selector('#stf-loader[data-state="error"]', timeout=180_000)
        status = {s: pg.get_attribute(f'li[data-step="{s}"]', "data-status") for s in ("runtime", "packages", "app")}
        detail = pg.text_content("#stf-error-detail")
        assert status == {"runtime": "done", "packages": "done", "app": "failed"}, (status, pg.inner_text("#stf-error-message"), detail)
        message = pg.inner_text("#stf-error-message")
        assert message.startswith("Panel did not start: ImportError:") and "stand-in" in message, message
        assert "is a stand-in for an offline test" in detail
        trail = pg.evaluate("window.__stf")
        assert any(t.startswith("loading|packages|Downloading packages") for t in trail), trail
        assert any(t.startswith("loading|app|") for t in trail), trail
        shot(pg, "lab-stand-in-packages-app-error.png")
    finally:
        context.close()
        srv.stop()


# ------------------------------------------------------------------ hosting


def test_site_works_at_a_sub_path_and_offline_on_a_second_visit(browser, dist):
    """Served from /some/sub/path/: every request resolves (no 404), the service worker's scope
    is that folder; then with the server gone the hub and the lab page still come up."""
    root = dist.parent / "host-root"
    sub = root / "some" / "sub"
    sub.mkdir(parents=True, exist_ok=True)
    link = sub / "path"
    if not link.exists():
        link.symlink_to(dist, target_is_directory=True)
    srv = Server(root)
    context = browser.new_context()
    bad = []
    try:
        pg = context.new_page()
        pg.on("response", lambda r: bad.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        base = srv.url("some/sub/path/")
        _open_hub(pg, base)  # the folder URL itself serves index.html
        scope = pg.evaluate("navigator.serviceWorker.ready.then(r => r.scope)")
        assert scope == base
        pg.goto(base + "lab.html?mission=chunk-it")
        pg.wait_for_selector('#stf-loader[data-state="error"]', timeout=60_000)
        assert bad == [], bad
        # Second visit, with the web server stopped: the cached site still shows up.
        pg.evaluate("navigator.serviceWorker.ready")
        srv.stop()
        _open_hub(pg, base + "index.html")
        assert len(_cards(pg)) == len(_missions()) + 1
        pg.goto(base + "lab.html?mission=book-store")
        pg.wait_for_selector('#stf-loader[data-state="error"]', timeout=60_000)
        assert pg.inner_text("#stf-loader-mission") == "Mission: The book store"
    finally:
        context.close()
        srv.stop()


def _frame(pg):
    pg.wait_for_function("document.querySelector('iframe') && document.querySelector('iframe').contentWindow")
    return next(f for f in pg.frames if f != pg.main_frame)


def _embed_hub(pg, server):
    """The hub inside an iframe on another site (localhost vs 127.0.0.1: same server, other host name)."""
    pg.goto(f"http://localhost:{server.port}/site.webmanifest")
    pg.set_content(f'<iframe src="{server.url("index.html")}" width="900" height="700"></iframe>')
    frame = pg.frame_locator("iframe")
    frame.locator('#stf-missions[data-loaded="true"]').wait_for()
    return frame


def _stars_of(pg, mission):
    return pg.get_attribute(f'a[data-mission="{mission}"]', "data-stars")


def test_a_cross_site_embed_gets_no_storage_in_chromium(browser, server):
    """Chromium 156 (headless, default settings) gives a third-party iframe no localStorage at all
    (SecurityError), and refuses requestStorageAccess even after a click: the embed sees none
    of the site's stars, says its stars last for the visit, and offers the ways to keep them."""
    context = browser.new_context()
    try:
        pg = context.new_page()
        pg.goto(server.url("site.webmanifest"))
        pg.evaluate("([k, v]) => localStorage.setItem(k, v)",
                    [KEY, json.dumps({"version": 1, "stars": {"mixing-hurts": [True, True, True]}})])
        _open_hub(pg, server.url("index.html"))
        assert _stars_of(pg, "mixing-hurts") == "3"
        assert pg.locator("#stf-open-full").is_hidden()  # top level: no full-lab link, no storage request
        assert pg.locator("#stf-storage-access").is_hidden()
        frame = _embed_hub(pg, server)
        assert frame.locator('a[data-mission="mixing-hurts"]').get_attribute("data-stars") == "0"
        assert frame.locator("#stf-note").get_attribute("data-status") == "unavailable"
        assert "Copy my progress" in frame.locator("#stf-note").inner_text()
        assert _frame(pg).evaluate("() => { try { localStorage.length; return 'storage'; } catch (e) { return e.name; } }") \
            == "SecurityError"
        button = frame.locator("#stf-storage-access")
        button.wait_for(state="visible")
        button.click()
        frame.locator("#stf-progress-status", has_text="did not allow").wait_for()
        assert frame.locator("#stf-open-full").is_visible()
    finally:
        context.close()


def test_an_embed_star_reaches_the_top_level_hub_by_code_and_by_the_full_lab_link(browser, server):
    context = browser.new_context()
    try:
        pg = context.new_page()
        frame = _embed_hub(pg, server)
        # The lab's storage bridge earns through this same STFStars.earn (stars_store.js).
        _frame(pg).evaluate("() => { STFStars.earn('mixing-hurts', [false, true]); }")
        frame.locator("#stf-copy-progress").click()
        code = frame.locator("#stf-progress-code").input_value()
        assert code.startswith("STF1-")
        href = frame.locator("#stf-open-full").get_attribute("href")
        assert href.endswith("#progress=" + code)

        _open_hub(pg, server.url("index.html"))  # the site itself, top level: its own storage
        assert _stars_of(pg, "mixing-hurts") == "0"
        pg.fill("#stf-paste-input", code)
        pg.click("#stf-paste-progress")
        pg.locator("#stf-progress-status", has_text="1 star added").wait_for()
        assert _stars_of(pg, "mixing-hurts") == "1"
        saved = json.loads(pg.evaluate("k => localStorage.getItem(k)", KEY))
        assert saved["stars"]["mixing-hurts"] == [False, True]
        pg.fill("#stf-paste-input", code)  # again: OR-merged, nothing new, nothing lost
        pg.click("#stf-paste-progress")
        pg.locator("#stf-progress-status", has_text="0 stars added").wait_for()

        other = context.new_page()  # the link hand-off, in a fresh top-level page
        other.evaluate("() => 0")
        other.goto(server.url("site.webmanifest"))
        other.evaluate("k => localStorage.removeItem(k)", KEY)
        _open_hub(other, server.url(href.removeprefix("./")))
        assert _stars_of(other, "mixing-hurts") == "1"
        assert other.evaluate("() => window.location.hash") == ""  # the fragment is taken out of the address
        assert "added from the embed" in other.locator("#stf-progress-status").inner_text()
    finally:
        context.close()


HOSTILE_CODES = {
    "xss": '<img src=x onerror="window.__pwned=1">',
    "xss in a fragment id": "STF1-" + base64.urlsafe_b64encode(b'{"<svg onload=window.__pwned=1>":1}').decode(),
    "megabyte": "STF1-" + "A" * 1_000_000 + ".00000000",
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CODES))
def test_a_hostile_progress_code_changes_nothing_and_shows_as_text(page, server, case):
    code = HOSTILE_CODES[case]
    page.goto(server.url("site.webmanifest"))
    before = json.dumps({"version": 1, "stars": {"mixing-hurts": [True]}})
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, before])
    _open_hub(page, server.url("index.html"))
    page.evaluate("c => { document.getElementById('stf-paste-input').value = c; }", code)  # past maxlength too
    page.click("#stf-paste-progress")
    status = page.locator("#stf-progress-status", has_text="Nothing changed")
    status.wait_for()
    assert page.evaluate("k => localStorage.getItem(k)", KEY) == before
    assert len(status.inner_text()) < 300
    assert page.locator("#stf-progress-status *").count() == 0  # text, never markup
    assert page.evaluate("() => window.__pwned") is None
    _open_hub(page, server.url("index.html#progress=" + urllib.parse.quote(code[:5000])))
    page.locator("#stf-progress-status", has_text="Nothing changed").wait_for()
    assert page.evaluate("k => localStorage.getItem(k)", KEY) == before
    assert page.evaluate("() => window.__pwned") is None
    assert page.errors == []


# The full lab page, offline from a local Pyodide folder: tests/test_site_offline.py.


# ------------------------------------------------------------------ hostile mission text, storage edge cases


@pytest.fixture(scope="module")
def hostile_site(dist, tmp_path_factory):
    """The built site with its hub rebuilt (build.py's own hub_html) from hostile missions."""
    import importlib.util as iu

    from mission_text_payloads import write_hostile_missions

    spec = iu.spec_from_file_location("stf_build_hostile", REPO / "build.py")
    stf_build = iu.module_from_spec(spec)
    spec.loader.exec_module(stf_build)
    root = tmp_path_factory.mktemp("hostile-site")
    site = root / "dist"
    shutil.copytree(dist, site)
    folder = write_hostile_missions(root / "missions")
    missions = stf_build.missions_index(folder)
    (site / "index.html").write_text(stf_build.hub_html(missions, version="test", pyodide_version="0"), encoding="utf-8")
    srv = Server(site)
    yield srv, missions
    srv.stop()


def test_hostile_mission_text_never_runs_on_the_static_hub(page, hostile_site):
    from mission_text_payloads import HOSTILE_LABEL

    srv, missions = hostile_site
    _open_hub(page, srv.url("index.html"))
    cards = {c["id"]: c for c in _cards(page)}
    assert list(cards) == [m["id"] for m in missions] + ["sandbox"]  # `<!--<script>` no longer blanks the page
    for m in missions:
        assert cards[m["id"]]["name"] == m["title"]
        assert page.text_content(f'a[data-mission="{m["id"]}"] .one') == m["summary"]
    assert HOSTILE_LABEL in page.get_attribute('a[data-mission="xss-brief"]', "title")  # star labels: the tooltip
    for i in range(len(missions)):
        page.hover(f"#stf-missions li:nth-child({i + 1}) a")
        page.hover(f"#stf-missions li:nth-child({i + 1}) .name")
    for sel in ("script", "img", "svg", "iframe", "style", "b"):
        assert page.locator(f"#stf-missions {sel}").count() == 0, sel
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.errors == []


def _backups(page):
    return page.evaluate("() => Object.keys(localStorage).filter(k => k.startsWith(%s)).sort()" % json.dumps(BACKUP))


def test_two_recoveries_and_a_reset_keep_three_backups_until_cleared(page, server):
    page.goto(server.url("site.webmanifest"))
    first = '{"version": 1, "stars": {"mixing-hurts": [true, 7]}}'
    second = "{not json"
    for raw in (first, second):
        page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, raw])
        _open_hub(page, server.url("index.html"))
        assert "could not be read" in page.inner_text("#stf-note")
    saved = json.dumps({"version": 1, "stars": {"mixing-hurts": [True, True]}})
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, saved])
    _open_hub(page, server.url("index.html"))
    page.click("#stf-reset")
    page.click("#stf-reset")
    page.wait_for_selector('a[data-mission="mixing-hurts"][data-stars="0"]')
    keys = _backups(page)
    assert keys == [BACKUP, BACKUP + ":1", BACKUP + ":2"], keys
    values = page.evaluate("(ks) => ks.map(k => localStorage.getItem(k))", keys)
    assert values == [saved, first, second]  # the newest under the plain key, then oldest first by number
    assert page.get_attribute("#stf-backups", "data-backups") == "3" and page.is_visible("#stf-backups")
    assert all(k in page.inner_text("#stf-backups-text") for k in keys)
    page.click("#stf-clear-backups")
    assert len(_backups(page)) == 3  # one click only arms it
    page.click("#stf-clear-backups")
    assert _backups(page) == [] and page.is_hidden("#stf-backups")
    assert "3 backups deleted" in page.inner_text("#stf-reset-status")
    assert page.errors == []


_BIG = """([key, n, extra]) => {
    const raw = '{"version": 1, "stars": {"mixing-hurts": [true, false, true], "junk": "' + "j".repeat(n) + '"}}';
    if (key) localStorage.setItem(key, raw);
    return Object.keys(localStorage).filter(k => localStorage.getItem(k) === raw);
}"""


@pytest.mark.parametrize("room", ["no room for a copy", "no room at all"])
def test_a_corrupt_value_over_half_the_quota_is_never_lost(page, server, room):
    """No room to copy it: the raw text moves to the backup key (or, with no room even for
    that, stays where it was); the readable stars show either way."""
    page.goto(server.url("site.webmanifest"))
    quota = page.evaluate(FILL_TO_QUOTA)
    n = int(quota * 0.6)
    assert page.evaluate(_BIG, [KEY, n, 0]) == [KEY]
    if room == "no room at all":  # fill what is left, so even the backup key's longer name does not fit
        page.evaluate("""() => { let i = 0, size = 1 << 20;
            while (size >= 1) { try { localStorage.setItem("fill" + i, "f".repeat(size)); i++; } catch (e) { size >>= 1; } } }""")
    _open_hub(page, server.url("index.html"))
    assert page.get_attribute('a[data-mission="mixing-hurts"]', "data-stars") == "2"
    held = page.evaluate(_BIG, [None, n, 0])
    if room == "no room for a copy":
        assert held == [BACKUP]
        assert json.loads(page.evaluate(f"localStorage.getItem({json.dumps(KEY)})")) == {
            "version": 1, "stars": {"mixing-hurts": [True, False, True]}}
    else:
        assert held in ([KEY], [BACKUP]), held  # kept in place if it could not be backed up
    # Earning more never overwrites what could not be backed up.
    page.evaluate("STFStars.earn('chunk-it', [true])")
    assert page.evaluate(_BIG, [None, n, 0]) == held
    assert page.errors == []


def test_object_prototype_names_in_storage_and_as_a_mission_id_on_the_static_hub(page, hostile_site):
    from mission_text_payloads import CONSTRUCTOR_ID, EASY_ID

    srv, _ = hostile_site
    page.goto(srv.url("site.webmanifest"))
    raw = ('{"version": 1, "stars": {"__proto__": [true, true], "constructor": [true, false], "toString": [true], '
           '"hasOwnProperty": [true], "' + EASY_ID + '": [false, true]}}')
    page.evaluate("([k, v]) => localStorage.setItem(k, v)", [KEY, raw])
    _open_hub(page, srv.url("index.html"))
    assert page.get_attribute(f'a[data-mission="{CONSTRUCTOR_ID}"]', "data-stars") == "1"
    assert page.get_attribute(f'a[data-mission="{EASY_ID}"]', "data-stars") == "1"
    assert page.get_attribute('a[data-mission="xss-brief"]', "data-stars") == "0"
    assert page.get_attribute("#stf-total .stf-total", "data-earned") == "2"
    assert page.evaluate(f"localStorage.getItem({json.dumps(BACKUP)})") == raw
    # Earning for "constructor" (the lab's bridge runs this same code) merges like any id.
    page.evaluate(f"STFStars.earn({json.dumps(CONSTRUCTOR_ID)}, [false, true])")
    assert json.loads(page.evaluate(f"localStorage.getItem({json.dumps(KEY)})")) == {
        "version": 1, "stars": {CONSTRUCTOR_ID: [True, True], EASY_ID: [False, True]}}
    assert page.evaluate("Object.prototype.constructor === Object && ({}).toString === Object.prototype.toString")
    assert page.errors == []


def test_the_hub_and_the_lab_bridge_share_one_copy_of_the_storage_logic(dist):
    from lab.ui.stars.stars_bridge import _ESM, STORE_JS

    store = STORE_JS.read_text(encoding="utf-8")
    assert (dist / "assets" / "stars.js").read_text(encoding="utf-8") == store
    assert _ESM.startswith(store)


# ------------------------------------------------------------------ a blog with the lab and the hub embedded

# Chromium with third-party storage allowed (partitioned by the top-level site), as Firefox and
# Safari give it and as a Chrome with third-party cookies allowed does. Debian's headless
# Chromium blocks it by default (test_a_cross_site_embed_gets_no_storage_in_chromium).
PARTITIONED = "--disable-features=TrackingProtection3pcd"


def _blog(pg, server, *frames):
    """A page of the blog (localhost: another site than the lab's 127.0.0.1) embedding `frames`."""
    pg.goto(f"http://localhost:{server.port}/site.webmanifest")
    tags = "".join(f'<iframe id="f{i}" src="{server.url(src)}" width="600" height="500"></iframe>'
                   for i, src in enumerate(frames))
    pg.set_content(f"<h1>My serving series</h1>{tags}")
    pg.wait_for_function(f"document.querySelectorAll('iframe').length === {len(frames)}")
    out = []
    for i in range(len(frames)):
        loc = pg.frame_locator(f"#f{i}")
        loc.locator('#stf-missions[data-loaded="true"]').wait_for()
        out.append(loc)
    return out


def _earn_in(pg, index, mission, stars):
    """What the lab embed's storage bridge does when a star is earned: STFStars.earn (stars_store.js)."""
    frame = pg.query_selector(f"#f{index}").content_frame()
    frame.evaluate("([m, s]) => STFStars.earn(m, s)", [mission, stars])


def test_a_blogs_hub_embed_shows_the_star_earned_in_its_lab_embed_in_chromium_without_storage(browser, server):
    """Third-party storage blocked: the star lives for the visit, and the hub embed beside the lab
    embed shows it at once (the lab posts it to its sibling frames of the same site)."""
    context = browser.new_context()
    try:
        pg = context.new_page()
        lab, hub = _blog(pg, server, "index.html?embed=1", "index.html?embed=1")
        assert hub.locator(".stf-hero").is_hidden() and hub.locator(".stf-topbar").is_hidden()  # compact
        href = hub.locator('a[data-mission="mixing-hurts"]').get_attribute("href")
        assert href == "lab.html?mission=mixing-hurts&embed=1"  # a mission opens as an embed, in the frame
        assert hub.locator("#stf-note").get_attribute("data-status") == "unavailable"
        _earn_in(pg, 0, "mixing-hurts", [False, True])
        hub.locator('a[data-mission="mixing-hurts"][data-stars="1"]').wait_for()
        pg.reload()  # no storage: gone after the visit (docs/embedding.md says so: copy the progress code)
        hub = _blog(pg, server, "index.html?embed=1")[0]
        assert hub.locator('a[data-mission="mixing-hurts"]').get_attribute("data-stars") == "0"
        # Another site's frame cannot add stars: only this origin's messages are taken.
        pg.evaluate("() => document.querySelector('#f0').contentWindow.postMessage("
                    "{type: 'stf-stars:v1', stars: {'mixing-hurts': [true, true, true]}}, '*')")
        hub.locator("#stf-missions").wait_for()
        assert hub.locator('a[data-mission="mixing-hurts"]').get_attribute("data-stars") == "0"
    finally:
        context.close()


def test_a_blogs_series_page_keeps_the_stars_of_its_posts_lab_embeds_where_storage_is_partitioned(playwright_driver,
                                                                                                  server):
    """Partitioned third-party storage: a star earned in a lab embed on one post shows in the hub
    embed on the blog's series page on a later visit, and not on the lab's own site (another
    partition), where a progress code carries it."""
    b = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=ARGS + [BLOCK_CDN, PARTITIONED])
    try:
        context = b.new_context()
        post = context.new_page()
        hub = _blog(post, server, "index.html?embed=1")[0]
        assert hub.locator("#stf-note").get_attribute("data-status") != "unavailable"
        _earn_in(post, 0, "mixing-hurts", [True, False, True])
        post.close()
        series = context.new_page()  # the series page, later
        hub = _blog(series, server, "index.html?embed=1")[0]
        assert hub.locator('a[data-mission="mixing-hurts"]').get_attribute("data-stars") == "2"
        top = context.new_page()  # the lab's own site, top level: the blog's stars are not there
        _open_hub(top, server.url("index.html"))
        assert top.get_attribute('a[data-mission="mixing-hurts"]', "data-stars") == "0"
        context.close()
    finally:
        b.close()
