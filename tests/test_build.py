"""`python build.py`: the static site, checked file by file.

One build per test session (shared with test_site_browser.py through `build_site`),
into a temporary folder. What is checked: every file is there and listed with its size
and hash, every link of the site resolves inside it (except the configured Pyodide
base), the Pyodide/Panel/Bokeh versions agree with what Panel's converter pins, the lab
wheel carries the core, the UI and the missions, the build is reproducible, the
vendored wheels import and render the lab, and the lab wheel installed into bare
Pyodide under Node runs every mission's start exactly as CPython does. And build.py's steps
(site_build/): each module says what it owns, build.py finds them when loaded by path from
any folder, and none of them reaches the lab wheel.
"""

import base64
import hashlib
import html.parser
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin, urlparse

import pytest

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / "build.py"
RUN_WHEEL = REPO / "tests" / "pyodide" / "run_wheel.mjs"
NODE_PYODIDE = REPO / "node_modules" / "pyodide"

_BUILDS = {}


def run_build(out, *args, timeout=900):
    return subprocess.run([sys.executable, str(BUILD), "--out", str(out), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def build_site(tmp_path_factory, *args):
    """Build once per session and set of options; returns (dist Path, CompletedProcess)."""
    key = tuple(args)
    if key not in _BUILDS:
        out = tmp_path_factory.mktemp("site") / "dist"
        proc = run_build(out, *args)
        if proc.returncode != 0:
            raise AssertionError(f"build.py {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        _BUILDS[key] = (out, proc)
    return _BUILDS[key]


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    return build_site(tmp_path_factory)


@pytest.fixture(scope="session")
def dist(site):
    return site[0]


@pytest.fixture(scope="session")
def source_dist(tmp_path_factory):
    """The site with Python as source (--no-precompile): what CPython, not Pyodide, can import."""
    return build_site(tmp_path_factory, "--no-precompile", "--no-prerender")[0]


@pytest.fixture(scope="session")
def info(dist):
    return json.loads((dist / "build-info.json").read_text(encoding="utf-8"))


def _worker_config(dist):
    text = (dist / "lab.js").read_text(encoding="utf-8")
    m = re.search(r"^const STF = (\{.*?^\});", text, re.S | re.M)
    assert m, "lab.js has no STF config"
    return json.loads(m.group(1))


def _page_config(dist):
    text = (dist / "lab.html").read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="stf-config">(.*?)</script>', text, re.S)
    assert m, "lab.html has no stf-config"
    return json.loads(m.group(1))


def _missions():
    from lab.core.missions import list_missions

    return list_missions(str(REPO / "missions"))


# ------------------------------------------------------------------ output and files


def test_build_prints_every_file_its_size_and_the_total(site):
    dist, proc = site
    files = sorted(p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file())
    listed = re.findall(r"^\s+\d+(?:\.\d)? (?:B|KB|MB|GB)\s+(\S+)$", proc.stdout, re.M)
    assert sorted(listed) == files
    total = sum((dist / f).stat().st_size for f in files)
    assert re.search(rf"^total: {len(files)} files, .* \({total:,} bytes\)", proc.stdout, re.M), proc.stdout[-500:]
    first = _missions()[0]
    assert f'lab.html?mission={first.id}&amp;embed=1"' in proc.stdout
    assert "<iframe " in proc.stdout and 'loading="lazy"' in proc.stdout


def test_expected_files_are_there(dist, info):
    from panel.io import convert

    expected = [
        "index.html", "lab.html", "lab.js", "sw.js", "site.webmanifest", "build-info.json", "missions/index.json",
        "missions/schema.json", "assets/site.css", "assets/theme.css", "assets/hub.js", "assets/stars.js",
        "assets/loader.js", "assets/icon.svg",
        f"panel/{convert.PY_VERSION}/dist/panel.min.js",
        f"panel/{convert.PY_VERSION}/dist/wheels/panel-{convert.PY_VERSION}-py3-none-any.whl",
        f"panel/wheels/bokeh-{convert.BOKEH_VERSION}-py3-none-any.whl",
        f"bokeh/bokeh-{convert.BOKEH_VERSION}.min.js",
        "wheels/split_the_fleet-0.1.0-py3-none-any.whl",
    ]
    expected += ["missions/" + p.relative_to(REPO / "missions").as_posix()
                 for p in (REPO / "missions").rglob("*") if p.is_file() and p.suffix in (".json", ".csv")]
    missing = [f for f in expected if not (dist / f).is_file()]
    assert not missing
    for name in ("index.html", "lab.html", "lab.js", "sw.js"):
        assert (dist / name).stat().st_size > 1000, name


def test_build_info_lists_every_file_with_its_size_and_hash(dist, info):
    on_disk = {p.relative_to(dist).as_posix() for p in dist.rglob("*") if p.is_file()}
    assert set(info["files"]) == on_disk - {"build-info.json"}
    for name, entry in info["files"].items():
        data = (dist / name).read_bytes()
        assert entry["size"] == len(data), name
        assert entry["sha256"] == hashlib.sha256(data).hexdigest(), name


def test_missions_index_is_every_mission_in_order(dist):
    index = json.loads((dist / "missions" / "index.json").read_text(encoding="utf-8"))
    missions = _missions()
    assert [m["id"] for m in index["missions"]] == [m.id for m in missions]
    for entry, m in zip(index["missions"], missions):
        assert entry["title"] == m.title and entry["summary"] == m.summary and entry["order"] == m.order
        assert entry["stars"] == [s.label for s in m.stars]
        assert (dist / "missions" / entry["file"]).read_bytes() == Path(m.path).read_bytes()
    hub = (dist / "index.html").read_text(encoding="utf-8")
    inline = json.loads(re.search(r'id="stf-missions-data">(.*?)</script>', hub, re.S).group(1))
    assert inline["missions"] == index["missions"]
    assert inline["storageKey"] == "split-the-fleet:stars:v1"


# ------------------------------------------------------------------ relative links


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and ((name == "src" and tag in ("script", "img", "iframe", "source"))
                          or (name == "href" and tag in ("a", "link"))):
                self.links.append((tag, name, value))


def _resolve(dist, page, url):
    """The file `url` (relative, as written in `page`) names inside dist, or None if it leaves it."""
    base = "http://site.test/sub/path/" + page
    full = urlparse(urljoin(base, url))
    if full.netloc != "site.test" or not full.path.startswith("/sub/path/"):
        return None
    rel = full.path[len("/sub/path/"):] or "index.html"
    if rel.endswith("/"):
        rel += "index.html"
    return dist / rel


def _site_text_files(dist):
    """The site's own text files (not the vendored Panel/Bokeh assets)."""
    for path in sorted(dist.rglob("*")):
        rel = path.relative_to(dist).as_posix()
        if path.is_file() and path.suffix in (".html", ".js", ".css", ".json", ".webmanifest", ".svg") \
                and not rel.startswith(("panel/", "bokeh/", "missions/", "pyodide/")):
            yield rel, path.read_text(encoding="utf-8")


def test_every_link_is_relative_and_resolves_inside_the_site(dist, info):
    checked = 0
    for page in ("index.html", "lab.html"):
        parser = _Links()
        parser.feed((dist / page).read_text(encoding="utf-8"))
        for tag, attr, url in parser.links:
            if tag == "a" and url.startswith(("#", "http://localhost:")):
                continue  # in-page anchors; the "run python -m http.server" instructions
            assert not url.startswith("/"), f"{page}: root-relative {url} breaks sub-path hosting"
            assert not re.match(r"^[a-z]+:", url), f"{page}: absolute URL {url}"
            target = _resolve(dist, page, url)
            assert target is not None and target.is_file(), f"{page}: <{tag} {attr}={url!r}> does not resolve"
            checked += 1
    # Runtime URLs: the worker's wheels, the service worker's precache list, the manifest.
    config = _worker_config(dist)
    for wheel in config["wheels"]:
        target = _resolve(dist, "lab.js", wheel["url"])
        assert target is not None and target.is_file(), wheel
        checked += 1
    assert _resolve(dist, "lab.js", config["panelCdnRoot"]) is not None
    sw = (dist / "sw.js").read_text(encoding="utf-8")
    precache = json.loads(re.search(r"^const PRECACHE = (\[.*?\]);", sw, re.S | re.M).group(1))
    assert "./lab.html" in precache and "./index.html" in precache and "./assets/loader.js" in precache
    for url in precache:
        target = _resolve(dist, "sw.js", url)
        assert target is not None and target.is_file(), url
        checked += 1
    manifest = json.loads((dist / "site.webmanifest").read_text(encoding="utf-8"))
    assert manifest["scope"] == "./" and manifest["start_url"] == "./index.html"
    for icon in manifest["icons"]:
        assert _resolve(dist, "site.webmanifest", icon["src"]).is_file()
    # CSS url(...) references, the site's and Panel's.
    for css in list(dist.glob("assets/*.css")) + list((dist / "panel").rglob("*.css")):
        rel = css.relative_to(dist).as_posix()
        for url in re.findall(r"url\(\s*['\"]?([^'\")]+)['\"]?\s*\)", css.read_text(encoding="utf-8")):
            if url.startswith(("data:", "#")):
                continue
            target = _resolve(dist, rel, url.split("?")[0].split("#")[0])
            assert target is not None and target.is_file(), f"{rel}: url({url})"
            checked += 1
    assert checked > 40
    # Nothing else of the site names another origin but the configured Pyodide base.
    allowed = {info["pyodide"]["base"], "http://localhost:8000/", "http://www.w3.org/2000/svg"}  # + XML namespace
    for rel, text in _site_text_files(dist):
        for url in re.findall(r"https?://[^\s\"'<>)`\\]+", text):
            assert any(url.startswith(a) for a in allowed), f"{rel} names {url}"
    lab = (dist / "lab.html").read_text(encoding="utf-8")
    assert "cdn.bokeh.org" not in lab and "cdn.holoviz.org" not in lab


def test_lab_page_is_panels_conversion_with_the_loading_screen(dist):
    page = (dist / "lab.html").read_text(encoding="utf-8")
    assert page.count('STFLoader.createWorker("./lab.js")') == 1 and "new Worker(" not in page
    assert 'id="stf-loader"' in page and 'id="stf-retry"' in page
    assert page.index('src="./assets/loader.js"') < page.index("STFLoader.createWorker")
    assert re.findall(r'<div id="(stf-root-\d+)" data-root-id=', page), "Panel's root elements"
    assert not re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", page), "random ids"
    worker = (dist / "lab.js").read_text(encoding="utf-8")
    assert "from lab.ui.site_entry import site_page" in worker and "init_doc()" in worker and "await write_doc()" in worker
    assert "importScripts(" in worker and "micropip" not in worker.split("// ---- Panel's generated code")[0]
    node = shutil.which("node")
    if node:
        for name in ("lab.js", "sw.js", "assets/loader.js", "assets/hub.js", "assets/stars.js"):
            proc = subprocess.run([node, "--check", str(dist / name)], capture_output=True, text=True)
            assert proc.returncode == 0, f"{name}: {proc.stderr}"


# ------------------------------------------------------------------ versions


def test_versions_agree_with_what_panels_converter_pins(dist, info):
    import bokeh
    import panel
    from panel.io import convert

    pyodide = convert.PYODIDE_VERSION.lstrip("v")
    npm = json.loads((REPO / "package.json").read_text(encoding="utf-8"))["dependencies"]["pyodide"]
    assert pyodide == npm
    assert convert.PY_VERSION == panel.__version__ and convert.BOKEH_VERSION == bokeh.__version__
    # The worker: Pyodide from the converter's pinned release, the version checked at run time.
    config = _worker_config(dist)
    assert config["pyodideVersion"] == pyodide == info["pyodide"]["version"] == _page_config(dist)["pyodideVersion"]
    assert config["pyodideBase"] == convert.PYODIDE_URL.rsplit("/", 1)[0] + "/" == info["pyodide"]["base"]
    assert info["converter"]["pyodide_url"] == convert.PYODIDE_URL
    # The converter's own requirement list names the Panel and Bokeh wheels the site carries.
    env = info["converter"]["env_spec"]
    panel_url = f"./panel/{convert.PY_VERSION}/dist/wheels/panel-{convert.PY_VERSION}-py3-none-any.whl"
    bokeh_url = f"./panel/wheels/bokeh-{convert.BOKEH_VERSION}-py3-none-any.whl"
    assert panel_url in env and bokeh_url in env
    urls = [w["url"] for w in config["wheels"]]
    assert panel_url in urls and bokeh_url in urls
    for url, name, version in ((panel_url, "panel", convert.PY_VERSION), (bokeh_url, "bokeh", convert.BOKEH_VERSION)):
        with zipfile.ZipFile(dist / url) as zf:
            meta = zf.read(f"{name}-{version}.dist-info/METADATA").decode()
        assert f"\nVersion: {version}\n" in meta
    # BokehJS and Panel's JS on the page are the same versions.
    scripts = _page_config(dist)["scripts"]  # loader.js runs them (test_what_the_site_serves_gzipped_...)
    assert f"./bokeh/bokeh-{convert.BOKEH_VERSION}.min.js" in scripts
    assert f"./panel/{convert.PY_VERSION}/dist/panel.min.js" in scripts
    bokehjs = (dist / f"bokeh/bokeh-{convert.BOKEH_VERSION}.min.js").read_text(encoding="utf-8")
    assert f'o.version="{convert.BOKEH_VERSION}"' in bokehjs  # BokehJS's own version string
    # Pyodide's packages the worker loads exist in that release's lock, at compatible versions.
    lock = json.loads((NODE_PYODIDE / "pyodide-lock.json").read_text(encoding="utf-8")) if NODE_PYODIDE.is_dir() else None
    if lock:
        assert set(config["pyodidePackages"]) <= set(lock["packages"])
        assert "numpy" in config["pyodidePackages"] and "bokeh" not in config["pyodidePackages"]


# ------------------------------------------------------------------ wheels


def _lab_wheel(dist):
    wheels = sorted((dist / "wheels").glob("split_the_fleet-*-py3-none-any.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_lab_wheel_contains_the_core_the_ui_and_the_missions(dist):
    wheel = _lab_wheel(dist)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        for sub in ("core", "ui"):
            for path in sorted((REPO / "lab" / sub).glob("*.py")):
                arc = f"lab/{sub}/{path.name}"
                assert arc in names, arc
                assert zf.read(arc) == path.read_bytes(), f"{arc} differs from the repo"
        assert "lab/__init__.py" in names and "lab/cli.py" in names
        for path in (REPO / "missions").rglob("*"):
            if path.is_file() and path.suffix in (".json", ".csv"):
                arc = "lab/missions/" + path.relative_to(REPO / "missions").as_posix()
                assert zf.read(arc) == path.read_bytes(), arc
        assert "lab/missions/schema.json" in names
        # Compiled for Pyodide beside the kept sources: __pycache__/<module>.<Pyodide's tag>.pyc, one per .py.
        compiled = [n for n in names if n.endswith(".pyc")]
        tags = {n.rsplit(".", 2)[-2] for n in compiled}
        assert len(tags) == 1 and tags != {sys.implementation.cache_tag}, tags
        tag = tags.pop()
        assert all("/__pycache__/" in n for n in compiled)
        sources = sorted(n for n in names if n.endswith(".py"))
        assert sorted(n.replace("__pycache__/", "").replace(f".{tag}.pyc", ".py") for n in compiled) == sources
        info = [n for n in names if n.endswith(".dist-info/METADATA")]
        assert info == ["split_the_fleet-0.1.0.dist-info/METADATA"]
        meta = zf.read(info[0]).decode()
        assert "Name: split-the-fleet\n" in meta and "Version: 0.1.0\n" in meta
        assert "Tag: py3-none-any" in zf.read("split_the_fleet-0.1.0.dist-info/WHEEL").decode()
        # RECORD: every file with its hash, itself last.
        record = zf.read("split_the_fleet-0.1.0.dist-info/RECORD").decode().splitlines()
        assert record[-1] == "split_the_fleet-0.1.0.dist-info/RECORD,,"
        assert len(record) == len(names)
        for line in record[:-1]:
            name, digest, size = line.rsplit(",", 2)
            data = zf.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == want and int(size) == len(data), name


def test_vendored_wheels_are_pure_python_with_valid_records(dist, info):
    from site_build.precompile import start_imports

    for wheel in info["wheels"]:
        path = _resolve(dist, "lab.js", wheel["url"])
        with zipfile.ZipFile(path) as zf:
            assert zf.testzip() is None
            names = zf.namelist()
            wheel_files = [n for n in names if n.endswith(".dist-info/WHEEL")]
            assert len(wheel_files) == 1, path.name
            tags = re.findall(r"^Tag: (\S+)", zf.read(wheel_files[0]).decode(), re.M)
            assert tags and all(t.endswith("-none-any") for t in tags), (path.name, tags)
            assert not [n for n in names if n.endswith(".so")], path.name
            if wheel["url"].startswith("./wheels/split_the_fleet-"):
                continue  # the lab's own: sources kept (test_lab_wheel_contains_the_core_the_ui_and_the_missions)
            # Pre-compiled: every module the lab imports at start (START_IMPORTS) a .pyc of one
            # interpreter (not this one), unchecked-hash (PEP 552 flags 0b01), since unpacking does
            # not keep file times; the modules it never imports stay source (smaller).
            listed = start_imports()
            assert not [n for n in names if n.endswith(".py") and n in listed], path.name
            assert not [n for n in names if n.endswith(".pyc") and n[:-1] not in listed], path.name
            headers = {zf.read(n)[:8] for n in names if n.endswith(".pyc")}
            assert headers, path.name
            assert {h[4:8] for h in headers} == {(0b01).to_bytes(4, "little")}, path.name
            magics = {h[:4] for h in headers}
            assert len(magics) == 1 and magics != {importlib.util.MAGIC_NUMBER}, (path.name, magics)
    panel_url = next(w["url"] for w in info["wheels"] if w["name"] == "panel")
    with zipfile.ZipFile(_resolve(dist, "lab.js", panel_url)) as zf:
        names = zf.namelist()
        assert not [n for n in names if n.startswith(("panel/dist/bundled/", "panel/tests/", "panel/dist/images/"))
                    or n == "panel/dist/panel.json"], "not trimmed"
        assert "panel/io/pyodide.pyc" in names and "panel/dist/css/loading.css" in names


def test_no_precompile_serves_the_same_wheels_as_source(dist, source_dist, info):
    """--no-precompile: the same files, with .py where the default build has .pyc."""
    for wheel in info["wheels"]:
        with zipfile.ZipFile(_resolve(dist, "lab.js", wheel["url"])) as zf:
            compiled = {re.sub(r"(__pycache__/)?([^/]+?)(\.cpython-\d+)?\.pyc$", r"\2.py", n) for n in zf.namelist()}
        with zipfile.ZipFile(_resolve(source_dist, "lab.js", wheel["url"])) as zf:
            source = set(zf.namelist())
        assert not [n for n in source if n.endswith(".pyc")], wheel["name"]
        assert compiled == source, (wheel["name"], sorted(compiled ^ source)[:5])
    info_src = json.loads((source_dist / "build-info.json").read_text(encoding="utf-8"))
    assert info["precompiled"]["done"] and not info_src["precompiled"]["done"]


_CPYTHON_RENDER = r'''
import json, re, sys
sys.path.insert(0, sys.argv[1])
import bokeh, panel, param, lab
assert all(m.__file__.startswith(sys.argv[1]) for m in (bokeh, panel, param, lab)), [bokeh.__file__, panel.__file__, lab.__file__]
from bokeh.document import Document
from bokeh.embed.util import standalone_docs_json_and_render_items
from panel.io.document import MockSessionContext
from panel.io.state import set_curdoc, state
from lab.ui.app import lab_page
urls = set()
for search in ("?mission=mixing-hurts", "?mission=slow-link&embed=1", "?mission=sandbox"):
    doc = Document()
    doc._session_context = lambda: MockSessionContext(document=doc)
    with set_curdoc(doc):
        loc = state.location
        from panel.util import edit_readonly
        with edit_readonly(loc):
            loc.param.update(search=search, pathname="/sub/lab.html")
        lab_page().server_doc(doc)
        docs_json, _ = standalone_docs_json_and_render_items(doc)
    text = json.dumps(docs_json)
    urls |= set(re.findall(r'\./panel/[^"\\ )?]+', text))
print(json.dumps(sorted(urls)))
'''


def _unpack_site_wheels(dist, info, site):
    """Every wheel the site's worker installs, unpacked into `site` (a site-packages folder)."""
    for wheel in info["wheels"]:
        with zipfile.ZipFile(_resolve(dist, "lab.js", wheel["url"])) as zf:
            zf.extractall(site)
    return site


def test_vendored_wheels_import_and_render_the_lab(source_dist, info, tmp_path):
    """The trimmed Panel/Bokeh wheels and the lab wheel, alone on sys.path, build every page kind;
    every stylesheet those pages ask for is on the site. (The source build: CPython cannot
    import Pyodide's .pyc; tests/test_site_offline.py runs the compiled ones in the browser.)"""
    dist = source_dist
    site = _unpack_site_wheels(dist, info, tmp_path / "site-packages")
    script = tmp_path / "render.py"
    script.write_text(_CPYTHON_RENDER, encoding="utf-8")
    env = dict(os.environ, PANEL_CDN_ROOT="./panel/", PYTHONPATH="")
    proc = subprocess.run([sys.executable, str(script), str(site)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    urls = json.loads(proc.stdout.strip().splitlines()[-1])
    assert any(u.endswith("/css/button.css") for u in urls)  # the scan finds Panel's stylesheets (briefs are HTML panes now, not Markdown)
    for url in urls:
        assert (dist / url).is_file(), f"the lab asks for {url}, which the site lacks"


_WORKER_PYTHON = r"""
import ast, asyncio, json, re, sys, types
lab_js = open(sys.argv[2], encoding="utf-8").read()
sys.path.insert(0, sys.argv[1])

def literal(name):  # a JS template literal of lab.js, as Python source (Panel escaped it with unicode_escape)
    m = re.search(r"^const %s = `(.*?)(?<!\\)`;" % name, lab_js, re.S | re.M)
    return m.group(1).replace("\\`", "`").encode("utf-8").decode("unicode_escape")

code, setup = literal("PANEL_APP_CODE"), literal("SETUP")
early, env = literal("EARLY_START"), literal("PANEL_ENV")  # the first view's start, then Panel's settings
slices = json.loads(re.search(r"^const PANEL_SLICES = (\[.*?\]);", lab_js, re.M).group(1))
assert code.rstrip().endswith("await write_doc()")
code = code.rstrip()[: -len("await write_doc()")] + "_stf_result = await write_doc()\n"
# Stand-ins for Pyodide's `js` and `pyodide` modules: no DOM, as in the web worker.
js = types.ModuleType("js")
js.JSON, js.XMLHttpRequest = json, object
pyodide = types.ModuleType("pyodide")
pyodide.code = types.SimpleNamespace(run_js=lambda src: None)
pyodide.ffi = types.SimpleNamespace(to_js=lambda x, **k: x, jsnull=None)
sys.modules.update(js=js, pyodide=pyodide)
search = sys.argv[3]
g = {"__name__": "__main__", "_stf_panel_cdn_root": "http://site.test/sub/path/panel/",
     "_stf_page_location": json.dumps({"href": "http://site.test/sub/path/lab.html" + search, "pathname": "/sub/path/lab.html",
                                        "search": search, "hash": "", "ancestorOrigins": {}})}
g["_stf_early_query"] = search.lstrip("?")
exec(early, g)  # (what the worker runs before Panel: the first view's controls answered)
answer = json.loads(g["_stf_early_answer"]("layout", "colocated"))
assert answer["html"].startswith('<div class="stf-first') and answer["query"].startswith(search.lstrip("?").split("&")[0])
exec(env, g)
for name in slices:
    exec(f"import {name}", g)
exec(setup, g)

async def main():
    run = eval(compile(code, "<panel-app>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), g)
    if run is not None:
        await run

asyncio.run(main())
import bokeh, panel
docs_json, render_items, root_ids = g["_stf_result"]
print(json.dumps({"docs": docs_json, "roots": len(json.loads(root_ids)), "panel": panel.__file__, "bokeh": bokeh.__file__}))
"""


@pytest.mark.parametrize("mission, embed, extra", [("slow-link", True, ""), ("chunk-it", False, ""),
                                                   ("chunk-it", False, "&gpus=" + "9" * 10_000)])
def test_the_workers_python_builds_the_mission_in_the_address(source_dist, info, tmp_path, mission, embed, extra):
    """lab.js's own Python (build.py's setup + Panel's converted program), run in CPython with the
    site's wheels and stand-ins for Pyodide's js/pyodide modules: it builds the mission the page's
    address names, and every stylesheet it asks for is on the site, at its sub-path."""
    dist = source_dist
    site = _unpack_site_wheels(dist, info, tmp_path / "site-packages")
    script = tmp_path / "worker_python.py"
    script.write_text(_WORKER_PYTHON, encoding="utf-8")
    search = f"?mission={mission}" + ("&embed=1" if embed else "") + extra
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PANEL_", "BOKEH_"))}
    env["PYTHONPATH"] = ""
    proc = subprocess.run([sys.executable, str(script), str(site), str(dist / "lab.js"), search], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["panel"].startswith(str(site)) and out["bokeh"].startswith(str(site))
    title = next(m.title for m in _missions() if m.id == mission)
    assert title in out["docs"]
    assert ("stf-embed" in out["docs"]) == embed
    # A value Panel cannot convert (10,000 digits) reaches the lab's own parser, which ignores it, saying so.
    assert ("Ignored" in out["docs"]) == bool(extra)
    page = (dist / "lab.html").read_text(encoding="utf-8")
    assert out["roots"] == len(re.findall(r'data-root-id="', page)), "the page has one element per root"
    css = set(re.findall(r'"(https?://[^"\\]+?\.css)[?"]', out["docs"]))
    assert css and all(u.startswith("http://site.test/sub/path/panel/") for u in css), sorted(css)[:5]
    for url in css:
        assert (dist / url[len("http://site.test/sub/path/"):]).is_file(), url


def test_the_packages_loaded_first_are_what_the_first_views_controls_import():
    """lab.js loads EARLY_PACKAGES and EARLY_WHEELS first, then answers the first view's controls
    (lab/ui/early_page.py) while the rest load: they must be exactly what that module imports
    beyond the standard library (one missing: the controls never work; one too many: they work later)."""
    worker = (REPO / "static" / "site" / "lab-worker.js").read_text(encoding="utf-8")
    listed = set()
    for name in ("EARLY_PACKAGES", "EARLY_WHEELS"):
        listed |= set(json.loads(re.search(rf"^const {name} = (\[.*?\]);", worker, re.M).group(1)))
    code = ("import importlib.metadata as md, json, sys\n"
            "before = {m.split('.')[0] for m in sys.modules}\n"
            "from lab.ui import early_page\n"
            "owners = md.packages_distributions()\n"
            "tops = {m.split('.')[0] for m in sys.modules} - before - set(sys.stdlib_module_names)\n"
            "print(json.dumps(sorted({d for t in tops for d in owners.get(t, [t])})))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported = set(json.loads(proc.stdout))
    canon = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    assert {canon(n) for n in imported} == {canon(n) for n in listed}


def test_build_is_reproducible(site, tmp_path_factory):
    dist, _ = site
    again = tmp_path_factory.mktemp("again") / "dist"
    proc = run_build(again, "--quiet")
    assert proc.returncode == 0, proc.stderr
    first = {p.relative_to(dist).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in dist.rglob("*") if p.is_file()}
    second = {p.relative_to(again).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in again.rglob("*") if p.is_file()}
    assert first.keys() == second.keys()
    assert [k for k in first if first[k] != second[k]] == []
    assert proc.stdout.strip().startswith("total:")


# ------------------------------------------------------------------ options


def test_options_pyodide_base_and_panel_cdn_root(tmp_path_factory):
    dist, proc = build_site(tmp_path_factory, "--pyodide-base", "./pyodide", "--panel-cdn-root",
                            "https://cdn.holoviz.org/panel/", "--quiet", "--no-prerender")
    config = _worker_config(dist)
    assert config["pyodideBase"] == "./pyodide/" and config["panelCdnRoot"] == "https://cdn.holoviz.org/panel/"
    assert _page_config(dist)["pyodideBase"] == "./pyodide/"
    assert 'new URL("./pyodide/"' in (dist / "sw.js").read_text(encoding="utf-8")
    page = (dist / "lab.html").read_text(encoding="utf-8")
    from panel.io import convert

    assert f"https://cdn.holoviz.org/panel/{convert.PY_VERSION}/dist/panel.min.js" in page
    assert "https://cdn.bokeh.org/bokeh/release/" in page
    assert not (dist / "panel").exists() and not (dist / "bokeh").exists()
    urls = [w["url"] for w in config["wheels"]]
    assert f"https://cdn.holoviz.org/panel/{convert.PY_VERSION}/dist/wheels/panel-{convert.PY_VERSION}-py3-none-any.whl" in urls
    assert all((dist / u).is_file() for u in urls if not u.startswith("https://"))


def test_pyodide_dir_copies_only_what_the_lab_needs(tmp_path_factory, tmp_path):
    if not NODE_PYODIDE.is_dir():
        pytest.skip("node_modules/pyodide missing (npm ci)")
    # npm's pyodide has the runtime but none of the packages: refused, naming what is missing.
    proc = run_build(tmp_path / "bad", "--pyodide-dir", str(NODE_PYODIDE), "--quiet")
    assert proc.returncode == 2
    assert "--pyodide-dir" in proc.stderr and "numpy" in proc.stderr and "jinja2" in proc.stderr
    assert not (tmp_path / "bad").exists()
    # A complete release folder (stand-in files): exactly the needed files are copied.
    release = tmp_path / "pyodide-release"
    release.mkdir()
    lock = json.loads((NODE_PYODIDE / "pyodide-lock.json").read_text(encoding="utf-8"))
    for name in ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"):
        shutil.copyfile(NODE_PYODIDE / name, release / name)
    for pkg in lock["packages"].values():
        (release / pkg["file_name"]).write_bytes(b"stand-in for " + pkg["file_name"].encode())
    out = tmp_path / "classroom"
    proc = run_build(out, "--pyodide-dir", str(release), "--quiet", "--no-precompile",  # stand-ins are no zips
                     "--no-prerender")
    assert proc.returncode == 0, proc.stderr
    info = json.loads((out / "build-info.json").read_text(encoding="utf-8"))
    assert info["pyodide"]["base"] == "./pyodide/" and info["pyodide"]["self_hosted"]
    copied = sorted(p.name for p in (out / "pyodide").iterdir())
    gzipped = sorted(n[:-3] for n in copied if n.endswith(".gz"))
    assert gzipped == sorted(_worker_config(out)["gzipped"]) == ["pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip"]
    assert [n for n in copied if not n.endswith(".gz")] == sorted(info["pyodide"]["files"])
    assert "numpy-" in " ".join(copied) and len(copied) < len(lock["packages"])
    assert _worker_config(out)["pyodideBase"] == "./pyodide/"


@pytest.mark.parametrize("args, message", [
    (["--pyodide-base", "/pyodide/"], "is absolute"),
    (["--pyodide-base", "https://cdn.jsdelivr.net/pyodide/v0.27.0/full/"], "pins Pyodide"),
    (["--panel-cdn-root", "../panel/"], "inside the site"),
    (["--pyodide-dir", "/nonexistent"], "no pyodide.js"),
])
def test_bad_options_are_refused_with_a_reason(tmp_path, args, message):
    proc = run_build(tmp_path / "out", *args, "--quiet")
    assert proc.returncode == 2
    assert message in proc.stderr, proc.stderr


def test_refuses_to_replace_a_folder_that_is_not_a_build(tmp_path):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    proc = run_build(out, "--quiet")
    assert proc.returncode == 2 and "not an earlier build" in proc.stderr
    assert (out / "notes.txt").read_text() == "keep me"


# ------------------------------------------------------------------ build.py and its steps (site_build/)

SITE_BUILD = REPO / "site_build"


def test_lab_wheel_holds_the_lab_package_and_nothing_of_the_build(dist):
    """The browser gets lab/ only: build.py's steps (site_build/) stay in the checkout."""
    with zipfile.ZipFile(_lab_wheel(dist)) as zf:
        names = zf.namelist()
        tops = {n.split("/", 1)[0] for n in names}
        assert tops == {"lab", "split_the_fleet-0.1.0.dist-info"}, tops
        assert not [n for n in names if n.endswith(".py") and b"site_build" in zf.read(n)]
        # the command line's planner and executors never run in the browser
        assert not [n for n in names if n.startswith(("lab/plan/", "lab/parallel"))]
        assert "lab/cli.py" in names and "lab/core/engine.py" in names


def test_build_py_loaded_by_path_from_another_folder_has_its_names(tmp_path):
    """scripts/pyodide_mirror.py and tests load build.py by path, with the repo not on sys.path."""
    code = ("import importlib.util, json, sys\n"
            f"spec = importlib.util.spec_from_file_location('stf_build', {str(BUILD)!r})\n"
            "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
            "print(json.dumps({n: callable(getattr(mod, n)) for n in mod.__all__}))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    names = json.loads(proc.stdout)
    assert {"build", "main", "BuildError", "write_wheel", "lab_wheel_files", "lab_roots", "resolve_dependencies",
            "missions_index", "hub_html"} <= set(names)
    assert all(names.values()), names


@pytest.mark.parametrize("path", sorted(SITE_BUILD.glob("*.py")), ids=lambda p: p.name)
def test_every_site_build_module_says_what_it_owns(path):
    """A docstring first, and an __all__ that names only what the module defines."""
    import ast
    import importlib

    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert len(ast.get_docstring(tree) or "") > 40, f"{path.name}: no docstring saying what it owns"
    module = importlib.import_module("site_build" if path.stem == "__init__" else f"site_build.{path.stem}")
    assert isinstance(module.__all__, list)
    assert [n for n in module.__all__ if not hasattr(module, n)] == []
    assert not any(n.startswith("_") for n in module.__all__)
    assert not [n.names[0].name for n in ast.walk(tree) if isinstance(n, ast.Import) and n.names[0].name == "build"]


# ------------------------------------------------------------------ the wheel in bare Pyodide

_MISSION_STARTS = r'''
import json, sys
import lab
import lab.core as core
from lab.core.missions import default_missions_dir, list_missions

def canon(v):
    if isinstance(v, float):
        return "float:" + repr(v)
    if isinstance(v, dict):
        return {str(k): canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    return v

directory = default_missions_dir()
out = {"lab": lab.__file__, "missions_dir": directory, "results": {}}
for m in list_missions(directory):
    result = core.simulate(m.scenario)
    metrics = core.summarize(result)
    out["results"][m.id] = {"summary": canon(metrics), "stars": m.evaluate(metrics), "requests": len(result.requests)}
print(json.dumps(out, sort_keys=True))
'''


@pytest.mark.pyodide
def test_lab_wheel_in_bare_pyodide_runs_every_mission_start_like_cpython(dist, tmp_path, run_in_pyodide):
    del run_in_pyodide  # only for its skip/fail when node or npm pyodide are missing
    wheel = _lab_wheel(dist)
    program = tmp_path / "mission_starts.py"
    program.write_text(_MISSION_STARTS, encoding="utf-8")
    # CPython: the same wheel, unpacked alone on sys.path (not the repo checkout).
    site = tmp_path / "cpython-site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    cp = subprocess.run([sys.executable, "-c", f"import sys, runpy; sys.path.insert(0, {str(site)!r}); "
                         f"runpy.run_path({str(program)!r}, run_name='__main__')"],
                        cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert cp.returncode == 0, cp.stderr[-3000:]
    py = subprocess.run(["node", str(RUN_WHEEL), str(wheel), str(program)], cwd=REPO,
                        capture_output=True, text=True, timeout=900)
    assert py.returncode == 0, py.stderr[-3000:]
    cpython, pyodide = json.loads(cp.stdout), json.loads(py.stdout)
    assert cpython["lab"].startswith(str(site))
    assert PurePosixPath(pyodide["missions_dir"]).parts[-3:] == ("site-packages", "lab", "missions")
    ids = [m.id for m in _missions()]
    assert list(pyodide["results"]) == sorted(ids) and len(ids) >= 1
    for mid in ids:
        assert pyodide["results"][mid]["requests"] > 0
        assert pyodide["results"][mid] == cpython["results"][mid], f"{mid}: Pyodide and CPython differ"


@pytest.mark.pyodide
def test_precompiling_is_reproducible_without_the_cache(source_dist, tmp_path, run_in_pyodide):
    """Two compilations of the same wheels, each with an empty cache, give identical bytes;
    the sourceless wheel and the kept-source one differ as they should."""
    del run_in_pyodide  # only for its skip/fail when node or npm pyodide are missing
    from site_build.precompile import precompile_archives
    from site_build.wheels import _zip_time, write_wheel

    wheels = sorted((source_dist / "wheels").glob("*.whl"))
    picked = [w for w in wheels if w.name.startswith(("mdurl-", "split_the_fleet-"))]
    assert len(picked) == 2
    outputs = []
    for run in ("a", "b"):
        folder = tmp_path / run
        folder.mkdir()
        copies = [Path(shutil.copyfile(w, folder / w.name)) for w in picked]
        sizes = precompile_archives(copies, write_wheel=write_wheel, stamp=_zip_time(),
                                    keep_source={picked[1].name}, cache=tmp_path / f"cache-{run}")
        assert set(sizes) == {w.name for w in picked}
        outputs.append([c.read_bytes() for c in copies])
    assert outputs[0] == outputs[1]
    with zipfile.ZipFile(tmp_path / "a" / picked[0].name) as zf:
        assert "mdurl/__init__.pyc" in zf.namelist() and "mdurl/__init__.py" not in zf.namelist()
    with zipfile.ZipFile(tmp_path / "a" / picked[1].name) as zf:
        assert "lab/__init__.py" in zf.namelist() and any(n.startswith("lab/__pycache__/__init__.") for n in zf.namelist())
    # compile_only (START_IMPORTS): a module not listed stays source; the lab's wheel is compiled whole.
    folder = tmp_path / "only"
    folder.mkdir()
    copies = [Path(shutil.copyfile(w, folder / w.name)) for w in picked]
    precompile_archives(copies, write_wheel=write_wheel, stamp=_zip_time(), keep_source={picked[1].name},
                        cache=tmp_path / "cache-only", compile_only={"mdurl/__init__.py"})
    with zipfile.ZipFile(copies[0]) as zf:
        names = zf.namelist()
        assert "mdurl/__init__.pyc" in names and "mdurl/__init__.py" not in names
        assert "mdurl/_parse.py" in names and "mdurl/_parse.pyc" not in names
    with zipfile.ZipFile(copies[1]) as zf:
        assert any(n.startswith("lab/core/__pycache__/engine.") for n in zf.namelist())


def test_start_imports_lists_module_files(tmp_path):
    """The committed list names archive members (`pkg/mod.py`), none of the lab's own; a missing or
    empty list means every module is compiled (None)."""
    from site_build.precompile import START_IMPORTS, start_imports

    names = start_imports()
    assert names and all(n.endswith(".py") and not n.startswith(("/", "lab/")) for n in names)
    assert {"asyncio/__init__.py", "panel/io/pyodide.py", "bokeh/document/document.py"} <= names
    assert START_IMPORTS.read_text(encoding="utf-8").startswith("#")
    assert start_imports(tmp_path / "absent.txt") is None
    (tmp_path / "empty.txt").write_text("# only a comment\n\n", encoding="utf-8")
    assert start_imports(tmp_path / "empty.txt") is None


def test_what_the_site_serves_gzipped_unpacks_to_the_file_beside_it(dist):
    """Every .gz (page scripts, wheels; Pyodide's runtime when self-hosted) holds exactly its plain
    sibling, which stays as the fallback; gzipped wheels are stored zips (no deflate to undo in
    WebAssembly), and the worker's and the page's configs list what is gzipped."""
    import gzip

    copies = sorted(dist.rglob("*.gz"))
    assert copies
    for gz in copies:
        assert gzip.decompress(gz.read_bytes()) == gz.with_suffix("").read_bytes(), gz.name
    wheels = _worker_config(dist)["wheels"]
    local = [w for w in wheels if w["url"].startswith("./")]
    assert local and all(w.get("gz") for w in local)
    for wheel in local:
        with zipfile.ZipFile(_resolve(dist, "lab.js", wheel["url"])) as zf:
            assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_STORED}, wheel["name"]
    scripts = _page_config(dist)["scripts"]
    assert any("bokeh-" in u for u in scripts) and any(u.endswith("panel.min.js") for u in scripts)
    head = (dist / "lab.html").read_text(encoding="utf-8").split("</head>")[0]
    for url in scripts:
        assert (dist / (url[2:] + ".gz")).is_file(), url
        assert f'src="{url}"' not in head, url  # loader.js runs them, after unpacking


def test_a_self_hosted_pyodide_package_leaves_out_what_only_building_reads(tmp_path):
    """trim_package: type stubs, Cython declarations, C headers/sources and static libraries go
    (with their RECORD lines); modules, extension modules and data stay byte for byte."""
    from site_build.pyodide_dir import trim_package

    src, dest = tmp_path / "pkg-1.0-cp313-cp313-pyodide_2025_0_wasm32.whl", tmp_path / "out.whl"
    kept = {"pkg/__init__.py": b"X = 1\n", "pkg/_core.cpython-313-wasm32-emscripten.so": b"\0asm",
            "pkg/data.json": b"{}", "pkg/py.typed": b""}
    dropped = {"pkg/__init__.pyi": b"X: int\n", "pkg/core.pxd": b"cdef int x\n",
               "pkg/include/pkg.h": b"int x;\n", "pkg/src/pkg.c": b"int x;\n", "pkg/lib/libpkg.a": b"!<arch>\n"}
    record = "".join(f"{n},sha256=x,1\n" for n in [*kept, *dropped]) + "pkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(src, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in {**kept, **dropped, "pkg-1.0.dist-info/RECORD": record.encode()}.items():
            zf.writestr(name, data)
    assert trim_package(src, dest) is True
    with zipfile.ZipFile(dest) as zf:
        assert sorted(zf.namelist()) == sorted([*kept, "pkg-1.0.dist-info/RECORD"])
        assert all(zf.read(n) == data for n, data in kept.items())
        lines = zf.read("pkg-1.0.dist-info/RECORD").decode().splitlines()
    assert [line.split(",")[0] for line in lines] == [*kept, "pkg-1.0.dist-info/RECORD"]
    first = dest.read_bytes()
    trim_package(src, dest)
    assert dest.read_bytes() == first  # reproducible
    # Nothing to leave out, or no zip at all: copied as it is.
    (tmp_path / "plain.whl").write_bytes(b"stand-in")
    assert trim_package(tmp_path / "plain.whl", dest) is False and dest.read_bytes() == b"stand-in"
