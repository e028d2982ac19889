"""Pools that change roles (`fleet.planner`): which instances move, decided over a snapshot.

The engine asks these small functions at each planning moment and carries the moves
out itself (docs/model.md "Pools that change roles"): a moving instance drains (stops taking
new work and finishes or hands over what it has), reloads for `switch_s`, then joins the
other pool. The functions read only numbers handed to them, never the engine's state,
so the reference simulator (tests/reference_sim.py, which does not import this module)
checks them independently.

- `busy_in_window`: how long a step log was busy within [t0, t1] (fsum of the overlaps).
- `utilization_move`: every `interval_s`, each pool's utilisation over the interval just
  ended = busy time of its current members / (members x interval). When one pool's
  exceeds the other's by more than `threshold` and no instance is moving already, one
  instance of the idler pool moves to the busier one, never leaving the idler pool under
  `min_per_pool` instances.
- `schedule_moves`: at a row's `at_s`, as many instances move as it takes for the pools
  (counting a moving instance in the pool it is going to) to have the row's sizes.
- `pick_mover`: which instance of a pool moves: the least loaded (a prefill instance:
  prompt tokens it has admitted and not finished prefilling; a decode instance:
  sequences holding a slot on it), ties to the highest index.
"""

import math

__all__ = ["busy_in_window", "utilization", "utilization_move", "schedule_moves", "pick_mover"]


def busy_in_window(starts, ends, t0, t1):
    """Time of steps (parallel lists, in time order) that fall inside [t0, t1]: ticks in
    the engine (fsum of whole numbers: exact while under 2**53), seconds in metrics."""
    parts = []
    j = len(ends) - 1
    while j >= 0 and ends[j] > t0:  # steps are in order: the ones before t0 end before it
        s = starts[j]
        if s < t1:
            parts.append((ends[j] if ends[j] < t1 else t1) - (s if s > t0 else t0))
        j -= 1
    return math.fsum(parts)


def utilization(busy, members, interval_s):
    """A pool's utilisation over an interval: busy time / (members x interval), both in
    ticks in the engine, seconds elsewhere."""
    return busy / (members * interval_s) if members else 0.0


def pick_mover(loads):
    """Index (into `loads`) of the instance that moves: the least loaded, ties highest index."""
    best = len(loads) - 1
    for i in range(len(loads) - 2, -1, -1):
        if loads[i] < loads[best]:
            best = i
    return best


def utilization_move(util_prefill, util_decode, prefill_members, decode_members, threshold, min_per_pool):
    """"prefill" (a decode instance moves to prefill), "decode" (the reverse) or None."""
    if util_prefill - util_decode > threshold and decode_members > min_per_pool:
        return "prefill"
    if util_decode - util_prefill > threshold and prefill_members > min_per_pool:
        return "decode"
    return None


def schedule_moves(prefill_now, want_prefill):
    """(destination role, how many instances move) to bring the prefill pool from
    `prefill_now` instances (moving ones counted where they go) to `want_prefill`."""
    if want_prefill > prefill_now:
        return "prefill", want_prefill - prefill_now
    if want_prefill < prefill_now:
        return "decode", prefill_now - want_prefill
    return None, 0
