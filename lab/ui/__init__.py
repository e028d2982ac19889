"""The lab's browser UI: Panel + Bokeh + numpy views over one state object.

    lab.ui.state      LabState: settings, runs, URL parsing, sweep (no widgets; tested without a browser)
    lab.ui.app        hub_page(), lab_page()
    lab.ui.serve      main(argv): `python -m lab serve`
"""

__all__ = ["hub_page", "lab_page", "LabState"]


def __getattr__(name):  # keep `import lab.ui` cheap: Panel loads only when a page is built
    if name in ("hub_page", "lab_page"):
        from . import app

        return getattr(app, name)
    if name == "LabState":
        from .state import LabState

        return LabState
    raise AttributeError(name)
