"""A refused change in the student's words: which control, why, and which value works.

The spec refuses a fleet that does not fit with a message about its config paths
("fleet.prefill_gpus: 4 GPUs is not a whole number of instances of prefill_tp = 8 GPUs:
use a multiple of 8"). The page says it with the controls' own labels and values instead:

    Prefill tensor parallel 8 was not applied: 4 Prefill GPUs do not split into instances
    of 8 GPUs. Set Prefill GPUs to 8 first, or choose Prefill tensor parallel 2 or 4.

Why it was refused comes from the core's refusal itself (`LabError.reason` and its `facts`:
the GPU count and instance size, the weights and the GPUs they did not fit); the message's
text is read only for an error raised without them. The fixes are found by trying them
(`mission.apply`): another control the student can move, set first, that lets the refused
value through (the nearest value of each), and the values of the moved control that work
with everything else as it is. The spec's message stays the
page's detail line (LabState.error). Standard library only, like the state.
"""

import html
import re

from lab.core.errors import WEIGHTS_DO_NOT_FIT, WHOLE_INSTANCES, LabError
from lab.core.missions import CONTROL_PATHS, CONTROL_SPECS, control_applies

__all__ = ["refusal_text", "refusal_html", "short_label", "MAX_TRIES"]

MAX_TRIES = 240  # mission.apply calls one refusal may make looking for fixes
MAX_OWN = 3  # values of the moved control named as working, at most
MAX_FIXES = 2  # other controls named as fixes, at most
MAX_PER_CONTROL = 16  # values of one control tried, the nearest to its own first
_PATH_CONTROL = {path: name for name, path in CONTROL_PATHS.items()}
# The message's text, read only for a refusal without the core's reason (LabError.reason).
_INSTANCES = re.compile(r"(\d+) GPUs is not a whole number of instances of \w+ = (\d+) GPUs")
_NO_FIT = re.compile(r"^(\S+) \((\d+) GB of weights\) does not fit on (\d+) (\w+)")


def short_label(mission, name):
    """A control's label without its parenthesis ("Prefill tensor parallel")."""
    control = mission.controls.get(name)
    label = (control.label if control is not None else "") or CONTROL_SPECS.get(name, (None, name))[1]
    return re.sub(r"\s*\([^)]*\)\s*$", "", label) or label


def _join(words, last="or"):
    words = list(words)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def _reason(exc):
    """(reason, facts) of a refusal: the core's own (LabError.reason and .facts), else read
    from its message's text (an error raised without them), else (None, {})."""
    facts = getattr(exc, "facts", None) or {}
    reason = getattr(exc, "reason", None)
    if reason == WHOLE_INSTANCES and {"gpus", "tp"} <= set(facts):
        return reason, facts
    if reason == WEIGHTS_DO_NOT_FIT and {"weights_gb", "tp", "gpu"} <= set(facts):
        return reason, facts
    detail = getattr(exc, "detail", str(exc))
    match = _INSTANCES.search(detail)
    if match:
        return WHOLE_INSTANCES, {"gpus": int(match.group(1)), "tp": int(match.group(2))}
    match = _NO_FIT.search(detail)
    if match:
        return WEIGHTS_DO_NOT_FIT, {"weights_gb": float(match.group(2)), "tp": int(match.group(3)), "gpu": match.group(4)}
    return None, {}


def _why(mission, settings, name, exc, words):
    """The spec's reason in the controls' words, or ''."""
    other = _PATH_CONTROL.get(getattr(exc, "path", ""))
    reason, facts = _reason(exc)
    if reason == WHOLE_INSTANCES and other:
        return f"{facts['gpus']} {short_label(mission, other)} do not split into instances of {facts['tp']} GPUs"
    if reason == WEIGHTS_DO_NOT_FIT:
        tp = facts["tp"]
        return f"the {facts['weights_gb']:.0f} GB of weights do not fit on {tp} {str(facts['gpu']).upper()} GPU{'' if tp == 1 else 's'}"
    if other and other != name and other in settings:
        return f"it does not fit with {short_label(mission, other)} at {words(other, settings[other])}"
    return ""


def _nearest(values, value):
    """`values` by how far each is from `value` (choices in their order when not numbers)."""
    try:
        return sorted(values, key=lambda v: abs(v - value))
    except TypeError:
        return list(values)


def refusal_text(mission, settings, values, exc, words, movable=None):
    """The sentence for a refused change of `values` ({control: value}) from `settings`.

    `exc`: the spec's LabError; `words(name, value)`: a value as its control shows it;
    `movable(name)`: whether the student can move that control now (default: any of the
    mission's controls). Plain text."""
    moved = [(n, v) for n, v in values.items() if settings.get(n) != v]
    if len(moved) != 1 or moved[0][0] not in mission.controls:
        return "Those settings do not fit together, so the controls stay where they were."
    name, value = moved[0]
    label = short_label(mission, name)
    movable = movable or (lambda _n: True)
    tries = [0]

    def works(trial):
        """Whether `trial` runs, with the moved control still mattering in it."""
        if tries[0] >= MAX_TRIES:
            return False
        tries[0] += 1
        try:
            scenario = mission.apply({k: v for k, v in trial.items() if v is not None})
        except LabError:
            return False
        return control_applies(name, scenario)

    def said(other, cand):
        """A value after its control's label: "8", not "8 GPUs" after "Prefill GPUs"."""
        text = words(other, cand)
        unit = short_label(mission, other).split()[-1]
        return text[: -len(unit) - 1] if text.endswith(" " + unit) and text[0].isdigit() else text

    grid = mission.controls[name].grid() or []
    own = []
    for cand in _nearest([c for c in grid if c != value], value)[:MAX_PER_CONTROL]:
        if len(own) < MAX_OWN and works({**settings, name: cand}):
            own.append(cand)
    fixes = []
    for other, control in mission.controls.items():
        if other == name or not movable(other) or len(fixes) >= MAX_FIXES:
            continue
        now = settings.get(other)
        for cand in _nearest([c for c in (control.grid() or []) if c != now], now)[:MAX_PER_CONTROL]:
            if works({**settings, name: value, other: cand}):
                fixes.append(f"set {short_label(mission, other)} to {said(other, cand)} first")
                break
    if own:
        try:
            own.sort()
        except TypeError:
            pass
        fixes.append(f"choose {label} {_join(said(name, v) for v in own)}")
    why = _why(mission, settings, name, exc, words)
    text = f"{label} {said(name, value)} was not applied" + (f": {why}." if why else ".")
    if fixes:
        fix = ", or ".join(fixes)
        text += f" {fix[0].upper()}{fix[1:]}."
    return text


def refusal_html(words, detail):
    """The note where the controls are: the student's sentence, the spec's message folded in a
    details line under it ('' when nothing was refused)."""
    if not detail and not words:
        return ""
    more = (f'<details class="stf-refusal-detail"><summary>Details</summary><code>{html.escape(detail)}</code>'
            '</details>') if detail and words else ""
    return (f'<div class="stf-notes stf-error" role="alert" data-refused="true">'
            f'<span class="stf-refusal">{html.escape(words or detail)}</span>{more}</div>')
