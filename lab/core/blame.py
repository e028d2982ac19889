"""Blame: why a request missed, derived from a `Result` (no engine bookkeeping).

**TTFT parts** (seconds, `TTFT_PARTS`) add up to the request's TTFT (first token -
arrival), to float rounding:

- `queue`: arrival -> the first step carrying its prompt starts (colocated: this includes
  waiting for KV memory or a batch slot on a GPU).
- `prefix_fetch` (a shared prefix cache, docs/model.md "Prefix caching"): the time its cached
  head was fetched from the host pool (`prefix_fetch_s`), inside the step that started its
  prefill; 0 otherwise.
- `prefill`: what its own prompt costs: for each step that carried c of its prompt
  tokens, the cost model's time for c prompt tokens alone on its idle prefill instance,
  `step_s(0, 0, c)`, summed (`math.fsum`). Whole prefill: one step, `step_s(0, 0, P)`.
  With `model.attention` each piece also carries its attention over the p tokens of its
  prompt before it: `step_s(0, 0, c, c * (p + c/2), p)`. A prompt with a cached head of
  h tokens computes only the rest: its pieces start after p = h tokens. The same on a prefill pool
  chunked by `prefill_chunk_tokens`, and with `long_prefill_tokens` (several prompts under
  way share a step, each with its own pieces: `_prompt_pieces`).
- `chunk_wait`: the rest of prefill start -> prefill end: time those steps spent on other
  work (other prompts in the same batch or chunk budget, the decode tokens of other
  sequences sharing a colocated step) and any wait between the steps carrying its chunks
  (on a prefill pool too: the other prompts sharing its chunk budget), and the fetches of
  other prompts started in the same step (its own fetch is `prefix_fetch`).
  Colocated whole prefill mixed with decode: the decode share of that step is here too.
- Disaggregated with `first_token: decode` (the parts after the prefill end):
  `kv_wait` prefill end -> room reserved on a decode GPU (0 when it was reserved
  before the prefill ended, as layer-wise streaming does when
  a decode GPU has room: it reserves at the prefill start); `wire`: time its bytes are on
  the wire after both the prefill end and the reservation (layer-wise: only the chunks'
  time after that moment, so streaming that overlaps the prefill costs nothing here);
  `link_wait`: the rest of that moment -> landed (the fifo link busy with others, or
  layer chunks waiting for one another); `join_wait`: landed -> the decode step boundary
  where the decode GPU takes it in, which is the first token's time.
- With `first_token: prefill` the first token is the prefill end, so those four parts are
  0 in TTFT; the same four, measured to the boundary where the decode GPU takes the
  sequence in, plus that first decode step (`decode_step`), make `first_gap_parts`,
  which sum to the first inter-token gap.

A request that never got its first token counts with TTFT = end of run - arrival (as
metrics.py does): its parts run up to the end of the run and `open_part` names the one it
was in then, which takes all the time since that phase began (a prefill cut short is all
`prefill`). A dropped request (larger than a GPU's KV memory) has all parts 0, and so
does a rejected one (`fleet.admission`: turned away at arrival, it waited for nothing;
its TTFT is None in `request_metrics`).

**Worst gap**: the largest inter-token gap, the earliest of equals, ended by step j of
its decode GPU. `worst_gap_cause` is named whether or not the gap met a target:
`transfer` when it is the first gap and `first_token: prefill` (a split fleet);
`prefill_interference` when step j carried prompt tokens; `decode_batch` otherwise (a
decode-only step: its batch and context made it long). `worst_gap_prompt_tokens` and
`worst_gap_batch` are step j's prompt tokens and decoding sequences. `preemption` when the
gap is the first of a later decode stretch (`RequestRecord.earlier`) and the stretch before
ended in a preemption (`_stretch_change`): it spans the sequence's preemption, its wait and
its recompute (fleet.kv_policy on_demand); `role_change` instead when the stretch before it
ended with its instance leaving for the other pool (fleet.planner: the gap spans the
hand-over, the KV's trip and the rejoin). Gaps are
read over every stretch in order (the step j is then on that stretch's GPU). None without gaps.

**Dominant cause** (`dominant_cause`, None when the request met the SLO): `rejected` for
a request early rejection turned away at arrival; `kv_capacity` for a dropped request; the largest TTFT part (earliest in `TTFT_PARTS` of equals) when it
has no first token or its TTFT is over the SLO's target; `unfinished` when its first token
was in time but the run was cut before its last; else (it missed a TPOT or max-gap
target) its worst gap's cause. A finished request that missed both the TTFT target and a
per-token term is blamed on the one it missed by more: its worst gap's cause when that
gap's excess over the per-token target (`Slo.per_token_target_ms`) is larger than its
TTFT's excess over the TTFT target (`gap_outweighs_ttft`): a request a little late after
waiting for KV room, then frozen for seconds by a preemption, missed because of the preemption.
"""

import math
from dataclasses import dataclass
from itertools import compress

from .cost import instance_costs
from .metrics import first_token_ticks, step_gaps_of, request_metrics
from .policies import prefill_slice
from .ticks import to_seconds, to_ticks

__all__ = [
    "TTFT_PARTS", "LINK_PARTS", "GAP_CAUSES", "CAUSES", "BLAME_NAMES", "BLAME_COLUMNS",
    "Blame", "request_blame", "blame_summary",
]

TTFT_PARTS = ("queue", "prefix_fetch", "prefill", "chunk_wait", "kv_wait", "link_wait", "wire", "join_wait")
GAP_CAUSES = ("prefill_interference", "decode_batch", "transfer", "preemption", "role_change")
# Every dominant cause, in the order summaries list them.
CAUSES = TTFT_PARTS + GAP_CAUSES + ("kv_capacity", "unfinished", "rejected")
# Fleet-level names `lab run --json` adds after summarize()'s (see blame_summary).
BLAME_NAMES = ("missed", "missed_by_cause")
# Per-request columns `--requests-csv` adds (see Blame.row).
BLAME_COLUMNS = tuple(f"ttft_{p}_s" for p in TTFT_PARTS) + (
    "ttft_open_part", "worst_gap_cause", "worst_gap_prompt_tokens", "worst_gap_batch", "dominant_cause",
)
# The TTFT parts after the prefill end: a split fleet's transfer (0 on a colocated fleet).
LINK_PARTS = ("kv_wait", "link_wait", "wire", "join_wait")


@dataclass
class Blame:
    """Why one request took the time it took (see the module docstring)."""

    id: int
    parts: dict  # TTFT part name -> seconds, every name of TTFT_PARTS, in that order
    open_part: str = None  # the part it was in when the run ended without its first token
    worst_gap_s: float = None
    worst_gap_cause: str = None
    worst_gap_prompt_tokens: int = None
    worst_gap_batch: int = None
    first_gap_parts: dict = None  # first_token: prefill on a split fleet: the first gap, split
    missed: bool = False
    dominant_cause: str = None

    def row(self):
        """The BLAME_COLUMNS of this request, for --requests-csv."""
        out = {f"ttft_{p}_s": self.parts[p] for p in TTFT_PARTS}
        out.update(ttft_open_part=self.open_part, worst_gap_cause=self.worst_gap_cause,
                   worst_gap_prompt_tokens=self.worst_gap_prompt_tokens, worst_gap_batch=self.worst_gap_batch,
                   dominant_cause=self.dominant_cause)
        return out


def _prompt_pieces(result):
    """{request id: [(step index, own prompt tokens)]} on its prefill GPU, from the step logs.

    A GPU admits prompts in request-id order (each queue is FIFO), each at the start of a
    step that carries some of it (its `prefill_start`); on_demand's re-prefills
    (`GpuLog.readmitted`) are admitted at their step ahead of that step's new prompts. A step's prompt tokens go to the
    prompts under way in admission order, each `policies.prefill_slice` of what is left
    (docs/model.md "Chunked prefill and partial prefills"). Replaying that with the step's logged
    total as the budget gives each prompt's share exactly: the engine's slices sum to that
    total, and only the last prompt served can have been cut short by the budget.
    """
    fleet = result.scenario.fleet
    chunked = (fleet.chunk_tokens if fleet.layout == "colocated" else fleet.prefill_chunk_tokens) is not None
    long_tokens = fleet.long_prefill_tokens if chunked else None  # whole prefill ignores it
    by_gpu = {log.index: [] for log in result.gpus if log.readmitted}
    for rec in result.requests:
        if rec.prefill_gpu >= 0 and rec.prefill_start is not None:
            by_gpu.setdefault(rec.prefill_gpu, []).append(rec)
    pieces = {}
    for g, recs in by_gpu.items():
        log = result.gpus[g]
        column, starts = log.prefill_tokens, log.start_t  # (ticks: no seconds made per step)
        admitted, count = 0, len(recs)
        next_start = to_ticks(recs[0].prefill_start) if recs else math.inf
        # on_demand's re-prefills: admitted ahead of the step's new prompts (they re-enter the
        # front of the queue); their pieces are not their request's own prefill (TTFT's).
        again = log.readmitted
        k = 0
        under_way = []  # [prompt tokens, tokens left, its pieces], admission order
        for j in compress(range(len(column)), column):  # the steps with prompt work
            while k < len(again) and again[k][0] <= j:
                under_way.append([again[k][2], again[k][3], []])  # (its cached head is not computed)
                k += 1
            while next_start <= starts[j]:
                rec = recs[admitted]
                # A cached head is not computed: only the rest is left (prefix_cache.py).
                under_way.append([rec.prompt_tokens, rec.prompt_tokens - rec.prefix_hit_tokens, pieces.setdefault(rec.id, [])])
                admitted += 1
                next_start = to_ticks(recs[admitted].prefill_start) if admitted < count else math.inf
            budget = column[j]
            ended = False
            for item in under_way:
                take = prefill_slice(item[0], item[1], budget, long_tokens)
                item[2].append((j, take))
                item[1] -= take
                ended = ended or not item[1]
                budget -= take
                if not budget:
                    break
            if ended:
                under_way = [item for item in under_way if item[1]]
    return pieces


def _own_prefill_s(pieces, step_s, cached=0):
    """Its own prompt's cost: each piece of c tokens alone on an idle GPU, after the p tokens
    of its prompt before it (which attention, if modelled, attends to and re-reads); the
    first piece comes after its `cached` head."""
    times = []
    before = cached
    for _, c in pieces:
        times.append(step_s(0, 0, c, c * (before + c / 2), before))
        before += c
    return math.fsum(times)


def _link_parts(tr, prefill_end, until):
    """kv_wait, link_wait, wire, join_wait from the prefill end to `until`, and the open one."""
    parts = dict.fromkeys(LINK_PARTS, 0.0)
    if tr is None or tr.reserved >= until:
        parts["kv_wait"] = until - prefill_end
        return parts, "kv_wait"
    t0 = tr.reserved if tr.reserved > prefill_end else prefill_end  # only the link holds it now
    if t0 > until:
        t0 = until
    landed = tr.end if tr.end < until else until
    wire = math.fsum(
        (e if e < landed else landed) - (s if s > t0 else t0)
        for s, e in tr.wire_spans() if e > t0 and s < landed
    )
    parts["kv_wait"] = t0 - prefill_end
    parts["wire"] = wire
    parts["link_wait"] = max(0.0, (landed - t0) - wire)
    parts["join_wait"] = until - landed
    if tr.end <= until:
        return parts, "join_wait"
    on_wire = any(s <= until < e for s, e in tr.wire_spans())
    return parts, "wire" if on_wire else "link_wait"


def _ttft_parts(result, rec, pieces, step_s, end):
    """(parts, open part or None): see the module docstring."""
    parts = dict.fromkeys(TTFT_PARTS, 0.0)
    if rec.dropped or rec.rejected:
        return parts, None
    first = rec.first_token
    until = first if first is not None else end
    start = rec.prefill_start
    if start is None or start >= until:
        parts["queue"] = until - rec.arrival
        return parts, (None if first is not None else "queue")
    parts["queue"] = start - rec.arrival
    finish = rec.prefill_end
    if finish is None:
        parts["prefill"] = until - start
        return parts, "prefill"
    own = _own_prefill_s(pieces.get(rec.id, ()), step_s, rec.prefix_hit_tokens)
    fetch = rec.prefix_fetch_s
    parts["prefix_fetch"] = fetch
    parts["prefill"] = own
    parts["chunk_wait"] = max(0.0, (finish - start) - own - fetch)
    if finish >= until:
        return parts, None  # colocated, one-token answers, first_token: prefill
    tr = result.transfers[rec.transfer] if rec.transfer >= 0 else None
    link, open_part = _link_parts(tr, finish, until)
    parts.update(link)
    return parts, (None if first is not None else open_part)


def _worst_gap(result, rec, step_gaps):
    """(gap seconds, GPU, step index that ended it, its stretch's number) or None: the
    earliest of the largest gaps, over the request's decode stretches in order (in ticks,
    as metrics' `request_gap_ticks`, the gap converted once)."""
    if rec.first_token is None:
        return None
    best = None
    prev = first_token_ticks(rec)
    for k, (g, a, b) in enumerate(rec.stretches()):
        if b < a:
            continue  # preempted before it emitted in this stretch
        end = result.gpus[g].end_t
        last = min(b, len(end) - 1)
        if a > last:
            break
        first_gap = end[a] - prev
        if best is None or first_gap > best[0]:
            best = (first_gap, g, a, k)
        if a < last:
            if step_gaps[g] is None:
                step_gaps[g] = step_gaps_of(result.gpus[g])
            rest = step_gaps[g][a + 1: last + 1]
            worst = max(rest)
            if worst > best[0]:
                best = (worst, g, a + 1 + rest.index(worst), k)
        prev = end[last]
    return best if best is None else (to_seconds(best[0]),) + best[1:]


def _stretch_change(result, rec, k):
    """What ended decode stretch k - 1 of `rec` (the gap into stretch k spans it):
    "preemption" when its GPU preempted it at the boundary after that stretch's last step
    (GpuLog.preempted), "role_change" when its instance then left for another role
    (fleet.planner: it started reloading, "switching", at the end of that step), else None."""
    gpu, _, last = rec.stretches()[k - 1]
    log = result.gpus[gpu]
    if (last + 1, rec.id) in log.preempted:
        return "preemption"
    if len(log.roles) > 1 and last < len(log):
        done = to_seconds(log.end_t[last])
        if any(t == done and role == "switching" for t, role in log.roles):
            return "role_change"
    return None


def request_blame(result, rows=None, missed_only=False):
    """One `Blame` per request, in request order. `rows`: request_metrics(result), if at hand.
    `missed_only`: only the requests that missed the SLO (all `blame_summary` reads; each is
    blamed as it would be among all, and a run that missed nothing costs no pass over its steps)."""
    if rows is None:
        rows = request_metrics(result)
    pairs = zip(result.requests, rows)
    if missed_only:
        pairs = [(rec, row) for rec, row in pairs if not row["met_slo"]]
        if not pairs:
            return []
    scenario = result.scenario
    fleet = scenario.fleet
    step_fns = [cost.step_s for cost in instance_costs(scenario)]  # by instance: pools differ
    pieces = _prompt_pieces(result)
    gaps = [None] * len(result.gpus)
    first_at_prefill = fleet.layout == "disaggregated" and fleet.first_token == "prefill"
    out = []
    for rec, row in pairs:
        step_s = step_fns[rec.prefill_gpu] if rec.prefill_gpu >= 0 else None
        parts, open_part = _ttft_parts(result, rec, pieces, step_s, result.end_time)
        blame = Blame(rec.id, parts, open_part)
        worst = _worst_gap(result, rec, gaps)
        if worst is not None:
            gap, g, j, k = worst
            log = result.gpus[g]
            first_gpu, first_step, _ = rec.stretches()[0]
            blame.worst_gap_s = gap
            blame.worst_gap_prompt_tokens = log.prefill_tokens[j]
            blame.worst_gap_batch = log.decode_seqs[j]
            into = _stretch_change(result, rec, k) if k and j == rec.stretches()[k][1] else None
            if into:
                blame.worst_gap_cause = into  # the gap spans what ended the stretch before
            elif first_at_prefill and k == 0 and j == first_step:
                blame.worst_gap_cause = "transfer"
            elif log.prefill_tokens[j]:
                blame.worst_gap_cause = "prefill_interference"
            else:
                blame.worst_gap_cause = "decode_batch"
            first_emitted = rec.stretches()[0][2] >= first_step  # (a preemption may empty it)
            if first_at_prefill and first_emitted:
                first_log = result.gpus[first_gpu]
                joined = to_seconds(first_log.start_t[first_step])
                split, _ = _link_parts(result.transfers[rec.transfer], rec.prefill_end, joined)
                split["decode_step"] = to_seconds(first_log.end_t[first_step]) - joined
                blame.first_gap_parts = split
        blame.missed = not row["met_slo"]
        if blame.missed:
            blame.dominant_cause = _dominant(rec, row, blame, scenario.slo)
        out.append(blame)
    return out


def _largest_part(parts):
    best = TTFT_PARTS[0]
    for name in TTFT_PARTS:
        if parts[name] > parts[best]:
            best = name
    return best


def gap_outweighs_ttft(row, blame, slo):
    """A finished request late on TTFT that also missed a per-token term by more time: its
    worst gap over the per-token target exceeds its TTFT over the TTFT target (module docstring)."""
    per_token = slo.per_token_target_ms
    if blame.worst_gap_s is None or not per_token or slo.ttft_s is None or row.get("ttft_s") is None:
        return False
    missed_token = ((slo.tpot_ms is not None and (row.get("tpot_ms") or 0.0) > slo.tpot_ms)
                    or (slo.max_gap_ms is not None and (row.get("worst_gap_ms") or 0.0) > slo.max_gap_ms))
    return missed_token and blame.worst_gap_s * 1000.0 - per_token > (row["ttft_s"] - slo.ttft_s) * 1000.0


def _dominant(rec, row, blame, slo):
    if rec.rejected:
        return "rejected"
    if rec.dropped:
        return "kv_capacity"
    late = rec.first_token is None or (slo.ttft_s is not None and row["ttft_s"] > slo.ttft_s)
    if late and not (rec.finished and gap_outweighs_ttft(row, blame, slo)):
        return _largest_part(blame.parts)
    if not rec.finished:
        return "unfinished"
    return blame.worst_gap_cause or _largest_part(blame.parts)


def blame_summary(blames):
    """{"missed": count, "missed_by_cause": {cause: share of missed}} over CAUSES (all listed;
    shares sum to 1, all 0.0 when nothing missed)."""
    counts = dict.fromkeys(CAUSES, 0)
    missed = 0
    for b in blames:
        if b.missed:
            missed += 1
            counts[b.dominant_cause] += 1
    return {
        "missed": missed,
        "missed_by_cause": {c: (n / missed if missed else 0.0) for c, n in counts.items()},
    }
