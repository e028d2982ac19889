"""lab/ui/runs/offload.py: work handed to `lab serve`'s worker processes comes back as an Outcome on
the page's loop; a worker that dies fails that work with a message and the pool is renewed."""

import functools
import os
import pickle
from pathlib import Path

import pytest

pytest.importorskip("panel")

from lab.core.errors import LabError  # noqa: E402
from lab.ui.runs import offload  # noqa: E402

MISSION_01 = Path(__file__).resolve().parents[2] / "missions" / "01-mixing-hurts.json"


class _Doc:
    """What `_hand_back` needs of a Document: callbacks for the loop, run here at once."""

    def add_next_tick_callback(self, callback):
        callback()


class _Loop:
    """A Document whose loop turns are run by hand (`turn()`), one callback each."""

    def __init__(self):
        self.waiting = []

    def add_next_tick_callback(self, callback):
        self.waiting.append(callback)

    def turn(self):
        self.waiting.pop(0)()


class _Done:
    """A finished future holding `value`."""

    def __init__(self, value):
        self.value = value

    def cancelled(self):
        return False

    def result(self):
        return self.value


def _run_like_lab_serve(work, sliced=None):
    """`work` as lab serve runs it: its outcome cut in the worker, pickled across, handed back
    on a loop turned by hand. (the outcome, the loop turns it took; `sliced`: the slices' count
    is appended to it)"""
    sent = pickle.loads(pickle.dumps(offload._in_worker(work)))
    if sliced is not None:
        sliced.append(len(sent[1]))
    loop, got = _Loop(), []
    offload._hand_back(_Done(sent), loop, got.append, pool=None)
    turns = 0
    while not got:
        loop.turn()
        turns += 1
    return got[0], turns


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
        pool = offload._pools[False]
        doc, got = _Doc(), []
        future = pool.submit(offload._in_worker, functools.partial(os._exit, 3))  # the worker dies
        assert future.exception(timeout=120) is not None  # the pool has noticed
        offload._hand_back(future, doc, got.append, pool)
        with pytest.raises(RuntimeError, match="the lab's worker process failed"):
            got[0].get()
        assert offload._pools[False] is not pool and offload.pooled()  # renewed
        again = offload._pools[False].submit(offload._in_worker, functools.partial(sum, [2, 3]))
        again.result(timeout=120)
        offload._hand_back(again, doc, got.append, offload._pools[False])
        assert got[1].get() == 5
    finally:
        offload.stop_pool()
    assert not offload.pooled()


def test_long_lists_come_back_in_slices_a_few_a_loop_turn_and_equal(monkeypatch):
    """A run's long lists (its requests, rows, blames, and each GPU's step log: inside a dict,
    a tuple, a list and a dataclass, as run_work returns them) are unpickled on the loop in
    slices, TURN_S of them a turn, so no page waits on one long unpickling; what comes back is
    equal to what the work returned, shorter lists and all."""
    import lab.core as core
    from lab.ui.runs.run_work import run_work

    monkeypatch.setattr(offload, "SLICE_ITEMS", 500)  # (a run of 3,600 requests, 1,000 steps a GPU: many slices of each)
    mission = core.load_mission(str(MISSION_01))
    scenario = mission.scenario.with_changes({"workload.rate": 60.0})
    work = functools.partial(run_work, mission, scenario, None, True, None, measured=True)
    direct = work()
    n = len(direct["result"].requests)
    assert n > offload.SLICE_ITEMS  # (the rows and blames are as long)
    long_logs = [len(column) for log in direct["result"].gpus for column in vars(log).values()
                 if type(column) is list and len(column) > offload.SLICE_ITEMS]
    assert long_logs  # (a GPU's step log is a long list too)
    slices = 3 * -(-n // offload.SLICE_ITEMS) + sum(-(-k // offload.SLICE_ITEMS) for k in long_logs)
    monkeypatch.setattr(offload, "TURN_S", 0.0)  # a slice a turn: what a slow loop turn does
    sliced = []
    outcome, turns = _run_like_lab_serve(work, sliced)
    assert sliced == [slices] and turns == slices  # one turn a slice; the last hands the whole back
    monkeypatch.setattr(offload, "TURN_S", 3600.0)  # a fast loop: all in one turn
    _outcome, turns = _run_like_lab_serve(work)
    assert turns == 1
    back = outcome.get()
    assert back["result"] == direct["result"] and back["result"].requests == direct["result"].requests
    assert [vars(g) for g in back["result"].gpus] == [vars(g) for g in direct["result"].gpus]
    assert back["measured"] == direct["measured"] and type(back["measured"]) is tuple
    assert [vars(b) for b in back["blames"]] == [vars(b) for b in direct["blames"]]


def test_a_big_runs_step_logs_come_back_an_array_a_slice():
    """A big run's step logs are arrays (lab.core.result.GpuLog): each long one comes back as a
    slice of its own, an array again, so the pool's thread never unpickles them all in one call."""
    from array import array

    logs = {"gpus": [{"start_t": array("d", range(offload.SLICE_ITEMS + 1)), "short": array("q", [1, 2])}] * 2}
    sliced = []
    outcome, _turns = _run_like_lab_serve(functools.partial(dict, logs), sliced)
    back = outcome.get()
    assert sliced == [2]
    assert back == logs and type(back["gpus"][1]["start_t"]) is array and back["gpus"][1]["start_t"].typecode == "d"


def test_a_slice_that_cannot_be_read_fails_the_work_with_a_message():
    outcome, slices = offload._in_worker(functools.partial(list, range(offload.SLICE_ITEMS + 1)))
    slices[1] = b"not a pickle"
    loop, got = _Loop(), []
    offload._hand_back(_Done((outcome, slices)), loop, got.append, pool=None)
    while not got:
        loop.turn()
    with pytest.raises(RuntimeError, match="the lab could not read its worker's answer"):
        got[0].get()


def test_heavy_work_runs_in_processes_at_a_lower_priority():
    """lab serve's heavy pool (offload.py): its processes yield the CPU to the server and to the
    light pool's runs; the light pool's run at the server's own priority."""
    if not hasattr(os, "nice"):
        pytest.skip("no process priorities on this system")
    offload.start_pool(2)
    try:
        assert offload._pools[False]._max_workers == 2 and offload._pools[True]._max_workers == 1
        own = os.nice(0)
        light = offload._pools[False].submit(offload._in_worker, functools.partial(os.nice, 0)).result(timeout=120)
        heavy = offload._pools[True].submit(offload._in_worker, functools.partial(os.nice, 0)).result(timeout=120)
        assert light[0].get() == own
        assert heavy[0].get() == min(own + offload.HEAVY_NICE, 19)
    finally:
        offload.stop_pool()


_ORPHAN_SCRIPT = """
import functools, sys, time
sys.path.insert(0, {repo!r})
from lab.ui.runs import offload
offload.start_pool(1)
future = offload._pools[False].submit(offload._in_worker, functools.partial(time.sleep, 600))
while not offload._pools[False]._processes:
    time.sleep(0.05)
print(*offload._pools[False]._processes, flush=True)
{then}
"""


def _worker_of(then):
    """Start a server-like process whose one worker sleeps 10 minutes; (the process, the worker's pid)."""
    import subprocess
    import sys

    script = _ORPHAN_SCRIPT.format(repo=str(MISSION_01.parents[1]), then=then)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    return proc, int(proc.stdout.readline())


def _gone(pid, within_s):
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            os.waitpid(pid, os.WNOHANG)  # (reaped here if it was ours)
        except ChildProcessError:
            pass
        time.sleep(0.1)
    return False


def test_stopping_the_pool_ends_a_run_under_way():
    proc, worker = _worker_of("offload.stop_pool(); print('stopped', flush=True); time.sleep(600)")
    try:
        assert proc.stdout.readline().strip() == "stopped"
        assert _gone(worker, 10), "the worker still runs after stop_pool"
    finally:
        proc.kill()
        proc.wait()


def test_a_worker_never_outlives_a_killed_server():
    """Killed (SIGKILL: no `finally`, no stop_pool), the server leaves its worker mid-run; the
    worker sees it gone and exits, instead of finishing a run nobody waits for."""
    proc, worker = _worker_of("time.sleep(600)")
    proc.kill()
    proc.wait()
    try:
        assert _gone(worker, 3 * offload.PARENT_CHECK_S + 5), "the worker outlived its server"
    finally:
        if not _gone(worker, 0.1):
            os.kill(worker, 9)


def test_a_frozen_scenario_with_phases_crosses_untouched():
    """A scenario is a frozen dataclass whose workload holds tuples (phases): cutting the long
    lists out of a run must not try to set any of its fields (it did, and every run of a
    mission with phases failed in the worker: FrozenInstanceError)."""
    import lab.core as core

    mission = core.load_mission(str(MISSION_01))
    scenario = mission.scenario.with_changes({"workload.phases": [{"start_s": 30, "rate": 20}], "workload.rate": 10})
    value = {"scenario": scenario, "runs": (scenario, [0] * (offload.SLICE_ITEMS + 1))}
    sliced = []
    outcome, _turns = _run_like_lab_serve(functools.partial(dict, value), sliced)
    back = outcome.get()
    assert back["scenario"] == scenario and back["runs"][0] == scenario and back["runs"][1] == [0] * (offload.SLICE_ITEMS + 1)
    assert sliced == [2]
