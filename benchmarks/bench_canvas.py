"""Time the canvas's share of a control change in CPython: `timeline_data` (steps, link,
overview, queue rows and KV bands) and `Canvas._on_run` (that plus slicing the window).

    python benchmarks/bench_canvas.py [--mission code-trace] [--runs 60] [--tree DIR]

CPU time (`time.process_time`), median and minimum over --runs after one warm-up, so
other processes on a shared machine disturb the figures less. `--tree` times another
checkout's `lab` (e.g. `git archive OLD lab | tar -x -C /tmp/old`) on this tree's missions,
for a before/after. Figures, not assertions: speed is never a test.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def cpu_ms(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1000.0)
    return statistics.median(times), min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mission", default="code-trace")
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--tree", default=str(REPO), help="the checkout whose lab/ is timed")
    args = ap.parse_args(argv)
    sys.path.insert(0, args.tree)
    from lab.ui.timeline.canvas import Canvas
    from lab.ui.data.canvas_data import timeline_data
    from lab.ui.catalog import Catalog
    from lab.ui.state import LabState

    state = LabState.from_query(Catalog(str(REPO / "missions")), f"?mission={args.mission}")
    state.run()
    canvas = Canvas(state)
    slo = state.scenario.slo
    target = getattr(slo, "per_token_target_ms", slo.tpot_ms)  # an older tree has no per_token_target_ms

    def on_run():
        canvas._labels = None  # as after a change of the fleet's rows
        canvas._on_run()

    data = cpu_ms(lambda: timeline_data(state.result, target), args.runs)
    run = cpu_ms(on_run, args.runs)
    print(f"{args.mission}: {len(state.result.requests)} requests; timeline_data {data[0]:.1f} ms "
          f"(min {data[1]:.1f}); Canvas._on_run {run[0]:.1f} ms (min {run[1]:.1f})  [{args.tree}]")


if __name__ == "__main__":
    main()
