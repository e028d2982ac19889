"""Timers the lab page starts: a debounced re-run, playback ticks, the stars bridge's resend.

Under `lab serve` they are Panel's periodic callbacks (Bokeh's server runs them under the
document's lock). In Pyodide, Panel starts a periodic callback only when an asyncio loop
is *running* in the calling context, and a widget event reaches Python from JavaScript as
a plain call, so a timer started by a student's click was silently never scheduled: the
static lab ran once at load and never again. There the timers go on the asyncio loop
itself, which in Pyodide is the browser's (call_later is setTimeout).

Both kinds answer `stop()`, which may be called at any time, twice, or after the last run.
"""

import asyncio
import sys

import panel as pn

__all__ = ["later", "every"]

IN_BROWSER = sys.platform == "emscripten"


class _LoopTimer:
    """Call `callback` every `period_ms` on the asyncio loop, `count` times (None: until stopped)."""

    def __init__(self, callback, period_ms, count):
        self._loop = asyncio.get_event_loop()
        self._callback = callback
        self._period_s = period_ms / 1000.0
        self._left = count
        self._handle = self._loop.call_later(self._period_s, self._fire)

    def _fire(self):
        self._handle = None
        if self._left is not None:
            self._left -= 1
        try:
            self._callback()
        finally:
            if self._handle is None and (self._left is None or self._left > 0) and self._period_s is not None:
                self._handle = self._loop.call_later(self._period_s, self._fire)

    def stop(self):
        self._period_s = None  # a run in progress schedules no next one
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def every(callback, period_ms, count=None):
    """Call `callback` every `period_ms` milliseconds, `count` times or until `stop()`."""
    period_ms = max(1, int(period_ms))
    if IN_BROWSER:
        return _LoopTimer(callback, period_ms, count)
    return pn.state.add_periodic_callback(callback, period=period_ms, count=count, start=True)


def later(callback, delay_ms):
    """Call `callback` once, `delay_ms` milliseconds from now."""
    return every(callback, delay_ms, count=1)
