"""The lab page's first view, rendered at build time in CPython (build.py --> prerender/ID.json).

The static site's loader (static/site/loader.js) draws this document with BokehJS at once,
while the Pyodide worker boots, so a student sees the mission's first simulation in seconds
instead of after the whole runtime has loaded. It is the same document the worker sends
later: `lab_page()` built for `lab.html?mission=ID`, serialized the way Panel's Pyodide
bridge does it (panel.io.pyodide._doc_json: docs_json + render_items + root_ids). The lab is
deterministic (same scenario and seed, identical results in CPython and Pyodide), so the
numbers on the pre-rendered page are the numbers the live page computes.

Only a mission at its starting controls gets one (the address `?mission=ID`, optionally with
`embed=1`: the blog iframe's 700 x 760 layout is its own file). Any other address loads the
normal way; so does a file that is missing, from another build or unreadable (loader.js).

    prerender_document(query) -> {"docs_json", "render_items", "root_ids"} (JSON-ready)
    python -m lab.ui.prerender [--missions DIR] OUT_FILE QUERY ...   (what build.py runs)
"""

import json
import os
import re
import sys

__all__ = ["PRERENDER_FORMAT", "PANEL_ROOT_MARK", "prerender_document", "prerender_name", "write_prerender", "main"]

# Bumped when the file's shape changes; loader.js ignores a file with another format.
PRERENDER_FORMAT = 1
# PANEL_CDN_ROOT while pre-rendering: the site's Panel assets have no absolute address at build
# time, so the document names this one and loader.js puts the page's own in its place (the
# worker sets PANEL_CDN_ROOT to the absolute URL of the same folder: the same stylesheets).
PANEL_ROOT_MARK = "https://stf-panel-cdn-root.invalid/"


def prerender_name(mission_id, embed=False):
    """The file a page's pre-render is written to (relative to the site): prerender/ID[.embed].json."""
    return f"prerender/{mission_id}{'.embed' if embed else ''}.json"


def _location(query):
    """What the browser sends as window.location for lab.html?QUERY (only what the lab reads)."""
    search = "?" + query if query else ""
    return {"pathname": "/lab.html", "search": search, "hash": "", "href": "http://localhost/lab.html" + search,
            "protocol": "http:", "hostname": "localhost", "port": "", "host": "localhost"}


def _build_time_status(text):
    """The status line without the run's wall-clock time (the one thing not the same on every
    build, nor the same as the browser's): the live page shows its own."""
    text = re.sub(r' data-run-ms="[^"]*"', "", text)
    return re.sub(r"simulated in [\d,.]+ ms", "simulated in advance", text)


def prerender_document(query, missions_dir=None):
    """lab_page() for lab.html?QUERY, serialized like the worker's first `render` message.

    One page per process: Panel keeps per-document state (pn.state) that a second page in the
    same interpreter would share, and the worker builds exactly one page too.
    """
    from bokeh.document import Document
    from bokeh.embed.util import standalone_docs_json_and_render_items
    from bokeh.settings import settings as bk_settings
    from panel.io.document import MockSessionContext
    from panel.io.state import set_curdoc, state
    from panel.util import edit_readonly

    from . import app as app_module
    from .page_bridge import guard_location

    bk_settings.simple_ids.set_value(True)  # readable, deterministic ids (the live page has its own)
    doc = Document()
    doc._session_context = lambda: MockSessionContext(document=doc)
    with set_curdoc(doc):
        state.curdoc = doc
        guard_location()
        loc = state.location
        if loc is not None:
            with edit_readonly(loc):
                loc.param.update({k: v for k, v in _location(query).items() if k in loc.param})
        lab = app_module.lab_app(missions_dir)
        # What the live page shows once its first run is in (its canvas, then its metrics and
        # stars, then the plots: each its own patch, from pn.state.onload and timers): all of
        # it now, and the timers cancelled.
        lab._run_now()
        if getattr(lab, "_finish_pending", None) is not None:
            lab._finish_now()
        lab._update_plots()
        for name in ("_pending", "_finish_pending", "_plots_pending"):
            timer = getattr(lab, name, None)
            if timer is not None:
                timer.stop()
        lab.status.object = _build_time_status(lab.status.object)
        lab.view.servable(title="Split the Fleet")
        if doc in state._templates and doc not in state._templates[doc]._documents:
            template = state._templates[doc]
            template.server_doc(title=template.title, location=True, doc=doc)
        docs_json, render_items = standalone_docs_json_and_render_items(doc.roots, suppress_callback_warning=True)
    return {
        "format": PRERENDER_FORMAT,
        "docs_json": docs_json,
        "render_items": [item.to_json() for item in render_items],
        "root_ids": [m.id for m in doc.roots],
    }


def _canonical(data, query):
    """Fixed ids where Bokeh draws random ones (document id, target elements), so a build is
    byte-reproducible; loader.js maps the roots onto its own elements anyway."""
    (docid, doc), = data["docs_json"].items()
    item, = data["render_items"]
    fixed = "stf-prerender"
    item["docid"] = fixed
    item["roots"] = {root: f"stf-pre-{i + 1}" for i, root in enumerate(data["root_ids"])}
    data["docs_json"] = {fixed: doc}
    data["query"] = query
    return data


def write_prerender(out_file, query, missions_dir=None):
    """One page's pre-render, as compact JSON. Keys keep Bokeh's order: a model is defined where
    it first appears and referenced after, so sorting the keys would break the document."""
    data = _canonical(prerender_document(query, missions_dir), query)
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    os.makedirs(os.path.dirname(os.path.abspath(out_file)), exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as f:
        f.write(text)


def main(argv=None):
    """python -m lab.ui.prerender [--missions DIR] OUT_FILE QUERY [OUT_FILE QUERY ...]

    Panel and the lab are imported once; each page is built in a forked child (where the
    platform forks) so no page sees another's Panel state.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    missions_dir = None
    if argv[:1] == ["--missions"] and len(argv) > 1:
        missions_dir, argv = argv[1], argv[2:]
    if not argv or len(argv) % 2:
        print("usage: python -m lab.ui.prerender [--missions DIR] OUT_FILE QUERY [OUT_FILE QUERY ...]", file=sys.stderr)
        return 2
    pairs = list(zip(argv[0::2], argv[1::2]))
    if not hasattr(os, "fork") or len(pairs) == 1:
        if len(pairs) > 1:
            print("lab.ui.prerender: one page per process on this platform", file=sys.stderr)
            return 2
        write_prerender(*pairs[0], missions_dir)
        return 0
    import panel  # noqa: F401  (imported once, before the forks)

    from . import app  # noqa: F401
    for out_file, query in pairs:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                write_prerender(out_file, query, missions_dir)
                code = 0
            except BaseException:  # the child must never return into the parent's loop
                import traceback
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            print(f"lab.ui.prerender: {query!r} failed", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
