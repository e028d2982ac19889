"""lab.js: the site's web worker, static/site/lab-worker.js filled with the parts of Panel's
generated worker it keeps (its program, sendPatch, onmessage) and the build's config (where
Pyodide is, the packages to load, the wheels to install)."""

import json

from site_build.common import _write
from site_build.templates import _fill, _template

__all__ = ["build_worker", "write_worker"]


def build_worker(parts, worker_config):
    template = _template("lab-worker.js")
    return _fill(template, {
        "STF_CONFIG": json.dumps(worker_config, sort_keys=True, indent=1),
        "PANEL_SEND_PATCH": parts["send_patch"].rstrip("\n"),
        "PANEL_ONMESSAGE": parts["onmessage"].replace("self.onmessage = async (event) =>", "const panelOnMessage = async (event) =>", 1).rstrip("\n"),
        "PANEL_CODE": parts["code"],
    }, "lab-worker.js")


def write_worker(site, parts, *, pyodide_base, pyodide_version, load, closure, wheel_urls, panel_cdn_root,
                 gzipped=()):
    """lab.js. `gzipped`: Pyodide's files (names in its folder) the site also has as .gz."""
    worker_config = {
        "gzipped": list(gzipped),
        "pyodideBase": pyodide_base,
        "pyodideVersion": pyodide_version,
        "pyodidePackages": load,
        "pyodideFiles": len(closure),
        "wheels": wheel_urls,
        "panelCdnRoot": panel_cdn_root,
    }
    _write(site, "lab.js", build_worker(parts, worker_config))
