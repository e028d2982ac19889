"""Panel's and Bokeh's browser files (Panel's dist/ parts and the BokehJS bundles the page
names), copied into the site when PANEL_CDN_ROOT is a folder of it."""

import shutil
from pathlib import Path

from site_build.common import BuildError
from site_build.urls import _inside

__all__ = ["PANEL_DIST_PARTS", "BOKEH_JS", "copy_panel_assets"]

# What of Panel's dist/ the site serves: the JS, the CSS its components ask for at run
# time, the spinner/icon assets, the design themes and the ES-module shim.
PANEL_DIST_PARTS = ("panel.min.js", "css/", "assets/", "bundled/theme/", "bundled/reactiveesm/")
BOKEH_JS = ("bokeh", "bokeh-gl", "bokeh-widgets", "bokeh-tables", "bokeh-mathjax", "bokeh-api")


def _copy_panel_dist(dist_dir, dest):
    """The parts of Panel's dist/ the pages use (JS, CSS, assets, themes, the ES-module shim)."""
    src = Path(dist_dir)
    for part in PANEL_DIST_PARTS:
        p = src / part
        if part.endswith("/"):
            if not p.is_dir():
                raise BuildError(f"Panel's {p} is missing")
            for f in sorted(p.rglob("*")):
                if f.is_file() and not f.name.endswith(".map"):
                    out = dest / f.relative_to(src)
                    out.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f, out)
        else:
            if not p.is_file():
                raise BuildError(f"Panel's {p} is missing")
            (dest / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dest / part)


def _copy_bokeh_js(dest, version, names):
    import bokeh

    static = Path(bokeh.__file__).parent / "server" / "static" / "js"
    for name in names:
        src = static / f"{name}.min.js"
        if not src.is_file():
            raise BuildError(f"BokehJS file {src} is missing")
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest / f"{name}-{version}.min.js")


def copy_panel_assets(site, facts, page):
    """Panel's dist/ where the converter points, and the BokehJS files `page` loads; returns BokehJS's base."""
    panel_dist = site / _inside(facts["cdn_dist"])
    _copy_panel_dist(facts["panel_dist_dir"], panel_dist)
    used = sorted(set(n for n in BOKEH_JS if f"release/{n}-{facts['bokeh_version']}" in page))
    _copy_bokeh_js(site / "bokeh", facts["bokeh_version"], used)
    return "./bokeh/"
