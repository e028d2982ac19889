"""The run as tables a person reads: per-request rows (the one CSV writer) and per-GPU rows.

`REQUESTS_CSV_COLUMNS` is the header of `lab run --requests-csv` and of the lab page's
"Download CSV": REQUEST_COLUMNS (request_metrics' fields), BLAME_COLUMNS (why it took
that long), RUN_COLUMNS (the same on every row: whether the run was cut, so a CSV alone
says why its unfinished requests are unfinished). `write_requests_csv(fh, ...)` writes
them to any text file object; both the command line and the page call it.

`gpu_rows(result, target_ms)`: per GPU its steps, busy share of the run (busy time capped at
the run's span, over the span: the per-GPU terms of summarize's util_*) and slow steps:
steps that decode and last longer than `target_ms`, which callers take from
`Slo.per_token_target_ms` (the ones the canvas draws red, hatched). `slow_limit_t` is that
rule's one threshold, in ticks: a step is slow when its end_t - start_t (exact) exceeds it.
"""

import csv

from .blame import BLAME_COLUMNS
from .ticks import to_ticks

__all__ = ["REQUEST_COLUMNS", "RUN_COLUMNS", "REQUESTS_CSV_COLUMNS", "write_requests_csv", "requests_csv_rows",
           "gpu_rows", "GPU_COLUMNS", "slow_limit_t"]

REQUEST_COLUMNS = (
    "id", "arrival_s", "prompt_tokens", "output_tokens", "prefill_gpu", "decode_gpu",
    "ttft_s", "tpot_ms", "worst_gap_ms", "transfer_ms", "finish_s", "met_slo", "dropped",
    "rejected", "predicted_ttft_s",
    "prefix_hit_tokens", "prefix_fetch_s",
    "preemptions",
)
RUN_COLUMNS = ("run_cut",)
REQUESTS_CSV_COLUMNS = REQUEST_COLUMNS + BLAME_COLUMNS + RUN_COLUMNS
GPU_COLUMNS = ("gpu", "role", "steps", "busy_share", "slow_steps")


def _cell(value):
    return "" if value is None else value


def requests_csv_rows(rows, metrics, blames):
    """The CSV's data rows (lists, None as ''), in request order."""
    run = [_cell(metrics.get(c)) for c in RUN_COLUMNS]
    for row, blame in zip(rows, blames):
        why = blame.row()
        yield [_cell(row[c]) for c in REQUEST_COLUMNS] + [_cell(why[c]) for c in BLAME_COLUMNS] + run


def write_requests_csv(fh, rows, metrics, blames):
    """Write the header and one row per request (request_metrics rows, their request_blame) to `fh`."""
    writer = csv.writer(fh)
    writer.writerow(REQUESTS_CSV_COLUMNS)
    writer.writerows(requests_csv_rows(rows, metrics, blames))


def slow_limit_t(target_ms):
    """The ticks a decoding step must exceed to be slow against `target_ms` (None or 0: no
    step is). Steps are compared by their tick lengths, exact, so the table and the canvas
    (which both use this) agree on a step that lasts exactly the target."""
    return to_ticks(target_ms / 1000.0) if target_ms else float("inf")


def gpu_rows(result, target_ms):
    """One dict per GPU (GPU_COLUMNS), in the fleet's order; slow steps are over `target_ms`."""
    span = result.end_time if result.end_time > 0 else 1.0
    limit = slow_limit_t(target_ms)
    out = []
    for log in result.gpus:
        slow = sum(1 for s, e, b in zip(log.start_t, log.end_t, log.decode_seqs) if b > 0 and e - s > limit)
        out.append({"gpu": log.index, "role": log.role, "steps": len(log),
                    "busy_share": min(log.busy_s(), span) / span, "slow_steps": slow})
    return out
