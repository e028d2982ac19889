"""A page's figures send no model the lab never draws (lab/ui/browser/lean_models.py): no
nonselection or muted glyph copies, one selection policy and one every-row filter per figure;
a fifth of the page's models fewer (docs/architecture.md, "No model the lab never draws")."""

import pytest

pytest.importorskip("panel")

from bokeh.document import Document  # noqa: E402
from bokeh.models import AllIndices, Glyph, GlyphRenderer, Plot, SelectionPolicy  # noqa: E402
from siblings import sibling  # noqa: E402  (tests/ui is on sys.path: pytest prepends it)

M1 = "ui-mixing-hurts"


def _page_after_its_first_run(catalog, app_timers):
    """The page's document once its first run is shown, its plots included (as a student sees it)."""
    import lab.ui.app as app
    from panel.io.state import set_curdoc

    lab = app.LabApp(catalog, f"?mission={M1}")
    doc = Document()
    with set_curdoc(doc):
        lab.view.server_doc(doc)
        lab._run_now()
        sibling("test_run_halves")._finish_turns(lab, app_timers)  # (bounded: a second half that never ends fails)
        app_timers.fire(lab._update_plots)
    return doc


def test_every_glyph_in_the_page_is_one_a_renderer_draws(catalog, app_timers):
    doc = _page_after_its_first_run(catalog, app_timers)
    plots = {m.name for m in doc.models if isinstance(m, Plot)}
    assert {"timeline", "overview", "gap_plot", "itl_plot", "sweep_plot"} <= plots  # every figure is in it
    renderers = [m for m in doc.models if isinstance(m, GlyphRenderer)]
    assert len(renderers) >= 20
    drawn = {id(r.glyph) for r in renderers} | {id(r.hover_glyph) for r in renderers if r.hover_glyph is not None}
    copies = [type(m).__name__ for m in doc.models if isinstance(m, Glyph) and id(m) not in drawn]
    assert copies == [], f"glyph models no renderer draws: {copies}"
    assert {(r.nonselection_glyph, r.muted_glyph) for r in renderers} == {("auto", "auto")}


def test_the_sources_of_a_figure_share_one_selection_policy_and_its_views_one_filter(catalog, app_timers):
    doc = _page_after_its_first_run(catalog, app_timers)
    for fig in (m for m in doc.models if isinstance(m, Plot)):
        renderers = [r for r in fig.renderers if isinstance(r, GlyphRenderer)]
        sources = {id(r.data_source): r.data_source for r in renderers}
        policies = {id(s.selection_policy) for s in sources.values()}
        assert len(policies) == 1, f"{fig.name}: {len(policies)} selection policies for {len(sources)} sources"
        filters = {id(r.view.filter) for r in renderers}
        assert len(filters) == 1 and isinstance(renderers[0].view.filter, AllIndices), fig.name
        assert len({id(r.view) for r in renderers}) == len(renderers), f"{fig.name}: a view shared (it holds its rows)"
    drawn = sum(len(fig.renderers) for fig in doc.models if isinstance(fig, Plot))
    assert len([m for m in doc.models if isinstance(m, SelectionPolicy)]) < drawn / 3


def test_a_fifth_of_the_pages_models_are_gone(catalog, app_timers, monkeypatch):
    import lab.ui.timeline.canvas as canvas
    import lab.ui.views.plots as plots

    lean = len(_page_after_its_first_run(catalog, app_timers).models)
    for module in (canvas, plots):
        monkeypatch.setattr(module, "lean_figure", lambda fig: fig)
    app_timers.timers.clear()
    full = len(_page_after_its_first_run(catalog, app_timers).models)
    assert lean <= full * 4 / 5, (lean, full)
