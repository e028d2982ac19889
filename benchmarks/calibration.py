"""Every row of the calibration table: the published figure, the calibrated model's, the error,
and what the textbook roofline gives for the same conditions.

    python benchmarks/calibration.py             # the table as text
    python benchmarks/calibration.py --markdown  # the table docs/calibration.md shows
    python benchmarks/calibration.py --write     # rewrite that table, and docs/model.md's stack presets

tests/test_calibration.py holds the doc's table equal to `--markdown`, and every held row's
error within the tolerance stated there.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from doc_blocks import rewrite_block  # noqa: E402  (benchmarks/, beside this file)
from lab.core.calibration import evaluate_rows, load_rows  # noqa: E402
from lab.core.stacks import DEFAULT_STACK, STACK_PRESETS  # noqa: E402

DOC = os.path.join(ROOT, "docs", "calibration.md")
BEGIN, END = "<!-- calibration table: benchmarks/calibration.py --write -->", "<!-- end of calibration table -->"
MODEL_DOC = os.path.join(ROOT, "docs", "model.md")
STACKS_BEGIN, STACKS_END = "<!-- stack presets: benchmarks/calibration.py --write -->", "<!-- end of stack presets -->"
FITTED_ON = {"optimized": "TensorRT-LLM's rows", "vllm-2023": "the Splitwise authors' Llama-2-70B profile"}
UNITS = {"ttft_ms": "TTFT, ms", "tbt_ms": "time between tokens, ms", "prefill_tok_s": "prefill, tokens/s",
         "throughput_out_tok_s": "output tokens/s", "throughput_total_tok_s": "tokens/s",
         "serving_ttft_ms": "mean TTFT served, ms", "serving_itl_ms": "mean ITL served, ms"}


def _conditions(row):
    bits = [row["llm"], row["gpu"].upper(), f"TP {row.get('tp', 1)}", row.get("dtype", "bf16").upper()]
    if row.get("rate"):
        bits.append(f"{row['rate']:g} req/s")
    if row.get("prompt_tokens"):
        bits.append(f"{row['prompt_tokens']:,}" + (f"/{row['output_tokens']:,}" if row.get("output_tokens") else "") + " tokens")
    if row.get("batch"):
        bits.append(f"batch {row['batch']:,}")
    return ", ".join(bits)


def _fmt(value):
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def table_rows():
    rows = load_rows()
    calibrated = evaluate_rows(rows)
    textbook = evaluate_rows(rows, cost="roofline")
    for (row, value, error), (_, roof, roof_error) in zip(calibrated, textbook):
        yield row, value, error, roof, roof_error


def markdown():
    lines = ["| row | stack | conditions | measure | published | calibrated | error | roofline | error |",
             "|---|---|---|---|--:|--:|--:|--:|--:|"]
    for row, value, error, roof, roof_error in table_rows():
        source = f"[{row['id']}]({row['url']})" if row.get("url") else row["id"]
        marks = ("" if row.get("held", True) else " (not held)") + ("" if row.get("verified", True) else " (unverified)")
        lines.append(f"| {source}{marks} | {row['stack']} | {_conditions(row)} | {UNITS[row['kind']]} | {_fmt(row['value'])} "
                     f"| {_fmt(value)} | {error:+.0%} | {_fmt(roof)} | {roof_error:+.0%} |")
    return "\n".join(lines)


def stacks_markdown():
    def us(v):
        return "0" if v == 0 else f"{v:,.4g} µs"
    lines = ["| `model.stack` | step overhead | per sequence | per prompt token | `hbm_share` | `compute_share` "
             "| `fp8_compute_share` | `ramp_tokens` | all-reduce hop | `nvlink_share` | fitted on |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"]
    for name, p in STACK_PRESETS.items():
        label = f"`{name}`" + (" (default)" if name == DEFAULT_STACK else "")
        lines.append(f"| {label} | {us(p['step_overhead_us'])} | {us(p['host_us_per_seq'])} | {us(p['host_us_per_prompt_token'])} "
                     f"| {p['hbm_share']:.2f} | {p['compute_share']:.2f} | {p['fp8_compute_share']:.2f} | {p['ramp_tokens']} "
                     f"| {us(p['allreduce_hop_us'])} | {p['nvlink_share']:.2f} | {FITTED_ON.get(name, '')} |")
    return "\n".join(lines)


def write_docs():
    rewrite_block(DOC, BEGIN, END, markdown(), ROOT)
    rewrite_block(MODEL_DOC, STACKS_BEGIN, STACKS_END, stacks_markdown(), ROOT)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true", help="print the docs/calibration.md block")
    ap.add_argument("--write", action="store_true", help="rewrite the table in docs/calibration.md and docs/model.md's stack presets")
    args = ap.parse_args(argv)
    if args.write:
        write_docs()
        return
    if args.markdown:
        print(markdown())
        return
    print(f"{'row':40s} {'stack':10s} {'published':>10s} {'calibrated':>11s} {'error':>7s} {'roofline':>10s} {'error':>7s}")
    worst = 0.0
    for row, value, error, roof, roof_error in table_rows():
        held = row.get("held", True)
        if held:
            worst = max(worst, abs(error))
        print(f"{row['id']:40s} {row['stack']:10s} {_fmt(row['value']):>10s} {_fmt(value):>11s} {error:>+7.1%} "
              f"{_fmt(roof):>10s} {roof_error:>+7.1%}{'' if held else '  (not held)'}")
    print(f"worst calibrated error on the held rows: {worst:.1%}")


if __name__ == "__main__":
    main()
