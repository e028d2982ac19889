"""What the two pages (the hub, hub.py; the lab, app.py) share: the missions' catalog (catalog.py's, for
both), the links between them, the brand, and Panel's settings.

The links depend on where the page runs: the static site's files (index.html, lab.html;
always in Pyodide) or `lab serve`'s routes (/, /lab).
"""

import sys

import panel as pn

from .browser.panel_shims import escape_without_nh3, one_patch_per_update, skip_busy_tracking
from .catalog import MISSIONS_ENV, get_catalog
from .words.theme import PALETTE

__all__ = ["get_catalog", "search", "hub_href", "lab_href", "author_href", "brand_html", "page_extension", "star_text", "MISSIONS_ENV"]


def search():
    loc = pn.state.location
    search = getattr(loc, "search", "") if loc is not None else ""
    return search if isinstance(search, str) else ""


def _static_build():
    """True when the page is the static site (index.html, lab.html) rather than `lab serve`.

    Python in the browser (Pyodide) means the static site, whatever the host does to its
    URLs (some serve lab.html as /lab); a path ending in .html also says so.
    """
    if sys.platform == "emscripten":
        return True
    loc = pn.state.location
    path = getattr(loc, "pathname", "") if loc is not None else ""
    return isinstance(path, str) and path.endswith(".html")


def hub_href():
    return "index.html" if _static_build() else "./"


def lab_href(mission_id, draft_code=None):
    """The lab's address for a mission, or for a shared draft (its link code: lab.core.mission_link)."""
    base = "lab.html" if _static_build() else "lab"
    return f"{base}?draft={draft_code}" if draft_code else f"{base}?mission={mission_id}"


def author_href():
    return "author.html" if _static_build() else "author"


def brand_html():
    return (f'<a class="stf-brand" href="{hub_href()}" title="All missions">'
            '<span class="logo" aria-hidden="true"></span>Split the Fleet</a>')


def page_extension():
    """Panel settings both pages need (idempotent; safe in Pyodide)."""
    escape_without_nh3()
    skip_busy_tracking()  # the lab shows its own busy status
    if sys.platform == "emscripten":  # the static site: Panel's worker link, one patch per update
        one_patch_per_update()
    pn.config.raw_css = [c for c in pn.config.raw_css if "stf-page" not in c] + [
        "/* stf-page */ body { margin: 0; background: %s; }" % PALETTE["page"]
    ]


def star_text(saved, total):
    """(stars earned of `total`, their glyphs as HTML) from the saved list."""
    got = sum(1 for s in saved[:total] if s)
    glyphs = "".join(f'<span class="{"on" if i < len(saved) and saved[i] else ""}">{"★" if i < len(saved) and saved[i] else "☆"}</span>'
                     for i in range(total))
    return got, glyphs
