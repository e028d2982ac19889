"""Blame (lab/core/blame.py): TTFT parts that add up, worst-gap causes, dominant causes.

Properties over random scenarios (both layouts, whole/chunked, layer-wise, both
first_token definitions, KV-limited, runs cut by the drain cap); hand-built fleets whose
cause is known; the engine's blame equal (float ==) to the one the naive reference
simulator computes from its own per-token records; and the CLI's names.
"""

import csv
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.cli import main
from lab.core import (
    BLAME_COLUMNS, BLAME_NAMES, CAUSES, TTFT_PARTS, blame_summary, load_scenario, request_blame, request_gaps,
    request_metrics, simulate, step_time_fn, summarize,
)
from lab.core.blame import _prompt_pieces
from lab.core.missions import list_missions
from lab.core.result import GpuLog, RequestRecord, Result, Transfer

from reference_sim import reference_blame, reference_simulate
from test_properties import PROPERTY_SETTINGS, scenarios

LINK_PARTS = ("kv_wait", "link_wait", "wire", "join_wait")


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def make(fleet, slo, model=None, drain_s=120.0):
    """A scenario whose requests the test passes to simulate() itself."""
    return load_scenario({
        "workload": {"rate": 1, "duration_s": 1, "prompt_tokens": 100, "output_tokens": 10},
        "fleet": fleet, "model": model or {"cost": "linear"}, "slo": slo, "seed": 0, "drain_s": drain_s,
    })


def blame_of(scenario, requests):
    result = simulate(scenario, requests)
    rows = request_metrics(result)
    return result, rows, request_blame(result, rows)


# ---------------------------------------------------------------- properties


def check_blame(result):
    rows = request_metrics(result)
    blames = request_blame(result, rows)
    fleet = result.scenario.fleet
    split = fleet.layout == "disaggregated"
    pieces = _prompt_pieces(result)
    assert [b.id for b in blames] == [r.id for r in result.requests]
    for rec, row, b in zip(result.requests, rows, blames):
        assert tuple(b.parts) == TTFT_PARTS
        assert all(v >= 0.0 for v in b.parts.values()), (rec, b)
        total = math.fsum(b.parts.values())
        if rec.dropped:
            assert total == 0.0 and b.dominant_cause == "kv_capacity"
            continue
        if rec.first_token is not None:
            assert b.open_part is None
            assert close(total, rec.first_token - rec.arrival), (rec, b)
        else:
            # Never got its first token: the parts run to the end of the run, the open one named.
            assert b.open_part in TTFT_PARTS and close(total, row["ttft_s"]), (rec, b)
            # The open part is the last phase it reached (wire and link_wait interleave).
            later = TTFT_PARTS[TTFT_PARTS.index(b.open_part) + 1:]
            assert all(b.parts[p] == 0.0 for p in later if (b.open_part, p) != ("link_wait", "wire")), b
            if b.open_part in ("link_wait", "wire", "join_wait"):
                tr, stop = result.transfers[rec.transfer], result.end_time
                on_wire = any(s <= stop < e for s, e in tr.wire_spans())
                assert b.open_part == ("join_wait" if tr.end <= stop else "wire" if on_wire else "link_wait")
        if not split or fleet.first_token == "prefill":
            assert all(b.parts[p] == 0.0 for p in LINK_PARTS), b
        if rec.prefill_end is not None:
            # Its share of each step, derived from the logs: its own tokens, in consecutive
            # steps from its prefill start to its prefill end.
            own = pieces[rec.id]
            log = result.gpus[rec.prefill_gpu]
            steps = [j for j, _ in own]
            assert sum(c for _, c in own) == rec.prompt_tokens
            assert steps == list(range(steps[0], steps[-1] + 1))
            assert (log.start[steps[0]], log.end[steps[-1]]) == (rec.prefill_start, rec.prefill_end)
        gaps = request_gaps(result, rec)
        if gaps:
            assert b.worst_gap_s == max(gaps)
            if row["worst_gap_ms"] is not None:
                assert b.worst_gap_s * 1000.0 == row["worst_gap_ms"]
            # (a gap into a later stretch is the preemption's, whatever its step carried)
            assert b.worst_gap_cause in ("prefill_interference", "decode_batch", "transfer") + (
                ("preemption",) if rec.preemptions else ())
            if b.worst_gap_cause != "preemption":
                assert (b.worst_gap_cause == "prefill_interference") == (b.worst_gap_prompt_tokens > 0)
                assert b.worst_gap_batch >= 1
            if split and fleet.first_token == "prefill" and b.first_gap_parts is None:
                assert rec.preemptions  # preempted before its second token: no first gap to split
            elif split and fleet.first_token == "prefill":
                assert close(math.fsum(b.first_gap_parts.values()), gaps[0]), b
                assert all(v >= 0.0 for v in b.first_gap_parts.values())
        else:
            assert b.worst_gap_s is None and b.worst_gap_cause is None
        assert b.missed == (not row["met_slo"])
        assert (b.dominant_cause is None) == (not b.missed)
        assert b.dominant_cause is None or b.dominant_cause in CAUSES
    # Every step's prompt tokens are shared out exactly, several prompts per step or one.
    shared = {}
    for rid, own in pieces.items():
        for j, c in own:
            key = (result.requests[rid].prefill_gpu, j)
            shared[key] = shared.get(key, 0) + c
    logged = {(log.index, j): c for log in result.gpus for j, c in enumerate(log.prefill_tokens) if c}
    again = {log.index for log in result.gpus if log.readmitted}  # on_demand's re-prefills share steps too
    assert {k: c for k, c in shared.items() if k[0] not in again} == {k: c for k, c in logged.items() if k[0] not in again}
    assert all(c <= logged[k] for k, c in shared.items())
    summary = blame_summary(blames)
    assert tuple(summary["missed_by_cause"]) == CAUSES
    assert summary["missed"] == sum(1 for r in rows if not r["met_slo"])
    shares = summary["missed_by_cause"].values()
    assert close(math.fsum(shares), 1.0) if summary["missed"] else all(s == 0.0 for s in shares)
    if not any(rec.preemptions for rec in result.requests):
        assert summary["missed_by_cause"]["preemption"] == 0.0
    # `lab run` without a CSV blames only the misses: the same blames, the same summary.
    missed = request_blame(result, rows, missed_only=True)
    assert missed == [b for b in blames if b.missed]
    assert blame_summary(missed) == summary
    return blames


@st.composite
def busy_scenarios(draw):
    """test_properties' scenarios, loaded enough that queues, links and decode GPUs are
    busy (so every part and cause occurs), with a random SLO so that requests miss."""
    raw = draw(scenarios(drain=st.sampled_from([0.0, 0.5, 60.0]), max_duration=3.0))
    raw["workload"]["rate"] = draw(st.floats(4.0, 30.0))
    fleet, model = raw["fleet"], raw["model"]
    fleet["max_batch_seqs"] = draw(st.sampled_from([3, 256]))
    model.pop("kv_capacity_tokens", None)
    kv = draw(st.sampled_from([None, 3000, 20000]))
    if kv is not None:
        model["kv_capacity_tokens"] = kv
    if fleet["layout"] == "disaggregated":
        fleet["link"]["gbytes_per_s"] = draw(st.sampled_from([0.5, 3.0, 20.0]))
        fleet["link"]["sharing"] = draw(st.sampled_from(["fifo", "fifo", "independent"]))
    slo = {"ttft_s": draw(st.floats(0.05, 3.0)), "tpot_ms": draw(st.floats(5.0, 60.0)),
           "max_gap_ms": draw(st.floats(10.0, 400.0))}
    keep = draw(st.lists(st.sampled_from(sorted(slo)), min_size=1, max_size=3, unique=True))
    raw["slo"] = {k: slo[k] for k in keep}
    return raw


@PROPERTY_SETTINGS
@given(scenarios(drain=st.sampled_from([0.0, 0.3, 2.0, 60.0])))
def test_parts_are_nonnegative_and_add_up_to_the_ttft(raw):
    check_blame(simulate(load_scenario(raw)))


@settings(PROPERTY_SETTINGS, max_examples=150)  # enough for every part and cause to occur
@given(busy_scenarios())
def test_parts_add_up_and_causes_hold_on_busy_fleets(raw):
    check_blame(simulate(load_scenario(raw)))


def diff_blame(scenario, requests=None):
    """Where the engine's blame differs from the reference's (empty list = equal)."""
    result = simulate(scenario, requests)
    rows = request_metrics(result)
    mine = request_blame(result, rows)
    theirs = reference_blame(scenario, reference_simulate(scenario, requests))
    out = []
    served = {r.id for r in result.requests if r.first_token is not None and not r.dropped}
    if served != set(theirs):
        out.append(f"requests with a first token: engine {sorted(served)[:5]}..., reference {sorted(theirs)[:5]}...")
    for b in mine:
        if b.id not in served or b.id not in theirs:
            continue
        ref = theirs[b.id]
        worst = None if b.worst_gap_s is None else (
            b.worst_gap_s, b.worst_gap_cause, b.worst_gap_prompt_tokens, b.worst_gap_batch)
        for what, a, c in (("parts", b.parts, ref["parts"]), ("worst gap", worst, ref["worst_gap"]),
                           ("missed", b.missed, not ref["met"]), ("dominant", b.dominant_cause, ref["dominant"])):
            if a != c:
                out.append(f"request {b.id}: {what}: engine {a!r}, reference {c!r}")
    return out[:6]


@settings(PROPERTY_SETTINGS, max_examples=100)
@given(st.one_of(scenarios(drain=st.sampled_from([0.0, 1.0, 60.0]), max_duration=4.0), busy_scenarios()))
def test_engine_blame_equals_the_reference_blame(raw):
    problems = diff_blame(load_scenario(raw))
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- known causes


def test_a_long_prompt_in_a_decode_step_is_prefill_interference_with_its_tokens():
    sc = make({"layout": "colocated", "gpus": 1}, {"max_gap_ms": 100})
    result, rows, blames = blame_of(sc, [(0.0, 100, 40), (0.0, 100, 40), (0.05, 6000, 2)])
    check_blame(result)
    for victim in blames[:2]:
        assert (victim.worst_gap_cause, victim.worst_gap_prompt_tokens, victim.worst_gap_batch) == (
            "prefill_interference", 6000, 2)
        assert victim.missed and victim.dominant_cause == "prefill_interference"
    long = result.requests[2]
    parts = blames[2].parts
    step_s = step_time_fn(sc.model)
    # Its own prompt is its prefill; the two decode tokens riding in that step are chunk_wait.
    assert parts["prefill"] == step_s(0, 0, 6000)
    assert close(parts["chunk_wait"], (long.prefill_end - long.prefill_start) - step_s(0, 0, 6000))
    assert parts["chunk_wait"] > 0.0


def test_huge_decode_batches_are_decode_batch():
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
               "link": {"gbytes_per_s": 900, "sharing": "independent"}}, {"tpot_ms": 25})
    result, rows, blames = blame_of(sc, [(0.0, 50, 30)] * 150)
    check_blame(result)
    assert all(b.missed and b.dominant_cause == "decode_batch" for b in blames)
    assert all(b.worst_gap_prompt_tokens == 0 and b.worst_gap_batch > 100 for b in blames)
    assert blame_summary(blames)["missed_by_cause"]["decode_batch"] == 1.0


def test_a_slow_fifo_link_makes_link_wait_dominate():
    sc = make({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2,
               "link": {"gbytes_per_s": 1, "sharing": "fifo", "layerwise": False}}, {"ttft_s": 1.5})
    result, rows, blames = blame_of(sc, [(0.25 * i, 4000, 20) for i in range(12)])
    check_blame(result)
    bandwidth = 1e9
    waits = [b.parts["link_wait"] for b in blames]
    assert waits == sorted(waits) and waits[-1] > 2.0  # each waits for every transfer before it
    for rec, b in zip(result.requests, blames):
        assert close(b.parts["wire"], result.transfers[rec.transfer].bytes / bandwidth)
    summary = blame_summary(blames)
    assert summary["missed"] > 0
    assert max(summary["missed_by_cause"], key=summary["missed_by_cause"].get) == "link_wait"
    assert all(b.dominant_cause == "link_wait" for b in blames if b.missed)


def test_an_overloaded_prefill_pool_makes_queue_dominate():
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2,
               "link": {"gbytes_per_s": 900, "sharing": "independent"}}, {"ttft_s": 1.5})
    result, rows, blames = blame_of(sc, [(0.05 * i, 4000, 20) for i in range(40)])
    check_blame(result)
    summary = blame_summary(blames)
    assert summary["missed"] > 20
    assert summary["missed_by_cause"]["queue"] == 1.0


def test_first_token_at_prefill_puts_the_transfer_in_the_first_gap():
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "first_token": "prefill",
               "link": {"gbytes_per_s": 5, "sharing": "independent", "layerwise": False}}, {"max_gap_ms": 30})
    result, rows, blames = blame_of(sc, [(0.5 * i, 2000, 20) for i in range(5)])
    check_blame(result)
    for rec, b in zip(result.requests, blames):
        assert all(b.parts[p] == 0.0 for p in LINK_PARTS)
        assert b.worst_gap_cause == "transfer" and b.dominant_cause == "transfer"
        assert close(b.first_gap_parts["wire"], result.transfers[rec.transfer].bytes / 5e9)
        assert close(math.fsum(b.first_gap_parts.values()), request_gaps(result, rec)[0])


def test_chunked_prefill_splits_its_steps_into_own_prefill_and_chunk_wait():
    sc = make({"layout": "colocated", "gpus": 1, "chunk_tokens": 512}, {"ttft_s": 10})
    result, rows, blames = blame_of(sc, [(0.0, 1000, 5), (0.0, 1000, 5)])
    check_blame(result)
    step_s = step_time_fn(sc.model)
    # Chunks of 512: [512 of r0], [488 of r0 + 24 of r1], [512 of r1 + r0's decode], [464 of r1 + r0's decode].
    assert _prompt_pieces(result) == {0: [(0, 512), (1, 488)], 1: [(1, 24), (2, 512), (3, 464)]}
    for rid, own in ((0, (512, 488)), (1, (24, 512, 464))):
        rec, parts = result.requests[rid], blames[rid].parts
        assert parts["prefill"] == math.fsum(step_s(0, 0, c) for c in own)
        assert parts["chunk_wait"] > 0.0
        assert close(parts["prefill"] + parts["chunk_wait"], rec.prefill_end - rec.prefill_start)
    # r0's steps spent only r1's 24 tokens on other work.
    assert close(blames[0].parts["chunk_wait"], step_s(0, 0, 24))


def test_layerwise_streaming_overlapping_the_prefill_counts_only_the_wire_after_it():
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1,
               "link": {"gbytes_per_s": 50, "sharing": "independent", "layerwise": True}}, {"ttft_s": 10})
    result, rows, blames = blame_of(sc, [(0.0, 4000, 5)])
    check_blame(result)
    tr, parts = result.transfers[0], blames[0].parts
    assert tr.reserved < tr.ready  # reserved at the prefill start: no kv_wait
    assert parts["kv_wait"] == 0.0
    # A fast link keeps up with the layers: only the last chunk is on the wire after the prefill.
    assert close(parts["wire"], tr.layer_s) and close(parts["link_wait"], 0.0)


def test_a_request_larger_than_kv_memory_is_kv_capacity():
    sc = make({"layout": "colocated", "gpus": 1}, {"ttft_s": 10}, model={"cost": "linear", "kv_capacity_tokens": 800})
    result, rows, blames = blame_of(sc, [(0.0, 100, 10), (0.1, 1000, 10)])
    assert (blames[0].missed, blames[1].dominant_cause) == (False, "kv_capacity")
    assert blame_summary(blames) == {"missed": 1, "missed_by_cause": {c: float(c == "kv_capacity") for c in CAUSES}}


def test_a_cut_run_names_the_open_part_and_the_unfinished():
    sc = make({"layout": "colocated", "gpus": 1, "max_batch_seqs": 2}, {"ttft_s": 100}, drain_s=0.0)
    result, rows, blames = blame_of(sc, [(0.0, 100, 1000), (0.0, 100, 1000), (0.1, 100, 10)])
    check_blame(result)
    assert result.capped == "drain_s"
    assert [b.dominant_cause for b in blames[:2]] == ["unfinished", "unfinished"]
    assert (blames[2].open_part, blames[2].dominant_cause) == ("queue", "queue")  # no slot ever freed
    assert blames[2].parts["queue"] == result.end_time - 0.1


# ---------------------------------------------------------------- hand-built Results: ties and edges
#
# Built from the Result dataclasses directly, with times chosen to tie exactly (binary
# fractions), so the tie-breaking rules of the module docstring are pinned, not left to
# whatever a random scenario happens to produce.

HALF_S_PER_1000 = {"cost": "linear", "prefill_ms_per_token": 0.5}  # 1,000 prompt tokens: 0.5 s


def hand_result(fleet, slo, requests, gpus, transfers=(), end_time=4.0):
    sc = make(fleet, slo, model=HALF_S_PER_1000)
    result = Result(sc, list(requests), list(gpus), list(transfers), end_time=end_time, arrivals_end=end_time)
    rows = request_metrics(result)
    return result, request_blame(result, rows)


def log(index, role, steps):
    """A GpuLog from (start, end, decode_seqs, prefill_tokens) tuples."""
    g = GpuLog(index, role)
    for start, end, seqs, prompt in steps:
        g.start.append(start)
        g.end.append(end)
        g.decode_seqs.append(seqs)
        g.prefill_tokens.append(prompt)
        g.context_tokens.append(0)
    return g


def test_equal_ttft_parts_blame_the_earliest_in_ttft_parts():
    # Waited 0.5 s for the GPU, then its own 0.5 s prefill: queue and prefill tie.
    rec = RequestRecord(0, 0.0, 1000, 1, prefill_gpu=0, decode_gpu=0, prefill_start=0.5, prefill_end=1.0,
                        first_token=1.0, finish=1.0)
    _, [b] = hand_result({"layout": "colocated", "gpus": 1}, {"ttft_s": 0.5}, [rec],
                         [log(0, "colocated", [(0.5, 1.0, 0, 1000)])])
    assert (b.parts["queue"], b.parts["prefill"]) == (0.5, 0.5)
    assert (b.missed, b.dominant_cause) == (True, "queue")


def test_equal_gaps_make_the_earliest_the_worst_gap():
    # Gaps of 0.25 s and 0.25 s: the first (a step that also prefilled 100 tokens) is the worst.
    recs = [
        RequestRecord(0, 0.0, 1000, 3, prefill_gpu=0, decode_gpu=0, prefill_start=0.0, prefill_end=0.5,
                      first_token=0.5, finish=1.0, decode_first_step=1, decode_last_step=2),
        RequestRecord(1, 0.5, 100, 1, prefill_gpu=0, decode_gpu=0, prefill_start=0.5, prefill_end=0.75,
                      first_token=0.75, finish=0.75),
    ]
    steps = [(0.0, 0.5, 0, 1000), (0.5, 0.75, 1, 100), (0.75, 1.0, 1, 0)]
    _, blames = hand_result({"layout": "colocated", "gpus": 1}, {"ttft_s": 10, "max_gap_ms": 100}, recs,
                           [log(0, "colocated", steps)])
    b = blames[0]
    assert b.worst_gap_s == 0.25
    assert (b.worst_gap_cause, b.worst_gap_prompt_tokens, b.dominant_cause) == ("prefill_interference", 100,
                                                                               "prefill_interference")


SPLIT = {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1}


def cut_transfer(reserved, start, end_time):
    """One request whose prompt (0 -> 0.5 s on GPU 0) is moving to GPU 1 when the run ends."""
    rec = RequestRecord(0, 0.0, 1000, 10, prefill_gpu=0, decode_gpu=1, prefill_start=0.0, prefill_end=0.5,
                        transfer=0)
    tr = Transfer(0, 0, 1, ready=0.5, reserved=reserved, start=start, end=3.0, bytes=1)
    gpus = [log(0, "prefill", [(0.0, 0.5, 0, 1000)]), log(1, "decode", [])]
    _, [b] = hand_result(SPLIT, {"ttft_s": 10}, [rec], gpus, [tr], end_time=end_time)
    return b


def test_a_run_cut_while_the_bytes_move_is_open_on_the_wire():
    b = cut_transfer(reserved=0.5, start=0.5, end_time=1.5)
    assert (b.open_part, b.parts["wire"], b.parts["kv_wait"]) == ("wire", 1.0, 0.0)


def test_a_run_cut_while_the_link_is_busy_with_others_is_open_in_link_wait():
    b = cut_transfer(reserved=0.5, start=2.0, end_time=1.5)
    assert (b.open_part, b.parts["link_wait"], b.parts["wire"]) == ("link_wait", 1.0, 0.0)


def test_an_event_at_the_very_end_of_the_run_has_not_happened():
    # Room reserved (and bytes starting) exactly when the run ends: still waiting for KV room,
    # as a prefill starting exactly at the end still counts as queued.
    b = cut_transfer(reserved=1.5, start=1.5, end_time=1.5)
    assert (b.open_part, b.parts["kv_wait"], b.parts["wire"]) == ("kv_wait", 1.0, 0.0)
    rec = RequestRecord(0, 0.0, 1000, 1, prefill_gpu=0, decode_gpu=0, prefill_start=2.0)
    _, [q] = hand_result({"layout": "colocated", "gpus": 1}, {"ttft_s": 10}, [rec],
                         [log(0, "colocated", [])], end_time=2.0)
    assert (q.open_part, q.parts["queue"], q.parts["prefill"]) == ("queue", 2.0, 0.0)


# ---------------------------------------------------------------- reference, fixed cases


@pytest.mark.parametrize("fleet", [
    {"layout": "colocated", "gpus": 2},
    {"layout": "colocated", "gpus": 2, "chunk_tokens": 300},
    {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 1, "first_token": "prefill",
     "link": {"gbytes_per_s": 2, "sharing": "fifo", "layerwise": True}},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2,
     "link": {"gbytes_per_s": 1, "sharing": "fifo", "layerwise": False}},
    {"layout": "colocated", "gpus": 2, "chunk_tokens": 1024, "long_prefill_tokens": 256},
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "prefill_chunk_tokens": 1024,
     "long_prefill_tokens": 300, "link": {"gbytes_per_s": 1, "sharing": "fifo", "layerwise": True}},
], ids=["whole", "chunked", "fifo-layerwise-first-at-prefill", "fifo-whole", "partial-prefills",
        "prefill-pool-partial-prefills-layerwise"])
def test_engine_blame_equals_the_reference_on_a_loaded_fleet(fleet):
    sc = load_scenario({
        "seed": 4, "workload": {"rate": 6, "duration_s": 6, "prompt_tokens": {"dist": "uniform", "low": 100, "high": 3000},
                                "output_tokens": {"dist": "uniform", "low": 1, "high": 80}},
        "fleet": fleet, "model": {"cost": "linear", "kv_capacity_tokens": 20000},
        "slo": {"ttft_s": 1.0, "tpot_ms": 20, "max_gap_ms": 60},
    })
    problems = diff_blame(sc)
    assert not problems, "\n".join(problems)
    assert sum(b.missed for b in request_blame(simulate(sc))) > 0  # the comparison covered misses


# ---------------------------------------------------------------- command line


@pytest.fixture
def loaded_file(tmp_path):
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps({
        "seed": 2, "workload": {"rate": 8, "duration_s": 8, "prompt_tokens": 3000, "output_tokens": 50},
        "fleet": {"layout": "colocated", "gpus": 1}, "slo": {"ttft_s": 1.5, "tpot_ms": 25},
    }))
    return path


def test_run_json_says_why_requests_missed(loaded_file, capsys):
    assert main(["run", str(loaded_file), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out)[-len(BLAME_NAMES):] == list(BLAME_NAMES)
    assert out["missed"] == round(out["requests"] * (1 - out["slo_attainment"]))
    assert list(out["missed_by_cause"]) == list(CAUSES) and out["missed"] > 0
    assert math.isclose(math.fsum(out["missed_by_cause"].values()), 1.0)


def test_requests_csv_has_the_blame_columns(loaded_file, tmp_path, capsys):
    target = tmp_path / "rows.csv"
    assert main(["run", str(loaded_file), "--requests-csv", str(target)]) == 0
    assert "Why requests missed" in capsys.readouterr().out
    with open(target, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert set(BLAME_COLUMNS) <= set(rows[0])
    for row in rows:
        parts = [float(row[f"ttft_{p}_s"]) for p in TTFT_PARTS]
        assert math.isclose(math.fsum(parts), float(row["ttft_s"]), rel_tol=1e-9, abs_tol=1e-12)
        assert (row["dominant_cause"] == "") == (row["met_slo"] == "True")
        assert row["dominant_cause"] == "" or row["dominant_cause"] in CAUSES


# ---------------------------------------------------------------- prefill-pool chunks, attention, routing


def test_prefill_pool_chunks_split_into_own_prefill_and_chunk_wait():
    """fleet.prefill_chunk_tokens: a split fleet's prefill GPU shares its chunk budget the
    same way a colocated GPU does; the other prompt's tokens are chunk_wait."""
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "prefill_chunk_tokens": 512},
              {"ttft_s": 10})
    result, rows, blames = blame_of(sc, [(0.0, 1000, 5), (0.0, 1000, 5)])
    check_blame(result)
    step_s = step_time_fn(sc.model)
    assert list(result.gpus[0].prefill_tokens) == [512, 512, 512, 464]
    assert _prompt_pieces(result) == {0: [(0, 512), (1, 488)], 1: [(1, 24), (2, 512), (3, 464)]}
    assert close(blames[0].parts["chunk_wait"], step_s(0, 0, 24))
    assert close(blames[1].parts["chunk_wait"], step_s(0, 0, 488))
    for rid in (0, 1):
        rec, parts = result.requests[rid], blames[rid].parts
        assert close(parts["prefill"] + parts["chunk_wait"], rec.prefill_end - rec.prefill_start)
        assert close(math.fsum(parts.values()), rec.first_token - rec.arrival)


def test_chunk_wait_counts_the_gap_between_a_prompts_chunks_on_a_prefill_pool():
    """Request 1's chunks are separated by nothing but other prompts' chunks: its TTFT is
    queue + own prefill + chunk_wait exactly, with chunk_wait the others' share."""
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "prefill_chunk_tokens": 256},
              {"ttft_s": 10})
    result, rows, blames = blame_of(sc, [(0.0, 300, 3), (0.001, 2000, 3), (0.002, 100, 3)])
    check_blame(result)
    step_s = step_time_fn(sc.model)
    rec, parts = result.requests[1], blames[1].parts
    own = math.fsum(step_s(0, 0, c) for _, c in _prompt_pieces(result)[1])
    assert parts["prefill"] == own
    assert close(parts["chunk_wait"], (rec.prefill_end - rec.prefill_start) - own)
    assert parts["chunk_wait"] > 0.0


def test_own_prefill_with_attention_counts_the_attention_over_earlier_chunks():
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "prefill_chunk_tokens": 4096},
              {"ttft_s": 10}, model={"cost": "roofline", "attention": True})
    result, rows, blames = blame_of(sc, [(0.0, 10_000, 3)])
    check_blame(result)
    step_s = step_time_fn(sc.model)
    # 4,096 + 4,096 + 1,808 tokens; each chunk attends to the ones before it
    expected = math.fsum([step_s(0, 0, 4096, 4096 * 2048.0, 0), step_s(0, 0, 4096, 4096 * (4096 + 2048.0), 4096),
                          step_s(0, 0, 1808, 1808 * (8192 + 904.0), 8192)])
    assert blames[0].parts["prefill"] == expected
    assert expected > math.fsum([step_s(0, 0, 4096), step_s(0, 0, 4096), step_s(0, 0, 1808)])
    assert close(blames[0].parts["chunk_wait"], 0.0)


def test_engine_blame_equals_the_reference_blame_over_routing_combinations():
    from test_reference import ROUTING_GRID, random_routed_scenario

    for index, combo in enumerate(ROUTING_GRID):
        problems = diff_blame(random_routed_scenario(index, *combo))
        assert not problems, f"{combo}:\n" + "\n".join(problems)


def test_partial_prefills_give_each_prompt_under_way_its_own_pieces():
    """Budget 2,048, long_prefill_tokens 512: A (3,000) and C (5,000) take 512 a step each,
    B (400) its whole prompt in the first step; each prompt's prefill is its own pieces and
    its chunk_wait the others' share of its steps."""
    sc = make({"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 1, "prefill_chunk_tokens": 2048,
               "long_prefill_tokens": 512}, {"ttft_s": 10})
    result, rows, blames = blame_of(sc, [(0.0, 3000, 3), (0.0, 400, 3), (0.0, 5000, 3)])
    check_blame(result)
    assert list(result.gpus[0].prefill_tokens) == [1424] + [1024] * 4 + [512 + 440] + [512] * 3 + [392]
    pieces = _prompt_pieces(result)
    assert pieces == {0: [(j, 512) for j in range(5)] + [(5, 440)], 1: [(0, 400)],
                      2: [(j, 512) for j in range(9)] + [(9, 392)]}
    step_s = step_time_fn(sc.model)
    log = result.gpus[0]
    for rid, rec in enumerate(result.requests):
        parts = blames[rid].parts
        own = [step_s(0, 0, c) for _, c in pieces[rid]]
        assert parts["prefill"] == math.fsum(own)
        others = [(log.end[j] - log.start[j]) - step_s(0, 0, c) for j, c in pieces[rid]]
        assert close(parts["chunk_wait"], math.fsum(others)) and parts["chunk_wait"] > 0.0
        assert close(math.fsum(parts.values()), rec.first_token - rec.arrival)
    assert result.requests[1].prefill_end == log.end[0]  # B did not wait for A's last chunk


@pytest.mark.parametrize("layout", ["colocated", "disaggregated"])
def test_a_gap_spanning_a_preemption_is_blamed_on_it_on_the_later_stretchs_gpu(layout):
    from test_metrics import two_stretches

    result = two_stretches(layout)
    [b] = request_blame(result)
    # The gap into the second stretch (0.75 -> 1.0 s) is the worst, ended by GPU 1's step 0
    # (colocated: the re-prefill, which carried 12 prompt tokens and no decoding sequence).
    g1 = result.requests[0].decode_gpu
    assert b.worst_gap_s == 0.25
    assert b.worst_gap_cause == "preemption"
    assert (b.worst_gap_prompt_tokens, b.worst_gap_batch) == (result.gpus[g1].prefill_tokens[0],
                                                              result.gpus[g1].decode_seqs[0])
    assert (b.missed, b.dominant_cause) == (True, "preemption")
    assert math.fsum(b.parts.values()) == 0.5  # TTFT parts unchanged: they add up to the TTFT
    # A stretch that ended for another reason (no preemption logged) is not blamed on one.
    result.gpus[result.requests[0].earlier[0][0]].preempted.clear()
    [b] = request_blame(result)
    assert b.worst_gap_s == 0.25 and b.worst_gap_cause != "preemption"


def test_a_preempted_request_whose_worst_gap_is_within_a_stretch_keeps_its_cause():
    from test_metrics import two_stretches

    result = two_stretches("disaggregated")
    first = result.gpus[1]
    first.end[1] = 0.75 + 0.125  # stretch 1's second step: 0.625 -> 0.875 s, a 0.25 s gap
    later = result.gpus[2]
    later.start[:] = [1.0, 1.125]  # stretch 2 joins at 1.0 and ends at 1.125: 0.125 s gaps
    later.end[:] = [1.125, 1.25]
    result.requests[0].finish = 1.25
    [b] = request_blame(result)
    assert b.worst_gap_s == 0.25 and b.worst_gap_cause == "decode_batch"  # the earliest of equals


# ---------------------------------------------------------------- late and frozen: the larger miss


def _mission(mission_id):
    from lab.core.missions import list_missions

    return next(m for m in list_missions() if m.id == mission_id)


def test_a_request_late_by_a_hair_and_frozen_by_a_preemption_is_blamed_on_the_preemption():
    """Mission 16's storm: requests 5 ms late on TTFT (after waiting for KV room) that a
    preemption then froze for seconds, past the TPOT target, were all blamed on the KV wait."""
    from lab.core.blame import gap_outweighs_ttft

    scenario = _mission("memory-on-demand").scenario
    slo = scenario.slo
    result = simulate(scenario)
    rows = request_metrics(result)
    late_and_frozen = 0
    for rec, row, b in zip(result.requests, rows, request_blame(result, rows)):
        if not b.missed or rec.first_token is None or not rec.finished or row["ttft_s"] <= slo.ttft_s:
            continue
        token_miss = row["tpot_ms"] > slo.tpot_ms
        gap_excess = b.worst_gap_s * 1000.0 - slo.tpot_ms
        ttft_excess = (row["ttft_s"] - slo.ttft_s) * 1000.0
        assert gap_outweighs_ttft(row, b, slo) == (token_miss and gap_excess > ttft_excess)
        if token_miss and gap_excess > ttft_excess:
            late_and_frozen += 1
            assert b.dominant_cause == b.worst_gap_cause, (rec.id, b)
        else:
            assert b.dominant_cause in TTFT_PARTS, (rec.id, b)
    preempted = [b for b in request_blame(result, rows) if b.dominant_cause == "preemption"]
    assert late_and_frozen > 0 and len(preempted) >= late_and_frozen
    assert all(b.worst_gap_s * 1000.0 > slo.tpot_ms for b in preempted)  # each with its gap, over the target


# What each mission's brief says its start's misses come from (the brief's own words), and
# so what its start's blame bar must show first. Missions whose start misses nothing are out.
BRIEF_CAUSES = {
    "mixing-hurts": "prefill_interference",  # "a 2,500-token prefill ... every answer on that GPU waits for it"
    "decode-drowns": "decode_batch",  # "every decode step takes 30-40 ms"
    "slow-link": "link_wait",  # "transfers wait for seconds"
    "long-document-surge": "prefill_interference",  # "every long prefill ... freezes the answers on its GPU"
    "chunk-it": "prefill_interference",  # "whole-prompt prefill puts a step of 100 ms or more into the answers"
    "chat-heavy": "decode_batch",  # "its blue steps pass 25 ms"
    "book-store": "prefill_interference",  # "every 4,000-token prefill freezes the answers on its GPU"
    "conversation-trace": "decode_batch",  # "conversation is decode-heavy"
    "code-trace": "queue",  # "every burst piles up prompts"
    "memory-full": "kv_wait",  # "a finished prompt must reserve room for its whole answer"
    "tp-per-phase": "kv_wait",  # "the finished prompts wait in the link queue (waiting for room)"
    "one-long-prompt": "queue",  # "the short prompts already bound to it wait behind it"
    "memory-on-demand": "kv_wait",  # "most misses are late first tokens (KV room) ... the rest ... (preempted)"
    "cache-remembers": "queue",  # "so prompts queue for seconds"
    "say-no-early": "queue",  # "the prefill queue climbs ... everyone in it waits"
    "traffic-shifts": "queue",  # "two prefill GPUs cannot keep up with the documents"
    "tiny-chunks": "prefill_interference",  # "Whole prompts freeze the answers"
    "chunking-runs-out": "queue",  # "an instance prefills 5,000 tokens a second of the 6,100 it gets: prompts queue"
}


@pytest.mark.parametrize("mission_id", sorted(BRIEF_CAUSES))
def test_each_missions_start_blames_its_misses_on_what_its_brief_says(mission_id):
    mission = _mission(mission_id)
    result = simulate(mission.scenario)
    summary = blame_summary(request_blame(result))
    shares = summary["missed_by_cause"]
    assert summary["missed"] > 0
    top = max(shares, key=shares.get)
    assert top == BRIEF_CAUSES[mission_id], (mission_id, {k: round(v, 3) for k, v in shares.items() if v})
    if mission_id == "memory-on-demand":  # the brief's second cause: the frozen answers
        assert shares["preemption"] > 0


@pytest.mark.parametrize("mission_id", [m.id for m in list_missions()])
def test_run_json_blames_as_the_full_blame_does_on_every_mission(mission_id, capsys):
    """request_blame(missed_only=True) is the full blame's misses on every mission at its start;
    `lab run --json` builds no row per request and blames only the misses (none when every
    request met the SLO): its metrics and its why are those of the full rows and blame."""
    mission = _mission(mission_id)
    result = simulate(mission.scenario)
    rows = request_metrics(result)
    blames = request_blame(result, rows)
    assert request_blame(result, rows, missed_only=True) == [b for b in blames if b.missed]
    assert main(["run", str(mission.path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    full = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in summarize(result, rows).items()}
    full.update(blame_summary(blames))
    assert {k: out[k] for k in full} == json.loads(json.dumps(full))
