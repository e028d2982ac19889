"""lab/ui/timeline/collector.py under `lab serve`: what survives a full collection is frozen (later
full collections walk only what is new), and a closed page's frozen cycles are collected by
one thaw, scheduled once however many pages close meanwhile."""

import gc
import weakref

import pytest

from lab.ui.timeline import collector


class _Cycle:
    def __init__(self):
        self.me = self


@pytest.fixture
def clean_collector(monkeypatch):
    """The process's collector as it was, whatever the test froze or hooked."""
    monkeypatch.setattr(collector, "_thaw_pending", False)
    yield
    if collector._freeze_survivors in gc.callbacks:
        gc.callbacks.remove(collector._freeze_survivors)
    gc.unfreeze()
    gc.collect()


def test_what_survives_a_full_collection_is_frozen_once_the_server_asks(clean_collector):
    kept = [[i] for i in range(1000)]  # (tracked objects that live on)
    gc.collect()
    before = gc.get_freeze_count()
    gc.collect()
    assert gc.get_freeze_count() == before  # not asked: nothing frozen
    collector.serve_pages()
    collector.serve_pages()  # (once, however often asked)
    assert gc.callbacks.count(collector._freeze_survivors) == 1
    gc.collect(1)
    assert gc.get_freeze_count() == before  # a young collection freezes nothing
    gc.collect()
    assert gc.get_freeze_count() >= before + len(kept)
    assert all(gc.is_tracked(x) for x in kept)


def test_a_closed_pages_frozen_cycle_is_collected_by_one_thaw(clean_collector):
    cycle = _Cycle()
    gone = weakref.ref(cycle)
    gc.collect()
    gc.freeze()
    del cycle
    gc.collect()
    assert gone() is not None  # frozen: the collector does not see it
    scheduled = []
    collector.thaw_soon(lambda seconds, fn: scheduled.append((seconds, fn)))
    collector.thaw_soon(lambda seconds, fn: scheduled.append((seconds, fn)))  # a second page closes meanwhile
    assert [s for s, _fn in scheduled] == [collector.THAW_AFTER_S]
    scheduled[0][1]()  # (collector.thaw)
    assert gone() is None
    assert gc.get_freeze_count() > 0  # what lives is frozen again
    collector.thaw_soon(lambda seconds, fn: scheduled.append((seconds, fn)))
    assert len(scheduled) == 2  # after the thaw, the next close schedules the next one
