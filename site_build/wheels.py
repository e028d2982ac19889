"""Reproducible wheels (fixed timestamps, sorted entries): the lab's own (lab/ plus the
published missions), installed pure-Python distributions re-wheeled for the browser, and the
step that puts them all on the site (wheels/, and Panel's and Bokeh's where the converter
points)."""

import base64
import hashlib
import importlib.metadata
import io
import json
import os
import re
import sys
import zipfile
from pathlib import Path, PurePosixPath

from site_build.common import MISSIONS_SRC, REPO, BuildError, _project
from site_build.missions import _mission_source_files
from site_build.urls import _inside

__all__ = ["ZIP_EPOCH", "PANEL_WHEEL_SKIP", "BOKEH_WHEEL_SKIP", "write_wheel", "lab_wheel_files", "build_lab_wheel",
           "rewheel_installed", "write_site_wheels"]

# Fixed zip timestamp (the zip format cannot go below 1980) unless SOURCE_DATE_EPOCH says otherwise.
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

# Trimmed from the Panel and Bokeh wheels for the browser, as Panel's own Pyodide wheels
# are (scripts/build_pyodide_wheels.py): bundled JS/CSS is served by the site, not imported.
# Also what only building Panel's or Bokeh's JS, or type-checking, reads: Panel's dist/panel.json
# (1 MB compressed: `bokeh ext build`'s artifact list; Bokeh's own bokeh.json is dropped alike)
# and its TypeScript sources (panel/models/*.ts), Bokeh's type stubs (.pyi); and Panel's
# dist/images/ (read from disk only by `panel serve` and `panel convert`; pages point at them
# by URL, the site's copy).
PANEL_WHEEL_SKIP = re.compile(r"^panel/(tests/|dist/(bundled|lib|dts|wheels|images)/|dist/[^/]+\.(js|json)$)|\.(map|ts)$")
BOKEH_WHEEL_SKIP = re.compile(r"^bokeh/(?!core/_templates/).*(\.js|\.d\.ts|\.tsbuildinfo|\.map|/bokeh\.json|\.pyi)$")


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


def _wheel_name(name):
    return re.sub(r"[-_.]+", "_", name).lower()


# The command line's planner and its process/Dask executors never run in the browser.
NOT_IN_BROWSER = ("lab/plan/", "lab/parallel.py")


def lab_wheel_files(missions_dir=MISSIONS_SRC):
    """{archive name: bytes} of the lab's wheel: lab/ (core, ui, cli) + `missions_dir` as lab/missions."""
    files = {}
    for path in sorted((REPO / "lab").rglob("*")):
        rel = path.relative_to(REPO).as_posix()
        if not path.is_file() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        if rel.startswith("lab/missions/"):
            continue  # the repo's top-level missions/ is the source of truth
        if rel.startswith(NOT_IN_BROWSER):
            continue
        files[rel] = path.read_bytes()
    for rel, data in _mission_source_files(missions_dir).items():
        files["lab/missions/" + rel] = data
    return files


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


def write_site_wheels(site, missions_dir, parts, facts, vendored, load, panel_cdn_root, self_host_panel):
    """Every wheel the worker installs, on the site; returns [{name, url}] in install order."""
    wheels_dir = site / "wheels"
    wheels_dir.mkdir()
    wheel_urls = []
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
    return wheel_urls
