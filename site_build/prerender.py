"""prerender/: each mission's first view, rendered at build time (lab/ui/prerender.py).

For every mission (and the sandbox) at its starting controls, `lab.html?mission=ID` and the
blog iframe's `lab.html?mission=ID&embed=1`, the lab page is built in CPython and its Bokeh
document written to prerender/ID.json.gz and prerender/ID.embed.json.gz (~50 KB each).
assets/loader.js draws it while the worker boots, then swaps in the live document.

Each file carries a stamp (the lab wheel's sha256, also in lab.html's config): a file from
another build is ignored and the page loads the normal way. Pages run in forked children of
two processes (the machine's cores), Panel imported once per process: ~1.5 s a page.
"""

import hashlib
import json
import os
import subprocess
import sys

from site_build.common import REPO, BuildError, _project, _write
from site_build.transfer import _write_gz
from site_build.urls import _inside

__all__ = ["prerender_stamp", "write_prerenders"]


def prerender_stamp(site, wheel_urls):
    """The lab wheel's sha256 (first 16 hex digits): what the pre-renders were built from."""
    for wheel in wheel_urls:
        rel = _inside(wheel["url"])
        if wheel["name"] == _project()["name"] and rel is not None and (site / rel).is_file():
            return hashlib.sha256((site / rel).read_bytes()).hexdigest()[:16]
    raise BuildError("no lab wheel among the site's wheels: nothing to stamp the pre-renders with")


def _pages(missions):
    """[(file, query)]: every mission and the sandbox, full page and embed."""
    from lab.ui.catalog import SANDBOX_ID
    from lab.ui.prerender import prerender_name

    pages = []
    for mission_id in [m["id"] for m in missions] + [SANDBOX_ID]:
        pages.append((prerender_name(mission_id), f"mission={mission_id}"))
        pages.append((prerender_name(mission_id, embed=True), f"mission={mission_id}&embed=1"))
    return pages


def write_prerenders(site, missions_dir, missions, stamp, *, jobs=None):
    """Write prerender/*.json.gz, stamped; returns the files written (relative to the site)."""
    pages = _pages(missions)
    jobs = max(1, min(jobs or os.cpu_count() or 1, 2, len(pages)))
    env = dict(os.environ, PYTHONHASHSEED="0")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    from lab.ui.prerender import PANEL_ROOT_MARK

    env["PANEL_CDN_ROOT"] = PANEL_ROOT_MARK  # read when Panel is imported; loader.js puts the page's in
    env["BOKEH_RESOURCES"] = "cdn"  # as in the worker
    # With fork, each process imports Panel once and builds its pages in forked children;
    # without it (Windows), one process a page, one after another.
    groups = [pages[i::jobs] for i in range(jobs)] if hasattr(os, "fork") else [[p] for p in pages]
    running = jobs if hasattr(os, "fork") else 1
    failures = []
    for start in range(0, len(groups), running):
        procs = []
        for group in groups[start:start + running]:
            args = [sys.executable, "-m", "lab.ui.prerender", "--missions", str(missions_dir)]
            for rel, query in group:
                args += [str(site / rel), query]
            procs.append(subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
        for proc in procs:
            out, _ = proc.communicate(timeout=900)
            if proc.returncode != 0:
                failures.append(out.strip()[-3000:])
    if failures:
        raise BuildError("pre-rendering the lab's first views failed:\n" + "\n".join(failures))
    written = []
    for rel, _query in pages:
        path = site / rel
        data = json.loads(path.read_text(encoding="utf-8"))
        data["stamp"] = stamp
        # Only the .gz is kept (~50 KB, not ~600 KB): a browser without DecompressionStream
        # loads the normal way. Keys in Bokeh's order (lab/ui/prerender.py write_prerender).
        _write_gz(path, json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
        path.unlink()
        written.append(rel + ".gz")
    return written
