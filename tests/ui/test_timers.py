"""lab.ui.browser.timers in the browser's way (IN_BROWSER): timers started from a plain call, as a widget
event makes them in Pyodide, fire on the asyncio loop; stop() holds; counts are kept."""

import asyncio
import threading

import pytest

pytest.importorskip("panel")

from lab.ui.browser import timers  # noqa: E402


@pytest.fixture
def in_browser(monkeypatch):
    monkeypatch.setattr(timers, "IN_BROWSER", True)


def _drive(start, run_for_s=0.15):
    """Start timers from a plain callback on a running loop (no coroutine around it), then let it run.

    The loop runs in a thread of its own: sync Playwright, used by other tests in this process,
    keeps a loop of its own running in the main thread."""
    async def main():
        asyncio.get_running_loop().call_soon(start)
        await asyncio.sleep(run_for_s)

    thread = threading.Thread(target=lambda: asyncio.run(main()))
    thread.start()
    thread.join(10)
    assert not thread.is_alive()


def test_a_timer_started_outside_a_coroutine_fires_once(in_browser):
    fired = []
    _drive(lambda: timers.later(lambda: fired.append("once"), 5))
    assert fired == ["once"]


def test_every_keeps_its_count_and_stop_ends_it(in_browser):
    counted, stopped, made = [], [], {}

    def start():
        timers.every(lambda: counted.append(1), 5, count=3)
        made["t"] = timers.every(lambda: (stopped.append(1), made["t"].stop()), 5)  # stops itself on its first run

    _drive(start)
    assert len(counted) == 3 and len(stopped) == 1


def test_stop_before_it_fires_and_twice_is_harmless(in_browser):
    fired = []

    def start():
        t = timers.later(lambda: fired.append(1), 20)
        t.stop()
        t.stop()

    _drive(start)
    assert fired == []
