"""lab/core/report.py: the one per-request CSV writer (CLI and page) and the per-GPU rows."""

import csv
import io
import math
from pathlib import Path

from lab.cli import main
from lab.core import load_scenario, request_blame, request_metrics, simulate, summarize
from lab.core.report import GPU_COLUMNS, REQUESTS_CSV_COLUMNS, gpu_rows, write_requests_csv

REPO = Path(__file__).resolve().parent.parent


def run(fleet, slo=None, rate=6.0):
    scenario = load_scenario({
        "seed": 3, "workload": {"rate": rate, "duration_s": 20, "prompt_tokens": 1500, "output_tokens": 120},
        "fleet": fleet, "model": {"cost": "linear"}, "slo": slo or {"ttft_s": 1.5, "tpot_ms": 25},
    })
    result = simulate(scenario)
    rows = request_metrics(result)
    return scenario, result, rows, summarize(result, rows)


def test_the_cli_and_the_writer_give_the_same_file(tmp_path, capsys):
    mission = REPO / "missions" / "02-decode-drowns.json"
    out = tmp_path / "cli.csv"
    assert main(["run", str(mission), "--requests-csv", str(out)]) == 0
    capsys.readouterr()
    scenario = load_scenario(str(mission))
    result = simulate(scenario)
    rows = request_metrics(result)
    buf = io.StringIO(newline="")
    write_requests_csv(buf, rows, summarize(result, rows), request_blame(result, rows))
    assert out.read_bytes().decode("utf-8") == buf.getvalue()
    table = list(csv.reader(io.StringIO(buf.getvalue())))
    assert tuple(table[0]) == REQUESTS_CSV_COLUMNS
    assert len(table) - 1 == len(result.requests)


def test_gpu_busy_shares_average_to_the_pool_utilisations():
    for fleet, pools in (({"layout": "colocated", "gpus": 3, "chunk_tokens": 512}, {"colocated": "util_gpu"}),
                         ({"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2},
                          {"prefill": "util_prefill", "decode": "util_decode"})):
        _, result, _, metrics = run(fleet)
        table = gpu_rows(result, 25)
        assert [tuple(r) for r in table] == [GPU_COLUMNS] * len(result.gpus)
        assert [r["gpu"] for r in table] == [g.index for g in result.gpus]
        assert sum(r["steps"] for r in table) == sum(len(g) for g in result.gpus)
        for role, name in pools.items():
            shares = [r["busy_share"] for r in table if r["role"] == role]
            assert shares and all(0 < s <= 1 for s in shares)
            assert math.isclose(math.fsum(shares) / len(shares), metrics[name], rel_tol=1e-12)


def test_slow_steps_are_decode_steps_over_the_tpot_target():
    _, result, _, _ = run({"layout": "colocated", "gpus": 2})  # whole prefill mixed into decode: slow steps
    decode_steps = sum(1 for g in result.gpus for b in g.decode_seqs if b > 0)
    assert sum(r["slow_steps"] for r in gpu_rows(result, None)) == 0  # no TPOT target: nothing is slow
    assert sum(r["slow_steps"] for r in gpu_rows(result, 1e-6)) == decode_steps
    some = sum(r["slow_steps"] for r in gpu_rows(result, 25))
    assert 0 < some < decode_steps
    assert sum(r["slow_steps"] for r in gpu_rows(result, 50)) <= some
