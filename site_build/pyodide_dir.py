"""Where the site's Pyodide comes from (--pyodide-base, checked against the version Panel
pins), the files of it the lab needs, and their copy into the site from a Pyodide folder
(--pyodide-dir)."""

import re
import shutil
from pathlib import Path

from site_build.common import BuildError
from site_build.dependencies import _canon
from site_build.urls import _inside, _is_url

__all__ = ["pyodide_base", "copy_pyodide"]


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
    for f in pyodide_files:
        (site / rel / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / f, site / rel / f)
