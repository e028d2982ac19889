"""The static site's one Python program, for both of its Panel pages: lab.html (the lab) and
author.html (the author page). Both are the same converted page and worker (build.py makes
them); the page's own address says which to draw. `lab serve` routes them itself (serve.py)."""

import panel as pn

from .browser.page_bridge import guard_location

__all__ = ["site_page", "is_author_address"]


def is_author_address(pathname):
    """True for the author page's address (author.html, or /author where a host drops the .html)."""
    name = pathname.rstrip("/").rsplit("/", 1)[-1] if isinstance(pathname, str) else ""
    return name in ("author.html", "author")


def site_page():
    """The page the address asks for: the author page or the lab."""
    guard_location()
    loc = pn.state.location
    if is_author_address(getattr(loc, "pathname", "") if loc is not None else ""):
        from .author.author_page import author_page

        return author_page()
    from .app import lab_page

    return lab_page()
