"""The engine's time base: integer picosecond ticks (docs/model.md "Time base").

Inside the engine and the reference simulator every time and duration is a Python int
of picoseconds, so sums are exact: a stretch of steps adds up to the same end however
it is summed (in order, or in closed form), in CPython and in Pyodide alike. A week is
6.05e17 ticks, under 2**63, so a tick count fits an `array('q')` slot. The engine keeps
the same whole numbers in floats when a run's times stay under 2**52 (engine.py,
FLOAT_TICKS_BELOW): exact there, since every whole number below 2**53 is a double.

Two rules, used at the edges only:

- `to_ticks(seconds)`: `round(seconds * 1e12)` (one float multiply, then Python's
  correctly rounded float-to-int, ties to even): arrivals, link and fetch times, planner
  moments, the time cap, as they enter the engine.
- `to_seconds(ticks)`: `ticks / 10**12`, int by int, which Python rounds correctly (one
  rounding, the same in CPython and Pyodide): every time a `Result` holds.

A whole number of ticks round-trips, `to_ticks(to_seconds(k)) == k`, while k < 2**52
(about 75 minutes); past that `to_seconds` is still correctly rounded.
"""

__all__ = ["TICKS_PER_S", "to_ticks", "to_seconds"]

TICKS_PER_S = 10**12


def to_ticks(seconds):
    """Seconds (a float) -> the nearest whole tick (an int)."""
    return round(seconds * 1e12)


def to_seconds(ticks):
    """Ticks (an int) -> seconds, correctly rounded; None stays None."""
    return None if ticks is None else ticks / TICKS_PER_S
