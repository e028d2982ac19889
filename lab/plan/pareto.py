"""The Pareto front of evaluated fleets: cheaper, or better per GPU, or meeting the SLO more often."""

__all__ = ["pareto_front", "dominates"]


def dominates(a, b):
    """Row `a` is at least as good as `b` on every objective and better on one.

    Objectives: `usd_per_hour` (lower), `goodput_rps_per_gpu` and `slo_attainment` (higher)."""
    ka = (-a["usd_per_hour"], a["goodput_rps_per_gpu"], a["slo_attainment"])
    kb = (-b["usd_per_hour"], b["goodput_rps_per_gpu"], b["slo_attainment"])
    return all(x >= y for x, y in zip(ka, kb)) and ka != kb


def pareto_front(rows):
    """The rows no other row dominates, cheapest first (ties: higher attainment first)."""
    front = [r for r in rows if not any(dominates(o, r) for o in rows)]
    return sorted(front, key=lambda r: (r["usd_per_hour"], -r["slo_attainment"], -r["goodput_rps_per_gpu"]))
