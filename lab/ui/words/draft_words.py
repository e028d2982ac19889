"""A shared draft mission in the lab (`?draft=CODE`, lab.core.mission_link): opening one from
an address, and what the page says about it.

A draft's text is untrusted exactly as a mission file's: the core checks every field, the
brief goes through mission_text.py, and notes here escape whatever they echo.
"""

import html

from lab.core.errors import LabError
from lab.core.mission_link import is_draft_id, mission_from_link

__all__ = ["open_draft", "is_draft", "DRAFT_KICKER", "DRAFT_MARK", "MAX_LISTED"]

DRAFT_KICKER = "Shared draft mission"
DRAFT_MARK = ("A draft mission shared by link: not one of this lab's missions. Its stars are kept in this browser "
              "under its own name, and a changed draft starts afresh.")
MAX_LISTED = 5  # a broken draft's mistakes named in its note; the rest are counted


def is_draft(mission):
    return is_draft_id(getattr(mission, "id", None))


def open_draft(catalog, code):
    """(the Mission a link code carries, None) or (None, the note saying why it did not open)."""
    try:
        mission, _data = mission_from_link(code, catalog.directory)
    except LabError as exc:
        return None, _broken_note(exc)
    return mission, None


def _broken_note(exc):
    mistakes = list(getattr(exc, "errors", [exc]))
    if len(mistakes) == 1 and mistakes[0].path == "draft":
        return f"This mission link could not be opened: {html.escape(mistakes[0].detail)}."
    shown = "".join(f"<li>{html.escape(str(m))}</li>" for m in mistakes[:MAX_LISTED])
    more = len(mistakes) - MAX_LISTED
    rest = f"<li>and {more} more</li>" if more > 0 else ""
    count = "a mistake" if len(mistakes) == 1 else f"{len(mistakes)} mistakes"
    return (f"The mission in this link has {count}, so it was not opened (whoever shared it can fix "
            f"{'it' if len(mistakes) == 1 else 'them'} on the author page):<ul>{shown}{rest}</ul>")
