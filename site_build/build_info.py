"""build-info.json: the build's versions, where Pyodide, Panel and the wheels come from, and
every file's size and sha256."""

import json

from site_build.common import STORAGE_KEY, _file_table, _project, _write

__all__ = ["write_build_info"]


def write_build_info(site, *, build_id, pyodide_version, pyodide_base, pyodide_files, pyodide_self_hosted, load,
                     facts, parts, panel_cdn_root, self_host_panel, wheel_urls, missions, precompiled=None,
                     prerender=None):
    """build-info.json, of the site as it is now (so written last); returns what it holds."""
    project = _project()
    table = _file_table(site)
    info = {
        "name": project["name"], "version": project["version"], "build_id": build_id,
        "pyodide": {"version": pyodide_version, "base": pyodide_base, "pinned_url": facts["pyodide_url"],
                    "packages": load, "files": pyodide_files, "lock": "pyodide-lock.json of " + pyodide_version,
                    "self_hosted": pyodide_self_hosted},
        "panel": {"version": facts["panel_version"], "cdn_root": panel_cdn_root, "self_hosted": self_host_panel},
        "bokeh": {"version": facts["bokeh_version"]},
        "converter": {"env_spec": parts["env_spec"], "pyodide_url": parts["pyodide_url"]},
        "wheels": wheel_urls,
        "precompiled": precompiled or {"done": False},
        "prerender": prerender or {"files": []},  # {stamp, files}: site_build/prerender.py
        "storage_key": STORAGE_KEY,
        "missions": [m["id"] for m in missions],
        "files": table,
    }
    _write(site, "build-info.json", json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info
