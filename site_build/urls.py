"""The URL-or-folder options (--pyodide-base, --panel-cdn-root, --site-url): a URL, or a
folder relative to the site, so the site works at any sub-path."""

import re
from pathlib import PurePosixPath
from urllib.parse import urlparse

from site_build.common import BuildError

__all__ = []  # its helpers are for this package only


def _is_url(text):
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", text, re.I))


def _dir_url(text, option):
    text = text.strip()
    if not text:
        raise BuildError(f"{option}: empty")
    if not text.endswith("/"):
        text += "/"
    if _is_url(text):
        if urlparse(text).scheme not in ("http", "https"):
            raise BuildError(f"{option}: {text!r} must be an http(s) URL or a relative folder")
        return text
    if text.startswith("/"):
        raise BuildError(f"{option}: {text!r} is absolute; use a URL or a folder relative to the site "
                         "(like ./pyodide/), so the site works at any sub-path")
    if not text.startswith(("./", "../")):
        text = "./" + text
    return text


def _inside(rel):
    """A relative URL folder ('./x/') as a path inside the site, or None when it leaves it."""
    parts = PurePosixPath(rel).parts
    if any(p == ".." for p in parts):
        return None
    return PurePosixPath(*[p for p in parts if p != "."]) if parts else PurePosixPath(".")
