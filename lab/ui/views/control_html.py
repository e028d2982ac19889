"""The controls' words as HTML, no Panel: why a greyed-out control does nothing and when it
would matter, the list of the settings a mission keeps locked, the tp controls a layout switch
set too, and a slider's notches. The live sidebar (controls.py) and the pre-rendered first
view (prerender.py) show the same lines and notches."""

import html
import math

from lab.core.missions import CONTROL_PATHS, CONTROL_REQUIRES, CONTROL_SPECS, control_applies, instance_size

from ..words.control_words import control_words

__all__ = ["EMBED_CONTROL_FLEX", "LOCK_SVG", "carried_html", "idle_reason", "idle_hint_html", "locked_html",
           "slider_notches"]

# What a greyed-out control waits for, beyond the layout (CONTROL_REQUIRES' field and value).
REQUIRES_WORDS = {("fleet.dispatch", "length_split"): ("routing by length", "length split"),
                  ("model.cost", "roofline"): ("the roofline cost model", "roofline"),
                  ("fleet.prefix_cache", "per_gpu"): ("a per-GPU prefix cache", "per-GPU cache"),
                  ("fleet.prefix_cache", "shared"): ("a shared prefix pool", "shared pool"),
                  ("fleet.kv_policy", "on_demand"): ("KV memory on demand", "KV on demand"),
                  ("fleet.planner.policy", "utilization"): ("GPUs that change roles by utilisation", "planner by utilisation"),
                  ("fleet.planner.policy", "schedule"): ("GPUs that change roles by hand", "planner by hand")}  # (hint, locked list)
EMBED_CONTROL_FLEX = "1 1 220px"  # an embed's controls: two a row when there is room, one in its side column
LOCK_SVG = ('<svg viewBox="0 0 16 16" aria-label="locked" role="img"><path d="M4 7V5a4 4 0 1 1 8 0v2h1v8H3V7h1zm2 0h4V5a2 2 0 1 0-4 0v2z"/></svg>')
# Locked controls at these values are the lab's plain fleet, so the "Locked" list leaves them
# out (a mission about chunking need not list every issue-11 knob at its default).
QUIET_DEFAULTS = {"tp": 1, "prefill_tp": 1, "decode_tp": 1, "power_cap_w": 0, "prefill_power_cap_w": 0,
                  "decode_power_cap_w": 0, "dispatch": "queue", "decode_pick": "most_free_kv",
                  "prefill_chunk_tokens": 0, "long_prefill_tokens": 0, "attention": False, "llm": "llama3-8b", "cost": "linear", "gpu": "h100",
                  "prefill_gpu": "h100", "decode_gpu": "h100", "admission": "off",
                  # no prefix cache; its sizes unset (their defaults, docs/model.md "Prefix caching")
                  "prefix_cache": "off", "prefix_cache_gb": None, "prefix_pool_gb": None,
                  "kv_policy": "reserve", "kv_block_tokens": 16, "planner": "off"}


def idle_reason(name, scenario, short=False):
    """When a control that does nothing in `scenario` would matter: "a split (disaggregated)
    fleet", "routing by length", ... (`short`: "split fleet")."""
    if scenario.fleet.layout not in CONTROL_SPECS[name][2]:
        if "disaggregated" in CONTROL_SPECS[name][2]:
            return "split fleet" if short else "a split (disaggregated) fleet"
        return "colocated fleet" if short else "a colocated fleet"
    words = REQUIRES_WORDS.get(CONTROL_REQUIRES.get(name), ("", ""))
    return words[1] if short else words[0]


def idle_hint_html(scenario, idle):
    """The line under the controls saying when the greyed-out ones matter; `idle`: [(name, label)]
    of the controls that do nothing in `scenario` ("" when none)."""
    if not idle:
        return ""
    by_reason = {}
    for n, label in idle:
        by_reason.setdefault(idle_reason(n, scenario), []).append(label)
    if len(idle) <= 2:
        parts = [f"{' and '.join(html.escape(label) for label in labels)} "
                 f"matter{'s' if len(labels) == 1 else ''} only with {html.escape(why)}"
                 for why, labels in by_reason.items()]
        return f'<span class="stf-lock">Greyed out: {"; ".join(parts)}.</span>'
    parts = [f"with {html.escape(why)}" for why in by_reason]
    return f'<span class="stf-lock">Greyed-out controls matter only {" or ".join(parts)}.</span>'


def _quiet(state, name):
    """A locked control the list leaves out: at the lab's plain default (QUIET_DEFAULTS), or
    waiting for a field (CONTROL_REQUIRES) that is locked at another value, so it never matters."""
    if name in QUIET_DEFAULTS and state.value_of(name) == QUIET_DEFAULTS[name]:
        return True
    need = CONTROL_REQUIRES.get(name)
    if need is None:
        return False
    owner = next((n for n, p in CONTROL_PATHS.items() if p == need[0]), None)
    return owner not in state.mission.controls and not control_applies(name, state.scenario)


def locked_html(state, compact=False):
    """The settings the mission keeps fixed.

    The sidebar lists those of every layout the mission allows, the ones that do not
    matter for the current layout muted and marked: the list then keeps its length when
    the student switches the layout (a sidebar that changes height re-lays out the whole
    page in the browser). `compact` (the embed): one line, a collapsed <details> with
    the settings that matter now, listed in full when opened.
    """
    mission = state.mission
    layouts = mission.controls["layout"].choices if "layout" in mission.controls else (state.scenario.fleet.layout,)
    names = [n for n in CONTROL_SPECS if n not in mission.controls and any(lay in CONTROL_SPECS[n][2] for lay in layouts)
             and not _quiet(state, n)]
    now = [n for n in names if state.applies(n)]
    if not names or (compact and not now):
        return ""

    def pair(n):
        return html.escape(CONTROL_SPECS[n][1]), html.escape(control_words(n, state.value_of(n)))

    if compact:
        pairs = [pair(n) for n in now]
        short = " · ".join(f"{name.split(' (')[0]} <b>{value}</b>" for name, value in pairs)
        return (f'<details class="stf-locked-compact" data-locked="{len(now)}">'
                f'<summary>{LOCK_SVG} <span class="stf-locked-title">Locked:</span> '
                f'<span class="stf-locked-line">{short}</span></summary>'
                '<ul class="stf-lock">' + "".join(f"<li>{name}: <b>{value}</b></li>" for name, value in pairs)
                + "</ul></details>")
    items = []
    for n in now + [n for n in names if n not in now]:
        name, value = pair(n)
        if n in now:
            items.append(f"<li>{LOCK_SVG} {name}: <b>{value}</b></li>")
        else:
            items.append(f'<li class="idle">{LOCK_SVG} {name}: <b>{value}</b> <i>({idle_reason(n, state.scenario, short=True)})</i></li>')
    return ('<div class="stf-section">Locked in this mission</div>'
            f'<ul class="stf-lock stf-locked-list" data-locked="{len(now)}" style="list-style:none;padding:0;margin:2px 0">'
            f'{"".join(items)}</ul>')


def slider_notches(mission, scenario, settings, name):
    """(start, end, step) of a numeric control's slider. A GPU-count slider moves in whole
    instances of its pool's tp: its notches are the control's values that are multiples of tp
    (through the current value). If the current value is not one (a link set it; the spec
    refuses it) or it is the only one, the control's own range stays and the spec's message
    says why a value is refused. A float control without a step moves in hundredths of its range."""
    control = mission.controls[name]
    if control.kind != "int":
        return float(control.min), float(control.max), control.step or (control.max - control.min) / 100.0
    own = (int(control.min), int(control.max), int(control.step or 1))
    size = instance_size(name, scenario)
    value = settings.get(name)
    if size > 1 and isinstance(value, int) and value % size == 0:
        step = own[2] * size // math.gcd(own[2], size)
        lo, hi = value - (value - own[0]) // step * step, value + (own[1] - value) // step * step
        if hi > lo:
            return lo, hi, step
    return own


def carried_html(state):
    """The line saying which greyed-out tp controls a layout switch set too (LabState.carried), or ''."""
    if not state.carried or state.error:
        return ""
    return f'<p class="stf-notes stf-carried" role="status">{html.escape(state.carried)}</p>'
