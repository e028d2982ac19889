"""lab/ui/offload.py: work handed to `lab serve`'s worker processes comes back as an Outcome on
the page's loop; a worker that dies fails that work with a message and the pool is renewed."""

import functools
import os
import pickle

import pytest

pytest.importorskip("panel")

from lab.core.errors import LabError  # noqa: E402
from lab.ui import offload  # noqa: E402


class _Doc:
    """What `_hand_back` needs of a Document: callbacks for the loop, run here at once."""

    def add_next_tick_callback(self, callback):
        callback()


def _refuse():
    raise LabError("workload.rate", "too many")


def test_an_outcome_carries_a_value_or_the_error_and_pickles():
    assert offload.Outcome.of(functools.partial(sum, [1, 2])).get() == 3
    refused = pickle.loads(pickle.dumps(offload.Outcome.of(_refuse)))
    with pytest.raises(LabError, match="workload.rate: too many"):
        refused.get()


def test_a_worker_that_dies_fails_its_work_with_a_message_and_the_next_work_runs():
    offload.start_pool(1)
    try:
        pool = offload._pool
        doc, got = _Doc(), []
        future = pool.submit(offload.Outcome.of, functools.partial(os._exit, 3))  # the worker dies
        assert future.exception(timeout=120) is not None  # the pool has noticed
        offload._hand_back(future, doc, got.append, pool)
        with pytest.raises(RuntimeError, match="the lab's worker process failed"):
            got[0].get()
        assert offload._pool is not pool and offload.pooled()  # renewed
        again = offload._pool.submit(offload.Outcome.of, functools.partial(sum, [2, 3]))
        again.result(timeout=120)
        offload._hand_back(again, doc, got.append, offload._pool)
        assert got[1].get() == 5
    finally:
        offload.stop_pool()
    assert not offload.pooled()
