"""The lab's browser UI: Panel + Bokeh + numpy views over one state object.

The pages (app.py, hub.py, author/, pages.py, serve.py, prerender.py, site_entry.py) at the top, the state (state.py,
url_state.py, catalog.py), and rooms that say what they hold (each package's docstring):
timeline/, views/, stars/, browser/, runs/, data/, words/. Imports point down, from the
pages through timeline/ and views/ to the state, then runs/, data/ and words/ at the
bottom (tests/ui/test_rooms.py holds the order).

    lab.ui.state      LabState: settings, runs, URL parsing, sweep (no widgets; tested without a browser)
    lab.ui.app        lab_page(): the lab for one mission
    lab.ui.hub        hub_page(): every mission, its stars
    lab.ui.author     author_page(): write, check, play and share a mission
    lab.ui.serve      main(argv): `python -m lab serve`
"""

__all__ = ["hub_page", "lab_page", "LabState"]


def __getattr__(name):  # keep `import lab.ui` cheap: Panel loads only when a page is built
    if name == "lab_page":
        from . import app

        return app.lab_page
    if name == "hub_page":
        from . import hub

        return hub.hub_page
    if name == "LabState":
        from .state import LabState

        return LabState
    raise AttributeError(name)
