"""Every row of the calibration table: the published figure, the calibrated model's, the error,
and what the textbook roofline gives for the same conditions.

    python benchmarks/calibration.py             # the table as text
    python benchmarks/calibration.py --markdown  # the block README "The calibrated model" shows
    python benchmarks/calibration.py --write     # rewrite that block in README.md

tests/test_calibration.py holds the README's block equal to `--markdown`, and every row's
error within the tolerance stated there.
"""

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from lab.core.calibration import evaluate_rows, load_rows  # noqa: E402

README = os.path.join(ROOT, "README.md")
BEGIN, END = "<!-- calibration table: benchmarks/calibration.py --write -->", "<!-- end of calibration table -->"
UNITS = {"ttft_ms": "TTFT, ms", "tbt_ms": "time between tokens, ms", "prefill_tok_s": "prefill, tokens/s",
         "throughput_out_tok_s": "output tokens/s", "throughput_total_tok_s": "tokens/s"}


def _conditions(row):
    bits = [row["llm"], row["gpu"].upper(), f"TP {row.get('tp', 1)}", row.get("dtype", "bf16").upper()]
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
        lines.append(f"| {source} | {row['stack']} | {_conditions(row)} | {UNITS[row['kind']]} | {_fmt(row['value'])} "
                     f"| {_fmt(value)} | {error:+.0%} | {_fmt(roof)} | {roof_error:+.0%} |")
    return "\n".join(lines)


def write_readme():
    text = open(README, encoding="utf-8").read()
    head, sep, rest = text.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not (sep and sep2):
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    new = f"{head}{BEGIN}\n{markdown()}\n{END}{tail}"
    if new != text:
        open(README, "w", encoding="utf-8").write(new)
    print("README.md: calibration table " + ("rewritten" if new != text else "already current"))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--markdown", action="store_true", help="print the README block")
    ap.add_argument("--write", action="store_true", help="rewrite the README block")
    args = ap.parse_args(argv)
    if args.write:
        write_readme()
        return
    if args.markdown:
        print(markdown())
        return
    print(f"{'row':40s} {'stack':10s} {'published':>10s} {'calibrated':>11s} {'error':>7s} {'roofline':>10s} {'error':>7s}")
    worst = 0.0
    for row, value, error, roof, roof_error in table_rows():
        worst = max(worst, abs(error))
        print(f"{row['id']:40s} {row['stack']:10s} {_fmt(row['value']):>10s} {_fmt(value):>11s} {error:>+7.1%} "
              f"{_fmt(roof):>10s} {roof_error:>+7.1%}")
    print(f"worst calibrated error: {worst:.1%}")


if __name__ == "__main__":
    main()
