"""sw.js: the service worker, precaching the site's shell (pages, assets, missions) under a
cache named after the hash of every other file, so a new build never mixes with an old one,
and keeping Pyodide's files under a cache named after its version (static/site/sw.js)."""

import hashlib
import json

from site_build.common import _file_table, _write
from site_build.templates import _fill, _template

__all__ = ["write_service_worker"]


def _js_string(text):
    return json.dumps(text)


def write_service_worker(site, pyodide_base, pyodide_version, gzipped=()):
    """sw.js, once every other file but build-info.json is written; returns the build id (its cache name).
    `gzipped`: Pyodide's files the site also has as .gz (site_build/transfer.py: the worker's config)."""
    table = _file_table(site)
    build_id = hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()[:16]
    shell = [p for p in table if p in ("index.html", "lab.html", "author.html", "lab.js", "site.webmanifest")
             or p.startswith(("assets/", "missions/"))]
    _write(site, "sw.js", _fill(_template("sw.js"), {
        "BUILD_ID": _js_string(build_id),
        "PRECACHE": json.dumps(["./"] + ["./" + p for p in sorted(shell)], indent=1),
        "PYODIDE_BASE": _js_string(pyodide_base),
        "PYODIDE_VERSION": _js_string(pyodide_version),
        "RUNTIME_WASM_GZ": json.dumps("pyodide.asm.wasm" in gzipped),
    }, "sw.js"))
    return build_id
