"""What the lab page's address carries, read without trusting a value: the control
settings, `hide`, `pin`, and the notes for what was ignored.

`parse_search` cuts a query string to its first MAX_QUERY_CHARS characters and
MAX_QUERY_FIELDS parameters; `parse_settings` checks each value against the mission's
controls; anything bad falls back to the mission's start with a note (HTML-escaped,
short: `shown_value`). LabState (state.py) reads an address through these and writes one
back (`LabState.query`).
"""

import html
import math
import re
import urllib.parse

from lab.core.errors import LabError
from lab.core.mission_link import MAX_CODE_CHARS
from lab.core.missions import CONTROL_PATHS, CONTROL_SPECS

from .words.control_words import format_value

RESERVED_PARAMS = ("mission", "draft", "embed", "t", "hide", "pin")  # query keys that are not control settings
# Panels a classroom link may hide (`hide=plots,brief,gpus`), besides any control of CONTROL_SPECS.
HIDE_PANELS = ("brief", "controls", "legend", "canvas-overview", "metrics", "stars", "progress", "plots")
# Names in one `hide` list (the rest are ignored with a note): every panel and control once,
# so a link that hides them all still works as the controls grow.
MAX_HIDE = len(HIDE_PANELS) + len(CONTROL_SPECS)
MAX_QUERY_CHARS = 200_000  # longer query strings are cut before parsing (browsers allow ~2 MB)
MAX_QUERY_FIELDS = 64  # ... and only this many parameters are read (query_note says so)
MAX_UNKNOWN_NOTES = 5  # parameters that are no setting get a note each up to this many, then one for the rest
MAX_VALUE_CHARS = 256  # each value is cut to this before the lab parses it (none is valid longer)...
MAX_DRAFT_CHARS = MAX_CODE_CHARS + 1  # ... but a shared mission (`draft`), cut one past its bound: "too long", not "damaged"
MAX_SHOWN = 40  # characters of a bad value echoed back in a note
INT_RE = re.compile(r"[+-]?\d{1,12}", re.ASCII)  # these validate whole values: fullmatch
FLOAT_RE = re.compile(r"[+-]?(\d{1,12}(\.\d{0,12})?|\.\d{1,12})([eE][+-]?\d{1,3})?", re.ASCII)


def short_text(exc, limit=300):
    """`exc` (or any value) as text of at most `limit` characters."""
    text = str(exc)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_value(raw):
    """A bad value as it may appear in a note: short and HTML-escaped."""
    text = str(raw)
    if len(text) > MAX_SHOWN:
        text = text[: MAX_SHOWN - 1] + "…"
    return html.escape(text, quote=True)


def _query_text(search):
    return search[1:] if search.startswith("?") else search


def parse_search(search):
    """'?a=1&b=x' -> {"a": "1", "b": "x"} (raw strings; the first of repeated keys wins).

    Reads the first MAX_QUERY_CHARS characters and MAX_QUERY_FIELDS parameters (query_note
    says when an address had more)."""
    if not isinstance(search, str):
        return {}
    fields = [f for f in _query_text(search)[:MAX_QUERY_CHARS].split("&") if f][:MAX_QUERY_FIELDS]
    out = {}
    for key, value in urllib.parse.parse_qsl("&".join(fields), keep_blank_values=True):
        key = key[:MAX_VALUE_CHARS]
        out.setdefault(key, value[:MAX_DRAFT_CHARS if key == "draft" else MAX_VALUE_CHARS])
    return out


def is_embed(params):
    """Whether an address's params (parse_search's) ask for the blog iframe's layout (`embed=1`)."""
    return params.get("embed", "").lower() in ("1", "true", "yes")


def query_note(search):
    """The note for an address longer than parse_search reads, or None."""
    if not isinstance(search, str):
        return None
    text = _query_text(search)
    fields = sum(1 for f in text[:MAX_QUERY_CHARS].split("&") if f)
    long, many = len(text) > MAX_QUERY_CHARS, fields > MAX_QUERY_FIELDS
    if long and many:
        return (f"The address is {len(text):,} characters long, with {fields:,} parameters in its first "
                f"{MAX_QUERY_CHARS:,}: the lab read the first {MAX_QUERY_FIELDS} of those and ignored the rest.")
    if long:
        return f"The address is {len(text):,} characters long: the lab read the first {MAX_QUERY_CHARS:,} and ignored the rest."
    if many:
        return f"The address has {fields:,} parameters: the lab read the first {MAX_QUERY_FIELDS} and ignored the rest."
    return None


def parse_value(control, raw):
    """(value, None) or (None, why) for one raw query string value."""
    if control.kind == "choice":
        for choice in control.choices:
            if raw == format_value(choice):
                return choice, None
        options = ", ".join(format_value(c) for c in control.choices)
        return None, f"expected one of {options}"
    text = raw.strip()
    if control.kind == "int":
        if not INT_RE.fullmatch(text):
            return None, "expected a whole number"
        value = int(text)
    else:
        if not FLOAT_RE.fullmatch(text):
            return None, "expected a number"
        value = float(text)
        if not math.isfinite(value):
            return None, "expected a finite number"
    try:
        return control.check(value), None
    except LabError as exc:
        return None, exc.detail


def parse_settings(mission, params):
    """Settings from raw URL params: ({name: value} for the good ones, [notes] for the rest).

    Unknown keys, locked controls and bad values are each reported and ignored; the
    caller starts from the mission's start and applies what survived.
    """
    settings = {}
    notes = []
    unknown = 0
    for key, raw in params.items():
        if key in RESERVED_PARAMS:
            continue
        if key not in CONTROL_PATHS:
            unknown += 1
            if unknown <= MAX_UNKNOWN_NOTES:
                notes.append(f"Ignored <code>{shown_value(key)}</code>: not a setting of the lab.")
            continue
        control = mission.controls.get(key)
        if control is None:
            notes.append(f"Ignored <code>{shown_value(key)}={shown_value(raw)}</code>: this mission keeps {key} locked.")
            continue
        value, why = parse_value(control, raw)
        if why:
            notes.append(
                f"Ignored <code>{shown_value(key)}={shown_value(raw)}</code>: {html.escape(why)}; "
                f"using the mission's start ({shown_value(format_value(control.value(mission.scenario)))})."
            )
            continue
        settings[key] = value
    if unknown > MAX_UNKNOWN_NOTES:
        more = unknown - MAX_UNKNOWN_NOTES
        notes.append(f"Ignored {more} more parameter{'s' if more > 1 else ''} that {'are' if more > 1 else 'is'} "
                     "not a setting of the lab.")
    return settings, notes


def parse_hide(raw):
    """`hide=a,b` -> (names in the lab's order: controls, then panels; [notes] for the names it ignored).

    A name is a control (CONTROL_SPECS, as in the URL) or one of HIDE_PANELS; blanks and
    repeats are skipped, anything else is ignored with a note (escaped, shortened).
    """
    if not isinstance(raw, str):
        return (), []
    wanted = set()
    notes = []
    for i, name in enumerate(p.strip() for p in raw.split(",")):
        if not name:
            continue
        if i >= MAX_HIDE:
            notes.append(f"Ignored the rest of <code>hide</code>: at most {MAX_HIDE} names.")
            break
        if name in CONTROL_SPECS or name in HIDE_PANELS:
            wanted.add(name)
        else:
            notes.append(f"Ignored <code>hide={shown_value(name)}</code>: not a control or a panel the lab can hide "
                         f"(panels: {', '.join(HIDE_PANELS)}; controls by their URL names).")
    order = list(CONTROL_SPECS) + list(HIDE_PANELS)
    return tuple(n for n in order if n in wanted), notes


def fleet_settings(settings):
    """The fleet part of control settings: all but the workload's (the rate), which a twin shares."""
    return {k: v for k, v in settings.items() if not CONTROL_PATHS.get(k, "").startswith("workload.")}


def format_pin(pin, start):
    """A pinned fleet as the `pin` URL value: its values off the mission's start, or "start"."""
    parts = [f"{k}:{format_value(v)}" for k, v in pin.items() if v is not None and v != start.get(k)]
    return ",".join(parts) or "start"


def parse_pin(mission, raw, start):
    """`pin=...` -> (pinned fleet settings or None, [notes]). All or nothing: one bad entry
    ignores the whole pin (a fleet with one setting dropped is not the fleet that was pinned).
    `start`: the settings a pin's unnamed controls take (the mission's start)."""
    base = fleet_settings(start)
    text = raw.strip() if isinstance(raw, str) else ""
    if text == "start":
        return dict(base), []

    def refuse(why):
        return None, [f"Ignored <code>pin={shown_value(raw)}</code>: {html.escape(why)}; nothing is pinned."]

    if not text:
        return refuse("expected start or name:value pairs separated by commas (like layout:colocated,gpus:4)")
    pin = dict(base)
    named = set()
    for entry in text.split(","):
        name, sep, value = entry.strip().partition(":")
        if not sep or not name:
            return refuse(f"{entry.strip()[:MAX_SHOWN]!r} is not name:value")
        if name in named:
            return refuse(f"{name[:MAX_SHOWN]} is named twice")
        named.add(name)
        if name not in CONTROL_PATHS:
            return refuse(f"{name[:MAX_SHOWN]} is not a setting of the lab")
        control = mission.controls.get(name)
        if control is None:
            return refuse(f"this mission keeps {name} locked")
        if name not in base:
            return refuse(f"{name} belongs to the workload, which a pinned fleet shares with the current one")
        parsed, why = parse_value(control, value)
        if why:
            return refuse(f"{name}: {why}")
        pin[name] = parsed
    return pin, []


def carried_note(mission, carried):
    """The sentence for tp controls a layout switch set too (LabState._carry_tp), or ''."""
    if not carried:
        return ""
    names = [f"{mission.controls[n].label or CONTROL_SPECS[n][1]} {format_value(v)}" for n, v in carried.items()]
    return (f"Also set {' and '.join(names)}: the new layout's fleet does not fit otherwise, and those controls "
            "were greyed out before the switch.")
