"""Panel's conversion of the lab page (`panel convert --to pyodide-worker`, run in a
subprocess on a two-line entry script), and the parts of the worker it generates that the
site's own worker keeps verbatim."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from site_build.common import REPO, BuildError
from site_build.dependencies import LAB_REQUIREMENTS

__all__ = ["ENTRY_NAME", "ENTRY_SOURCE", "convert_lab", "split_panel_worker", "convert_page"]

# The entry Panel converts. Not named lab.py: the script's folder goes first on sys.path
# and a lab.py there would shadow the `lab` package. Its outputs are renamed lab.html/lab.js.
ENTRY_NAME = "stf_lab_app"
ENTRY_SOURCE = '''\
# Split the Fleet: the lab page (lab.html) and the author page (author.html), as converted by
# `panel convert --to pyodide-worker`. In the browser, pn.state.location is the page's address
# (lab.html?mission=ID&embed=1&..., author.html?draft=CODE): it says which page to draw.
from lab.ui.site_entry import site_page

site_page().servable(title="Split the Fleet")
'''


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


def convert_page(work, panel_cdn_root):
    """The converted lab page: (its html, the worker's parts, Panel's facts, the Pyodide version it pins)."""
    page, worker_js, facts = convert_lab(work, panel_cdn_root)
    parts = split_panel_worker(worker_js)
    pyodide_version = facts["pyodide_version"].lstrip("v")
    if parts["pyodide_url"] != facts["pyodide_url"]:
        raise BuildError(f"the converted worker loads {parts['pyodide_url']}, Panel pins {facts['pyodide_url']}")
    return page, parts, facts, pyodide_version
