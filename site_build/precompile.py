"""Pre-compiled Python for the browser: every archive the lab unpacks, as .pyc.

Pyodide imports Python source by compiling it, in WebAssembly, on every visit: in the
lab's cold load that was about 60% of the time to the first canvas (Panel, Bokeh,
numpy and the standard library; 23.4 s -> 11.5 s measured with everything compiled). So
the build compiles each archive the site serves (wheels, Pyodide's python_stdlib.zip)
once, with Pyodide's own interpreter running under Node (`scripts/pyodide_compile.mjs`),
whatever Python runs the build: a .pyc carries the compiling interpreter's magic
number, and the browser's Pyodide accepts only its own.

Each .py becomes a sourceless .pyc beside where it was (tracebacks still name the file
and line, without the line's text), except in the lab's own wheel, which keeps its
sources so that its errors quote the line. The .pyc files are "unchecked-hash" (PEP 552):
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
import tempfile
import zipfile
from pathlib import Path

__all__ = ["PrecompileError", "compiler_available", "precompile_archives"]

REPO = Path(__file__).resolve().parents[1]
COMPILER = REPO / "scripts" / "pyodide_compile.mjs"
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


def _compiler_id():
    """What the compiled bytes depend on besides the input: Pyodide's version and the script."""
    version = json.loads((NODE_PYODIDE / "package.json").read_text(encoding="utf-8"))["version"]
    return hashlib.sha256(version.encode() + COMPILER.read_bytes()).hexdigest()[:12]


def _dist_info(names):
    tops = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    return tops.pop() if len(tops) == 1 else None


def _rezip(names, tree, keep_source, stamp, write_wheel):
    """The archive again from `tree`: each compiled .py as .pyc (and the .py too if `keep_source`)."""
    files = {}
    for name in names:
        if name.endswith("/"):
            continue
        compiled = tree / (name + "c")
        if name.endswith(".py") and compiled.is_file():
            files[name + "c"] = compiled.read_bytes()
            if not keep_source:
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


def precompile_archives(archives, *, write_wheel, stamp, keep_source=(), cache=CACHE):
    """Replace each archive (a Path to a .whl or .zip, in the site) by its compiled form, in place.

    `keep_source`: archive file names whose .py files stay beside their .pyc.
    `write_wheel(file, files, dist_info)` writes a wheel reproducibly (build.py's).
    Returns {archive name: (bytes before, bytes after)}.
    """
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    compiler = _compiler_id()
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
            for (archive, cached, keep), (tree, names) in zip(todo, trees):
                data = _rezip(names, tree, keep, stamp, write_wheel)
                archive.write_bytes(data)
                tmp_cached = cached.with_suffix(".part")
                tmp_cached.write_bytes(data)
                tmp_cached.replace(cached)
    for archive in archives:
        sizes[archive.name] = (sizes[archive.name][0], archive.stat().st_size)
    return sizes
