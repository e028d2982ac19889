"""Where the site's Pyodide comes from (--pyodide-base, checked against the version Panel
pins), the files of it the lab needs, and their copy into the site from a Pyodide folder
(--pyodide-dir), without the package files nothing imports (BUILD_ONLY)."""

import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

from site_build.common import BuildError
from site_build.dependencies import _canon
from site_build.urls import _inside, _is_url

__all__ = ["BUILD_ONLY", "pyodide_base", "copy_pyodide", "trim_package"]

# Files of a Pyodide package that only building against it uses: type stubs, Cython
# declarations, C headers and sources, static libraries (numpy: 0.3 MB compressed of 3.1).
# Python never imports them; a self-hosted site leaves them out.
BUILD_ONLY = re.compile(r"\.(pyi|pxd|h|c|a)$")


def pyodide_base(pyodide_base, pyodide_dir, parts, facts, pyodide_version):
    """--pyodide-base, or its default (./pyodide/ with --pyodide-dir, else the folder Panel's converter pins)."""
    pinned_base = parts["pyodide_url"].rsplit("/", 1)[0] + "/"
    if pyodide_base is None:
        pyodide_base = "./pyodide/" if pyodide_dir else pinned_base
    m = re.search(r"/v?(\d+\.\d+\.\d+[^/]*)/", pyodide_base)
    if _is_url(pyodide_base) and m and m.group(1) != pyodide_version:
        raise BuildError(f"--pyodide-base {pyodide_base} is Pyodide {m.group(1)}; Panel "
                         f"{facts['panel_version']} pins Pyodide {pyodide_version}")
    return pyodide_base


def _pyodide_files(lock, closure):
    files = ["pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json"]
    packages = {_canon(n): p for n, p in lock["packages"].items()}
    return files + sorted(packages[n]["file_name"] for n in closure)


def copy_pyodide(site, pyodide_dir, pyodide_base, pyodide_files, pyodide_version):
    """Copy `pyodide_files` from the folder `pyodide_dir` into the site, at `pyodide_base`."""
    rel = _inside(pyodide_base) if not _is_url(pyodide_base) else None
    if rel is None:
        raise BuildError(f"--pyodide-dir needs --pyodide-base to be a folder inside the site, not {pyodide_base}")
    src = Path(pyodide_dir)
    missing = [f for f in pyodide_files if not (src / f).is_file()]
    if missing:
        names = ", ".join(f.split("-", 1)[0] if f.endswith(".whl") else f for f in missing)
        raise BuildError(f"--pyodide-dir {src} lacks {len(missing)} file(s) the lab needs: {names} "
                         f"(like {missing[-1]}); download the full Pyodide {pyodide_version} release "
                         f"(pyodide-{pyodide_version}.tar.bz2) and pass its pyodide/ folder")
    trimmed = {}
    for f in pyodide_files:
        (site / rel / f).parent.mkdir(parents=True, exist_ok=True)
        if f.endswith(".whl"):
            trimmed[f] = trim_package(src / f, site / rel / f)
        else:
            shutil.copyfile(src / f, site / rel / f)
    # Pyodide checks each package it loads against the lock's sha256: point it at the trimmed file.
    lock_path = site / rel / "pyodide-lock.json"
    lock = json.loads(lock_path.read_text(encoding="utf-8"))
    for entry in lock["packages"].values():
        if trimmed.get(entry["file_name"]):
            entry["sha256"] = hashlib.sha256((site / rel / entry["file_name"]).read_bytes()).hexdigest()
    lock_path.write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def trim_package(src, dest):
    """Copy the wheel `src` to `dest` without its BUILD_ONLY members (and their RECORD lines),
    each kept member byte for byte with its own metadata. True if anything was left out.
    A file that is no zip is copied as it is (Pyodide will refuse it, naming the package)."""
    if not zipfile.is_zipfile(src):
        shutil.copyfile(src, dest)
        return False
    with zipfile.ZipFile(src) as zin:
        drop = {i.filename for i in zin.infolist() if BUILD_ONLY.search(i.filename)}
        if not drop:
            shutil.copyfile(src, dest)
            return False
        with zipfile.ZipFile(dest, "w") as zout:
            for info in zin.infolist():
                if info.filename in drop:
                    continue
                data = zin.read(info)
                if info.filename.endswith(".dist-info/RECORD"):
                    data = b"".join(line for line in data.splitlines(keepends=True)
                                    if line.split(b",", 1)[0].decode("utf-8", "replace") not in drop)
                zout.writestr(info, data, compress_type=info.compress_type)
    return True
