"""A run's end (engine.py): a run cut short loses what came after its stop, and the times the
run held as ticks become seconds (docs/model.md "Time base").

- `cut_at`, `cut_kv_logs`: a run cut at `stop` (its `drain_s` or the steps bound) keeps
  only the steps that ended by then and the request times up to it; on demand, the KV
  logs up to it too (with reserve they are empty).
- `in_seconds`: the per-request times, transfers, roles, KV traces and fetches, ticks
  until now, as seconds. The step columns stay ticks: the Result's GpuLog makes their
  seconds only if something reads them (result.py).
"""

from .ticks import TICKS_PER_S

__all__ = ["in_seconds", "cut_at", "cut_kv_logs"]


def in_seconds(records, logs, transfers, floats):
    """A run's per-request times, ticks until now, as seconds (ticks.py: ticks / 10**12,
    correctly rounded: a whole-number float under 2**53 divided by the float 1e12, or an int
    by the int 10**12): records, transfers, roles, KV traces, fetches. The step columns stay
    ticks: the Result's GpuLog makes their seconds only if something reads them."""
    per = 1e12 if floats else TICKS_PER_S  # (float / float skips an int's conversion)
    for rec in records:
        if rec.prefill_start is not None:
            rec.prefill_start /= per
        if rec.prefill_end is not None:
            rec.prefill_end /= per
        if rec.first_token is not None:
            rec.first_token_t = rec.first_token  # (kept: metrics take its gaps in ticks)
            rec.first_token /= per
        if rec.finish is not None:
            rec.finish /= per
    for log in logs:
        log.roles = [(t / per, role) for t, role in log.roles]
        if log.kv_used:
            log.kv_used = [(t / per, used) for t, used in log.kv_used]
        if log.fetch_s:
            log.fetch_s = {j: t / per for j, t in log.fetch_s.items()}
    for tr in transfers:
        tr.ready /= per
        tr.reserved /= per
        tr.start /= per
        tr.end /= per
        tr.layer_s /= per
        if tr.layer_starts is not None:
            tr.layer_starts = [t / per for t in tr.layer_starts]


def cut_at(gpus, records, stop):
    """A run cut short ends at `stop`: steps still running then never completed.

    GPUs that ran ahead on the fast path may have logged (and applied) steps past a
    step-bound stop; those are undone here so the result reads as of `stop`.
    """
    for gpu in gpus:
        log = gpu.log
        keep = len(log.end_t)
        while keep and log.end_t[keep - 1] > stop:
            keep -= 1
        for column in (log.start_t, log.end_t, log.decode_seqs, log.prefill_tokens, log.context_tokens):
            del column[keep:]
        for extra in (log.attention_args, log.fetch_s):
            for j in [j for j in extra if j >= keep]:
                del extra[j]
    for rec in records:
        if rec.finish is not None and rec.finish > stop:
            rec.finish = None
        if rec.first_token is not None and rec.first_token > stop:
            rec.first_token = None
        if rec.prefill_end is not None and rec.prefill_end > stop:
            rec.prefill_end = None


def cut_kv_logs(gpus, stop):
    """on_demand's logs of a run cut at `stop`: nothing after it."""
    for gpu in gpus:
        log = gpu.log
        steps = len(log.start_t)
        log.kv_used[:] = [(t, used) for t, used in log.kv_used if t <= stop]
        log.preempted[:] = [(j, rid) for j, rid in log.preempted if j <= steps]
        log.readmitted[:] = [item for item in log.readmitted if item[0] < steps]
