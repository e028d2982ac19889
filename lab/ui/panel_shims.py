"""Panel behaviour the lab adjusts so the same pages run under `lab serve` and in Pyodide.

`escape_without_nh3`: Panel's ReactiveHTML components (the lab's `pn.FlexBox` layouts)
pass their string parameters through `panel.util.HTML_SANITIZER`, which imports `nh3`
the first time it cleans. `nh3` is compiled Rust with no build for Pyodide, so in the
browser that import fails and the page never renders. Where `nh3` is missing, the
sanitizer escapes instead: stricter than cleaning (no markup survives at all), and the
only strings the lab gives it are layout values such as "wrap" or "14px", which escaping
leaves alone. Mission text never goes this way: lab/ui/mission_text.py renders it.
"""

import html
import importlib

__all__ = ["escape_without_nh3"]


def _escape(text):
    return html.escape(str(text), quote=True)


def escape_without_nh3():
    """Point Panel's lazy HTML sanitizer at html.escape when nh3 cannot be imported (idempotent)."""
    from panel.util import HTML_SANITIZER

    if HTML_SANITIZER._sanitize is not None:
        return  # already chosen (nh3 loaded, or this shim ran)
    try:
        importlib.import_module("nh3")  # as Panel's first clean would; here only to learn whether it can
    except ImportError:
        HTML_SANITIZER._sanitize = _escape
