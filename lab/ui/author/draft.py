"""The author page's draft: a mission as the sections an author edits, checked as they type.

    texts = sections_from_mission(data)      # {section key: text}: the page's editors
    verdict = check_draft(texts, base_dir)   # the mission object, the Mission if valid, every mistake by section
    start_work(data, base_dir)               # the start's run, measured (picklable: lab serve's pool runs it)
    check_work(data, base_dir)               # the checker's verdict (lab.core.solver), as `lab check` prints it

The sections follow a mission file's parts: about (id, title, order, summary), the brief,
the workload, the starting fleet, the SLO, the rest of the scenario, the controls, the
stars and the outro. The JSON sections are parsed one by one, so a syntax slip in one names
its line there and the others are still checked: a section that does not parse stands in
with its last good value (or nothing), and only its own slip is reported for it. Every
mistake of the whole mission is named at once (lab.core.missions.Mission.from_dict), each
under the section its field path falls in.

Nothing here touches Panel or the page: tests call it directly.
"""

import dataclasses
import json
import os

from lab.core import LabError
from lab.core.loading import MAX_JSON_BYTES
from lab.core.missions import Mission, parse_mission_text

__all__ = ["Section", "SECTIONS", "SECTION_KEYS", "ABOUT_FIELDS", "Verdict", "sections_from_mission", "mission_from_sections",
           "check_draft", "section_of", "template", "trace_files", "start_work", "check_work", "download_text", "CHECK_BUDGET_S"]

CHECK_BUDGET_S = 20.0  # the checker's time budget in the page (the browser's Python is 2-3x slower than lab check's)


@dataclasses.dataclass(frozen=True)
class Section:
    key: str
    title: str
    kind: str  # "about" (four one-line fields), "text" (Markdown), "json" (a JSON value)
    hint: str


SECTIONS = (
    Section("about", "About", "about", "The id names the mission's file and address; the summary is one line on the hub."),
    Section("brief", "Brief", "text", "What the student reads first, in Markdown: no HTML, links to http(s) only."),
    Section("workload", "Workload", "json", "scenario.workload: the rate, duration and lengths, phases, or a trace."),
    Section("fleet", "Starting fleet", "json", "scenario.fleet: what the student starts from."),
    Section("slo", "Targets (SLO)", "json", "scenario.slo: ttft_s, tpot_ms and optionally max_gap_ms."),
    Section("scenario", "Rest of the scenario", "json", "The scenario's other fields: seed, drain_s, model, link, …"),
    Section("controls", "Controls", "json", "What the student may move, each with its range or choices."),
    Section("stars", "Stars", "json", "Up to three stars, each with a label, its tests (when) and a debrief."),
    Section("outro", "Outro", "text", "Markdown shown once every star is earned."),
)
SECTION_KEYS = tuple(s.key for s in SECTIONS)
ABOUT_FIELDS = ("id", "title", "order", "summary")
_SCENARIO_PARTS = ("workload", "fleet", "slo")  # each a section of its own; "scenario" holds the rest


@dataclasses.dataclass
class Verdict:
    data: dict  # the mission object the sections make (broken sections stood in for)
    mission: Mission = None  # the validated mission, when there is no mistake at all
    errors: dict = dataclasses.field(default_factory=dict)  # section key (or "") -> [message], in the mission's order
    count: int = 0
    slips: tuple = ()  # the JSON sections that do not parse (their last good value stood in)

    @property
    def ok(self):
        return self.mission is not None


def _json_text(value):
    return json.dumps(value, indent=2, ensure_ascii=False)


def _lines_text(value):
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return "" if value is None else str(value)


def sections_from_mission(data):
    """{section key: text} for a mission object (a shipped file, a template, a link's)."""
    data = data if isinstance(data, dict) else {}
    scenario = data.get("scenario") if isinstance(data.get("scenario"), dict) else {}
    texts = {"about": {f: ("" if data.get(f) is None else str(data.get(f))) for f in ABOUT_FIELDS},
             "brief": _lines_text(data.get("brief")), "outro": _lines_text(data.get("outro"))}
    for part in _SCENARIO_PARTS:
        texts[part] = _json_text(scenario.get(part, {}))
    texts["scenario"] = _json_text({k: v for k, v in scenario.items() if k not in _SCENARIO_PARTS})
    texts["controls"] = _json_text(data.get("controls", {}))
    texts["stars"] = _json_text(data.get("stars", []))
    return texts


def _order_value(text):
    text = text.strip()
    if text.lstrip("-").isdigit() and len(text) <= 12:
        return int(text)
    return text  # the core names it: "order: expected a whole number"


def mission_from_sections(texts, fallback=None):
    """(the mission object, {section key: [LabError]} for the JSON sections that do not parse).
    A section that does not parse takes its value from `fallback` (a mission object) if given."""
    fallback = fallback if isinstance(fallback, dict) else {}
    fallback_scenario = fallback.get("scenario") if isinstance(fallback.get("scenario"), dict) else {}
    slips, parsed = {}, {}
    for key in ("workload", "fleet", "slo", "scenario", "controls", "stars"):
        text = texts.get(key, "")
        try:
            if len(text.encode("utf-8")) > MAX_JSON_BYTES:
                raise LabError(key, f"is over {MAX_JSON_BYTES:,} bytes")
            parsed[key] = parse_mission_text(text, key) if text.strip() else None
        except LabError as exc:
            slips[key] = [exc]
            if key == "scenario":
                parsed[key] = {k: v for k, v in fallback_scenario.items() if k not in _SCENARIO_PARTS}
            elif key in _SCENARIO_PARTS:
                parsed[key] = fallback_scenario.get(key)
            else:
                parsed[key] = fallback.get(key)
    about = texts.get("about", {})
    data = {"$schema": "./schema.json"}
    for field in ABOUT_FIELDS:
        value = str(about.get(field, ""))
        data[field] = _order_value(value) if field == "order" else value.strip()
    brief = texts.get("brief", "")
    data["brief"] = brief.split("\n") if "\n" in brief else brief
    rest = parsed["scenario"]
    scenario = {}
    for part in _SCENARIO_PARTS:
        if parsed[part] is not None:
            scenario[part] = parsed[part]
    if isinstance(rest, dict):
        scenario.update({k: v for k, v in rest.items() if k not in _SCENARIO_PARTS})
    elif rest is not None:
        slips.setdefault("scenario", []).append(LabError("scenario", "expected an object of the scenario's other fields"))
    data["scenario"] = scenario
    data["controls"] = parsed["controls"] if parsed["controls"] is not None else {}
    data["stars"] = parsed["stars"] if parsed["stars"] is not None else []
    outro = texts.get("outro", "").strip()
    if outro:
        data["outro"] = outro.split("\n") if "\n" in outro else outro
    return data, slips


def section_of(path):
    """The section a mistake's field path falls in ("" for the mission as a whole)."""
    head = path.split(":")[0].strip()  # "workload: line 3, column 5" (a slip) -> "workload"
    if head in SECTION_KEYS:
        return head
    first = head.split(".")[0].split("[")[0]
    if first in ABOUT_FIELDS:
        return "about"
    if first in ("brief", "outro", "controls", "stars"):
        return first
    if first == "scenario":
        parts = head.split(".")
        if len(parts) > 1 and parts[1].split("[")[0] in _SCENARIO_PARTS:
            return parts[1].split("[")[0]
        return "scenario"
    return ""


def check_draft(texts, base_dir, fallback=None):
    """Every mistake of the draft, by section, and the Mission when there is none."""
    data, slips = mission_from_sections(texts, fallback)
    errors = {}
    for key, found in slips.items():
        errors.setdefault(key, []).extend(str(e) for e in found)
    mission = None
    try:
        mission = Mission.from_dict(data, base_dir, None)
    except LabError as exc:
        for err in getattr(exc, "errors", [exc]):
            key = section_of(err.path)
            if key in slips:
                continue  # its own slip is the mistake there: the stand-in's are not the author's
            errors.setdefault(key, []).append(str(err))
    if slips:
        mission = None
    count = sum(len(v) for v in errors.values())
    return Verdict(data=data, mission=mission, errors=errors, count=count, slips=tuple(slips))


def template():
    """The blank template: a small mission that passes the checker (mission 7's fleet and first
    two stars), in words for the author to replace."""
    return {
        "$schema": "./schema.json",
        "id": "my-mission",
        "title": "My mission",
        "order": 90,
        "summary": "One line for the missions page.",
        "brief": ["Say what the fleet serves, what its users want, and where the student starts.",
                  "",
                  "**Try:** a fifth GPU, then a split fleet."],
        "scenario": {
            "workload": {"rate": 6, "duration_s": 60, "prompt_tokens": 4000, "output_tokens": 220},
            "fleet": {"layout": "colocated", "gpus": 4, "prefill_gpus": 3, "decode_gpus": 1},
            "slo": {"ttft_s": 1.5, "tpot_ms": 20},
            "seed": 9,
            "drain_s": 60,
        },
        "controls": {"layout": {"choices": ["colocated", "disaggregated"]}, "gpus": {"min": 2, "max": 8},
                     "prefill_gpus": {"min": 1, "max": 4}, "decode_gpus": {"min": 1, "max": 4}},
        "stars": [
            {"label": "99% on time on one colocated pool",
             "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.99},
                      {"metric": "prefill_gpus", "op": "==", "value": 0}],
             "debrief": "Say why the fix works: what was short, and what the change gave."},
            {"label": "No frozen answers: 99% and p99 worst gap under 50 ms",
             "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.99},
                      {"metric": "worst_gap_p99_ms", "op": "<=", "value": 50}],
             "debrief": "Say why splitting the fleet stops the freezes, and what it costs."},
        ],
        "outro": "Say what the student learnt, and where to go next.",
    }


TRACE_SUFFIXES = (".csv", ".jsonl")
MAX_TRACES_LISTED = 50


def trace_files(base_dir):
    """The trace files a mission in `base_dir` may replay: traces/*.csv and *.jsonl there, as
    the paths a workload's `trace.path` takes ([] when there is no such folder)."""
    folder = os.path.join(base_dir, "traces")
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(TRACE_SUFFIXES)
                       and os.path.isfile(os.path.join(folder, n)))
    except OSError:
        return []
    return ["traces/" + n for n in names[:MAX_TRACES_LISTED]]


def download_text(data):
    """The mission as a file for the repo: indented JSON, `$schema` first."""
    ordered = {"$schema": data.get("$schema", "./schema.json"), **{k: v for k, v in data.items() if k != "$schema"}}
    return json.dumps(ordered, indent=2, ensure_ascii=False) + "\n"


def start_work(data, base_dir):
    """The start's run of a valid mission object: {"metrics", "stars", "blame", "requests", "scenario"}.
    A start past the lab page's bounds raises LabError naming the bound, before any simulation."""
    import lab.core as core

    from ..runs.run_work import page_requests

    mission = Mission.from_dict(data, base_dir, None)
    # Within what a lab page runs (page_bounds): the lab would refuse a bigger start too.
    result = core.simulate(mission.scenario, page_requests(mission.scenario, None))
    rows = core.request_metrics(result)
    metrics = core.summarize(result, rows)
    blame = core.blame_summary(core.request_blame(result, rows, missed_only=True))  # (the summary reads only the misses)
    return {"metrics": metrics, "stars": list(mission.evaluate(metrics)), "blame": blame, "requests": len(rows),
            "scenario": mission.scenario}


def check_work(data, base_dir, seeds=5, budget_s=CHECK_BUDGET_S):
    """The checker's verdict on a valid mission object: {"ok", "lines", "problems", "runs", "elapsed_s"}."""
    from lab.core.solver import check_mission

    mission = Mission.from_dict(data, base_dir, None)
    report = check_mission(mission, time_budget_s=budget_s, seeds=seeds)
    return {"ok": report.ok, "lines": report.lines(), "problems": list(report.problems), "runs": report.runs,
            "elapsed_s": report.elapsed_s}

