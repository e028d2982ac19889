"""The static site's build steps; `python build.py` (the entry point) runs them in order.

    common.py          the repository's paths, BuildError, say(), writing files, the file table
    urls.py            URL-or-folder options: checked, and relative folders as paths in the site
    convert.py         Panel's pyodide-worker conversion of the lab page, and the parts of its worker kept
    dependencies.py    what the lab needs in Pyodide: Pyodide's lock, the packages to load, those to vendor
    wheels.py          reproducible wheels: the lab's, re-wheeled installed packages, the site's wheels/
    panel_assets.py    Panel's and Bokeh's browser files, for a self-hosted PANEL_CDN_ROOT
    pyodide_dir.py     where Pyodide comes from, and the copy of a Pyodide folder (--pyodide-dir)
    missions.py        the missions published: the hub's index, the source files, missions/ in the site
    prerender.py       prerender/: each mission's first view as static HTML + SVG, built in CPython (lab/ui/prerender.py), stamped
    templates.py       static/site/ templates and their {{TOKENS}}
    pages.py           lab.html (Panel's page, patched), index.html (the hub), theme CSS, assets/
    worker.py          lab.js: the site's web worker around Panel's converted program
    service_worker.py  sw.js: what it precaches, under a cache named after the build
    build_info.py      build-info.json: versions, sources, every file's size and sha256

Not part of the lab: it is not in the lab's wheel (wheels.lab_wheel_files packs lab/ only)
nor in the project's pip package (pyproject.toml includes lab* only); it reads the checkout.
Names with a leading underscore are shared between this package's modules only.
"""

__all__ = []
