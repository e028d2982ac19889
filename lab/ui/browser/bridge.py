"""`Bridge`: a Panel `JSComponent` that takes no room on the page.

The lab's bridges (the address and keys, the stars' storage, the accessibility helper)
are code on the page, not something to look at: each is a zero-size, fixed component,
so it works the same over `lab serve`'s websocket and in Pyodide's worker.

One rule for their page code: a message to Python (`model.send_msg`) leaves on a task of its
own (`setTimeout(..., 0)`) when it answers one from Python. On the static site, Panel's page
handler drops everything the page sends while it applies a patch from the worker, and a
`msg:custom` handler runs inside that: an answer sent from it never arrived.
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
