"""The stars bridge's Python side without a browser: asking the page for the saved stars until
it has answered once (its own first answer can be lost on the static site), and resending
stars it has not confirmed."""

import pytest

pytest.importorskip("panel")

import lab.ui.stars.stars_bridge as stars_bridge  # noqa: E402


class _Timer:
    def __init__(self, callback, period_ms, count):
        self.callback, self.period_ms, self.count, self.stopped = callback, period_ms, count, False

    def stop(self):
        self.stopped = True


@pytest.fixture
def bridge(monkeypatch):
    timers = []
    monkeypatch.setattr(stars_bridge, "every", lambda cb, ms, count=None: timers.append(_Timer(cb, ms, count)) or timers[-1])
    b = stars_bridge.StarsBridge()
    sent = []
    monkeypatch.setattr(b, "_send_msg", sent.append)
    return b, timers, sent


def test_a_bridge_that_has_not_answered_is_asked_until_it_does(bridge):
    b, timers, sent = bridge
    b.read_until_loaded()
    b.read_until_loaded()  # (one timer, however often it is called)
    assert len(timers) == 1
    timers[0].callback()
    timers[0].callback()
    assert sent == [{"type": "read"}, {"type": "read"}]
    b._handle_msg({"type": "stars", "stars": [["draft-0123456789ab", [True]]], "status": "ok", "backups": []})
    assert b.loaded and b.stars == {"draft-0123456789ab": [True]} and timers[0].stopped
    timers[0].callback()  # a tick already queued sends nothing more
    assert len(sent) == 2


def test_a_bridge_that_answered_is_not_asked(bridge):
    b, timers, sent = bridge
    b._handle_msg({"type": "stars", "stars": [], "status": "ok", "backups": [], "hello": True})
    b.read_until_loaded()
    assert timers == [] and sent == []


def test_the_asking_ends_after_the_retry_limit(bridge):
    b, timers, sent = bridge
    b.read_until_loaded()
    assert timers[0].count == stars_bridge.RETRY_LIMIT and timers[0].period_ms == stars_bridge.RETRY_MS


def test_each_star_earned_is_resent_for_the_full_count_even_after_an_earlier_resend_ran_out(bridge):
    b, timers, sent = bridge
    b.earn("mixing-hurts", [True, False, False])  # the page never answers
    assert len(timers) == 1 and timers[0].count == stars_bridge.RETRY_LIMIT
    for _ in range(timers[0].count):
        timers[0].callback()
    assert len(sent) == 1 + stars_bridge.RETRY_LIMIT  # the first send, then one per tick; the timer is done
    sent.clear()
    b.earn("mixing-hurts", [False, True, False])  # a minute later: a new star must be resent again
    assert sent and timers[-1] is not timers[0] and timers[-1].count == stars_bridge.RETRY_LIMIT
    timers[-1].callback()
    assert sent[-1] == {"type": "earn", "missions": [{"mission": "mixing-hurts", "stars": [True, True, False]}]}
    assert len(sent) == 2
    b._handle_msg({"type": "stars", "stars": [["mixing-hurts", [True, True, False]]], "status": "ok", "ack": True})
    assert b.pending == {} and timers[-1].stopped  # confirmed: the resending stops
