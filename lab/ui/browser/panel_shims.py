"""Panel behaviour the lab adjusts so the same pages run under `lab serve` and in Pyodide.

`escape_without_nh3`: Panel's ReactiveHTML components (the lab's `pn.FlexBox` layouts)
pass their string parameters through `panel.util.HTML_SANITIZER`, which imports `nh3`
the first time it cleans. `nh3` is compiled Rust with no build for Pyodide, so in the
browser that import fails and the page never renders. Where `nh3` is missing, the
sanitizer escapes instead: stricter than cleaning (no markup survives at all), and the
only strings the lab gives it are layout values such as "wrap" or "14px", which escaping
leaves alone. Mission text never goes this way: lab/ui/words/mission_text.py renders it.

`one_patch_per_update`: in Pyodide, Panel sends the page one message per document event
(panel.io.pyodide._link_docs_worker's `pysync`), so one simulation run, which changes
some thirty properties under a single `pn.io.hold()`, became thirty messages, each
serialized against every model of the document in the worker and applied with its own
re-render on the page. The replacement queues the events of one Python turn and sends
them as one patch when the worker's event loop next runs (Bokeh's patch message is a list
of events, applied in order). Under `lab serve` nothing changes. `PagePatches` does the
batching, and applies a patch from the page only after the turn's waiting events have gone;
`encode_patch` orders a patch's events so that the page meets each model before a change
to it. Their docstrings say how Bokeh broke each (the lab failed to draw, at random).

`Html`: the lab's `pn.pane.HTML`. When Panel's HTML pane gets a new `object` it sends the
model all of its properties again, and its stylesheets are rebuilt as new Bokeh models each
time (panel.theme's `_patch_modifiers`): every changed pane put three new stylesheet models
in the patch, the page built them and restyled the pane, for the same CSS. `Html` sends
the new text alone (its other parameters still update as Panel's own do): 0.75 ms -> 0.07
ms a change in CPython.

`IntSlider`, `FloatSlider`: Panel's sliders with `set_value`, which moves the slider from
Python and keeps its `value_throttled` (the value at release, which the lab acts on) in step,
here and on the page. Panel never sends `value_throttled` to the page and never changes it
when `value` is set from Python, so after the state moved a slider (Back to the start, the
browser's Back, a shared link) both sides still held the old release value, and a student who
dragged back to it changed nothing the lab could see: the slider said 5 GPUs, the fleet ran 4.
And `answer_page`, which sends the page both values as they stand here, changed or not: the
lab answers every release from the page with it (Controls). A value Python sends the page
(a refused or snapped one sent back, a reset) can cross a newer one the page has already
sent: the page then shows Python's, while Python, taking the newer one, finds nothing to send,
as its slider already holds it. Mission 03's link, keyed 31.25 -> 25 -> 18.75 faster than the
lab answered: the page sent 25.000000000000004, the lab sent back its grid's 25, which reached
the page after 18.75 had left; the slider showed 25 while 18.75 ran. So every release is
answered, after whatever Panel still had to write (it queues a widget's update while the
socket is busy, and writes it later), with the values the slider holds by then: the last word
the page gets is the value of the last change the lab took.

`skip_busy_tracking`: Panel marks `pn.state.busy` around every widget event from the page,
for a template's busy spinner, through a counter whose every update rewrites the flags of
each of `pn.state`'s parameters several times over (edit_readonly): about half of what a
slider's change cost in Python before the lab's own callback ran (5.8 ms profiled in CPython).
The lab has no template and shows its own busy status (LabState.busy), so it skips that.

`one_model_walk`: Bokeh re-walks every model of a document (the lab page has about 600, 43 ms in
CPython) each time a model joins it outside a freeze of its model set, and once at the end of
every freeze. The plots' first patch, which puts three new figures in their panes and gives them
data, walked the page four times: 170 of that patch's 390 ms under `lab serve`. Under one freeze
it is walked once. Only for changes that add models: a freeze of a patch that adds none costs a
walk that would not have happened.
"""

import asyncio
import contextlib
import functools
import html
import importlib
import sys

import panel as pn
import param

__all__ = ["escape_without_nh3", "encode_patch", "one_patch_per_update", "one_model_walk", "skip_busy_tracking", "Html",
           "IntSlider", "FloatSlider"]


ANSWER_RETRY_MS = 5  # a slider's answer waits this long at a time for Panel's queued writes...
ANSWER_TRIES = 400  # ...this many times at most (2 s), then goes anyway


class _ReleaseValueInStep:
    """A slider whose value set from Python is also its release value, on both sides (module docstring)."""

    def set_value(self, value):
        with param.edit_constant(self):
            self.param.update(value=value, value_throttled=value)
        # Bokeh's `value_throttled` is read-only in Python and Panel never sends it, so it is set
        # as the page would set it, marked as Python's own change (`_changing`) so that Panel does
        # not take it back as a change from the page.
        for ref, (model, _) in list(self._models.items()):
            changing = self._changing.setdefault(ref, [])
            changing.append("value_throttled")
            try:
                model.set_from_json("value_throttled", value)
            finally:
                if "value_throttled" in self._changing.get(ref, []):  # no watcher took the mark
                    self._changing[ref].remove("value_throttled")
                if not self._changing.get(ref, True):
                    del self._changing[ref]

    def answer_page(self):
        """Send the page this slider's value and release value as the model holds them, even
        where they have not changed here (module docstring). Sent as Bokeh sends a change,
        without running Python's own watchers: nothing changes on this side.

        Under `lab serve` the answer goes on a later turn of the loop, once Panel has written
        the messages it queued (Panel defers a widget's update while the socket is busy, so a
        reply queued before could reach the page after one sent directly), and it carries the
        values as they are then: the newest, whatever changed in between. One waits per slider."""
        for model, _ in list(self._models.values()):
            doc = model.document
            if doc is None:
                continue
            if doc.session_context is None:  # not served (Pyodide's one ordered patch stream, tests)
                _send_values(model)
            elif model.id not in self._answers_waiting:
                self._answers_waiting.add(model.id)
                doc.add_next_tick_callback(functools.partial(self._answer_when_written, model, ANSWER_TRIES))

    @property
    def _answers_waiting(self):
        waiting = self.__dict__.get("_stf_answers_waiting")
        if waiting is None:
            waiting = self.__dict__["_stf_answers_waiting"] = set()
        return waiting

    def _answer_when_written(self, model, tries):
        from panel.io.document import _WRITE_BLOCK, _WRITE_MSGS

        doc = model.document
        if doc is None:
            self._answers_waiting.discard(model.id)
            return
        if tries > 0 and (doc in _WRITE_MSGS or doc in _WRITE_BLOCK):  # Panel still has messages to write
            doc.add_timeout_callback(functools.partial(self._answer_when_written, model, tries - 1), ANSWER_RETRY_MS)
            return
        self._answers_waiting.discard(model.id)
        _send_values(model)


def _send_values(model):
    for attr in ("value", "value_throttled"):
        current = getattr(model, attr)
        model.document.callbacks.notify_change(model, attr, current, current)


class IntSlider(_ReleaseValueInStep, pn.widgets.IntSlider):
    pass


class FloatSlider(_ReleaseValueInStep, pn.widgets.FloatSlider):
    pass


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


@contextlib.contextmanager
def one_model_walk(doc):
    """Within this block, models joining `doc` (None: no document, as in tests) are found in one
    walk of it, at the block's end; inside `pn.io.hold()`, so before the held events are sent."""
    if doc is None:
        yield
        return
    with doc.models.freeze():
        yield


# The events that name their model by reference only (`model.ref`): the page must have met
# the model before, in an earlier patch or earlier in this one.
_EVENTS_BY_REFERENCE = ("ModelChanged", "ColumnDataChanged", "ColumnsStreamed", "ColumnsPatched")


def _named_model(event):
    return event.model if getattr(event, "kind", None) in _EVENTS_BY_REFERENCE else None


def encode_patch(doc, events):
    """Bokeh's patch message for `events` (as Panel's _process_document_events), each event
    placed after the definition of the model it names; returns (patch JSON, serializer).

    Under a hold, Bokeh combines a change into the earlier event for the same property, so
    the event that brought a new model may end up before it (or lose it, the model gone
    again) while a change to that model stays where it was: the page, decoding in order,
    met a reference it never had ("reference ... isn't known") and the lab was not drawn.
    Here a change to a model not yet defined waits until it is; a change to a model no
    longer in the document, which the page never got, is dropped."""
    from bokeh.core.serialization import Serializer
    from bokeh.protocol.messages.patch_doc import PatchJson

    serializer = Serializer(references=doc.models.synced_references)
    encoded, waiting = [], list(events)
    while waiting:
        later = []
        for event in waiting:
            model = _named_model(event)
            if model is None or serializer.has_ref(model):
                encoded.append(serializer.encode(event))
            else:
                later.append(event)
        if len(later) == len(waiting):
            break
        waiting = later
    for event in waiting:
        if event.model.id in doc.models:  # in the document yet never sent: a change would be lost
            print(f"Split the Fleet: a change to {event.model!r}.{getattr(event, 'attr', '')} was not sent "
                  "(the page has never had that model)", file=sys.stderr)
    doc.models.flush_synced(lambda model: not serializer.has_ref(model))
    return PatchJson(events=encoded), serializer


class PagePatches:
    """The worker's side of the page link (one_patch_per_update): a Python turn's document
    events go to the page as one patch when the event loop next runs (`schedule`), and a
    patch from the page is applied only after the events still waiting have gone.

    Why the second: Bokeh's Document.apply_json_patch marks every model in the document as
    the page's afterwards (its flush_synced gets all of them as the patch's references).
    Models made in the turn before, not yet sent, then went out as bare references the page
    could not resolve, and the static lab failed to draw ("reference ... isn't known") when
    a message from the page came between a turn and its flush."""

    def __init__(self, doc, dispatch, schedule, setter=None):
        self.doc, self.dispatch, self.schedule, self.setter = doc, dispatch, schedule, setter
        self.pending = []

    def link(self):
        self.doc.on_change(self.on_change)

        def apply_json_patch(*args, **kwargs):
            self.flush()
            return type(self.doc).apply_json_patch(self.doc, *args, **kwargs)  # (looked up now: a profiler may wrap it)

        self.doc.apply_json_patch = apply_json_patch

    def on_change(self, event):
        if self.setter is not None and getattr(event, "setter", None) == self.setter:
            return  # the page's own change coming back: it has it already
        if not self.pending:
            self.schedule(self.flush)
        self.pending.append(event)

    def flush(self):
        events, self.pending = self.pending, []
        if not events:
            return
        try:
            self.dispatch(*encode_patch(self.doc, events))
        except Exception:  # a lost patch must show in the console, not vanish in the event loop
            import traceback

            traceback.print_exc()


def one_patch_per_update():
    """In Pyodide, make panel.io.pyodide link the page with one patch per Python turn (idempotent)."""
    import panel.io.pyodide as panel_pyodide

    if getattr(panel_pyodide._link_docs_worker, "_stf_batched", False):
        return
    original = panel_pyodide._link_docs_worker

    def link_docs_worker(doc, dispatch_fn, msg_id=None, setter=None):
        p = panel_pyodide  # Panel's own names (js, pyodide, state, DocumentReady), as its original uses them

        def dispatch(json_patch, serializer):  # as Panel's _process_document_events and pysync
            buffer_map = {buffer.id: p.pyodide.ffi.to_js(buffer.to_bytes()).buffer for buffer in serializer.buffers}
            json_patch = p._serialize_buffers(json_patch, buffers=buffer_map)
            json_patch = p.pyodide.ffi.to_js(json_patch, dict_converter=p._dict_converter)
            buffers = p.js.Map.new(p.js.Object.entries(p.pyodide.ffi.to_js(buffer_map)))
            dispatch_fn(json_patch, buffers, msg_id)

        PagePatches(doc, dispatch, asyncio.get_event_loop().call_soon, setter).link()
        # The rest as Panel's own _link_docs_worker (panel 1.9.4).
        doc.unhold()
        doc.on_event("document_ready", p.functools.partial(p.state._schedule_on_load, doc))
        doc.callbacks.trigger_event(p.DocumentReady())

    link_docs_worker._stf_batched = True
    link_docs_worker._stf_original = original
    panel_pyodide._link_docs_worker = link_docs_worker
