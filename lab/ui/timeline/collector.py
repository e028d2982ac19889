"""When Python's cyclic garbage collector runs on the lab page.

Nearly all of the page's Python heap lives as long as the page: Panel, Bokeh, param and
the lab's modules and models, about 173,000 objects in Pyodide once the first run is
shown. CPython's collector walks them all the same: over 16 control changes in Pyodide
(mission 1, `bench_browser.py --fresh`) it ran 30 young, 3 middle and 1 full collection,
240 ms in all, the full one 136 ms inside a single change.

`settle()`, once the page's first run is shown, freezes what is alive then (gc.freeze:
those objects move to a generation the collector never walks; reference counting still
frees them), so later collections walk only what the page made since. Idempotent.

`hold()` / `release()`: no collection during a run's first half (the simulation and its
canvas patch, which the student waits for): the collector is switched off there and back
on when the run's second half begins (the canvas is out by then), where the collections
the first half put off happen. Young collections still cost about 2 ms each in Pyodide,
and the simulation's allocations set off several per run. `release` is safe to call
when nothing is held.
"""

import gc

__all__ = ["settle", "hold", "release"]

_settled = False
_held = False


def settle():
    global _settled
    if _settled:
        return
    _settled = True
    gc.collect()  # (garbage from the page's start goes first, not into the frozen set)
    gc.freeze()


def hold():
    global _held
    if not _held and gc.isenabled():
        gc.disable()
        _held = True


def release():
    global _held
    if _held:
        _held = False
        gc.enable()
