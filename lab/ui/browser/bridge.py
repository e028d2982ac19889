"""`Bridge`: a Panel `JSComponent` that takes no room on the page.

The lab's bridges (the address and keys, the stars' storage, the accessibility helper)
are code on the page, not something to look at: each is a zero-size, fixed component,
so it works the same over `lab serve`'s websocket and in Pyodide's worker.
"""

from panel.custom import JSComponent

__all__ = ["Bridge"]


class Bridge(JSComponent):
    """A JSComponent of size 0 (unless told otherwise)."""

    def __init__(self, **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        params.setdefault("sizing_mode", "fixed")
        super().__init__(**params)
