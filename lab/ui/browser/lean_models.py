"""Fewer Bokeh models per figure: every model of a page is built, sent and rebuilt on each load.

A page load pays per model: Bokeh builds each one into the session's document, serializes it
for the page, and BokehJS builds it again there (under `lab serve` and in Pyodide alike). Bokeh's
glyph methods give every renderer two models the lab never draws: a nonselection glyph and a
muted glyph, each a copy of the glyph (drawn only while something is selected, or the renderer
muted; the lab's figures have no selection tool and no legend that mutes). And each data source
gets a selection policy of its own, and each renderer's view a filter of its own that keeps
every row: models with no state.

`lean_figure(fig)` leaves those two glyphs to BokehJS ("auto": it makes them from the glyph in
the page, as it already does for the selection and decimated glyphs), points every source of
the figure's renderers at one selection policy of the figure's, and every view at one filter
(one per figure, not one for the whole module: a model belongs to one document, and `lab serve`
holds one per page; the view itself stays the renderer's: BokehJS keeps its rows on it). Call
it before the figure joins a document. tests/ui/test_lean_models.py checks what a page holds.
"""

from bokeh.models import AllIndices, GlyphRenderer, UnionRenderers

__all__ = ["lean_figure"]


def lean_figure(fig):
    """Drop `fig`'s renderers' nonselection and muted glyph models, share one selection policy
    among their sources and one every-row filter among their views; returns `fig`."""
    policy, every_row = UnionRenderers(), AllIndices()
    for renderer in fig.renderers:
        if isinstance(renderer, GlyphRenderer):
            renderer.nonselection_glyph = "auto"
            renderer.muted_glyph = "auto"
            renderer.data_source.selection_policy = policy
            if isinstance(renderer.view.filter, AllIndices):
                renderer.view.filter = every_row
    return fig
