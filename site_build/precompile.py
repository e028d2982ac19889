"""Pre-compiled Python for the browser: every archive the lab unpacks, as .pyc.

Pyodide imports Python source by compiling it, in WebAssembly, on every visit: in the
lab's cold load that was about 60% of the time to the first canvas (Panel, Bokeh,
numpy and the standard library; 23.4 s -> 11.5 s measured with everything compiled). So
the build compiles each archive the site serves (wheels, Pyodide's python_stdlib.zip)
once, with Pyodide's own interpreter running under Node (`scripts/pyodide_compile.mjs`),
whatever Python runs the build: a .pyc carries the compiling interpreter's magic
number, and the browser's Pyodide accepts only its own.

Only the modules the lab imports by the time it has loaded and run (START_IMPORTS, a list
recorded from the running page by benchmarks/bench_browser.py --record-imports) are
compiled: a .pyc is larger than its source, and most of the standard library, Panel and
Bokeh is never imported, so compiling those would only add bytes to the first visit. A
module missing from the list still works: it stays source, and is compiled when (if ever)
it is imported. Each compiled .py becomes a sourceless .pyc in its place (tracebacks still
name the file and line, without the line's text), except in the lab's own wheel, which is
compiled whole and keeps its sources,
so that its errors quote the line and CPython can still run it, with the .pyc in
__pycache__ under Pyodide's cache tag. The .pyc files are "unchecked-hash" (PEP 552):
unpacking a wheel does not keep file times, so the importer must not compare them.

Results are cached by each archive's sha256 (`.cache/pyc/`), so a rebuild costs only
the archives that changed. Without Node or node_modules/pyodide the build goes on with
source archives and says so: the lab works, it only loads slower.
"""

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from site_build.common import BuildError, _project, say
from site_build.urls import _inside
from site_build.wheels import _wheel_name, _zip_time, write_wheel

__all__ = ["PrecompileError", "START_IMPORTS", "compiler_available", "start_imports", "precompile_archives",
           "precompile_site"]

REPO = Path(__file__).resolve().parents[1]
COMPILER = REPO / "scripts" / "pyodide_compile.mjs"
START_IMPORTS = Path(__file__).resolve().with_name("start_imports.txt")
NODE_PYODIDE = REPO / "node_modules" / "pyodide"
CACHE = REPO / ".cache" / "pyc"


class PrecompileError(Exception):
    """The compiler ran and failed; the message says which archive or what Node printed."""


def compiler_available():
    """None when the compiler can run here, else why not (for the build's summary)."""
    if shutil.which("node") is None:
        return "node is not on PATH"
    if not (NODE_PYODIDE / "package.json").is_file():
        return "node_modules/pyodide is missing (run `npm ci`)"
    return None


def start_imports(path=START_IMPORTS):
    """The archive member names (`asyncio/events.py`) to compile, or None (compile every module)
    when the list is missing or empty. Lines starting with # are comments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    names = {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}
    return names or None


def _compiler_id(compile_only):
    """What the compiled archive depends on besides the input: Pyodide's version, the compiler,
    this module, and which modules it compiles."""
    version = json.loads((NODE_PYODIDE / "package.json").read_text(encoding="utf-8"))["version"]
    listed = "\n".join(sorted(compile_only)).encode() if compile_only is not None else b"*"
    return hashlib.sha256(version.encode() + COMPILER.read_bytes() + Path(__file__).read_bytes()
                          + listed).hexdigest()[:12]


def _dist_info(names):
    tops = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    return tops.pop() if len(tops) == 1 else None


def _rezip(names, tree, keep_source, cache_tag, stamp, write_wheel, compile_only=None):
    """The archive again from `tree`: each compiled .py as a sourceless .pyc in its place, or,
    with `keep_source`, the .py kept and its .pyc in __pycache__ (where the importer looks
    when the source is there; other Pythons see a foreign cache tag and ignore it). With
    `compile_only` (a set of member names), a .py not in it stays source."""
    files = {}
    for name in names:
        if name.endswith("/"):
            continue
        compiled = tree / (name + "c")
        wanted = keep_source or compile_only is None or name in compile_only
        if name.endswith(".py") and compiled.is_file() and wanted:
            if keep_source:
                folder, _, stem = name[:-3].rpartition("/")
                files[f"{folder}/__pycache__/{stem}.{cache_tag}.pyc".lstrip("/")] = compiled.read_bytes()
            else:
                files[name + "c"] = compiled.read_bytes()
                continue
        files[name] = (tree / name).read_bytes()
    dist_info = _dist_info(files)
    if dist_info is not None:  # a wheel: a fresh RECORD
        out = tree.with_suffix(".whl")
        write_wheel(out, files, dist_info)
        return out.read_bytes()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, files[name], compresslevel=9)
    return buf.getvalue()


def _safe_names(archive, names):
    for name in names:
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "\\" in name:
            raise PrecompileError(f"{archive.name}: unsafe member name {name!r}")


def precompile_archives(archives, *, write_wheel, stamp, keep_source=(), cache=CACHE, compile_only=None):
    """Replace each archive (a Path to a .whl or .zip, in the site) by its compiled form, in place.

    `keep_source`: archive file names whose .py files are all compiled and stay beside their .pyc.
    `compile_only`: member names to compile in the other archives (None: every module).
    `write_wheel(file, files, dist_info)` writes a wheel reproducibly (build.py's).
    Returns {archive name: (bytes before, bytes after)}.
    """
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    compiler = _compiler_id(compile_only)
    todo, sizes = [], {}
    for archive in archives:
        data = archive.read_bytes()
        keep = archive.name in keep_source
        key = hashlib.sha256(data + compiler.encode() + (b"+src" if keep else b"")).hexdigest()[:32]
        cached = cache / f"{key}{archive.suffix}"
        sizes[archive.name] = (len(data), None)
        if cached.is_file():
            shutil.copyfile(cached, archive)
        else:
            todo.append((archive, cached, keep))
    if todo:
        with tempfile.TemporaryDirectory(prefix="stf-pyc-") as tmp:
            trees = []
            for i, (archive, _, _) in enumerate(todo):
                tree = Path(tmp) / str(i)
                with zipfile.ZipFile(archive) as zf:
                    names = zf.namelist()
                    _safe_names(archive, names)
                    zf.extractall(tree)
                trees.append((tree, names))
            proc = subprocess.run(["node", str(COMPILER), *(str(t) for t, _ in trees)], cwd=REPO,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise PrecompileError(f"{COMPILER.name} failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
            try:
                cache_tag = json.loads(proc.stdout.strip().splitlines()[-1])["cache_tag"]
            except (ValueError, KeyError, IndexError):
                raise PrecompileError(f"{COMPILER.name} printed no report: {proc.stdout[-300:]!r}") from None
            for (archive, cached, keep), (tree, names) in zip(todo, trees):
                data = _rezip(names, tree, keep, cache_tag, stamp, write_wheel, compile_only)
                archive.write_bytes(data)
                tmp_cached = cached.with_suffix(".part")
                tmp_cached.write_bytes(data)
                tmp_cached.replace(cached)
    for archive in archives:
        sizes[archive.name] = (sizes[archive.name][0], archive.stat().st_size)
    return sizes


def precompile_site(site, *, pyodide_base, pyodide_self_hosted, quiet, skip=False):
    """Every archive of the site the browser unpacks, compiled; returns what was done (for build-info.json).

    With a self-hosted Pyodide its packages and standard library are compiled too, and
    the site's pyodide-lock.json gets their new sha256 (Pyodide checks each package it
    loads against it)."""
    if skip:
        return {"done": False, "why": "--no-precompile"}
    why = compiler_available()
    if why:
        print(f"note: Python is not pre-compiled for the browser ({why}); the lab will load slower", file=sys.stderr)
        return {"done": False, "why": why}
    pyodide_dir = site / _inside(pyodide_base) if pyodide_self_hosted else None
    archives = sorted(site.rglob("*.whl"))
    if pyodide_dir is not None and (pyodide_dir / "python_stdlib.zip").is_file():
        archives.append(pyodide_dir / "python_stdlib.zip")
    project = _project()
    lab_wheel = f"{_wheel_name(project['name'])}-{project['version']}-py3-none-any.whl"
    say(quiet, f"compiling {len(archives)} archives to .pyc with Pyodide (cached in .cache/pyc) ...")
    try:
        sizes = precompile_archives(archives, write_wheel=write_wheel, stamp=_zip_time(), keep_source={lab_wheel},
                                    compile_only=start_imports())
    except PrecompileError as exc:
        raise BuildError(f"pre-compiling for the browser: {exc} (build.py --no-precompile skips it)") from None
    if pyodide_dir is not None:
        lock_path = pyodide_dir / "pyodide-lock.json"
        lock = json.loads(lock_path.read_text(encoding="utf-8"))
        for entry in lock["packages"].values():
            served = pyodide_dir / entry["file_name"]
            if served.name in sizes and served.is_file():
                entry["sha256"] = hashlib.sha256(served.read_bytes()).hexdigest()
        lock_path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return {"done": True, "archives": {name: {"source_bytes": a, "compiled_bytes": b}
                                       for name, (a, b) in sorted(sizes.items())}}
