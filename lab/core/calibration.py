"""The calibration table: published measurements of LLM serving, and the calibrated model's
figure for each (docs/model.md "The calibrated model").

    for row, model_value, error in evaluate_rows():
        print(row["id"], row["value"], model_value, error)

Each row of calibration.json names its source, its conditions (stack, LLM, GPU, TP, dtype,
prompt and output tokens, batch) and the published figure. `model_value(row)` puts the
same conditions to the model:

- ttft_ms: one prompt of `prompt_tokens` alone on an idle instance (or `batch` of them
  together): one prefill step;
- tbt_ms: one decode step of `batch` sequences, each `prompt_tokens` + half its
  `output_tokens` into its answer;
- prefill_tok_s: one prefill step of `batch` prompts of `prompt_tokens` (`batch_tokens`
  in all), its tokens over its time;
- throughput_out_tok_s: an offline benchmark run through the engine: `requests`
  requests (default 2,000) of fixed lengths arriving at once on one instance, chunked
  prefill at 8,192 tokens a step, at most `batch` sequences at once (default 2,048);
  output tokens over the span from the first arrival to the last finish;
- throughput_total_tok_s: the same run, prompt and output tokens over that span;
- serving_ttft_ms, serving_itl_ms: an online benchmark through the engine: `requests`
  (default 500) of fixed lengths arriving at `rate` per second (Poisson) on one instance,
  chunked prefill; the mean time to first token, or the mean gap between tokens.
"""

import json
import math
import os

from .cost import PoolCost
from .engine import simulate
from .loading import load_scenario
from .spec import Model

__all__ = ["TABLE_PATH", "load_rows", "model_value", "evaluate_rows", "model_for", "KINDS", "expected_error", "model_note"]

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibration.json")
KINDS = ("ttft_ms", "tbt_ms", "prefill_tok_s", "throughput_out_tok_s", "throughput_total_tok_s", "serving_ttft_ms",
         "serving_itl_ms")
BENCH_REQUESTS = 2000  # an offline benchmark's requests, when its row does not say
BENCH_CHUNK_TOKENS = 8192  # the token budget of a step (TensorRT-LLM's and vLLM's max_num_tokens)


def load_rows(path=TABLE_PATH):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["rows"]


def model_for(row, cost="calibrated"):
    return Model.from_dict({"cost": cost, "llm": row["llm"], "gpu": row["gpu"], "dtype": row.get("dtype", "bf16"),
                            **({"stack": row["stack"]} if cost == "calibrated" else {})})


def model_value(row, cost="calibrated"):
    """The model's figure for `row`'s conditions, in the row's unit."""
    kind = row["kind"]
    model = model_for(row, cost)
    tp = row.get("tp", 1)
    step = PoolCost(model, row["gpu"], tp).step_s
    prompt = row.get("prompt_tokens") or 0
    if kind == "ttft_ms":
        batch = row.get("batch") or 1  # prompts prefilled together in one step
        return step(0, 0, batch * prompt, batch * prompt * prompt / 2, 0) * 1000.0
    if kind == "tbt_ms":
        batch = row.get("batch") or 1
        context = prompt + (row.get("output_tokens") or 0) // 2
        return step(batch, batch * context, 0) * 1000.0
    if kind == "prefill_tok_s":
        batch = row.get("batch") or 1
        tokens = batch * prompt
        return tokens / step(0, 0, tokens, batch * prompt * prompt / 2, 0)
    if kind in ("throughput_out_tok_s", "throughput_total_tok_s"):
        return _benchmark(row, model, tp, total=kind == "throughput_total_tok_s")
    if kind in ("serving_ttft_ms", "serving_itl_ms"):
        return _serving(row, model, tp, kind)
    raise ValueError(f"row {row.get('id')}: unknown kind {kind!r} (one of {', '.join(KINDS)})")


def _benchmark(row, model, tp, total):
    n = row.get("requests") or BENCH_REQUESTS
    rate = 10_000.0  # the lab's highest rate: n requests arrive within n / 10,000 s
    scenario = load_scenario({
        "workload": {"rate": rate, "duration_s": n / rate,
                     "prompt_tokens": {"dist": "fixed", "value": row["prompt_tokens"]},
                     "output_tokens": {"dist": "fixed", "value": row["output_tokens"]}},
        "fleet": {"layout": "colocated", "gpus": tp, "tp": tp, "chunk_tokens": BENCH_CHUNK_TOKENS,
                  "prefill_batch_tokens": BENCH_CHUNK_TOKENS, "max_batch_seqs": row.get("batch") or 2048},
        "model": model.to_dict(),
        "seed": 1,
        "drain_s": 3600,
    })
    result = simulate(scenario)
    done = [r for r in result.requests if r.finished]
    start = min(r.arrival for r in result.requests)
    span = max(r.finish for r in done) - start
    tokens = sum(r.output_tokens + (r.prompt_tokens if total else 0) for r in done)
    return tokens / span


def _serving(row, model, tp, kind):
    """An online benchmark at `rate` requests/s (Poisson), `requests` of them: the mean TTFT
    (arrival to first token: queueing behind the step under way and the decodes that ride
    along included) or the mean gap between a request's tokens, in ms."""
    n = row.get("requests") or 500
    rate = row["rate"]
    scenario = load_scenario({
        "workload": {"rate": rate, "duration_s": n / rate,
                     "prompt_tokens": {"dist": "fixed", "value": row["prompt_tokens"]},
                     "output_tokens": {"dist": "fixed", "value": row["output_tokens"]}},
        "fleet": {"layout": "colocated", "gpus": tp, "tp": tp, "chunk_tokens": BENCH_CHUNK_TOKENS,
                  "prefill_batch_tokens": BENCH_CHUNK_TOKENS, "max_batch_seqs": 2048},
        "model": model.to_dict(),
        "seed": 1,
        "drain_s": 3600,
    })
    done = [r for r in simulate(scenario).requests if r.finished]
    if kind == "serving_ttft_ms":
        values = [r.first_token - r.arrival for r in done]
    else:
        values = [(r.finish - r.first_token) / (r.output_tokens - 1) for r in done if r.output_tokens > 1]
    return 1000.0 * math.fsum(values) / len(values)


def evaluate_rows(rows=None, cost="calibrated"):
    """[(row, model value, relative error)] for every row (error: model / published - 1)."""
    out = []
    for row in rows if rows is not None else load_rows():
        value = model_value(row, cost)
        out.append((row, value, value / row["value"] - 1.0))
    return out


def _same_conditions(row, model):
    return row["llm"] == model.llm and row["gpu"] == model.gpu and row.get("dtype", "bf16") == model.dtype


def expected_error(model, rows=None):
    """(largest |error|, rows, whether they match) of the calibrated model on the table's rows
    of `model`'s stack with its LLM, GPU and dtype, or on all that stack's rows when none
    match: what `lab plan` quotes."""
    rows = [r for r in (rows if rows is not None else load_rows()) if r["stack"] == model.stack]
    matching = [r for r in rows if _same_conditions(r, model)]
    used = matching or rows
    if not used:
        return None, 0, False
    return max(abs(err) for _, _, err in evaluate_rows(used)), len(used), bool(matching)


def model_note(model):
    """One line on the step times a run or plan used, and how far to trust them."""
    if model.cost == "calibrated":
        error, n, matched = expected_error(model)
        where = f"{model.llm} on {model.gpu.upper()}, {model.dtype.upper()}"
        if not n:
            return f"calibrated step times ({model.stack} stack), {where}: no calibration rows"
        rows = (f"its {n} calibration row{'s' if n != 1 else ''} for this LLM, GPU and dtype" if matched
                else f"all {n} calibration rows of its stack (none for this LLM, GPU and dtype)")
        return f"calibrated step times ({model.stack} stack), {where}: within {error:.0%} of published measurements on {rows}"
    if model.cost == "roofline":
        return (f"the textbook roofline, {model.llm} on {model.gpu.upper()}: weights at full HBM bandwidth, no overheads "
                "(decode steps 4-5x faster than measured; --set model.cost=calibrated for calibrated step times)")
    return ("the lab's illustrative linear constants, not a real GPU (name model.llm and model.gpu for calibrated "
            "step times)")
