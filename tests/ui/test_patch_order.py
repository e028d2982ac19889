"""lab/ui/panel_shims.encode_patch: every patch the worker sends applies on the page.

The page is played by a second Bokeh document made from the first one's JSON (what the page
draws), applying each patch as BokehJS does: decoded in order, a reference the page has
never had is an error ("reference ... isn't known" in the browser, UnknownReferenceError
here). The bug these tests pin: Bokeh's held events ("combine") put a later change into the
earlier event for the same property, so a change to a new model could come before the model
(or outlive it), and the static lab failed to draw at random in CI."""

import json

import pytest

pytest.importorskip("panel")

from bokeh.core.serialization import Buffer, Serialized, Serializer, UnknownReferenceError  # noqa: E402
from bokeh.document import Document  # noqa: E402
from bokeh.models import Column, Div  # noqa: E402
from bokeh.protocol.messages.patch_doc import PatchJson  # noqa: E402

from lab.ui.browser.panel_shims import PagePatches, encode_patch  # noqa: E402


def _page_of(doc):
    """The page's copy of `doc` as the worker's first render gives it (to_json marks all synced)."""
    return Document.from_json(json.loads(json.dumps(doc.to_json(deferred=False))))


def _apply(page, patch, serializer):
    """The patch through JSON as the page gets it (binary arrays by reference, as Panel sends them)."""
    text = json.dumps(patch, default=lambda value: value.ref if isinstance(value, Buffer) else value)
    page.apply_json_patch(Serialized(json.loads(text), buffers=serializer.buffers))


def _panels_own_encoding(doc, events):
    """What panel.io.pyodide._process_document_events sends (minus the Pyodide conversion)."""
    serializer = Serializer(references=doc.models.synced_references)
    patch = PatchJson(events=serializer.encode(events))
    doc.models.flush_synced(lambda model: not serializer.has_ref(model))
    return patch, serializer


def _held(doc, change):
    """The events `change` makes under a combining hold, as the worker's pysync gets them."""
    events = []
    doc.on_change(events.append)
    doc.hold("combine")
    change()
    doc.unhold()
    doc.callbacks._change_callbacks.pop(events.append, None)
    return events


def _fleet():
    doc = Document()
    kept = Div(text="kept")
    main, side = Column(children=[kept]), Column(children=[])
    doc.add_root(main)
    doc.add_root(side)
    return doc, main, side, kept


def _texts(column):
    return [child.text for child in column.children]


def test_a_model_added_changed_and_replaced_inside_one_hold_applies_on_the_page():
    """The change to the replaced model outlives the event that brought it: Panel's encoding
    names a model the page never got; encode_patch drops that change."""
    def change(doc, main):
        brief = Div(text="new")
        main.children = [main.children[0], brief]
        brief.text = "changed"
        main.children = [main.children[0], Div(text="other")]

    doc, main, _side, _kept = _fleet()
    page = _page_of(doc)
    with pytest.raises(UnknownReferenceError):
        _apply(page, *_panels_own_encoding(doc, _held(doc, lambda: change(doc, main))))

    doc, main, _side, _kept = _fleet()
    page = _page_of(doc)
    _apply(page, *encode_patch(doc, _held(doc, lambda: change(doc, main))))
    assert _texts(page.roots[0]) == _texts(main) == ["kept", "other"]


def test_a_change_to_a_model_whose_definition_moved_later_waits_for_it():
    """The model stays (moved to the other column): its change goes after its new home."""
    moved = {}

    def change(doc, main, side):
        moved["div"] = div = Div(text="new")
        main.children = [main.children[0], div]
        div.text = "changed"
        side.children = [div]
        main.children = [main.children[0]]  # combined into the first event: the div is no longer there

    doc, main, side, _kept = _fleet()
    page = _page_of(doc)
    with pytest.raises(UnknownReferenceError):
        _apply(page, *_panels_own_encoding(doc, _held(doc, lambda: change(doc, main, side))))

    doc, main, side, _kept = _fleet()
    page = _page_of(doc)
    _apply(page, *encode_patch(doc, _held(doc, lambda: change(doc, main, side))))
    assert _texts(page.roots[1]) == ["changed"] and _texts(page.roots[0]) == ["kept"]

    moved["div"].text = "later"  # now the page has it: a plain reference in the next patch
    events = _held(doc, lambda: setattr(moved["div"], "text", "again"))
    patch, serializer = encode_patch(doc, events)
    assert patch["events"] == [{"kind": "ModelChanged", "model": {"id": moved["div"].id}, "attr": "text", "new": "again"}]
    _apply(page, patch, serializer)
    assert _texts(page.roots[1]) == ["again"]


def test_events_already_in_order_keep_their_order():
    doc, main, side, kept = _fleet()
    page = _page_of(doc)
    events = _held(doc, lambda: (setattr(kept, "text", "one"), setattr(main, "visible", False),
                                 setattr(side, "children", [Div(text="x")])))
    patch, serializer = encode_patch(doc, events)
    assert [(e["model"]["id"], e["attr"]) for e in patch["events"]] == [(kept.id, "text"), (main.id, "visible"), (side.id, "children")]
    _apply(page, patch, serializer)
    assert page.roots[0].children[0].text == "one" and _texts(page.roots[1]) == ["x"]


def _from_page(doc, model, attr, value):
    """A change made on the page (a widget moved) arriving at the worker, as Panel applies it."""
    patch = {"events": [{"kind": "ModelChanged", "model": {"id": model.id}, "attr": attr, "new": value}]}
    doc.apply_json_patch(patch, setter="js")


def test_a_patch_from_the_page_waits_for_the_turn_the_worker_has_not_sent_yet():
    """Bokeh marks every model as the page's once a page patch is applied: a new model of a
    turn still waiting for its flush would then go out as a bare reference."""
    doc, main, _side, kept = _fleet()
    page = _page_of(doc)
    events = []
    doc.on_change(events.append)
    main.children = [kept, Div(text="new")]
    _from_page(doc, kept, "text", "typed")
    with pytest.raises(UnknownReferenceError):
        _apply(page, *encode_patch(doc, [e for e in events if e.setter != "js"]))

    doc, main, _side, kept = _fleet()
    page = _page_of(doc)
    turns, sent = [], []
    patches = PagePatches(doc, lambda patch, serializer: (sent.append(len(patch["events"])), _apply(page, patch, serializer)),
                          turns.append, setter="js")
    patches.link()
    main.children = [kept, Div(text="new")]
    main.visible = False
    assert sent == [] and len(turns) == 1  # waiting for the next turn, as one patch
    _from_page(doc, kept, "text", "typed")  # the page's message comes first
    assert sent == [2]
    for turn in turns:
        turn()
    assert sent == [2]  # nothing twice, and the page's own change not echoed back
    assert _texts(page.roots[0]) == ["kept", "new"] and page.roots[0].visible is False
    assert kept.text == "typed"
    main.children[1].text = "then"  # the page has the model now: later turns refer to it
    for turn in turns[1:]:
        turn()
    assert sent == [2, 1] and _texts(page.roots[0]) == ["kept", "then"]


def _fire_all(app_timers, after_each, limit=40):
    """Run every pending timer, and those they start, one turn each as the page's event loop would."""
    for _ in range(limit):
        pending = [t for t in app_timers.timers if not t.stopped]
        if not pending:
            return
        for timer in pending:
            if not timer.stopped:
                timer.stopped = True
                timer.callback()
                after_each()
    raise AssertionError("the lab's timers never stop")


def _lab_on_a_page(catalog, encode):
    import lab.ui.app as app

    lab = app.LabApp(catalog, "?mission=ui-mixing-hurts")
    doc = Document()
    lab.view.server_doc(doc)
    page = _page_of(doc)
    events = []
    doc.on_change(events.append)

    def send():  # the worker's turn is over: its events go out as one patch
        batch = events[:]
        events.clear()
        if batch:
            _apply(page, *encode(doc, batch))

    return lab, doc, page, send


def test_the_labs_first_runs_under_the_load_hold_apply_on_the_page(catalog, app_timers):
    """In the static site the document stays held from its build until the page has drawn it
    (Panel's init_doc ... _link_docs_worker), so runs that finish before then go out as one
    combined patch; then each turn's changes as their own. The page ends up with what the
    worker has."""
    lab, doc, page, send = _lab_on_a_page(catalog, encode_patch)
    doc.hold("combine")
    lab._run_now()
    _fire_all(app_timers, lambda: None)
    lab._run_now()  # a second run before the page has drawn (a control changed meanwhile)
    _fire_all(app_timers, lambda: None)
    doc.unhold()
    send()
    lab._run_now()
    send()
    _fire_all(app_timers, send)
    texts = 0
    for model in doc.models:  # every model's text on the page is the worker's
        if isinstance(getattr(model, "text", None), str):
            assert page.get_model_by_id(model.id) is not None, model
            assert page.get_model_by_id(model.id).text == model.text
            texts += 1
    assert texts > 10 and lab.state.run_id == 3
