"""prerender/: each mission's first view as static HTML + SVG, built at build time (lab/ui/prerender.py).

For every mission (and the sandbox) at its starting controls, `lab.html?mission=ID` and the
blog iframe's `lab.html?mission=ID&embed=1`, the lab's first run is simulated in CPython and
its first view written to prerender/ID.html and prerender/ID.embed.html (~80 KB each), each
with a .gz beside it (~16 KB: what loader.js fetches, as for the page's scripts, since many
hosts send files as they are). assets/loader.js shows it at once, inert, and swaps in the
live document once Pyodide has built it.

Each file carries a stamp (the lab wheel's sha256, also in lab.html's config): a file from
another build is ignored and the page loads the normal way. All pages are built in this
process, one after another (~0.3 s a page: a simulation and its metrics, no Panel document).
"""

import hashlib

from site_build.common import BuildError, _project, _write
from site_build.transfer import _write_gz
from site_build.urls import _inside

__all__ = ["prerender_stamp", "write_prerenders"]


def prerender_stamp(site, wheel_urls):
    """The lab wheel's sha256 (first 16 hex digits): what the first views were built from."""
    for wheel in wheel_urls:
        rel = _inside(wheel["url"])
        if wheel["name"] == _project()["name"] and rel is not None and (site / rel).is_file():
            return hashlib.sha256((site / rel).read_bytes()).hexdigest()[:16]
    raise BuildError("no lab wheel among the site's wheels: nothing to stamp the first views with")


def _pages(missions):
    """[(file, query)]: every mission and the sandbox, full page and embed."""
    from lab.ui.catalog import SANDBOX_ID
    from lab.ui.prerender import prerender_name

    pages = []
    for mission_id in [m["id"] for m in missions] + [SANDBOX_ID]:
        pages.append((prerender_name(mission_id), f"mission={mission_id}"))
        pages.append((prerender_name(mission_id, embed=True), f"mission={mission_id}&embed=1"))
    return pages


def write_prerenders(site, missions_dir, missions, stamp):
    """Write prerender/*.html and their .gz, stamped; returns the pages' files (relative to the site)."""
    from lab.ui.prerender import first_view_html

    written = []
    for rel, query in _pages(missions):
        try:
            text = first_view_html(query, str(missions_dir), stamp=stamp)
        except Exception as exc:  # a mission the lab cannot start: the build says which
            raise BuildError(f"{rel}: the first view of lab.html?{query} could not be built: {exc}") from exc
        _write(site, rel, text.encode("utf-8"))
        _write_gz(site / rel, text.encode("utf-8"))
        written.append(rel)
    return written
