"""Every mission's lesson under the calibrated model: does the start still fail, does each
star's fix still earn it, and what does the calibrated model's own cheapest fix look like?

    python benchmarks/lessons.py            # the table as text, and the probes below
    python benchmarks/lessons.py --write    # rewrite the block in README "The calibrated model"
    python benchmarks/lessons.py --only chunk-it,slow-link

Each mission is run as shipped (its own model: the lab's linear constants or the roofline)
and with `model.cost` set to `calibrated` (its LLM and GPU, Llama-3-8B on an H100 when it
names none). tests/test_calibration.py recomputes some rows and holds the README to them.
"""

import argparse
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lab.core.engine import simulate  # noqa: E402
from lab.core.metrics import summarize  # noqa: E402
from lab.core.missions import list_missions, load_mission  # noqa: E402
from lab.core.solver import _settings_text, check_mission  # noqa: E402

README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- lessons table: benchmarks/lessons.py --write -->", "<!-- end of lessons table -->"
BUDGET_S = 120


def calibrated_variant(mission):
    """The mission with its model's cost set to calibrated (everything else as shipped)."""
    raw = json.load(open(mission.path, encoding="utf-8"))
    raw = copy.deepcopy(raw)
    raw["scenario"].setdefault("model", {})["cost"] = "calibrated"
    raw.pop("$schema", None)
    return load_mission(raw, base_dir=os.path.dirname(mission.path))


def _attainment(mission, settings):
    try:
        return summarize(simulate(mission.apply(settings)))
    except Exception:  # a setting the other model's memory refuses (e.g. KV that no longer fits)
        return None


def lesson_row(mission):
    """One mission under both models: a dict of figures (see `markdown`)."""
    own = check_mission(mission, time_budget_s=BUDGET_S, seeds=1)
    cal_mission = calibrated_variant(mission)
    cal = check_mission(cal_mission, time_budget_s=BUDGET_S, seeds=1)
    stars = []
    for i, (o, c) in enumerate(zip(own.solutions, cal.solutions)):
        fix = o.settings
        under_cal = _attainment(cal_mission, fix) if fix is not None else None
        stars.append({
            "star": i + 1,
            "own_fix": _settings_text(mission, fix) if fix is not None else None,
            "holds": bool(under_cal and mission.stars[i].earned(under_cal)),
            "cal_fix": _settings_text(mission, c.settings) if c.settings is not None else None,
        })
    return {"id": mission.id, "model": mission.scenario.model.cost,
            "start_own": own.start_metrics.get("slo_attainment"), "start_cal": cal.start_metrics.get("slo_attainment"),
            "stars": stars}


def _pct(v):
    return "—" if v is None else f"{v:.0%}"


def markdown_line(row):
    held = sum(s["holds"] for s in row["stars"])
    notes = []
    for s in row["stars"]:
        if s["holds"]:
            continue
        cal = s["cal_fix"] or "no allowed setting"
        notes.append(f"★{s['star']}: {cal}")
    return (f"| {row['id']} | {row['model']} | {_pct(row['start_own'])} → {_pct(row['start_cal'])} "
            f"| {held} of {len(row['stars'])} | {'; '.join(notes) or 'as shipped'} |")


def markdown(rows):
    head = ["| mission | shipped model | start meets the SLO (shipped → calibrated) | star fixes that still earn their star "
            "| where a fix no longer earns it: the calibrated model's cheapest |",
            "|---|---|--:|--:|---|"]
    return "\n".join(head + [markdown_line(r) for r in rows])


def write_readme(rows):
    text = open(README, encoding="utf-8").read()
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    new = f"{head}{BEGIN}\n{markdown(rows)}\n{END}{tail}"
    if new != text:
        open(README, "w", encoding="utf-8").write(new)
    print("README.md: lessons table " + ("rewritten" if new != text else "already current"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the README block")
    ap.add_argument("--only", help="comma-separated mission ids")
    args = ap.parse_args(argv)
    missions = list_missions()
    if args.only:
        keep = set(args.only.split(","))
        missions = [m for m in missions if m.id in keep]
    rows = []
    for m in missions:
        row = lesson_row(m)
        rows.append(row)
        print(markdown_line(row), flush=True)
    if args.write:
        write_readme(rows)


if __name__ == "__main__":
    main()
