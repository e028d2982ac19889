"""lab/ui/browser/panel_shims.py's `Html`: a changed pane reaches the page as its new text alone."""

import pytest

pn = pytest.importorskip("panel")
from bokeh.document import Document  # noqa: E402

from lab.ui.browser.panel_shims import Html  # noqa: E402
from lab.ui.words.theme import CSS  # noqa: E402


def _changes(pane, text):
    """The document events a new `object` makes, as (model type, attribute) pairs, and the model."""
    doc = Document()
    model = pane.get_root(doc)
    doc.add_root(model)
    doc.hold("collect")  # (events are recorded while held)
    pane.object = text
    events = [(type(e.model).__name__, e.attr) for e in doc.callbacks._held_events]
    doc.unhold()
    return events, model


def test_a_new_object_reaches_the_page_as_panels_own_pane_would_send_it():
    """The same events and text as pn.pane.HTML (without its per-change rebuild of the
    pane's properties), for markup that needs escaping."""
    events, model = _changes(Html("<b>one</b>", stylesheets=[CSS], css_classes=["x"]), "<i>two & 3</i> \"q\"")
    plain_events, plain = _changes(pn.pane.HTML("<b>one</b>", stylesheets=[CSS], css_classes=["x"]), "<i>two & 3</i> \"q\"")
    assert events == plain_events == [("HTML", "text")]
    assert model.text == plain.text != "<i>two & 3</i> \"q\""  # escaped for the page alike
    assert len(model.stylesheets) == len(plain.stylesheets)


def test_an_unchanged_text_sends_nothing_and_other_parameters_still_update():
    pane = Html("same", stylesheets=[CSS])
    events, model = _changes(pane, "same")
    assert events == []
    doc = model.document
    doc.hold("collect")
    pane.visible = False
    pane.css_classes = ["y"]
    changed = {e.attr for e in doc.callbacks._held_events}
    doc.unhold()
    assert {"visible", "css_classes"} <= changed and model.visible is False


def test_a_widget_event_from_the_page_leaves_panels_busy_counter_alone():
    """Without the shim, pn.state.busy turns True and back around the event (Panel's counter)."""
    from panel.io.state import state

    from lab.ui.browser.panel_shims import skip_busy_tracking

    skip_busy_tracking()
    skip_busy_tracking()  # idempotent
    slider = pn.widgets.IntSlider(start=0, end=10, value=1)
    seen, busy = [], []
    slider.param.watch(lambda e: seen.append(e.new), "value")
    watcher = state.param.watch(lambda e: busy.append(e.new), ["busy", "_busy_counter"])
    try:
        slider._process_events({"value": 4})
    finally:
        state.param.unwatch(watcher)
    assert seen == [4] and slider.value == 4  # the change itself still arrives
    assert busy == [] and state.busy is False


def test_a_slider_answers_the_page_with_both_values_even_unchanged_and_without_its_watchers():
    """answer_page: the page's last word for a slider is the value held here (controls.py
    answers every release with it), though nothing changed on this side."""
    from lab.ui.browser.panel_shims import FloatSlider

    slider = FloatSlider(start=6.25, end=50, step=6.25, value=18.75)
    doc = Document()
    model = slider.get_root(doc)
    doc.add_root(model)
    seen = []
    slider.param.watch(lambda *events: seen.extend(e.name for e in events), ["value", "value_throttled"])
    slider.set_value(25.0)
    assert seen == ["value", "value_throttled"] and model.value == model.value_throttled == 25.0
    doc.hold("collect")
    slider.answer_page()
    events = [(e.attr, e.new) for e in doc.callbacks._held_events]
    doc.unhold()
    assert events == [("value", 25.0), ("value_throttled", 25.0)]
    assert seen == ["value", "value_throttled"]  # no watcher ran again
