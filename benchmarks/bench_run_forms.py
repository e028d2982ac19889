"""What storing decode-only stretches as runs would buy: two synthetic measurements.

    python benchmarks/bench_run_forms.py [--runs 20000] [--repeats 5]

benchmarks/README.md ("What the run representation would buy") quotes these figures. Neither
measures the engine itself; each compares the step-at-a-time form the core uses with the
run form the issue proposes, on runs of the sizes the conversation trace makes.

1. Simulating a run. The step loop of `engine._run_decode_only` (each step's context,
   its time on the decode line max(a + b x context, floor) in whole ticks, five appends)
   against a closed form: the run's length from the limit as the root of a quadratic in
   whole ticks (checked on either side), its end from the sum formula, one run record. The
   closed form leaves out the floor's piece and the lookup of the next finish, so its
   cost here is a lower bound. Both give the same end, checked on every case.
2. Counting a run's values for the percentile selection. `percentiles._select` puts every
   value in its bucket with one `bisect_right` pass in C; from runs it would count each
   run's values below each of the four bounds from the run's line, in Python per run.

CPU time, best of --repeats, the cyclic garbage collector off (the engine's lists are in
the oldest generation during a run: docs/architecture.md "Scale"). Figures, not assertions.
"""

import argparse
import gc
import random
import sys
import time
from bisect import bisect_right
from itertools import repeat
from math import isqrt

RUN_LENGTHS = (1, 6, 11, 30)  # one-step calls (128 GPUs), then the trace's 1 + 1 and 2-colocated runs


def step_loop(t, a, b, floor, context, decoding, steps, columns):
    """`engine._run_decode_only`'s loop for `steps` steps with no finish in them."""
    starts, ends, seqs, prompts, contexts = columns
    for _ in range(steps):
        context += decoding
        duration = a + b * context
        end = t + (duration if duration > floor else floor)
        starts.append(t)
        ends.append(end)
        seqs.append(decoding)
        prompts.append(0)
        contexts.append(context)
        t = end
    return t


def closed_form(t, a, b, context, decoding, limit, runs):
    """The same run's end (floor below every step), in O(1): the first k with t + S(k) >=
    limit, S(k) = k first + step k (k - 1) / 2, from the root of 2 S(k) = 2 (limit - t)."""
    first = a + b * (context + decoding)
    step = b * decoding
    twice_left = 2 * (limit - t)
    linear = 2 * first - step
    k = (isqrt(linear * linear + 4 * step * twice_left) - linear) // (2 * step) if step else twice_left // (2 * first)
    while k * linear + step * k * k < twice_left:
        k += 1
    while k > 1 and (k - 1) * linear + step * (k - 1) * (k - 1) >= twice_left:
        k -= 1
    runs.append((t, k, decoding, context + decoding))
    return t + k * first + step * k * (k - 1) // 2


def run_cases(rng, count):
    """(t, a, b, context, batch) in whole picoseconds, of a decode step's sizes: a 5-8 ms
    fixed part, 10-40 ps a context token, 5-60 sequences, 10k-1M tokens of context."""
    return [(rng.randint(0, 10**15), rng.randint(5 * 10**9, 8 * 10**9), rng.randint(10, 40),
             rng.randint(10**4, 10**6), rng.randint(5, 60)) for _ in range(count)]


def best_of(repeats, fn):
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def simulate_forms(cases, repeats):
    print("1. A decode-only run: the step loop (five appends a step) against a closed form (one record)")
    for length in RUN_LENGTHS:
        # the limit that ends the run after exactly `length` steps: the loop's own end
        limits = [step_loop(t, a, b, 0, c, d, length, ([], [], [], [], [])) for t, a, b, c, d in cases]
        for (t, a, b, c, d), limit in zip(cases, limits):
            assert closed_form(t, a, b, c, d, limit, []) == limit

        def loop():
            columns = ([], [], [], [], [])
            for t, a, b, c, d in cases:
                step_loop(t, a, b, 0, c, d, length, columns)

        def closed():
            runs = []
            for (t, a, b, c, d), limit in zip(cases, limits):
                closed_form(t, a, b, c, d, limit, runs)

        per_run = 1e9 / len(cases)
        print(f"   runs of {length:>2} steps: step loop {best_of(repeats, loop) * per_run:6,.0f} ns a run, "
              f"closed form {best_of(repeats, closed) * per_run:6,.0f} ns a run")


def count_forms(cases, repeats, mean_length=11.5):
    print("2. The selection's bucket counts: per run from its line against one bisect_right pass per value")
    rng = random.Random(3)
    runs = [(a + b * c, b * d, max(1, round(rng.expovariate(1 / mean_length)))) for _, a, b, c, d in cases]
    values = [float(first + step * i) for first, step, k in runs for i in range(k)]
    bounds = sorted(rng.sample(values, 4))

    def per_run():
        below = [0] * 5
        for first, step, k in runs:
            before = 0
            for j, bound in enumerate(bounds):  # bucket j holds values below bound j (bisect_right's)
                n = 0 if first >= bound else min(k, int(-((first - bound) // step)))
                below[j] += n - before
                before = n
            below[4] += k - before
        return below

    def per_value():
        return bytes(map(bisect_right, repeat(bounds), values))

    counted, buckets = per_run(), per_value()
    assert counted == [buckets.count(i) for i in range(5)]
    print(f"   {len(runs):,} runs, {len(values):,} values ({len(values) / len(runs):.1f} a run): "
          f"per run {best_of(repeats, per_run) * 1000:,.0f} ms, per value {best_of(repeats, per_value) * 1000:,.0f} ms")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20000, help="runs per measurement (default 20000)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    gc.disable()
    cases = run_cases(random.Random(5), args.runs)
    simulate_forms(cases, args.repeats)
    count_forms(run_cases(random.Random(7), 53308), args.repeats)  # the 2-colocated trace run's run count
    return 0


if __name__ == "__main__":
    sys.exit(main())
