#!/usr/bin/env python3
"""`python build.py`: the static site. The lab runs entirely in the browser.

    python build.py [--out dist] [--pyodide-base URL_OR_DIR] [--pyodide-dir DIR]
                    [--panel-cdn-root URL_OR_DIR] [--site-url URL] [--quiet]

What lands in OUT (every URL in it is relative, so the folder can be copied to any
static host, at any sub-path):

    index.html              the mission hub: plain HTML + JS, loads instantly, no Python
    lab.html, lab.js        the lab: Panel's pyodide-worker conversion of lab_page(),
                            with a loading screen, error + retry, and a worker that
                            installs everything below from this site
    sw.js                   service worker (scope: this folder), so a second visit works offline
    site.webmanifest        relative scope and start URL (Panel's own assumes scope "/")
    assets/                 CSS, the hub's and loader's JS, icon
    missions/               every mission JSON, schema.json, traces/, index.json (for the hub)
    wheels/                 the lab as a wheel (lab.core + lab.ui + lab/missions) and the
                            pure-Python packages Panel needs that Pyodide does not ship
    panel/                  Panel's JS/CSS and the Panel + Bokeh wheels (PANEL_CDN_ROOT=./panel/)
    bokeh/                  BokehJS
    prerender/              each mission's first view (ID.html, ID.embed.html): static HTML + SVG of
                            its first run, built in CPython; lab.html shows it while Pyodide boots
    build-info.json         versions, sources, and every file's size and sha256

Only Pyodide (the runtime and its packages: numpy, pandas, ...) comes from elsewhere:
its CDN by default, or `--pyodide-base ./pyodide/ --pyodide-dir DIR` for a self-hosted
copy (a classroom without internet). The output is reproducible: the same inputs give
byte-identical files (fixed zip timestamps, sorted entries, no random ids).

The steps live in site_build/ (one module each: conversion, dependencies, wheels, Panel's
assets, the Pyodide folder, missions, pages, the worker, the service worker, build-info);
this file checks the options and runs the steps in order.
"""

import argparse
import html
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent
# Loaded by path (tests, scripts/pyodide_mirror.py) rather than run, its folder may not be on
# sys.path; appended, not prepended, so it shadows nothing (`build` is also PyPA's package).
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

from site_build.build_info import write_build_info  # noqa: E402
from site_build.common import MISSIONS_SRC, BuildError, say  # noqa: E402
from site_build.convert import convert_page  # noqa: E402
from site_build.dependencies import _pyodide_lock, lab_roots, resolve_dependencies  # noqa: E402
from site_build.missions import missions_index, write_missions  # noqa: E402
from site_build.pages import hub_html, write_hub_and_assets, write_lab_page  # noqa: E402
from site_build.panel_assets import copy_panel_assets  # noqa: E402
from site_build.precompile import precompile_site  # noqa: E402
from site_build.prerender import prerender_stamp, write_prerenders  # noqa: E402
from site_build.pyodide_dir import _pyodide_files, copy_pyodide, pyodide_base  # noqa: E402
from site_build.service_worker import write_service_worker  # noqa: E402
from site_build.transfer import gzip_site_wheels, write_gzipped  # noqa: E402
from site_build.urls import _dir_url, _inside, _is_url  # noqa: E402
from site_build.wheels import lab_wheel_files, write_site_wheels, write_wheel  # noqa: E402
from site_build.worker import write_worker  # noqa: E402

__all__ = ["main", "build", "BuildError", "write_wheel", "lab_wheel_files", "lab_roots", "resolve_dependencies",
           "missions_index", "hub_html"]

DEFAULT_PANEL_CDN_ROOT = "./panel/"


def _check_args(args):
    """The options, checked before anything is built: (out, panel_cdn_root, self_host_panel, missions_dir)."""
    out = Path(args.out).resolve()
    if out == REPO or REPO.is_relative_to(out):
        raise BuildError(f"--out {args.out}: would replace the repository")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / "build-info.json").is_file())):
        raise BuildError(f"--out {args.out}: exists and is not an earlier build (no build-info.json); "
                         "choose an empty or new folder")
    if importlib.util.find_spec("lab.ui.app") is None:
        raise BuildError("lab/ui/app.py (lab_page) is missing: the lab page cannot be built")
    panel_cdn_root = _dir_url(args.panel_cdn_root, "--panel-cdn-root")
    self_host_panel = not _is_url(panel_cdn_root)
    if self_host_panel and _inside(panel_cdn_root) is None:
        raise BuildError(f"--panel-cdn-root {panel_cdn_root}: a relative folder must be inside the site (no ..)")

    if args.pyodide_base is not None:
        args.pyodide_base = _dir_url(args.pyodide_base, "--pyodide-base")
    if args.pyodide_dir is not None and not (Path(args.pyodide_dir) / "pyodide.js").is_file():
        raise BuildError(f"--pyodide-dir {args.pyodide_dir}: no pyodide.js there; pass the pyodide/ folder of a "
                         "Pyodide release")
    if args.pyodide_dir is not None and args.pyodide_base is not None and _is_url(args.pyodide_base):
        raise BuildError("--pyodide-dir copies Pyodide into the site, so --pyodide-base must be a folder "
                         f"inside it (like ./pyodide/), not {args.pyodide_base}")

    missions_dir = Path(args.missions)
    if not missions_dir.is_dir():
        raise BuildError(f"--missions {args.missions}: not a folder")
    return out, panel_cdn_root, self_host_panel, missions_dir


def build(args):
    """Build the site into a staging folder next to --out, then swap it in; returns (out, build-info)."""
    out, panel_cdn_root, self_host_panel, missions_dir = _check_args(args)
    missions = missions_index(missions_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=".stf-build-", dir=str(out.parent)))
    work = Path(tempfile.mkdtemp(prefix="stf-convert-"))
    try:
        site = stage / "site"
        site.mkdir()
        info = _build_site(site, work, args, missions_dir, missions, panel_cdn_root, self_host_panel)
        if out.exists():
            shutil.rmtree(out)
        site.rename(out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return out, info


def _build_site(site, work, args, missions_dir, missions, panel_cdn_root, self_host_panel):
    """The steps, in order (the service worker and build-info.json last: they hash the rest)."""
    quiet = args.quiet
    say(quiet, f"converting the lab page with Panel (pyodide-worker, PANEL_CDN_ROOT={panel_cdn_root}) ...")
    page, parts, facts, pyodide_version = convert_page(work, panel_cdn_root)
    args.pyodide_base = pyodide_base(args.pyodide_base, args.pyodide_dir, parts, facts, pyodide_version)

    lock, _ = _pyodide_lock(args, pyodide_version)
    load, closure, vendored = resolve_dependencies(
        lock, lab_roots(facts["panel_version"], facts["bokeh_version"], "pyodide-http" in parts["env_spec"]),
        python=lock.get("info", {}).get("python", "3.13.2"))
    say(quiet, "building wheels ...")
    wheel_urls = write_site_wheels(site, missions_dir, parts, facts, vendored, load, panel_cdn_root, self_host_panel)
    bokeh_base = copy_panel_assets(site, facts, page) if self_host_panel else None
    pyodide_files = _pyodide_files(lock, closure)
    if args.pyodide_dir:
        copy_pyodide(site, args.pyodide_dir, args.pyodide_base, pyodide_files, pyodide_version)
    precompiled = precompile_site(site, pyodide_base=args.pyodide_base, pyodide_self_hosted=bool(args.pyodide_dir),
                                  quiet=quiet, skip=getattr(args, "no_precompile", False))

    gzipped = write_gzipped(site, pyodide_base=args.pyodide_base, pyodide_self_hosted=bool(args.pyodide_dir))
    gzip_site_wheels(site, wheel_urls)
    write_missions(site, missions_dir, missions)
    prerender = None
    if not getattr(args, "no_prerender", False):
        say(quiet, "building each mission's first view (static HTML + SVG) ...")
        stamp = prerender_stamp(site, wheel_urls)
        prerender = {"stamp": stamp, "files": write_prerenders(site, missions_dir, missions, stamp)}
    write_lab_page(site, page, facts, bokeh_base, missions, args.pyodide_base, pyodide_version,
                   prerender_stamp=prerender and prerender["stamp"])
    write_worker(site, parts, pyodide_base=args.pyodide_base, pyodide_version=pyodide_version, load=load,
                 closure=closure, wheel_urls=wheel_urls, panel_cdn_root=panel_cdn_root, gzipped=gzipped)
    write_hub_and_assets(site, missions, pyodide_version)
    build_id = write_service_worker(site, args.pyodide_base, pyodide_version, gzipped)
    return write_build_info(
        site, build_id=build_id, pyodide_version=pyodide_version, pyodide_base=args.pyodide_base,
        pyodide_files=pyodide_files, pyodide_self_hosted=bool(args.pyodide_dir), load=load, facts=facts, parts=parts,
        panel_cdn_root=panel_cdn_root, self_host_panel=self_host_panel, wheel_urls=wheel_urls, missions=missions,
        precompiled=precompiled, prerender=prerender)


def _human(size):
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024


def embed_snippet(site_url, mission_id, title):
    src = f"{site_url}lab.html?mission={mission_id}&embed=1"
    return (f'<iframe src="{html.escape(src)}" title="Split the Fleet: {html.escape(title)}"\n'
            '        width="100%" height="760" style="border:1px solid #dde2ea;border-radius:8px;max-width:980px"\n'
            '        loading="lazy" allow="fullscreen"></iframe>')


def build_parser():
    p = argparse.ArgumentParser(
        prog="python build.py",
        description="Build the static site: the mission hub, the lab running in Pyodide, the missions and the lab wheel.")
    p.add_argument("--missions", default=str(MISSIONS_SRC), metavar="DIR",
                   help="the missions folder to publish (default: the repo's missions/)")
    p.add_argument("--out", default="dist", help="output folder (default: dist); replaced only if it is an earlier build")
    p.add_argument("--pyodide-base", default=None, metavar="URL_OR_DIR",
                   help="where Pyodide and its packages come from: a URL, or a folder relative to the site "
                        "(default: the CDN URL Panel's converter pins; ./pyodide/ with --pyodide-dir)")
    p.add_argument("--pyodide-dir", default=None, metavar="DIR",
                   help="a downloaded Pyodide release folder to copy into the site (only the files the lab needs)")
    p.add_argument("--no-precompile", action="store_true",
                   help="serve Python as source, not pre-compiled .pyc (the lab loads about 2x slower; "
                        "for debugging the build)")
    p.add_argument("--no-prerender", action="store_true",
                   help="no pre-rendered first views (prerender/): the lab page shows only its loading screen "
                        "until Pyodide has built the lab")
    p.add_argument("--panel-cdn-root", default=DEFAULT_PANEL_CDN_ROOT, metavar="URL_OR_DIR",
                   help="PANEL_CDN_ROOT: where Panel's JS/CSS and the Panel/Bokeh wheels come from "
                        f"(default: {DEFAULT_PANEL_CDN_ROOT}, copied into the site; a URL such as "
                        "https://cdn.holoviz.org/panel/ uses Panel's and Bokeh's CDNs instead)")
    p.add_argument("--site-url", default="https://example.org/split-the-fleet/", metavar="URL",
                   help="where the site will be hosted, only for the printed embed snippet")
    p.add_argument("--quiet", action="store_true", help="print only the summary line")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        out, info = build(args)
    except BuildError as exc:
        print(f"build.py: error: {exc}", file=sys.stderr)
        return 2
    files = {p.relative_to(out).as_posix(): {"size": p.stat().st_size} for p in sorted(out.rglob("*")) if p.is_file()}
    total = sum(f["size"] for f in files.values())
    shown = os.path.relpath(out) if not os.path.relpath(out).startswith("..") else str(out)
    if not args.quiet:
        print(f"wrote {shown}/:")
        width = max(len(_human(f["size"])) for f in files.values())
        for name, f in files.items():
            print(f"  {_human(f['size']):>{width}}  {name}")
    print(f"total: {len(files)} files, {_human(total)} ({total:,} bytes) in {shown}/")
    if not args.quiet:
        site_url = _dir_url(args.site_url, "--site-url")
        first = info["missions"][0]
        title = json.loads((out / "missions" / "index.json").read_text(encoding="utf-8"))["missions"][0]["title"]
        print()
        print(f"Pyodide {info['pyodide']['version']} from {info['pyodide']['base']}; Panel {info['panel']['version']}, "
              f"Bokeh {info['bokeh']['version']} from {info['panel']['cdn_root']}")
        print(f"Try it: python -m http.server --directory {shown} 8000  ->  http://localhost:8000/")
        print("Embed a mission in a blog post (replace the address with where you host the site):")
        print(embed_snippet(site_url, first, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
