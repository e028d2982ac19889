"""The cyclic garbage collector, held off while the core works through a run.

A run makes hundreds of thousands of the objects CPython's collector tracks (heap entries,
transfers, per-step lists; numpy's modules when the metrics import it) and next to no
garbage in cycles: what it drops, reference counting frees at once. Left on, the collector
walks the young objects every 700 new ones and the older ones now and then, finding
nothing. So `engine.simulate` and `metrics.summarize` run with it off (`held_off`); it is
on again when they return, and what they put off happens then, once (benchmarks/README.md,
"Metrics on numpy", "The collector held off": the figures).

`simulate` first moves the run's records and still empty step lists to the oldest
generation (one young collection), so the collections after the run do not walk them as
they are then, millions of list slots long (docs/architecture.md, "Scale").

Where the collector is off already (the lab page holds it through a run's first half:
lab/ui/timeline/collector.py) nothing changes, and nothing is collected. Under PyPy nothing
changes either: its collector frees everything, not only cycles, so a big run's memory would
grow without bound.
"""

import gc
from contextlib import contextmanager

from .percentiles import PYPY

__all__ = ["held_off"]


@contextmanager
def held_off():
    """Switch the collector off for the `with` block (or the decorated function) if it is
    on and this is not PyPy, and on again however the block ends. Yields whether it did."""
    if PYPY or not gc.isenabled():
        yield False
        return
    gc.disable()
    try:
        yield True
    finally:
        gc.enable()
