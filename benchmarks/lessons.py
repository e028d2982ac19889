"""Every mission's lesson under the calibrated model: does the start still fail, does each
star's fix still earn it, and what does the calibrated model's own cheapest fix look like?

    python benchmarks/lessons.py            # the probes and the missions' table, as Markdown
    python benchmarks/lessons.py --write    # rewrite their blocks in docs/model.md "Which lessons hold"
    python benchmarks/lessons.py --only chunk-it,slow-link   # the probes, and these missions' rows

Each mission is run as shipped (its own model: the lab's linear constants or the roofline)
and with `model.cost` set to `calibrated` (its LLM and GPU, Llama-3-8B on an H100 when it
names none). Two probes ask the issue's questions directly: what a prompt chunk costs, and
where a split fleet overtakes tuned chunking. tests/test_calibration.py recomputes the chunk
probe and holds docs/model.md to it; the rest is written here only (about two minutes).
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from doc_blocks import rewrite_block  # noqa: E402  (benchmarks/, beside this file)
from lab.core.engine import simulate  # noqa: E402
from lab.core.errors import LabError  # noqa: E402
from lab.core.metrics import summarize  # noqa: E402
from lab.core.missions import list_missions, load_mission  # noqa: E402
from lab.core.solver import _settings_text, check_mission  # noqa: E402

MODEL_DOC = os.path.join(ROOT, "docs", "model.md")
BEGIN, END = "<!-- lessons table: benchmarks/lessons.py --write -->", "<!-- end of lessons table -->"
BUDGET_S = 120


def calibrated_variant(mission):
    """The mission with its model's cost set to calibrated (everything else as shipped)."""
    with open(mission.path, encoding="utf-8") as f:
        raw = json.load(f)
    raw["scenario"].setdefault("model", {})["cost"] = "calibrated"
    raw.pop("$schema", None)
    return load_mission(raw, base_dir=os.path.dirname(mission.path))


def _metrics(mission, settings):
    try:
        return summarize(simulate(mission.apply(settings)))
    except LabError:  # a setting the other model's memory refuses (e.g. KV that no longer fits)
        return None


def lesson_row(mission):
    """One mission under both models: a dict of figures (see `markdown`)."""
    own = check_mission(mission, time_budget_s=BUDGET_S, seeds=1)
    cal_mission = calibrated_variant(mission)
    cal = check_mission(cal_mission, time_budget_s=BUDGET_S, seeds=1)
    stars = []
    for i, (o, c) in enumerate(zip(own.solutions, cal.solutions)):
        fix = o.settings
        under_cal = _metrics(cal_mission, fix) if fix is not None else None
        stars.append({
            "star": i + 1,
            "own_fix": _settings_text(mission, fix) if fix is not None else None,
            "holds": bool(under_cal and mission.stars[i].earned(under_cal)),
            "cal_fix": _settings_text(mission, c.settings) if c.settings is not None else None,
        })
    return {"id": mission.id, "model": mission.scenario.model.cost,
            "start_own": own.start_metrics.get("slo_attainment"), "start_cal": cal.start_metrics.get("slo_attainment"),
            "start_cal_stars": sum(cal.start_stars), "stars": stars}


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
            f"| {row['start_cal_stars']} | {held} of {len(row['stars'])} | {'; '.join(notes) or '—'} |")


def markdown(rows):
    head = ["| mission | shipped model | start meets the SLO (shipped → calibrated) | stars the calibrated start already earns "
            "| shipped fixes that still earn their star | where one no longer does: the calibrated model's cheapest |",
            "|---|---|--:|--:|--:|---|"]
    return "\n".join(head + [markdown_line(r) for r in rows])


# ---------------------------------------------------------------- probes

def chunk_probe():
    """What a prompt chunk costs: riding on a decode step, and a whole prompt taken in chunks."""
    from lab.core.cost import PoolCost
    from lab.core.spec import Model

    lines = ["| LLM, H100s | model | decode step (batch 32, 1,500 tokens each) | + a 128-token chunk | + 512 | "
             "a 4,000-token prompt alone in 128-token chunks | in 512 | in 2,048 |",
             "|---|---|--:|--:|--:|--:|--:|--:|"]
    for llm, tp in (("llama3-8b", 1), ("llama3-70b", 4)):
        for cost in ("roofline", "calibrated"):
            fields = {"cost": cost, "llm": llm, "gpu": "h100"}
            if cost == "roofline":
                fields["attention"] = True  # the same attention terms the calibrated model counts
            step = PoolCost(Model.from_dict(fields), "h100", tp).step_s
            base = step(32, 32 * 1500, 0)

            def riding(chunk, before=2000):  # a chunk midway through a prompt, on that decode step
                return step(32, 32 * 1500, chunk, chunk * (before + chunk / 2), before) - base

            def alone(chunk, prompt=4000):
                total, done = 0.0, 0
                while done < prompt:
                    k = min(chunk, prompt - done)
                    total += step(0, 0, k, k * (done + k / 2), done)
                    done += k
                return total
            ms = lambda v: f"{v * 1000:,.1f} ms"  # noqa: E731
            lines.append(f"| {llm}, TP {tp} | {cost} | {ms(base)} | +{ms(riding(128))} | +{ms(riding(512))} "
                         f"| {ms(alone(128))} | {ms(alone(512))} | {ms(alone(2048))} |")
    return "\n".join(lines)


def _attainment_at(cost, prompt, tpot, rate, fleet):
    from lab.core.loading import load_scenario
    scenario = load_scenario({
        "workload": {"rate": rate, "duration_s": 30,
                     "prompt_tokens": {"dist": "lognormal", "median": prompt, "sigma": 0.3, "min": 100, "max": 4 * prompt},
                     "output_tokens": {"dist": "lognormal", "median": 200, "sigma": 0.4, "min": 8, "max": 800}},
        "fleet": fleet, "model": {"cost": cost, "llm": "llama3-8b", "gpu": "h100"},
        "slo": {"ttft_s": 2.0, "tpot_ms": tpot}, "seed": 3, "drain_s": 60})
    return summarize(simulate(scenario))["slo_attainment"]


def _capacity(cost, prompt, tpot, fleet, hi):
    """The highest request rate (bisected, 7 halvings below `hi`) at which 90% meet the SLO."""
    lo = 0.0
    for _ in range(7):
        mid = (lo + hi) / 2
        if _attainment_at(cost, prompt, tpot, mid, fleet) >= 0.9:
            lo = mid
        else:
            hi = mid
    return lo


def split_probe():
    """Eight H100s serving Llama-3-8B: the best colocated fleet (any chunk) against the best
    split, by the request rate each serves with 90% meeting the SLO (TTFT 2 s)."""
    lines = ["| prompts (median) | TPOT target | model | colocated, best chunk: req/s | split, best pools: req/s | colocated ÷ split |",
             "|--:|--:|---|--:|--:|--:|"]
    for prompt, hi in ((4000, 120), (8000, 60)):
        for tpot in (9, 12):
            for cost in ("roofline", "calibrated"):
                col = max((_capacity(cost, prompt, tpot, {"layout": "colocated", "gpus": 8, "chunk_tokens": c}, hi), c)
                          for c in (128, 256, 512, 1024))
                dis = max((_capacity(cost, prompt, tpot, {"layout": "disaggregated", "prefill_gpus": p,
                                                          "decode_gpus": 8 - p}, hi), p) for p in (3, 4, 5, 6))
                lines.append(f"| {prompt:,} | {tpot} ms | {cost} | {col[0]:.1f} (chunk {col[1]}) "
                             f"| {dis[0]:.1f} ({dis[1]} + {8 - dis[1]}) | {col[0] / dis[0]:.2f} |")
    return "\n".join(lines)


BLOCKS = {
    "chunks": ("<!-- lessons: chunk cost, benchmarks/lessons.py --write -->", "<!-- end of chunk cost -->", chunk_probe),
    "split": ("<!-- lessons: split against chunking, benchmarks/lessons.py --write -->", "<!-- end of split against chunking -->",
              split_probe),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the docs/model.md blocks")
    ap.add_argument("--only", help="comma-separated mission ids (the missions' table only)")
    args = ap.parse_args(argv)
    for name, (begin, end, probe) in BLOCKS.items():
        body = probe()
        print(body, flush=True)
        if args.write:
            rewrite_block(MODEL_DOC, begin, end, body, ROOT)
    missions = list_missions()
    if args.only:
        keep = set(args.only.split(","))
        missions = [m for m in missions if m.id in keep]
    rows = []
    for m in missions:
        row = lesson_row(m)
        rows.append(row)
        print(markdown_line(row), flush=True)
    if args.write and not args.only:
        rewrite_block(MODEL_DOC, BEGIN, END, markdown(rows), ROOT)


if __name__ == "__main__":
    main()
