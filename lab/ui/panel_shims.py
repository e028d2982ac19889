"""Panel behaviour the lab adjusts so the same pages run under `lab serve` and in Pyodide.

`escape_without_nh3`: Panel's ReactiveHTML components (the lab's `pn.FlexBox` layouts)
pass their string parameters through `panel.util.HTML_SANITIZER`, which imports `nh3`
the first time it cleans. `nh3` is compiled Rust with no build for Pyodide, so in the
browser that import fails and the page never renders. Where `nh3` is missing, the
sanitizer escapes instead: stricter than cleaning (no markup survives at all), and the
only strings the lab gives it are layout values such as "wrap" or "14px", which escaping
leaves alone. Mission text never goes this way: lab/ui/mission_text.py renders it.

`one_patch_per_update`: in Pyodide, Panel sends the page one message per document event
(panel.io.pyodide._link_docs_worker's `pysync`), so one simulation run, which changes
some thirty properties under a single `pn.io.hold()`, became thirty messages, each
serialized against every model of the document in the worker and applied with its own
re-render on the page. The replacement queues the events of one Python turn and sends
them as one patch when the worker's event loop next runs (Bokeh's patch message is a list
of events, applied in order). Under `lab serve` nothing changes.

`Html`: the lab's `pn.pane.HTML`. When Panel's HTML pane gets a new `object` it sends the
model all of its properties again, and its stylesheets are rebuilt as new Bokeh models each
time (panel.theme's `_patch_modifiers`): every changed pane put three new stylesheet models
in the patch, the page built them and restyled the pane, for the same CSS. `Html` sends
the new text alone (its other parameters still update as Panel's own do): 0.75 ms -> 0.07
ms a change in CPython.

`skip_busy_tracking`: Panel marks `pn.state.busy` around every widget event from the page,
for a template's busy spinner, through a counter whose every update rewrites the flags of
each of `pn.state`'s parameters several times over (edit_readonly): about half of what a
slider's change cost in Python before the lab's own callback ran (5.8 ms profiled in CPython).
The lab has no template and shows its own busy status (LabState.busy), so it skips that.
"""

import asyncio
import html
import importlib

import panel as pn

__all__ = ["escape_without_nh3", "one_patch_per_update", "skip_busy_tracking", "Html"]


class Html(pn.pane.HTML):
    """pn.pane.HTML whose new `object` reaches the page as its text alone (module docstring).
    The text is what Panel's pane would send (`_transform_object`: escaped for the page,
    which unescapes it); sanitize_html is never set on the lab's panes."""

    def _update(self, ref, model):
        text = self._transform_object(self.object)["object"]
        if model.text != text:
            model.text = text


def _escape(text):
    return html.escape(str(text), quote=True)


def escape_without_nh3():
    """Point Panel's lazy HTML sanitizer at html.escape when nh3 cannot be imported (idempotent)."""
    from panel.util import HTML_SANITIZER

    if HTML_SANITIZER._sanitize is not None:
        return  # already chosen (nh3 loaded, or this shim ran)
    try:
        importlib.import_module("nh3")  # as Panel's first clean would; here only to learn whether it can
    except ImportError:
        HTML_SANITIZER._sanitize = _escape


def skip_busy_tracking():
    """Make Panel's busy counter (pn.state.busy) a no-op for this process (idempotent)."""
    from panel.io.state import state

    state._add_busy_event = state._remove_busy_event = _ignore_busy_event


def _ignore_busy_event(event_id):
    return None


def one_patch_per_update():
    """In Pyodide, make panel.io.pyodide link the page with one patch per Python turn (idempotent)."""
    import panel.io.pyodide as panel_pyodide

    if getattr(panel_pyodide._link_docs_worker, "_stf_batched", False):
        return
    original = panel_pyodide._link_docs_worker

    def link_docs_worker(doc, dispatch_fn, msg_id=None, setter=None):
        p = panel_pyodide  # Panel's own names (js, pyodide, state, DocumentReady), as its original uses them
        pending = []

        def flush():
            try:
                send(pending[:])
            except Exception:  # a lost patch must show in the console, not vanish in the event loop
                import traceback

                traceback.print_exc()
            finally:
                pending.clear()

        def send(events):
            if not events:
                return
            json_patch, buffer_map = p._process_document_events(doc, events)
            json_patch = p.pyodide.ffi.to_js(json_patch, dict_converter=p._dict_converter)
            buffers = p.js.Map.new(p.js.Object.entries(p.pyodide.ffi.to_js(buffer_map)))
            dispatch_fn(json_patch, buffers, msg_id)

        def pysync(event):
            if setter is not None and getattr(event, "setter", None) == setter:
                return  # the page's own change coming back: it has it already
            if not pending:
                asyncio.get_event_loop().call_soon(flush)
            pending.append(event)

        # The rest as Panel's own _link_docs_worker (panel 1.9.4).
        doc.on_change(pysync)
        doc.unhold()
        doc.on_event("document_ready", p.functools.partial(p.state._schedule_on_load, doc))
        doc.callbacks.trigger_event(p.DocumentReady())

    link_docs_worker._stf_batched = True
    link_docs_worker._stf_original = original
    panel_pyodide._link_docs_worker = link_docs_worker
