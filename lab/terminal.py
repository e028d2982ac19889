"""Text bound for a terminal: control characters shown as visible escapes.

File names, mission text and values echoed in errors come from files and the command line;
printed raw, an escape sequence in them could clear the screen, move the cursor or retitle
the window, and fake the lab's own output. `printable` is the one place the command line
makes such text safe to print.
"""

import re

__all__ = ["printable"]

# C0 controls, DEL and the C1 controls (U+0080-U+009F; some terminals act on them as ESC + byte).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BLOCK_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # the same, less newline and tab
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match):
    char = match.group()
    return _NAMED.get(char) or f"\\x{ord(char):02x}"


def printable(text, block=False):
    """`text` with every control character written as an escape (ESC as `\\x1b`).

    A line (the default) escapes newlines and tabs too, so a name cannot start a line of
    its own; a `block` of lines keeps them.
    """
    return (_BLOCK_CONTROL if block else _CONTROL).sub(_escape, str(text))
