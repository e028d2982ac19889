"""When Python's cyclic garbage collector runs on the lab page.

Nearly all of the page's Python heap lives as long as the page: Panel, Bokeh, param and
the lab's modules and models, about 173,000 objects in Pyodide once the first run is
shown. CPython's collector walks them all the same: over 16 control changes in Pyodide
(mission 1, `bench_browser.py --fresh`) it ran 30 young, 3 middle and 1 full collection,
240 ms in all, the full one 136 ms inside a single change.

`settle()`, once a page's first run is shown, freezes what is alive then (gc.freeze:
those objects move to a generation the collector never walks; reference counting still
frees them), so later collections walk only what was made since. The page calls it once.

Under `lab serve` (`serve_pages()`) every page settles so, and what survives a full
collection is frozen too: a classroom of 30 pages holds millions of objects, and each page
keeps its recent runs. Unfrozen, every full collection walked them all, every page waiting:
in benchmarks/classroom.py's minute, 19 full collections of 0.4 to 1.1 s; with only the
pages frozen, the runs kept since made them grow from 55 to 730 ms. A frozen object is still
freed by reference counting when nothing holds it; only its cycles wait. A closed page's
frozen cycles are garbage the collector cannot see, so `thaw_soon()` (when a page closes)
runs one full collection over everything, at most once every THAW_AFTER_S, and freezes again;
so does `thaw()` every THAW_EVERY_S while the server runs, for the cycles the open pages'
changes leave (the server's messages and callbacks; about 35 MB a minute in
benchmarks/classroom.py's light run: 1,320 MB after three minutes, against 1,204 MB
unfrozen and 1,150 MB thawed every minute). A thaw is one full collection with every page
waiting (in a 4-minute run thawed at 3 minutes, the slowest answer took 4.7 s, the 95th
percentile 1.0 s; thawed every minute, 0.9 s): every 10 minutes, a class sees one, and the
memory it holds back stays within about 350 MB.

`hold()` / `release()`: no collection during a run's first half (the simulation and its
canvas patch, which the student waits for): the collector is switched off there and back
on when the run's second half begins (the canvas is out by then), where the collections
the first half put off happen. Young collections still cost about 2 ms each in Pyodide,
and the simulation's allocations set off several per run. `release` is safe to call
when nothing is held.
"""

import gc

__all__ = ["settle", "serve_pages", "thaw_soon", "thaw", "hold", "release", "THAW_AFTER_S", "THAW_EVERY_S"]

THAW_AFTER_S = 120.0  # closed pages' frozen cycles are collected this long after a page closes, at most this often
THAW_EVERY_S = 600.0  # ...and every this long, whatever closes
_held = False
_thaw_pending = False


def settle():
    gc.collect()  # (garbage made since the last freeze goes first, not into the frozen set)
    gc.freeze()


def serve_pages():
    """(`lab serve`, once) from now on, freeze what survives each full collection."""
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)


def _freeze_survivors(phase, info):
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


def thaw_soon(call_later):
    """A page has closed: in THAW_AFTER_S (`call_later(seconds, fn)`, the server's loop), unfreeze,
    collect everything once, freeze again. Pages closing meanwhile share that one pass."""
    global _thaw_pending
    if _thaw_pending:
        return
    _thaw_pending = True
    call_later(THAW_AFTER_S, thaw)


def thaw():
    """Unfreeze, collect everything once, freeze again."""
    global _thaw_pending
    _thaw_pending = False
    gc.unfreeze()
    gc.collect()
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
