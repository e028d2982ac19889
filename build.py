#!/usr/bin/env python3
"""`python build.py`: the static site. The lab runs entirely in the browser.

    python build.py [--out dist] [--pyodide-base URL_OR_DIR] [--pyodide-dir DIR]
                    [--panel-cdn-root URL_OR_DIR] [--site-url URL] [--quiet]

What lands in OUT (every URL in it is relative, so the folder can be copied to any
static host, at any sub-path):

    index.html              the mission hub: plain HTML + JS, loads instantly, no Python
    lab.html, lab.js        the lab: Panel's pyodide-worker conversion of lab_page(),
                            with a loading screen, error + retry, and a worker that
                            installs everything below from this site
    sw.js                   service worker (scope: this folder), so a second visit works offline
    site.webmanifest        relative scope and start URL (Panel's own assumes scope "/")
    assets/                 CSS, the hub's and loader's JS, icon
    missions/               every mission JSON, schema.json, traces/, index.json (for the hub)
    wheels/                 the lab as a wheel (lab.core + lab.ui + lab/missions) and the
                            pure-Python packages Panel needs that Pyodide does not ship
    panel/                  Panel's JS/CSS and the Panel + Bokeh wheels (PANEL_CDN_ROOT=./panel/)
    bokeh/                  BokehJS
    build-info.json         versions, sources, and every file's size and sha256

Only Pyodide (the runtime and its packages: numpy, pandas, ...) comes from elsewhere:
its CDN by default, or `--pyodide-base ./pyodide/ --pyodide-dir DIR` for a self-hosted
copy (a classroom without internet). The output is reproducible: the same inputs give
byte-identical files (fixed zip timestamps, sorted entries, no random ids).
"""

import argparse
import base64
import hashlib
import html
import importlib.metadata
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

__all__ = ["main", "build", "BuildError", "write_wheel", "lab_wheel_files", "lab_roots", "resolve_dependencies",
           "missions_index", "hub_html"]

REPO = Path(__file__).resolve().parent
SITE_SRC = REPO / "static" / "site"
STARS_JS = REPO / "lab" / "ui" / "stars_store.js"  # the stars' storage logic: the lab's bridge and the hub share it
MISSIONS_SRC = REPO / "missions"
NODE_PYODIDE = REPO / "node_modules" / "pyodide"

STORAGE_KEY = "split-the-fleet:stars:v1"
DEFAULT_PANEL_CDN_ROOT = "./panel/"
# The entry Panel converts. Not named lab.py: the script's folder goes first on sys.path
# and a lab.py there would shadow the `lab` package. Its outputs are renamed lab.html/lab.js.
ENTRY_NAME = "stf_lab_app"
ENTRY_SOURCE = '''\
# Split the Fleet: the lab page, as converted by `panel convert --to pyodide-worker`.
# In the browser, pn.state.location is the page's address (?mission=ID&embed=1&...).
from lab.ui.app import lab_page

lab_page().servable(title="Split the Fleet")
'''
# What the lab imports beyond Panel and Bokeh (Panel's converter adds these to its list).
LAB_REQUIREMENTS = ["numpy"]
# Declared by Panel or Bokeh but never imported in the paths the lab runs, so the browser
# does not download them (and a self-hosted Pyodide folder need not have them; no wasm
# build of nh3 or pillow is on the registries scripts/pyodide_mirror.py can reach):
#   panel-material-ui: Panel declares it, never imports it.
#   pillow: Bokeh imports PIL only in bokeh.io.export (PNG/SVG export) and in the Image
#     property (image textures, image tool icons); the lab uses neither.
#   nh3: Panel imports it lazily, in panel.util.HTML_SANITIZER.clean, which runs only for
#     ReactiveHTML components (pn.FlexBox is one: it cleans every string parameter when
#     rendered), markup panes with sanitize_html=True, and server/auth error pages. The lab
#     page must use none of these in the browser (tests/test_pyodide_mirror.py renders it
#     with nh3 and PIL unimportable).
#   pandas (and with it python-dateutil, pytz, six: 5.2 MB): Panel declares it, but in
#     Pyodide imports it only when pyodide-http is missing (panel.io.pyodide patches
#     pandas.read_csv then), and Bokeh only when it is given pandas objects; the lab hands
#     both plain lists and numpy arrays. Checked in Chromium (load, sweep, layout switch,
#     playback) and in tests/test_pyodide_mirror.py.
UNUSED_DEPENDENCIES = {"panel-material-ui", "nh3", "pillow", "pandas"}
# Pyodide's environment, for evaluating dependency markers.
PYODIDE_MARKERS = {
    "sys_platform": "emscripten", "platform_system": "Emscripten", "os_name": "posix",
    "platform_machine": "wasm32", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "extra": "",
}
# Fixed zip timestamp (the zip format cannot go below 1980) unless SOURCE_DATE_EPOCH says otherwise.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

# What of Panel's dist/ the site serves: the JS, the CSS its components ask for at run
# time, the spinner/icon assets, the design themes and the ES-module shim.
PANEL_DIST_PARTS = ("panel.min.js", "css/", "assets/", "bundled/theme/", "bundled/reactiveesm/")
# Trimmed from the Panel and Bokeh wheels for the browser, as Panel's own Pyodide wheels
# are (scripts/build_pyodide_wheels.py): bundled JS/CSS is served by the site, not imported.
PANEL_WHEEL_SKIP = re.compile(r"^panel/(tests/|dist/(bundled|lib|dts|wheels)/|dist/[^/]+\.js$)|\.map$")
BOKEH_WHEEL_SKIP = re.compile(r"^bokeh/(?!core/_templates/).*(\.js|\.d\.ts|\.tsbuildinfo|\.map|/bokeh\.json)$")
BOKEH_JS = ("bokeh", "bokeh-gl", "bokeh-widgets", "bokeh-tables", "bokeh-mathjax", "bokeh-api")


class BuildError(Exception):
    """A build that cannot go on; the message says what to do."""


def say(quiet, *args):
    if not quiet:
        print(*args, flush=True)


# ---------------------------------------------------------------------------- wheels

def _zip_time():
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        import time

        t = time.gmtime(max(int(epoch), 315532800))  # not before 1980-01-01
        return (t.tm_year, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec - t.tm_sec % 2)
    return ZIP_EPOCH


def _record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(path, files, dist_info):
    """Write a wheel reproducibly: `files` {archive name: bytes}; RECORD is made here, last.

    Entries are sorted (the .dist-info folder last, as pip writes it), every timestamp
    is the same and permissions are fixed, so equal inputs give identical bytes.
    """
    names = sorted((n for n in files if not n.startswith(dist_info + "/")))
    names += sorted(n for n in files if n.startswith(dist_info + "/") and n != f"{dist_info}/RECORD")
    record = io.StringIO()
    for name in names:
        record.write(f"{name},{_record_hash(files[name])},{len(files[name])}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    stamp = _zip_time()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in [(n, files[n]) for n in names] + [(f"{dist_info}/RECORD", record.getvalue().encode())]:
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, data, compresslevel=6)
    Path(path).write_bytes(buf.getvalue())


def _project():
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return data


def _wheel_name(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def lab_wheel_files(missions_dir=MISSIONS_SRC):
    """{archive name: bytes} of the lab's wheel: lab/ (core, ui, cli) + `missions_dir` as lab/missions."""
    files = {}
    for path in sorted((REPO / "lab").rglob("*")):
        rel = path.relative_to(REPO).as_posix()
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        if rel.startswith("lab/missions/"):
            continue  # the repo's top-level missions/ is the source of truth
        files[rel] = path.read_bytes()
    for rel, data in _mission_source_files(missions_dir).items():
        files["lab/missions/" + rel] = data
    return files


def _mission_source_files(missions_dir=MISSIONS_SRC):
    """{path relative to the folder: bytes}: its *.json and traces/, plus the repo's schema.json if it has none."""
    missions_dir = Path(missions_dir)
    paths = sorted(missions_dir.glob("*.json"))
    traces = missions_dir / "traces"
    paths += sorted(p for p in traces.glob("*") if p.is_file()) if traces.is_dir() else []
    out = {p.relative_to(missions_dir).as_posix(): p.read_bytes() for p in paths}
    out.setdefault("schema.json", (MISSIONS_SRC / "schema.json").read_bytes())
    return out


def build_lab_wheel(dest_dir, missions_dir=MISSIONS_SRC):
    project = _project()
    name, version = project["name"], project["version"]
    dist_info = f"{_wheel_name(name)}-{version}.dist-info"
    files = lab_wheel_files(missions_dir)
    meta = [
        "Metadata-Version: 2.1",
        f"Name: {name}",
        f"Version: {version}",
        f"Summary: {project.get('description', '')}",
        f"Requires-Python: {project.get('requires-python', '>=3.11')}",
    ]
    if isinstance(project.get("license"), dict) and "text" in project["license"]:
        meta.append(f"License: {project['license']['text']}")
    meta += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    files[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    files[f"{dist_info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: split-the-fleet build.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ).encode()
    scripts = project.get("scripts", {})
    if scripts:
        files[f"{dist_info}/entry_points.txt"] = (
            "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(scripts.items()))
        ).encode()
    files[f"{dist_info}/top_level.txt"] = b"lab\n"
    path = Path(dest_dir) / f"{_wheel_name(name)}-{version}-py3-none-any.whl"
    write_wheel(path, files, dist_info)
    return path


def rewheel_installed(dist_name, dest_dir, skip=None):
    """A wheel of an installed pure-Python distribution, from the files its RECORD lists.

    Gives exactly the code the build ran against (so versions agree), offline. `skip`
    is a regex of archive names to leave out (trimming bundled JS for the browser).
    """
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(f"{dist_name} is not installed in this Python ({sys.executable}); "
                         f"run `pip install -e '.[test]'` (scripts/setup.sh)") from None
    wheel_meta = dist.read_text("WHEEL") or ""
    tags = re.findall(r"^Tag:\s*(\S+)", wheel_meta, re.M)
    if not tags or not all(t.endswith("-none-any") for t in tags):
        raise BuildError(f"{dist_name} {dist.version} is not a pure-Python wheel (tags {tags}); it cannot run in Pyodide from here")
    direct = dist.read_text("direct_url.json")
    if direct and json.loads(direct).get("dir_info", {}).get("editable"):
        raise BuildError(f"{dist_name} is installed in editable mode; install it normally to vendor it")
    root = Path(dist.locate_file(""))
    files = {}
    dist_info = None
    for f in dist.files or ():
        name = PurePosixPath(str(f).replace(os.sep, "/")).as_posix()
        if name.startswith("../") or "__pycache__" in name or name.endswith((".pyc", ".pyo")):
            continue
        top = name.split("/", 1)[0]
        if top.endswith(".dist-info"):
            dist_info = top
            if name.rsplit("/", 1)[-1] in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"):
                continue
        elif skip is not None and skip.search(name):
            continue
        path = root / name
        if path.is_file():
            files[name] = path.read_bytes()
    if dist_info is None:
        raise BuildError(f"{dist_name}: no .dist-info in its RECORD")
    tag = "py3-none-any"
    out = Path(dest_dir) / f"{_wheel_name(dist.metadata['Name'])}-{dist.version}-{tag}.whl"
    write_wheel(out, files, dist_info)
    return out


# ---------------------------------------------------------------------------- dependencies

def _canon(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyodide_lock(args, pyodide_version):
    """Pyodide's package list: --pyodide-dir's, else npm's (same version), else the base URL's."""
    candidates = []
    if args.pyodide_dir:
        candidates.append(Path(args.pyodide_dir) / "pyodide-lock.json")
    candidates.append(NODE_PYODIDE / "pyodide-lock.json")
    for path in candidates:
        if path.is_file():
            lock = json.loads(path.read_text(encoding="utf-8"))
            if path.parent == NODE_PYODIDE:
                npm = json.loads((NODE_PYODIDE / "package.json").read_text(encoding="utf-8"))["version"]
                if npm != pyodide_version:
                    continue
            return lock, str(path)
    base = args.pyodide_base
    if _is_url(base):
        import urllib.request

        url = base + "pyodide-lock.json"
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                return json.loads(resp.read().decode("utf-8")), url
        except OSError as exc:
            raise BuildError(f"need Pyodide {pyodide_version}'s pyodide-lock.json: not in node_modules/pyodide "
                             f"(run `npm ci`) and {url} is unreachable ({exc})") from None
    raise BuildError(f"need Pyodide {pyodide_version}'s pyodide-lock.json: run `npm ci` (node_modules/pyodide) "
                     "or pass --pyodide-dir")


def lab_roots(panel_version, bokeh_version, pyodide_http=True):
    """What the lab's Pyodide environment starts from: the converter's list (Panel, Bokeh,
    pyodide-http when it patches HTTP) plus LAB_REQUIREMENTS. resolve_dependencies walks it."""
    return [f"panel=={panel_version}", f"bokeh=={bokeh_version}", *LAB_REQUIREMENTS,
            *(["pyodide-http"] if pyodide_http else [])]


def resolve_dependencies(lock, roots, python="3.13.2"):
    """Split what the lab needs in Pyodide into (Pyodide packages to load, distributions to vendor).

    Walks Requires-Dist from `roots` (installed distributions) with Pyodide's markers.
    A requirement Pyodide ships (its pyodide-lock.json) is loaded from Pyodide; anything
    else must be pure Python and installed here, and is vendored as a wheel on the site.
    """
    from packaging.requirements import Requirement

    packages = {_canon(n): p for n, p in lock["packages"].items()}
    markers = dict(PYODIDE_MARKERS, python_version=".".join(python.split(".")[:2]), python_full_version=python)
    vendored, from_pyodide, problems = {}, set(), []
    todo = [(r, "the lab") for r in roots]
    while todo:
        req_text, why = todo.pop()
        req = Requirement(req_text)
        name = _canon(req.name)
        if req.marker is not None and not req.marker.evaluate(dict(markers)):
            continue
        if name in UNUSED_DEPENDENCIES or name in vendored or name in from_pyodide:
            continue
        try:
            installed = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if name in packages and name not in ("bokeh", "panel"):
            version = packages[name]["version"]
            if req.specifier and not req.specifier.contains(version, prereleases=True):
                problems.append(f"{req} (needed by {why}): Pyodide ships {name} {version}")
            from_pyodide.add(name)
            continue
        if installed is None:
            problems.append(f"{req} (needed by {why}) is neither in Pyodide nor installed here")
            continue
        if req.specifier and not req.specifier.contains(installed.version, prereleases=True):
            problems.append(f"{req} (needed by {why}): {installed.version} is installed")
        vendored[name] = installed.metadata["Name"]
        for sub in installed.requires or ():
            todo.append((sub, f"{req.name}"))
    if problems:
        raise BuildError("dependencies do not fit Pyodide:\n  " + "\n  ".join(problems))
    # Every Pyodide package we load, with its own dependencies (for progress and --pyodide-dir).
    closure, stack = set(), sorted(from_pyodide)
    while stack:
        name = stack.pop()
        if name in closure:
            continue
        closure.add(name)
        stack.extend(_canon(d) for d in packages[name].get("depends", ()))
    clash = sorted(closure & set(vendored))
    if clash:
        raise BuildError(f"Pyodide packages would also load {clash}, which the site vendors")
    return sorted(from_pyodide), sorted(closure), dict(sorted(vendored.items()))


# ---------------------------------------------------------------------------- conversion

_DRIVER = r'''
import json, sys
from panel.io import convert
entry, out, reqs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
result = convert.convert_app(entry, out, requirements=reqs, runtime="pyodide-worker",
                             prerender=False, panel_version="auto", verbose=False)
if result is None:
    sys.exit("panel's conversion failed (its error is above)")
print("STF-CONVERT " + json.dumps({
    "pyodide_url": convert.PYODIDE_URL, "pyodide_version": convert.PYODIDE_VERSION,
    "panel_version": convert.PY_VERSION, "bokeh_version": convert.BOKEH_VERSION,
    "panel_whl": convert.PANEL_CDN_WHL, "bokeh_whl": convert.BOKEH_CDN_WHL,
    "cdn_dist": convert.CDN_DIST, "panel_dist_dir": str(convert.DIST_DIR),
}))
'''


def convert_lab(workdir, panel_cdn_root):
    """Run Panel's pyodide-worker conversion of the lab page; return (html, worker js, facts)."""
    entry = Path(workdir) / f"{ENTRY_NAME}.py"
    entry.write_text(ENTRY_SOURCE, encoding="utf-8")
    driver = Path(workdir) / "stf_convert_driver.py"
    driver.write_text(_DRIVER, encoding="utf-8")
    out = Path(workdir) / "converted"
    out.mkdir()
    env = dict(os.environ)
    env["PANEL_CDN_ROOT"] = panel_cdn_root  # read once, when Panel is imported
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("BOKEH_RESOURCES", None)
    env["PYTHONHASHSEED"] = "0"
    proc = subprocess.run([sys.executable, str(driver), str(entry), str(out), json.dumps(LAB_REQUIREMENTS)],
                          cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
    facts = None
    for line in proc.stdout.splitlines():
        if line.startswith("STF-CONVERT "):
            facts = json.loads(line[len("STF-CONVERT "):])
    page, worker = out / f"{ENTRY_NAME}.html", out / f"{ENTRY_NAME}.js"
    if proc.returncode != 0 or facts is None or not page.is_file() or not worker.is_file():
        raise BuildError("panel convert --to pyodide-worker failed on the lab page:\n"
                         + (proc.stdout + proc.stderr).strip()[-4000:])
    return page.read_text(encoding="utf-8"), worker.read_text(encoding="utf-8"), facts


_WORKER_CODE = re.compile(r"const \[docs_json, render_items, root_ids\] = await self\.pyodide\.runPythonAsync\(`(.*?)(?<!\\)`\)", re.S)
_WORKER_SENDPATCH = re.compile(r"^function sendPatch\(.*?^}\n", re.S | re.M)
_WORKER_ONMESSAGE = re.compile(r"^self\.onmessage = async \(event\) => \{\n.*?^}\n", re.S | re.M)
_WORKER_ENVSPEC = re.compile(r"await micropip\.install\(\[(.*?)\]\);", re.S)
_WORKER_IMPORT = re.compile(r'^importScripts\("([^"]+)"\);', re.M)


def split_panel_worker(worker_js):
    """The parts of Panel's generated worker that the site's worker keeps verbatim."""
    parts = {}
    for key, rx in (("code", _WORKER_CODE), ("send_patch", _WORKER_SENDPATCH), ("onmessage", _WORKER_ONMESSAGE),
                    ("env_spec", _WORKER_ENVSPEC), ("pyodide_url", _WORKER_IMPORT)):
        m = rx.search(worker_js)
        if not m:
            raise BuildError(f"Panel's generated worker changed shape (no {key} found); build.py must be updated "
                             "for this Panel version")
        parts[key] = m.group(1) if key in ("code", "env_spec", "pyodide_url") else m.group(0)
    parts["env_spec"] = [s.strip().strip("'\"") for s in parts["env_spec"].split(",") if s.strip()]
    return parts


# ---------------------------------------------------------------------------- helpers

def _is_url(text):
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", text, re.I))


def _dir_url(text, option):
    text = text.strip()
    if not text:
        raise BuildError(f"{option}: empty")
    if not text.endswith("/"):
        text += "/"
    if _is_url(text):
        if urlparse(text).scheme not in ("http", "https"):
            raise BuildError(f"{option}: {text!r} must be an http(s) URL or a relative folder")
        return text
    if text.startswith("/"):
        raise BuildError(f"{option}: {text!r} is absolute; use a URL or a folder relative to the site "
                         "(like ./pyodide/), so the site works at any sub-path")
    if not text.startswith(("./", "../")):
        text = "./" + text
    return text


def _inside(rel):
    """A relative URL folder ('./x/') as a path inside the site, or None when it leaves it."""
    parts = PurePosixPath(rel).parts
    if any(p == ".." for p in parts):
        return None
    return PurePosixPath(*[p for p in parts if p != "."]) if parts else PurePosixPath(".")


def _js_string(text):
    return json.dumps(text)


_HTML_UNSAFE_IN_JSON = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_for_html(data):
    """JSON to put inside <script type="application/json">: no <, > or & at all, so no text
    (`</script>`, `<!--<script>`) can close the element or change how the page parses it.
    JSON.parse reads the \\u escapes back as the same characters."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda m: _HTML_UNSAFE_IN_JSON[m.group(0)], text)


def _template(name):
    return (SITE_SRC / name).read_text(encoding="utf-8")


def _fill(text, values, name):
    for key, value in values.items():
        token = "{{" + key + "}}"
        if token not in text:
            raise BuildError(f"static/site/{name} has no {token}")
        text = text.replace(token, value)
    left = re.findall(r"\{\{[A-Z_]+\}\}", text)
    if left:
        raise BuildError(f"static/site/{name}: unfilled {sorted(set(left))}")
    return text


def _human(size):
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024


# ---------------------------------------------------------------------------- pages

def missions_index(missions_dir=MISSIONS_SRC):
    """Every mission, validated by the core, as the hub needs it (in order)."""
    from lab.core.errors import LabError
    from lab.core.missions import list_missions

    try:
        missions = list_missions(str(missions_dir))
    except LabError as exc:
        raise BuildError(f"{missions_dir}: {exc}") from None
    if not missions:
        raise BuildError(f"{missions_dir} holds no mission")
    return [
        {"id": m.id, "title": m.title, "order": m.order, "summary": m.summary,
         "stars": [s.label for s in m.stars], "file": Path(m.path).name}
        for m in missions
    ]


def hub_html(missions, *, version, pyodide_version):
    """index.html: the hub page with the mission list embedded as JSON (hub.js renders it as text)."""
    return _fill(_template("index.html"), {
        "MISSIONS_JSON": _json_for_html({"version": 1, "missions": missions, "storageKey": STORAGE_KEY}),
        "VERSION": html.escape(version),
        "PYODIDE_VERSION": html.escape(pyodide_version),
    }, "index.html")


def theme_css():
    """The lab's own palette and hub CSS (lab/ui/theme.py), for the page instead of a shadow root."""
    spec = importlib.util.spec_from_file_location("_stf_theme", REPO / "lab" / "ui" / "theme.py")
    theme = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(theme)
    css = theme.HUB_CSS.replace(":host", ":root")
    return "/* Generated by build.py from lab/ui/theme.py (HUB_CSS): the hub looks like the lab. */\n" + css


def patch_lab_html(page, *, bokeh_version, bokeh_base, config, title):
    """Panel's converted page + the loading screen, relative URLs and the site's worker."""
    out = page
    # Deterministic root ids (Panel draws random uuids; the worker maps roots by order).
    counter = iter(range(1, 1000))
    out = re.sub(r'<div id="[0-9a-f-]{36}" data-root-id=', lambda m: f'<div id="stf-root-{next(counter)}" data-root-id=', out)
    if re.search(r'id="[0-9a-f]{8}-[0-9a-f]{4}-', out):
        raise BuildError("lab.html still has a random id after conversion")
    if bokeh_base is not None:
        out = out.replace("https://cdn.bokeh.org/bokeh/release/", bokeh_base)
    out = re.sub(r"<title>.*?</title>", f"<title>{html.escape(title)}</title>", out, count=1, flags=re.S)
    head = (
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="color-scheme" content="light">\n'
        '<link rel="icon" href="./assets/icon.svg" type="image/svg+xml">\n'
        '<link rel="manifest" href="./site.webmanifest">\n'
        '<link rel="stylesheet" href="./assets/site.css">\n'
        f'<script type="application/json" id="stf-config">{_json_for_html(config)}</script>\n'
        '<script src="./assets/loader.js"></script>\n'
    )
    title_end = out.find("</title>")
    if out.count("<head>") != 1 or title_end < 0 or title_end > out.find("</head>"):
        raise BuildError("lab.html: expected one <head> with a <title>")
    title_end += len("</title>")
    out = out[:title_end] + "\n" + head + out[title_end:]
    body = re.search(r"<body[^>]*>", out)
    if not body:
        raise BuildError("lab.html: no <body>")
    overlay = _template("loader.html")
    out = out[:body.end()] + "\n" + overlay + out[body.end():]
    worker_line = f'new Worker("./{ENTRY_NAME}.js")'
    if out.count(worker_line) != 1:
        raise BuildError(f"lab.html: Panel's worker start ({worker_line}) not found once")
    out = out.replace(worker_line, 'STFLoader.createWorker("./lab.js")')
    return out


def build_worker(parts, worker_config):
    template = _template("lab-worker.js")
    return _fill(template, {
        "STF_CONFIG": json.dumps(worker_config, sort_keys=True, indent=1),
        "PANEL_SEND_PATCH": parts["send_patch"].rstrip("\n"),
        "PANEL_ONMESSAGE": parts["onmessage"].replace("self.onmessage = async (event) =>", "const panelOnMessage = async (event) =>", 1).rstrip("\n"),
        "PANEL_CODE": parts["code"],
    }, "lab-worker.js")


# ---------------------------------------------------------------------------- the build

def _write(root, rel, data):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def _copy_panel_dist(dist_dir, dest):
    """The parts of Panel's dist/ the pages use (JS, CSS, assets, themes, the ES-module shim)."""
    src = Path(dist_dir)
    for part in PANEL_DIST_PARTS:
        p = src / part
        if part.endswith("/"):
            if not p.is_dir():
                raise BuildError(f"Panel's {p} is missing")
            for f in sorted(p.rglob("*")):
                if f.is_file() and not f.name.endswith(".map"):
                    out = dest / f.relative_to(src)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f, out)
        else:
            if not p.is_file():
                raise BuildError(f"Panel's {p} is missing")
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest / part)


def _copy_bokeh_js(dest, version, names):
    import bokeh

    static = Path(bokeh.__file__).parent / "server" / "static" / "js"
    for name in names:
        src = static / f"{name}.min.js"
        if not src.is_file():
            raise BuildError(f"BokehJS file {src} is missing")
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / f"{name}-{version}.min.js")


def _pyodide_files(lock, closure):
    files = ["pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"]
    packages = {_canon(n): p for n, p in lock["packages"].items()}
    return files + sorted(packages[n]["file_name"] for n in closure)


def _file_table(root):
    table = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            table[path.relative_to(root).as_posix()] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return table


def build(args):
    quiet = args.quiet
    out = Path(args.out).resolve()
    if out == REPO or REPO.is_relative_to(out):
        raise BuildError(f"--out {args.out}: would replace the repository")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "build-info.json").is_file())):
        raise BuildError(f"--out {args.out}: exists and is not an earlier build (no build-info.json); "
                         "choose an empty or new folder")
    if importlib.util.find_spec("lab.ui.app") is None:
        raise BuildError("lab/ui/app.py (lab_page) is missing: the lab page cannot be built")
    panel_cdn_root = _dir_url(args.panel_cdn_root, "--panel-cdn-root")
    self_host_panel = not _is_url(panel_cdn_root)
    if self_host_panel and _inside(panel_cdn_root) is None:
        raise BuildError(f"--panel-cdn-root {panel_cdn_root}: a relative folder must be inside the site (no ..)")

    if args.pyodide_base is not None:
        args.pyodide_base = _dir_url(args.pyodide_base, "--pyodide-base")
    if args.pyodide_dir is not None and not (Path(args.pyodide_dir) / "pyodide.js").is_file():
        raise BuildError(f"--pyodide-dir {args.pyodide_dir}: no pyodide.js there; pass the pyodide/ folder of a "
                         "Pyodide release")
    if args.pyodide_dir is not None and args.pyodide_base is not None and _is_url(args.pyodide_base):
        raise BuildError("--pyodide-dir copies Pyodide into the site, so --pyodide-base must be a folder "
                         f"inside it (like ./pyodide/), not {args.pyodide_base}")

    missions_dir = Path(args.missions)
    if not missions_dir.is_dir():
        raise BuildError(f"--missions {args.missions}: not a folder")
    missions = missions_index(missions_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".stf-build-", dir=str(out.parent)))
    work = Path(tempfile.mkdtemp(prefix="stf-convert-"))
    try:
        site = stage / "site"
        site.mkdir()
        # ---- Panel's conversion of the lab page
        say(quiet, f"converting the lab page with Panel (pyodide-worker, PANEL_CDN_ROOT={panel_cdn_root}) ...")
        page, worker_js, facts = convert_lab(work, panel_cdn_root)
        parts = split_panel_worker(worker_js)
        pyodide_version = facts["pyodide_version"].lstrip("v")
        pinned_base = parts["pyodide_url"].rsplit("/", 1)[0] + "/"
        if parts["pyodide_url"] != facts["pyodide_url"]:
            raise BuildError(f"the converted worker loads {parts['pyodide_url']}, Panel pins {facts['pyodide_url']}")
        if args.pyodide_base is None:
            args.pyodide_base = "./pyodide/" if args.pyodide_dir else pinned_base
        m = re.search(r"/v?(\d+\.\d+\.\d+[^/]*)/", args.pyodide_base)
        if _is_url(args.pyodide_base) and m and m.group(1) != pyodide_version:
            raise BuildError(f"--pyodide-base {args.pyodide_base} is Pyodide {m.group(1)}; Panel "
                             f"{facts['panel_version']} pins Pyodide {pyodide_version}")

        # ---- what runs in Pyodide
        lock, _ = _pyodide_lock(args, pyodide_version)
        load, closure, vendored = resolve_dependencies(
            lock, lab_roots(facts["panel_version"], facts["bokeh_version"], "pyodide-http" in parts["env_spec"]),
            python=lock.get("info", {}).get("python", "3.13.2"))
        wheels_dir = site / "wheels"
        wheels_dir.mkdir()
        wheel_urls = []
        say(quiet, "building wheels ...")
        lab_whl = build_lab_wheel(wheels_dir, missions_dir)
        # Panel and Bokeh go where the converter's list points (PANEL_CDN_ROOT layout).
        env_wheels = [u for u in parts["env_spec"] if u.endswith(".whl")]
        for dist_name, url, skip in (("bokeh", facts["bokeh_whl"], BOKEH_WHEEL_SKIP), ("panel", facts["panel_whl"], PANEL_WHEEL_SKIP)):
            if url not in env_wheels:
                raise BuildError(f"the converter's requirements {parts['env_spec']} lack {url}")
            if self_host_panel:
                rel = _inside(url)
                if rel is None or not url.startswith(panel_cdn_root):
                    raise BuildError(f"{dist_name} wheel URL {url} is not inside {panel_cdn_root}")
                (site / rel).parent.mkdir(parents=True, exist_ok=True)
                made = rewheel_installed(dist_name, site / rel.parent, skip=skip)
                if made.name != rel.name:
                    raise BuildError(f"{dist_name}: built {made.name}, the converter expects {rel.name}")
            wheel_urls.append({"name": dist_name, "url": url})
        for canon, dist_name in vendored.items():
            if canon in ("panel", "bokeh"):
                continue
            made = rewheel_installed(dist_name, wheels_dir)
            wheel_urls.append({"name": dist_name, "url": "./wheels/" + made.name})
        wheel_urls.append({"name": _project()["name"], "url": "./wheels/" + lab_whl.name})
        extra = sorted(set(parts["env_spec"]) - set(env_wheels) - set(load) - {"numpy", "pyodide-http"})
        if extra:
            raise BuildError(f"the converter asks for {extra}, which the build does not provide")

        # ---- Panel's and Bokeh's browser assets
        bokeh_base = None
        if self_host_panel:
            panel_dist = site / _inside(facts["cdn_dist"])
            _copy_panel_dist(facts["panel_dist_dir"], panel_dist)
            used = sorted(set(n for n in BOKEH_JS if f"release/{n}-{facts['bokeh_version']}" in page))
            _copy_bokeh_js(site / "bokeh", facts["bokeh_version"], used)
            bokeh_base = "./bokeh/"

        # ---- self-hosted Pyodide
        pyodide_files = _pyodide_files(lock, closure)
        if args.pyodide_dir:
            rel = _inside(args.pyodide_base) if not _is_url(args.pyodide_base) else None
            if rel is None:
                raise BuildError(f"--pyodide-dir needs --pyodide-base to be a folder inside the site, not {args.pyodide_base}")
            src = Path(args.pyodide_dir)
            missing = [f for f in pyodide_files if not (src / f).is_file()]
            if missing:
                names = ", ".join(f.split("-", 1)[0] if f.endswith(".whl") else f for f in missing)
                raise BuildError(f"--pyodide-dir {src} lacks {len(missing)} file(s) the lab needs: {names} "
                                 f"(like {missing[-1]}); download the full Pyodide {pyodide_version} release "
                                 f"(pyodide-{pyodide_version}.tar.bz2) and pass its pyodide/ folder")
            for f in pyodide_files:
                (site / rel / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src / f, site / rel / f)

        # ---- missions
        for rel, data in _mission_source_files(missions_dir).items():
            _write(site, "missions/" + rel, data)
        _write(site, "missions/index.json", json.dumps({"version": 1, "missions": missions}, indent=1, ensure_ascii=False) + "\n")

        # ---- the lab page and its worker
        project = _project()
        titles = {m["id"]: m["title"] for m in missions}
        titles["sandbox"] = "Sandbox"
        page_config = {
            "missions": titles, "pyodideBase": args.pyodide_base, "pyodideVersion": pyodide_version,
            "storageKey": STORAGE_KEY, "version": project["version"],
        }
        _write(site, "lab.html", patch_lab_html(page, bokeh_version=facts["bokeh_version"], bokeh_base=bokeh_base,
                                                config=page_config, title="Split the Fleet · lab"))
        worker_config = {
            "pyodideBase": args.pyodide_base,
            "pyodideVersion": pyodide_version,
            "pyodidePackages": load,
            "pyodideFiles": len(closure),
            "wheels": wheel_urls,
            "panelCdnRoot": panel_cdn_root,
        }
        _write(site, "lab.js", build_worker(parts, worker_config))

        # ---- the hub and static assets
        _write(site, "index.html", hub_html(missions, version=project["version"], pyodide_version=pyodide_version))
        for name in ("site.css", "hub.js", "loader.js", "icon.svg"):
            _write(site, "assets/" + name, (SITE_SRC / name).read_bytes())
        _write(site, "assets/stars.js", STARS_JS.read_bytes())  # the lab's own storage logic, one copy
        _write(site, "assets/theme.css", theme_css())
        _write(site, "site.webmanifest", (SITE_SRC / "site.webmanifest").read_bytes())
        _write(site, ".nojekyll", b"")

        # ---- the service worker: its cache name is the hash of everything else
        table = _file_table(site)
        build_id = hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()[:16]
        shell = [p for p in table if p in ("index.html", "lab.html", "lab.js", "site.webmanifest")
                 or p.startswith(("assets/", "missions/"))]
        _write(site, "sw.js", _fill(_template("sw.js"), {
            "BUILD_ID": _js_string(build_id),
            "PRECACHE": json.dumps(["./"] + ["./" + p for p in sorted(shell)], indent=1),
            "PYODIDE_BASE": _js_string(args.pyodide_base),
        }, "sw.js"))

        # ---- build-info.json
        table = _file_table(site)
        info = {
            "name": project["name"], "version": project["version"], "build_id": build_id,
            "pyodide": {"version": pyodide_version, "base": args.pyodide_base, "pinned_url": facts["pyodide_url"],
                        "packages": load, "files": pyodide_files, "lock": "pyodide-lock.json of " + pyodide_version,
                        "self_hosted": bool(args.pyodide_dir)},
            "panel": {"version": facts["panel_version"], "cdn_root": panel_cdn_root, "self_hosted": self_host_panel},
            "bokeh": {"version": facts["bokeh_version"]},
            "converter": {"env_spec": parts["env_spec"], "pyodide_url": parts["pyodide_url"]},
            "wheels": wheel_urls,
            "storage_key": STORAGE_KEY,
            "missions": [m["id"] for m in missions],
            "files": table,
        }
        _write(site, "build-info.json", json.dumps(info, indent=1, sort_keys=True) + "\n")

        # ---- swap in
        if out.exists():
            shutil.rmtree(out)
        site.rename(out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return out, info


def embed_snippet(site_url, mission_id, title):
    src = f"{site_url}lab.html?mission={mission_id}&embed=1"
    return (f'<iframe src="{html.escape(src)}" title="Split the Fleet: {html.escape(title)}"\n'
            '        width="100%" height="760" style="border:1px solid #dde2ea;border-radius:8px;max-width:980px"\n'
            '        loading="lazy" allow="fullscreen"></iframe>')


def build_parser():
    p = argparse.ArgumentParser(
        prog="python build.py",
        description="Build the static site: the mission hub, the lab running in Pyodide, the missions and the lab wheel.")
    p.add_argument("--missions", default=str(MISSIONS_SRC), metavar="DIR",
                   help="the missions folder to publish (default: the repo's missions/)")
    p.add_argument("--out", default="dist", help="output folder (default: dist); replaced only if it is an earlier build")
    p.add_argument("--pyodide-base", default=None, metavar="URL_OR_DIR",
                   help="where Pyodide and its packages come from: a URL, or a folder relative to the site "
                        "(default: the CDN URL Panel's converter pins; ./pyodide/ with --pyodide-dir)")
    p.add_argument("--pyodide-dir", default=None, metavar="DIR",
                   help="a downloaded Pyodide release folder to copy into the site (only the files the lab needs)")
    p.add_argument("--panel-cdn-root", default=DEFAULT_PANEL_CDN_ROOT, metavar="URL_OR_DIR",
                   help="PANEL_CDN_ROOT: where Panel's JS/CSS and the Panel/Bokeh wheels come from "
                        f"(default: {DEFAULT_PANEL_CDN_ROOT}, copied into the site; a URL such as "
                        "https://cdn.holoviz.org/panel/ uses Panel's and Bokeh's CDNs instead)")
    p.add_argument("--site-url", default="https://example.org/split-the-fleet/", metavar="URL",
                   help="where the site will be hosted, only for the printed embed snippet")
    p.add_argument("--quiet", action="store_true", help="print only the summary line")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        out, info = build(args)
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        return 2
    files = {p.relative_to(out).as_posix(): {"size": p.stat().st_size} for p in sorted(out.rglob("*")) if p.is_file()}
    total = sum(f["size"] for f in files.values())
    shown = os.path.relpath(out) if not os.path.relpath(out).startswith("..") else str(out)
    if not args.quiet:
        print(f"wrote {shown}/:")
        width = max(len(_human(f["size"])) for f in files.values())
        for name, f in files.items():
            print(f"  {_human(f['size']):>{width}}  {name}")
    print(f"total: {len(files)} files, {_human(total)} ({total:,} bytes) in {shown}/")
    if not args.quiet:
        site_url = _dir_url(args.site_url, "--site-url")
        first = info["missions"][0]
        title = json.loads((out / "missions" / "index.json").read_text(encoding="utf-8"))["missions"][0]["title"]
        print()
        print(f"Pyodide {info['pyodide']['version']} from {info['pyodide']['base']}; Panel {info['panel']['version']}, "
              f"Bokeh {info['bokeh']['version']} from {info['panel']['cdn_root']}")
        print(f"Try it: python -m http.server --directory {shown} 8000  ->  http://localhost:8000/")
        print("Embed a mission in a blog post (replace the address with where you host the site):")
        print(embed_snippet(site_url, first, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
