"""What the lab needs in Pyodide: Pyodide's package list (pyodide-lock.json), the roots the lab
starts from, and the walk that splits them into Pyodide packages to load and pure-Python
distributions to vendor as wheels (leaving out UNUSED_DEPENDENCIES)."""

import importlib.metadata
import json
import re
from pathlib import Path

from site_build.common import NODE_PYODIDE, BuildError
from site_build.urls import _is_url

__all__ = ["LAB_REQUIREMENTS", "UNUSED_DEPENDENCIES", "PYODIDE_MARKERS", "lab_roots", "resolve_dependencies"]

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
#   requests (with urllib3, idna, certifi, charset-normalizer: 0.6 MB): Panel declares it,
#     and in Pyodide only pyodide-http's patch_all imports it, which goes on without it;
#     the lab makes no HTTP request from Python (an uploaded trace comes as bytes).
#   tqdm: Panel's Tqdm indicator, imported in a try; narwhals: Bokeh's ColumnDataSource
#     for dataframes; xyzservices: Bokeh's map tiles; contourpy: Bokeh's contour plots;
#     markdown: Panel's Markdown pane with the "markdown" renderer (Panel's default, and
#     the one a widget's description tooltip uses, is markdown-it, which needs
#     mdit-py-plugins: that stays); typing-extensions: imported by none of what runs.
#   All of these: absent from sys.modules in the running static lab (load, play, split,
#     sweep); the offline browser tests run the lab without them.
UNUSED_DEPENDENCIES = {"panel-material-ui", "nh3", "pillow", "pandas", "requests", "urllib3", "idna", "certifi",
                       "charset-normalizer", "tqdm", "narwhals", "xyzservices", "contourpy", "markdown",
                       "typing-extensions"}
# Pyodide's environment, for evaluating dependency markers.
PYODIDE_MARKERS = {
    "sys_platform": "emscripten", "platform_system": "Emscripten", "os_name": "posix",
    "platform_machine": "wasm32", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "extra": "",
}


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
