"""Missions: a starting scenario, the knobs a student may move, and the stars to earn.

    m = load_mission("missions/01-mixing-hurts.json")     # or a dict; raises LabError
    m.settings(m.scenario)                               # {"chunk_tokens": 0, "gpus": 4}
    s = m.apply({"chunk_tokens": 512})                   # a new, validated Scenario
    evaluate_stars(m, summarize(simulate(s)))            # [True, False, False]

A mission file is JSON (see missions/schema.json and missions/README.md):
`id`, `title`, `order`, `summary`, `brief`, `scenario`, `controls`, `stars`, `outro`
(and per star a `debrief`).
Every mistake is reported as `LabError(path, message)` naming the field, the bad
value and what is allowed; malformed JSON names the file, line and column.
Nothing here runs a simulation (that is `solver.py`).
"""

import difflib
import json
import json.decoder
import json.scanner
import math
import os
import re
from dataclasses import dataclass, field

from . import fields as F
from .errors import LabError, Mistakes
from .loading import MAX_JSON_BYTES, parse_json, read_text
from .spec import GPU_PRESETS, LLM_PRESETS, Admission, Fleet, Link, Model, Planner, Scenario
from .stars import evaluate_stars, parse_stars
from .workload import resolve_trace_path

__all__ = [
    "CONTROL_PATHS",
    "CONTROL_SPECS",
    "Control",
    "Mission",
    "NONE_AS_ZERO",
    "TP_CHOICES",
    "control_applies",
    "control_value",
    "instance_size",
    "load_mission",
    "load_each",
    "list_missions",
    "mission_file_names",
    "default_missions_dir",
    "parse_mission_text",
]

# Control name -> dotted path of the scenario field it moves.
CONTROL_PATHS = {
    "layout": "fleet.layout",
    "gpus": "fleet.gpus",
    "prefill_gpus": "fleet.prefill_gpus",
    "decode_gpus": "fleet.decode_gpus",
    "chunk_tokens": "fleet.chunk_tokens",
    "link_gbytes_per_s": "fleet.link.gbytes_per_s",
    "link_sharing": "fleet.link.sharing",
    "layerwise": "fleet.link.layerwise",
    "first_token": "fleet.first_token",
    "rate": "workload.rate",
    "prefill_batch_tokens": "fleet.prefill_batch_tokens",
    "tp": "fleet.tp",
    "prefill_tp": "fleet.prefill_tp",
    "decode_tp": "fleet.decode_tp",
    "prefill_gpu": "fleet.prefill_gpu",
    "decode_gpu": "fleet.decode_gpu",
    "power_cap_w": "fleet.power_cap_w",
    "prefill_power_cap_w": "fleet.prefill_power_cap_w",
    "decode_power_cap_w": "fleet.decode_power_cap_w",
    "dispatch": "fleet.dispatch",
    "long_prompt_tokens": "fleet.long_prompt_tokens",
    "long_gpus": "fleet.long_gpus",
    "decode_pick": "fleet.decode_pick",
    "prefill_chunk_tokens": "fleet.prefill_chunk_tokens",
    "long_prefill_tokens": "fleet.long_prefill_tokens",
    "admission": "fleet.admission.reject_when",
    "kv_policy": "fleet.kv_policy",
    "kv_block_tokens": "fleet.kv_block_tokens",
    "planner": "fleet.planner.policy",
    "planner_threshold": "fleet.planner.threshold",
    "plan_at_s": "fleet.planner.schedule.0.at_s",
    "plan_prefill_gpus": "fleet.planner.schedule.0.prefill_gpus",
    "attention": "model.attention",
    "prefix_cache": "fleet.prefix_cache",
    "prefix_cache_gb": "fleet.prefix_cache_gb",
    "prefix_pool_gb": "fleet.prefix_pool_gb",
    "gpu": "model.gpu",
    "llm": "model.llm",
    "cost": "model.cost",
}

# Tensor parallelism is offered in powers of two: an instance spans 1, 2, 4 or 8 GPUs of one
# NVLink domain (the spec allows any tp up to 8; a control offers the sizes servers use).
TP_CHOICES = (1, 2, 4, 8)

# Per control: kind, default label, the layouts it matters for, and for choices every
# allowed value (a mission may offer a subset). Numeric controls need min and max.
CONTROL_SPECS = {
    "layout": ("choice", "Layout", ("colocated", "disaggregated"), Fleet.LAYOUTS),
    "gpus": ("int", "GPUs (colocated)", ("colocated",), None),
    "prefill_gpus": ("int", "Prefill GPUs", ("disaggregated",), None),
    "decode_gpus": ("int", "Decode GPUs", ("disaggregated",), None),
    "chunk_tokens": ("int", "Prefill chunk (tokens; 0 = whole prompt)", ("colocated",), None),
    "link_gbytes_per_s": ("float", "Link bandwidth (GB/s)", ("disaggregated",), None),
    "link_sharing": ("choice", "Link sharing", ("disaggregated",), Link.SHARING),
    "layerwise": ("choice", "Layer-wise KV streaming", ("disaggregated",), (False, True)),
    "first_token": ("choice", "First token counted at", ("disaggregated",), Fleet.FIRST_TOKEN),
    "rate": ("float", "Request rate (req/s)", ("colocated", "disaggregated"), None),
    "prefill_batch_tokens": ("int", "Prefill batch (tokens)", ("colocated", "disaggregated"), None),
    "tp": ("choice", "Tensor parallel (GPUs per instance)", ("colocated",), TP_CHOICES),
    "prefill_tp": ("choice", "Prefill tensor parallel (GPUs per instance)", ("disaggregated",), TP_CHOICES),
    "decode_tp": ("choice", "Decode tensor parallel (GPUs per instance)", ("disaggregated",), TP_CHOICES),
    "prefill_gpu": ("choice", "Prefill GPU type", ("disaggregated",), tuple(GPU_PRESETS)),
    "decode_gpu": ("choice", "Decode GPU type", ("disaggregated",), tuple(GPU_PRESETS)),
    "power_cap_w": ("int", "Power cap (W per GPU; 0 = none)", ("colocated",), None),
    "prefill_power_cap_w": ("int", "Prefill power cap (W per GPU; 0 = none)", ("disaggregated",), None),
    "decode_power_cap_w": ("int", "Decode power cap (W per GPU; 0 = none)", ("disaggregated",), None),
    "dispatch": ("choice", "Routing (which GPU takes a prompt)", ("colocated", "disaggregated"), Fleet.DISPATCH),
    "long_prompt_tokens": ("int", "Long prompts from (tokens)", ("colocated", "disaggregated"), None),
    "long_gpus": ("int", "GPUs kept for long prompts", ("colocated", "disaggregated"), None),
    "decode_pick": ("choice", "Decode GPU for each prompt", ("disaggregated",), Fleet.DECODE_PICK),
    "prefill_chunk_tokens": ("int", "Prefill-pool chunk (tokens; 0 = whole prompt)", ("disaggregated",), None),
    "long_prefill_tokens": ("int", "A long prompt's share of a chunk (tokens; 0 = all of it)", ("colocated", "disaggregated"), None),
    "admission": ("choice", "Early rejection (at arrival)", ("colocated", "disaggregated"),
                  (Admission.OFF,) + Admission.RULES),
    "kv_policy": ("choice", "KV memory", ("colocated", "disaggregated"), Fleet.KV_POLICY),
    "kv_block_tokens": ("int", "KV block (tokens)", ("colocated", "disaggregated"), None),
    "planner": ("choice", "GPUs change roles", ("disaggregated",), Planner.POLICIES),
    "planner_threshold": ("float", "Move a GPU when utilisations differ by more than", ("disaggregated",), None),
    "plan_at_s": ("float", "Hand schedule: change at (s)", ("disaggregated",), None),
    "plan_prefill_gpus": ("int", "Hand schedule: prefill GPUs from then on", ("disaggregated",), None),
    "attention": ("choice", "Attention FLOPs in the roofline", ("colocated", "disaggregated"), (False, True)),
    "prefix_cache": ("choice", "Prefix cache", ("colocated", "disaggregated"), Fleet.PREFIX_CACHES),
    "prefix_cache_gb": ("float", "Prefix cache per GPU (GB of HBM)", ("colocated", "disaggregated"), None),
    "prefix_pool_gb": ("float", "Shared prefix pool (GB of host memory)", ("colocated", "disaggregated"), None),
    "gpu": ("choice", "GPU type", ("colocated",), tuple(GPU_PRESETS)),
    "llm": ("choice", "Model", ("colocated", "disaggregated"), tuple(LLM_PRESETS)),
    "cost": ("choice", "Step cost model", ("colocated", "disaggregated"), Model.COSTS),
}

# Controls whose 0 stands for the field's None: a whole prompt (no chunk budget), no power cap.
NONE_AS_ZERO = ("chunk_tokens", "prefill_chunk_tokens", "long_prefill_tokens", "power_cap_w", "prefill_power_cap_w",
                "decode_power_cap_w")
# Controls that matter only when another field has one value (beyond the layout): the long-prompt
# split only with length_split routing, attention only in the roofline.
CONTROL_REQUIRES = {
    "long_prompt_tokens": ("fleet.dispatch", "length_split"),
    "long_gpus": ("fleet.dispatch", "length_split"),
    "attention": ("model.cost", "roofline"),
    "prefix_cache_gb": ("fleet.prefix_cache", "per_gpu"),
    "prefix_pool_gb": ("fleet.prefix_cache", "shared"),
    "kv_block_tokens": ("fleet.kv_policy", "on_demand"),
    "planner_threshold": ("fleet.planner.policy", "utilization"),
    "plan_at_s": ("fleet.planner.policy", "schedule"),
    "plan_prefill_gpus": ("fleet.planner.policy", "schedule"),
}
# GPU-count controls -> the tp field whose instances they count ("long_gpus": the routed pool's).
# A GPU-count slider stops at 64 (the page's fleet stays drawable), below spec.MAX_GPUS.
MAX_CONTROL_GPUS = 64
GPU_COUNT_CONTROLS = ("gpus", "prefill_gpus", "decode_gpus", "long_gpus", "plan_prefill_gpus")
COUNT_TP = {"gpus": "tp", "prefill_gpus": "prefill_tp", "decode_gpus": "decode_tp", "plan_prefill_gpus": "prefill_tp"}


def _field(scenario, dotted):
    node = scenario
    for part in dotted.split("."):
        if isinstance(node, tuple) and part.isdigit():  # a list's item (fleet.planner.schedule.0)
            node = node[int(part)] if int(part) < len(node) else None
        else:
            node = getattr(node, part, None)
    return node


def control_value(name, scenario):
    """Control `name`'s value in `scenario`, as the control shows it: 0 for a None in
    NONE_AS_ZERO, a pool's GPU type as model.gpu when unset, a colocated size as the
    split's total when unset."""
    fleet = scenario.fleet
    if name in NONE_AS_ZERO:
        return _field(scenario, CONTROL_PATHS[name]) or 0
    if name == "gpus":
        return fleet.gpus if fleet.gpus is not None else fleet.total_gpus
    if name in ("prefill_gpu", "decode_gpu"):
        return getattr(fleet, name) or scenario.model.gpu
    if name == "admission":  # off is no Admission at all
        return fleet.admission.reject_when if fleet.admission is not None else Admission.OFF
    if name == "planner":
        return fleet.planner.policy if fleet.planner is not None else "off"
    return _field(scenario, CONTROL_PATHS[name])


def control_applies(name, scenario):
    """Whether control `name` changes anything in `scenario`: its layout, and CONTROL_REQUIRES."""
    if scenario.fleet.layout not in CONTROL_SPECS[name][2]:
        return False
    need = CONTROL_REQUIRES.get(name)
    return need is None or _field(scenario, need[0]) == need[1]


def instance_size(name, scenario):
    """GPUs per instance of the pool a GPU-count control counts (1 for other controls)."""
    if name == "long_gpus":
        return scenario.fleet.tp if scenario.fleet.layout == "colocated" else scenario.fleet.prefill_tp
    tp_key = COUNT_TP.get(name)
    return getattr(scenario.fleet, tp_key) if tp_key else 1

MISSION_KEYS = ("id", "title", "order", "summary", "brief", "scenario", "controls", "stars", "outro")
# "$schema" may point an editor at missions/schema.json; the loader ignores it.
EDITOR_KEYS = ("$schema",)
ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # the whole id: use fullmatch
MAX_SUMMARY = 200
# The outro (shown once every star is earned): what the mission taught, and where to go next.
MAX_OUTRO = 800
MAX_MISTAKES = 20  # a file's mistakes `lab check` names in one run (more are counted)
# How many values a numeric control may offer (a slider's notches).
MAX_NOTCHES = 100_000


def _on_grid(value, lo, step):
    if step is None:
        return True
    k = (value - lo) / step
    return abs(k - round(k)) <= 1e-9 * max(1.0, abs(k))


def _fmt(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, F.BigNumber) or (isinstance(value, int) and abs(value) >= 10**15):
        return F.describe(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:  # 1e308 is "1e+308", as the CLI writes it
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True)
class Control:
    """One knob the student may move: a choice, or a number in [min, max] in steps."""

    name: str
    path: str
    kind: str  # "choice" | "int" | "float"
    choices: tuple = None
    min: float = None
    max: float = None
    step: float = None
    label: str = ""

    @property
    def layouts(self):
        """The layouts this control has an effect in."""
        return CONTROL_SPECS[self.name][2]

    def applies(self, scenario):
        """Whether the control changes anything for this scenario (its layout, CONTROL_REQUIRES)."""
        return control_applies(self.name, scenario)

    def value(self, scenario):
        """The control's current value in `scenario` (see control_value: 0 = whole prompt, no cap)."""
        node = control_value(self.name, scenario)
        if self.kind == "float" and node is not None:
            return float(node)
        if self.kind == "int" and isinstance(node, float) and node.is_integer():
            return int(node)
        return node

    def field_value(self, value):
        """The scenario field's value for a checked control value (0 -> None in NONE_AS_ZERO)."""
        return None if self.name in NONE_AS_ZERO and value == 0 else value

    def check(self, value, path=None):
        """`value` normalised for this control, or LabError naming the control."""
        where = path or F.join("controls", self.name)
        if self.kind == "choice":
            if isinstance(value, bool) != isinstance(self.choices[0], bool) or value not in self.choices:
                options = ", ".join(_fmt(c) if isinstance(c, bool) else repr(c) for c in self.choices)
                raise LabError(where, f"{F.describe(value)} is not one of {options}")
            return value
        if isinstance(value, F.BigNumber) or (isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**15):
            raise LabError(where, f"{F.describe(value)} is out of range: must be at least {_fmt(self.min)} and at most {_fmt(self.max)}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise LabError(where, f"expected a number, got {F.describe(value)}")
        if isinstance(value, float) and not math.isfinite(value):
            raise LabError(where, f"expected a finite number, got {F.describe(value)}")
        if self.kind == "int":
            if isinstance(value, float):
                if not value.is_integer():
                    raise LabError(where, f"expected a whole number, got {F.describe(value)}")
                value = int(value)
        else:
            value = float(value)
        if value < self.min or value > self.max:
            raise LabError(where, f"{_fmt(value)} is out of range: must be at least {_fmt(self.min)} and at most {_fmt(self.max)}")
        if not _on_grid(value, self.min, self.step):
            raise LabError(where, f"{_fmt(value)} is not a setting of this control: it moves from {_fmt(self.min)} in steps of {_fmt(self.step)}")
        if self.kind == "float" and self.step is not None:  # the grid's own value (as grid() gives it), not
            value = round(self.min + round((value - self.min) / self.step) * self.step, 12)  # a slider's 43.75000000000001
        return value

    def grid(self):
        """Every value the control offers (None for a continuous control without a step)."""
        if self.kind == "choice":
            return list(self.choices)
        if self.step is None:
            return None
        count = int(math.floor((self.max - self.min) / self.step + 1e-9)) + 1
        values = [self.min + i * self.step for i in range(count)]
        if self.kind == "int":
            return [int(round(v)) for v in values]
        return [round(v, 12) for v in values]

    def to_dict(self):
        out = {}
        if self.kind == "choice":
            out["choices"] = list(self.choices)
        else:
            out["min"] = self.min
            out["max"] = self.max
            if self.step is not None:
                out["step"] = self.step
        if self.label != CONTROL_SPECS[self.name][1]:
            out["label"] = self.label
        return out

    @classmethod
    def from_dict(cls, name, data, path):
        if name not in CONTROL_SPECS:
            close = difflib.get_close_matches(name, list(CONTROL_SPECS), n=1, cutoff=0.6)
            close = close or [n for n in CONTROL_SPECS if n.startswith(name[:4])]
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise LabError(path, f"{F.describe(name)} is not a control; {hint}controls are: {', '.join(CONTROL_SPECS)}")
        kind, label, _, all_choices = CONTROL_SPECS[name]
        if kind == "choice":
            F.check_keys(data, path, ("choices", "label"))
            raw = F.read_list(data, "choices", path, default=list(all_choices))
            if not raw:
                raise LabError(F.join(path, "choices"), "offers nothing; list at least one of " + ", ".join(_fmt(c) if isinstance(c, bool) else repr(c) for c in all_choices))
            choices = []
            for i, c in enumerate(raw):
                where = F.join(F.join(path, "choices"), i)
                if isinstance(c, bool) != isinstance(all_choices[0], bool) or c not in all_choices:
                    options = ", ".join(_fmt(a) if isinstance(a, bool) else repr(a) for a in all_choices)
                    raise LabError(where, f"{F.describe(c)} is not one of {options}")
                if c in choices:
                    raise LabError(where, f"{F.describe(c)} is listed twice")
                choices.append(c)
            text = F.read_str(data, "label", path, default=label)
            return cls(name, CONTROL_PATHS[name], kind, choices=tuple(choices), label=text)
        F.check_keys(data, path, ("min", "max", "step", "label"))
        reader = F.read_int if kind == "int" else F.read_number
        lo = reader(data, "min", path)
        hi = reader(data, "max", path)
        if name in GPU_COUNT_CONTROLS and hi > MAX_CONTROL_GPUS:
            raise LabError(F.join(path, "max"), f"{_fmt(hi)} GPUs is more than a mission's slider offers: at most {MAX_CONTROL_GPUS} "
                                                "(a scenario run from the command line may have more)")
        if hi < lo:
            raise LabError(F.join(path, "max"), f"{_fmt(hi)} is below min ({_fmt(lo)})")
        if kind == "int":
            step = F.read_int(data, "step", path, default=1, lo=1)
        else:
            step = F.read_number(data, "step", path, default=None, lo=0, lo_open=True)
        if step is not None:
            if (hi - lo) / step + 1 > MAX_NOTCHES:
                raise LabError(F.join(path, "step"), f"{_fmt(step)} gives over {MAX_NOTCHES:,} settings between {_fmt(lo)} and {_fmt(hi)}; use a larger step")
            if not _on_grid(hi, lo, step):
                raise LabError(F.join(path, "max"), f"{_fmt(hi)} is not reached from min {_fmt(lo)} in steps of {_fmt(step)}")
        text = F.read_str(data, "label", path, default=label)
        return cls(name, CONTROL_PATHS[name], kind, min=lo, max=hi, step=step, label=text)


@dataclass(frozen=True)
class Mission:
    id: str
    title: str
    order: int
    summary: str
    brief: str
    scenario: Scenario
    controls: dict = field(hash=False)  # name -> Control, in the file's order
    stars: tuple
    path: str = None
    outro: str = ""  # Markdown shown when every star is earned ("" = none written; `lab check` requires one)

    # ------------------------------------------------------------ settings

    def settings(self, scenario=None):
        """{control name: value} of this mission's controls in `scenario` (default: the start)."""
        scenario = self.scenario if scenario is None else scenario
        return {name: c.value(scenario) for name, c in self.controls.items()}

    def active_controls(self, scenario=None):
        """The controls that matter for `scenario`'s layout (the UI greys out the rest)."""
        scenario = self.scenario if scenario is None else scenario
        return [c for c in self.controls.values() if c.applies(scenario)]

    def apply(self, settings, base=None):
        """A validated Scenario: `base` (default: the start) with `settings` applied.

        Raises LabError("controls.NAME", ...) for an unknown control, one this mission
        does not let students move, or a value outside the control's range or choices.
        """
        base = self.scenario if base is None else base
        if not isinstance(settings, dict):
            raise LabError("controls", f"expected an object of control settings, got {F.describe(settings)}")
        changes = {}
        for name, value in settings.items():
            where = F.join("controls", str(name))
            if name not in CONTROL_PATHS:
                raise LabError(where, f"unknown control; controls are: {', '.join(CONTROL_PATHS)}")
            control = self.controls.get(name)
            if control is None:
                allowed = ", ".join(self.controls) or "none"
                raise LabError(where, f"this mission does not let students change {name}; it allows: {allowed}")
            changes[control.path] = control.field_value(control.check(value, where))
        if not changes:
            return base
        return base.with_changes(changes)

    # ------------------------------------------------------------ stars

    def evaluate(self, metrics):
        """[earned?] per star."""
        return evaluate_stars(self.stars, metrics)

    def to_dict(self):
        return {
            "id": self.id,
            "title": self.title,
            "order": self.order,
            "summary": self.summary,
            "brief": self.brief,
            "scenario": self.scenario.to_dict(),
            "controls": {name: c.to_dict() for name, c in self.controls.items()},
            "stars": [s.to_dict() for s in self.stars],
            **({"outro": self.outro} if self.outro else {}),
        }

    @classmethod
    def from_dict(cls, data, base_dir="", path=None):
        if not isinstance(data, dict):
            raise LabError("", f"expected a mission object, got {F.describe(data)}")
        schema = data.get("$schema")
        if isinstance(schema, str) and "json-schema.org" in schema and "id" not in data:
            raise LabError("", "this is a JSON Schema (missions/schema.json describes missions), not a mission")
        # Parts that do not depend on one another are each checked, so `lab check` names every
        # mistake of a file in one run; a part that needs a broken one is not checked.
        mistakes = Mistakes(MAX_MISTAKES)
        mistakes.check(lambda: F.check_keys(data, "", MISSION_KEYS + EDITOR_KEYS))
        mid = mistakes.check(lambda: _read_id(data))
        title = mistakes.check(lambda: F.read_str(data, "title", "").strip())
        order = mistakes.check(lambda: F.read_int(data, "order", "", lo=0, hi=1_000_000))
        summary = mistakes.check(lambda: _read_summary(data))
        brief = mistakes.check(lambda: _read_brief(data))
        scenario = mistakes.check(lambda: Scenario.from_dict(F.read_dict(data, "scenario", ""), "scenario", base_dir))
        controls = mistakes.check(lambda: _read_controls(data))
        if None not in (scenario, controls):
            controls = mistakes.check(lambda: _check_controls(controls, scenario))
        stars = mistakes.check(lambda: _read_stars(data))
        if None not in (scenario, controls, stars):
            mistakes.check(lambda: _check_stars_against(stars, scenario, controls))
        if scenario is not None:
            mistakes.check(lambda: _check_trace_file(scenario))
        outro = mistakes.check(lambda: F.read_lines(data, "outro", "", default="", max_chars=MAX_OUTRO).strip())
        mistakes.raise_any()
        return cls(mid, title, order, summary, brief, scenario, controls, stars, path, outro)


def _read_id(data):
    mid = F.read_str(data, "id", "")
    if not ID_PATTERN.fullmatch(mid):
        raise LabError("id", f"{F.describe(mid)} is not a slug: use lowercase letters, digits and single hyphens, like 'mixing-hurts'")
    return mid


def _read_summary(data):
    summary = F.read_str(data, "summary", "").strip()
    if "\n" in summary:
        raise LabError("summary", "must be one line (it is shown on the mission hub); put details in brief")
    if len(summary) > MAX_SUMMARY:
        raise LabError("summary", f"is {len(summary)} characters; keep it to {MAX_SUMMARY} (details go in brief)")
    return summary


def _read_stars(data):
    """The stars (parse_stars names each star's first mistake)."""
    return parse_stars(F.read_list(data, "stars", ""), "stars")


def _read_brief(data):
    """Markdown text, or a list of lines (easier to write in JSON) joined with newlines."""
    return F.read_lines(data, "brief", "")


def _read_controls(data):
    """The controls as written, each control's first mistake named (they need no scenario)."""
    raw = F.read_dict(data, "controls", "")
    if not raw:
        raise LabError("controls", "a mission needs at least one control for the student to move; controls are: " + ", ".join(CONTROL_SPECS))
    controls, mistakes = {}, Mistakes()
    for name, spec in raw.items():
        controls[name] = mistakes.check(lambda: Control.from_dict(name, spec, F.join("controls", name)))
    mistakes.raise_any()
    return controls


def _check_controls(controls, scenario):
    """The controls against the start: each reachable, doing something, valid at its ends."""
    fleet = scenario.fleet
    if "layout" in controls and fleet.layout not in controls["layout"].choices:
        options = ", ".join(repr(x) for x in controls["layout"].choices)
        raise LabError(
            "scenario.fleet.layout",
            f"{fleet.layout!r} is not among controls.layout.choices ({options}): the start must be a setting the student can return to",
        )
    layouts = controls["layout"].choices if "layout" in controls else (fleet.layout,)
    # Every control must do something in some layout the student can reach.
    for name, c in controls.items():
        if not set(c.layouts) & set(layouts):
            reachable = " or ".join(layouts)
            raise LabError(
                F.join("controls", name),
                f"{name} only affects a {' or '.join(c.layouts)} fleet, but this fleet is always {reachable}"
                + ("" if "layout" in controls else " (add a layout control or remove this one)"),
            )
    if "rate" in controls and scenario.workload.trace is not None:
        raise LabError("controls.rate", "the workload replays a trace, which sets its own arrivals; remove the rate control or the trace")
    # Switching to disaggregated needs the split to start from.
    if "disaggregated" in layouts and fleet.layout == "colocated":
        for key in ("prefill_gpus", "decode_gpus"):
            if getattr(fleet, key) is None:
                raise LabError(
                    F.join("scenario.fleet", key),
                    "required field is missing: controls.layout lets the student switch to disaggregated, so the start must say how many "
                    f"{key.split('_')[0]} GPUs that fleet has",
                )
    # The start must be a setting the controls can reach again, and each control's ends valid scenarios.
    for name, c in controls.items():
        value = c.value(scenario)
        where = "scenario." + c.path
        if value is None:
            raise LabError(where, f"required field is missing: controls.{name} needs a starting value")
        if c.kind == "choice":
            if value not in c.choices:
                options = ", ".join(_fmt(x) if isinstance(x, bool) else repr(x) for x in c.choices)
                raise LabError(where, f"{F.describe(value)} is not among controls.{name}.choices ({options}): the start must be a setting the student can return to")
        else:
            if value < c.min or value > c.max:
                raise LabError(
                    where,
                    f"{_fmt(value)} is outside the mission's own range controls.{name} (at least {_fmt(c.min)} and at most {_fmt(c.max)}): "
                    "the start must be a setting the student can return to",
                )
            if not _on_grid(value, c.min, c.step):
                raise LabError(where, f"{_fmt(value)} is not a setting of controls.{name}: it moves from {_fmt(c.min)} in steps of {_fmt(c.step)}")
            # A GPU count need only be whole instances at some tp the mission offers.
            tp_control = controls.get(COUNT_TP.get(name))
            with_tps = [{}] + ([{tp_control.path: t} for t in tp_control.choices] if tp_control else [])
            for end_key in ("min", "max"):
                end = getattr(c, end_key)
                if end == value:
                    continue
                first = None
                for extra in with_tps:
                    try:
                        scenario.with_changes({c.path: c.field_value(end), **extra})
                        break
                    except LabError as exc:
                        first = first or exc
                else:
                    raise LabError(F.join(F.join("controls", name), end_key), f"{_fmt(end)} is not a valid {c.path}: {first.detail}")
    for name in ("chunk_tokens", "prefill_chunk_tokens", "long_prefill_tokens"):
        if name not in controls:
            continue
        c = controls[name]
        for v in (c.min, c.min + (c.step or 1)):
            if 0 < v < 16 and v <= c.max:
                raise LabError(f"controls.{name}.min" if v == c.min else f"controls.{name}.step",
                               f"offers {name} {_fmt(v)}; a chunk is 0 (whole prompt) or at least 16 tokens")
    return controls


# Metrics that count requests served per second: they grow with the request rate.
RATE_METRICS = ("goodput_rps", "goodput_rps_per_gpu", "throughput_tokens_per_s", "requests", "finished")
SLO_METRICS = ("slo_attainment", "served_slo_attainment", "goodput_rps", "goodput_rps_per_gpu")


def _check_stars_against(stars, scenario, controls):
    slo = scenario.slo
    if slo.ttft_s is None and slo.tpot_ms is None and slo.max_gap_ms is None:
        for i, star in enumerate(stars):
            for j, p in enumerate(star.when):
                if p.metric in SLO_METRICS:
                    raise LabError(
                        f"stars[{i}].when[{j}].metric",
                        f"{p.metric} counts requests that meet the SLO, but scenario.slo sets no target (ttft_s, tpot_ms or max_gap_ms), so every finished request meets it",
                    )
    layouts = controls["layout"].choices if "layout" in controls else (scenario.fleet.layout,)
    for i, star in enumerate(stars):
        for j, p in enumerate(star.when):
            if p.metric in ("transfer_p50_ms", "transfer_p99_ms", "util_link", "util_prefill", "util_decode") and "disaggregated" not in layouts:
                raise LabError(f"stars[{i}].when[{j}].metric", f"{p.metric} is only defined for a disaggregated fleet, and this fleet is always colocated, so the star can never be earned")


def _check_trace_file(scenario):
    """The trace exists, is a regular file and lies inside the mission's folder (read at run time)."""
    if scenario.workload.trace is not None:
        resolve_trace_path(scenario.workload.trace, "scenario.workload.trace.path")


# ------------------------------------------------------------------ JSON text

class _DuplicateKey(Exception):
    def __init__(self, key, pos):
        self.key = key
        self.pos = pos


def _strict_decoder():
    """A JSON decoder that rejects an object with the same key twice (json.loads keeps the last)."""
    decoder = json.JSONDecoder()
    # The same number handling as parse_json: huge literals must not raise here either.
    decoder.parse_int = F.JSON_NUMBER_HOOKS["parse_int"]
    decoder.parse_float = F.JSON_NUMBER_HOOKS["parse_float"]
    starts = []

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None, _w=json.decoder.WHITESPACE.match):
        s, end = s_and_end
        starts.append(end - 1)
        try:
            return json.decoder.JSONObject(s_and_end, strict, scan_once, object_hook, pairs_hook, memo, _w)
        finally:
            starts.pop()

    def pairs_hook(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key, starts[-1])
            seen.add(key)
        return dict(pairs)

    decoder.parse_object = parse_object
    decoder.object_pairs_hook = pairs_hook
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder


def _second_key(text, start, key):
    """Where `key` appears the second time among the keys of the object opening at `start`."""
    depth = 0
    seen = 0
    i = start
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            token = text[i:j + 1]
            k = j + 1
            while k < n and text[k] in " \t\r\n":
                k += 1
            if depth == 1 and k < n and text[k] == ":":
                try:
                    is_key = json.loads(token) == key
                except ValueError:
                    is_key = False
                if is_key:
                    seen += 1
                    if seen == 2:
                        return i
            i = j + 1
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                break
        i += 1
    return start


def _line_col(text, pos):
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return line, col


def parse_mission_text(text, name="mission.json"):
    """Mission JSON text -> dict; malformed JSON or a repeated key names the line and column."""
    data = parse_json(text, name)
    try:
        _strict_decoder().decode(text)
    except _DuplicateKey as dup:
        line, col = _line_col(text, _second_key(text, dup.pos, dup.key))
        raise LabError(f"{name}: line {line}, column {col}", f"the key {dup.key!r} appears twice in one object; JSON would silently keep only the last") from None
    except (ValueError, RecursionError):
        pass
    return data


# ------------------------------------------------------------------ loading

def load_mission(source, base_dir=None):
    """A Mission from a file path or a dict (trace paths are relative to the file's folder)."""
    if isinstance(source, Mission):
        return source
    path = None
    if isinstance(source, (str, os.PathLike)):
        path = str(source)
        text = read_text(path, path, MAX_JSON_BYTES)
        data = parse_mission_text(text, os.path.basename(path))
        if base_dir is None:
            base_dir = os.path.dirname(os.path.abspath(path))
        try:
            return Mission.from_dict(data, base_dir, path)
        except LabError as exc:
            exc.file = path  # the field path stays as it is; callers checking many files say which
            raise
    if isinstance(source, dict):
        return Mission.from_dict(source, base_dir or "", None)
    raise LabError("", f"expected a mission file path or object, got {F.describe(source)}")


def default_missions_dir():
    """The repo's top-level missions/ (a checkout) or lab/missions (an installed wheel)."""
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = (
        os.path.normpath(os.path.join(here, "..", "..", "missions")),
        os.path.normpath(os.path.join(here, "..", "missions")),
    )
    for candidate in candidates:
        if os.path.isdir(candidate) and any(n.endswith(".json") and n != "schema.json" for n in os.listdir(candidate)):
            return candidate
    return candidates[0]


def mission_file_names(directory):
    """The mission files of a folder, sorted by name: every *.json but the JSON Schema."""
    return sorted(n for n in os.listdir(directory) if n.endswith(".json") and n != "schema.json")


def load_each(paths):
    """Load every mission file, in the order given: [(path, mission, None) or (path, None, LabError)].

    A file that reuses an earlier file's id fails too: `serve` and `build.py` key missions
    by id, so the second would hide the first.
    """
    out, first_file_of = [], {}
    for path in paths:
        path = str(path)
        try:
            mission = load_mission(path)
            if mission.id in first_file_of:
                raise LabError(f"{os.path.basename(path)}: id", f"{mission.id!r} is also the id of "
                               f"{first_file_of[mission.id]}; mission ids must be unique")
        except LabError as exc:
            out.append((path, None, exc))
            continue
        first_file_of[mission.id] = path
        out.append((path, mission, None))
    return out


def list_missions(directory=None):
    """Every mission in `directory` (default: default_missions_dir()), sorted by (order, id).

    schema.json is skipped. A bad file raises its LabError; two files with one id raise too.
    """
    directory = default_missions_dir() if directory is None else str(directory)
    missions = []
    for _, mission, error in load_each(os.path.join(directory, n) for n in mission_file_names(directory)):
        if error is not None:
            raise error
        missions.append(mission)
    missions.sort(key=lambda m: (m.order, m.id))
    return missions
