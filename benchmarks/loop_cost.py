"""What `lab serve`'s event loop spends on one run, once a worker process has simulated it.

    python benchmarks/loop_cost.py [--heavy-requests N] [--light-runs 8]

Under `lab serve` a run's simulation, measures, blames and whole-run views happen in a worker
process (lab/ui/runs/offload.py); the loop, which every student's page shares, then reads
the run back and updates the page in parts. This times those parts, in this process, as the
loop would run them: unpickling the run (its long lists a slice a turn), the canvas's patch
(`_ran`), the run's second half (metrics, stars, blame, story, tables: `_finish_step`) and the
plots. Two pages: the heavy page of benchmarks/classroom.py (a copy of mission 01 near the
page's bound, on 32 GPUs), its second run (the first builds the figures once); and the
sandbox, the mean over `--light-runs` rate changes after four to warm up.
"""

import argparse
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bokeh.document import Document  # noqa: E402

import lab.ui.app as app  # noqa: E402
from lab.core.page_bounds import PAGE_MAX_REQUESTS  # noqa: E402
from lab.ui.catalog import Catalog  # noqa: E402
from lab.ui.runs import offload  # noqa: E402

HEAVY_S = 1_980.0


class _HeldTimers:
    """lab.ui.app's timers, kept to be fired by hand (no server here)."""

    def __init__(self):
        self.timers = []

    def later(self, callback, _delay_ms):
        timer = [callback, False]
        self.timers.append(timer)

        class Handle:
            def stop(self_inner):
                timer[1] = True
        return Handle()

    def fire(self, callback):
        ran = False
        for timer in [t for t in self.timers if t[0] == callback and not t[1]]:
            timer[1] = True
            timer[0]()
            ran = True
        return ran


def _one_run(lab, held, parts):
    """Run the page's next run as lab serve would, adding each part's seconds to `parts`."""
    offload._pools = {False: object()}  # (pooled: the state asks for the whole run, views and all)
    work = lab.state.prepare_run(whole=True, plot_px=lab.canvas.plot_px)
    offload._pools = {}
    sent = pickle.dumps(offload._in_worker(work), protocol=pickle.HIGHEST_PROTOCOL)

    def timed(name, fn):
        began = time.perf_counter()
        out = fn()
        parts[name] = parts.get(name, 0.0) + time.perf_counter() - began
        return out

    outcome, slices = timed("read back (whole, in slices)", lambda: pickle.loads(sent))
    lists = timed("read back (whole, in slices)", lambda: [pickle.loads(s) for s in slices])
    outcome._value = offload._paste(outcome._value, lists, offload.SLICE_DEPTH)
    timed("canvas patch", lambda: lab._ran(outcome))
    while timed("second half", lambda: held.fire(lab._finish_step)):
        pass
    timed("plots", lambda: held.fire(lab._update_plots))
    return len(sent), len(slices)


def _page(catalog, mission_id, held):
    lab = app.LabApp(catalog, f"?mission={mission_id}")
    lab.view.server_doc(Document())
    return lab


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heavy-requests", type=int, default=int(PAGE_MAX_REQUESTS * 0.99),
                        help="the heavy page's requests (default: 99%% of the page's bound, as benchmarks/classroom.py)")
    parser.add_argument("--light-runs", type=int, default=8)
    args = parser.parse_args(argv)
    held = _HeldTimers()
    app.later = held.later
    app.pn.state.onload = lambda callback: None
    with tempfile.TemporaryDirectory() as folder:
        heavy = json.loads((REPO / "missions" / "01-mixing-hurts.json").read_text(encoding="utf-8"))
        heavy.update(id="heavy-class", title="Heavy", order=99)
        heavy["scenario"]["workload"].update(rate=round(args.heavy_requests / HEAVY_S, 3), duration_s=HEAVY_S)
        heavy["scenario"]["fleet"]["gpus"] = 32
        heavy["controls"]["gpus"].update(min=28, max=36)
        heavy["stars"] = heavy["stars"][:1]
        (Path(folder) / "99-heavy.json").write_text(json.dumps(heavy), encoding="utf-8")
        catalog = Catalog(folder)
        lab = _page(catalog, "heavy-class", held)
        _one_run(lab, held, {})
        lab.state.change("gpus", 33)
        parts = {}
        size, slices = _one_run(lab, held, parts)
        print(f"heavy page ({args.heavy_requests:,} requests over {HEAVY_S:,.0f} s on 32 GPUs), its second run: "
              f"{size / 1e6:,.0f} MB sent back, {slices} slices")
        for name, seconds in parts.items():
            print(f"  {name:<30} {seconds * 1000:8.0f} ms")
        print(f"  {'in all':<30} {sum(parts.values()) * 1000:8.0f} ms")

        light = _page(Catalog(), "sandbox", held)
        rate = light.state.settings["rate"]
        parts = {}
        for n in range(4 + args.light_runs):
            if n:
                light.state.change("rate", rate + n * 0.5)
            _one_run(light, held, parts if n >= 4 else {})
        print(f"sandbox, the mean of {args.light_runs} rate changes:")
        for name, seconds in parts.items():
            print(f"  {name:<30} {seconds / args.light_runs * 1000:8.1f} ms")
        print(f"  {'in all':<30} {sum(parts.values()) / args.light_runs * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
