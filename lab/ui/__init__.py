"""The lab's browser UI: Panel + Bokeh + numpy views over one state object.

    lab.ui.state      LabState: settings, runs, URL parsing, sweep (no widgets; tested without a browser)
    lab.ui.app        lab_page(): the lab for one mission
    lab.ui.hub        hub_page(): every mission, its stars
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
