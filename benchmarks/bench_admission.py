"""Early rejection's cost: the default path (admission off) against an older tree, and with it on.

    python benchmarks/bench_admission.py [--old DIR] [--rounds 7] [--runs 9]
    python benchmarks/bench_admission.py --old DIR --instructions    # valgrind: a few minutes

`--old` is another checkout's root (e.g. `git archive a81029a lab | tar -x -C /tmp/old`); each
round times `simulate` on benchmarks/scenarios.py's runs in a fresh process per tree, the
trees alternating (the machine's speed drifts), takes each round's fastest run in CPU time
(on a shared machine the fastest is the least disturbed), and reports the median over rounds. This tree also runs each scenario with `fleet.admission` on and a TTFT target
that rejects a share of the arrivals. Figures, not assertions: speed is never a test.

On a machine shared with other work, time (even CPU time) moves by 15% between two runs of
the same code; `--instructions` counts instructions instead, under valgrind's callgrind: a
process that simulates once and one that simulates three times, per tree and scenario, whose
difference / 2 is one warm run's count (imports and the first, unspecialised run cancel).
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Run in a child process with the tree under test first on sys.path.
CHILD = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])
from lab import core
from scenarios import SCENARIOS
runs, admit = int(sys.argv[3]), sys.argv[4] == "on"
out = {}
for name, raw in SCENARIOS.items():
    raw = json.loads(json.dumps(raw))
    if admit:
        raw["fleet"]["admission"] = {"reject_when": "predicted_ttft_over_slo"}
        raw["slo"]["ttft_s"] = 0.15  # tight: a share of the 22 req/s is turned away
    scenario = core.load_scenario(raw)
    requests = core.generate_requests(scenario.workload, scenario.seed)
    result = core.simulate(scenario, requests)  # warm-up
    times = []
    for _ in range(runs):
        t = time.process_time()  # CPU time: other processes' load disturbs it less than wall time
        core.simulate(scenario, requests)
        times.append((time.process_time() - t) * 1000)
    out[name] = {"ms": min(times), "rejected": sum(getattr(r, "rejected", False) for r in result.requests),
                 "requests": len(result.requests)}
print(json.dumps(out))
"""


# One scenario, simulated `n` times (for --instructions).
REPEAT = r"""
import sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])
from lab import core
from scenarios import SCENARIOS
scenario = core.load_scenario(SCENARIOS[sys.argv[3]])
requests = core.generate_requests(scenario.workload, scenario.seed)
for _ in range(int(sys.argv[4])):
    core.simulate(scenario, requests)
"""


def instructions(tree, name, n):
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           REPEAT, str(tree), str(REPO / "benchmarks"), name, str(n)],
                          capture_output=True, text=True, check=True)
    return int(proc.stderr.split("Collected : ")[1].split()[0])


def count_instructions(old):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from scenarios import SCENARIOS

    print(f"{'scenario':<34} {'old (M instr.)':>15} {'now':>9} {'change':>8}")
    for name in SCENARIOS:
        per = {}
        for label, tree in (("old", old), ("now", REPO)):
            per[label] = (instructions(tree, name, 3) - instructions(tree, name, 1)) / 2 / 1e6
        print(f"{name:<34} {per['old']:>15.2f} {per['now']:>9.2f} {(per['now'] / per['old'] - 1) * 100:>+7.2f}%")


def run(tree, runs, admit="off"):
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(REPO / "benchmarks"), str(runs), admit],
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", help="an older checkout's root, timed with admission off (its default path)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--instructions", action="store_true", help="count instructions under valgrind (needs --old)")
    args = ap.parse_args(argv)
    if args.instructions:
        if not args.old:
            ap.error("--instructions compares two trees: give --old DIR")
        return count_instructions(args.old)
    rounds = {"now": [], "old": [], "on": []}
    for _ in range(args.rounds):
        if args.old:
            rounds["old"].append(run(args.old, args.runs))
        rounds["now"].append(run(REPO, args.runs))
        rounds["on"].append(run(REPO, args.runs, "on"))
    names = list(rounds["now"][0])
    print(f"{'scenario':<34} {'old off':>9} {'now off':>9} {'change':>8} {'now on':>9} {'rejected':>9}")
    for name in names:
        now = statistics.median(r[name]["ms"] for r in rounds["now"])
        on = statistics.median(r[name]["ms"] for r in rounds["on"])
        old = statistics.median(r[name]["ms"] for r in rounds["old"]) if rounds["old"] else None
        change = f"{(now / old - 1) * 100:+.1f}%" if old else "—"
        first = rounds["on"][0][name]
        print(f"{name:<34} {(f'{old:.1f}ms' if old else '—'):>9} {now:>7.1f}ms {change:>8} {on:>7.1f}ms "
              f"{first['rejected']:>4}/{first['requests']}")


if __name__ == "__main__":
    main()
