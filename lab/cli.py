"""`python -m lab run | sweep | check | serve`: the instructor's and author's command line."""

import argparse
import json
import math
import os
import sys
import time

__all__ = ["main"]

# Row labels for the readable table, grouped the way a person reads them.
TABLE = (
    ("Requests", (("requests", "requests", "{:.0f}"), ("finished", "finished", "{:.0f}"), ("unfinished", "unfinished", "{:.0f}"))),
    ("Time to first token", (("ttft_p50_s", "p50", "{:.3f} s"), ("ttft_p90_s", "p90", "{:.3f} s"), ("ttft_p99_s", "p99", "{:.3f} s"))),
    ("Time per output token", (("tpot_p50_ms", "p50", "{:.1f} ms"), ("tpot_p99_ms", "p99", "{:.1f} ms"))),
    ("Inter-token gap (all)", (("itl_p50_ms", "p50", "{:.1f} ms"), ("itl_p99_ms", "p99", "{:.1f} ms"))),
    ("Worst gap per request", (("worst_gap_p50_ms", "p50", "{:.1f} ms"), ("worst_gap_p99_ms", "p99", "{:.1f} ms"))),
    ("SLO", (("slo_attainment", "met", "{:.1%}"), ("goodput_rps", "goodput", "{:.2f} req/s"), ("goodput_rps_per_gpu", "per GPU", "{:.3f} req/s"))),
    ("Throughput", (("throughput_tokens_per_s", "output", "{:,.0f} tok/s"),)),
    ("Fleet", (("gpus", "GPUs", "{:.0f}"), ("prefill_gpus", "prefill", "{:.0f}"), ("decode_gpus", "decode", "{:.0f}"))),
    ("Utilisation", (("util_gpu", "all GPUs", "{:.0%}"), ("util_prefill", "prefill", "{:.0%}"), ("util_decode", "decode", "{:.0%}"), ("util_link", "link", "{:.0%}"))),
    ("KV transfer (wait+wire)", (("transfer_p50_ms", "p50", "{:.1f} ms"), ("transfer_p99_ms", "p99", "{:.1f} ms"))),
    ("Cost (illustrative $)", (("usd_per_hour", "fleet", "${:,.2f}/h"), ("prefill_usd_per_hour", "prefill", "${:,.2f}/h"),
                               ("decode_usd_per_hour", "decode", "${:,.2f}/h"), ("usd_per_million_tokens", "per M output tokens", "${:,.3f}"),
                               ("usd_per_good_request", "per good request", "${:.6f}"))),
    ("Power and energy", (("power_w_mean", "mean", "{:,.0f} W"), ("prefill_power_w_mean", "prefill", "{:,.0f} W"),
                          ("decode_power_w_mean", "decode", "{:,.0f} W"), ("energy_j_per_token", "per output token", "{:,.2f} J"),
                          ("energy_j_per_request", "per request", "{:,.0f} J"))),
    ("Prefix cache", (("prefix_hit_rate", "hit rate", "{:.1%}"), ("prefill_tokens_saved", "prompt tokens saved", "{:,.0f}"),
                      ("prefix_fetch_p99_ms", "fetch p99", "{:.1f} ms"))),
)
# Rows shown only when their first metric is truthy (a cache that saved nothing, or none, says nothing).
ONLY_WHEN_SET = ("Prefix cache",)

def format_metrics(metrics):
    lines = []
    for title, items in TABLE:
        if title in ONLY_WHEN_SET and not metrics.get(items[0][0]):
            continue
        parts = []
        for key, label, fmt in items:
            value = metrics.get(key)
            if value is None:
                continue
            parts.append(f"{label} {fmt.format(value)}")
        if parts:
            lines.append(f"  {title:<25} " + "   ".join(parts))
    return "\n".join(lines)


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_requests_csv(path, rows, metrics, blames):
    """One row per request to `path` (columns: core.report.REQUESTS_CSV_COLUMNS)."""
    from lab.core import LabError
    from lab.core.report import write_requests_csv as write

    try:
        fh = open(path, "w", newline="", encoding="utf-8")
    except OSError as exc:
        raise LabError("--requests-csv", f"cannot write {path!r}: {exc.strerror or exc}") from None
    with fh:
        write(fh, rows, metrics, blames)


def describe_run(scenario, result):
    """Header lines for `lab run`: this scenario's workload, and step times at its own lengths."""
    from lab import core

    wl = scenario.workload
    reqs = result.requests
    if wl.trace is not None:
        source = f"trace {os.path.basename(wl.trace.path)}" + (f" x{wl.trace.time_scale:g} time" if wl.trace.time_scale != 1 else "")
    else:
        source = f"Poisson {wl.rate:g} req/s" + (f" in {len(wl.phases) + 1} phases" if wl.phases else "")
    lines = [f"workload: {len(reqs):,} requests in {result.arrivals_end:g} s ({source})"]
    model = scenario.model
    if reqs:
        prompt = sum(r.prompt_tokens for r in reqs) / len(reqs)
        output = sum(r.output_tokens for r in reqs) / len(reqs)
        lines[0] += f"; prompts mean {prompt:,.0f} tokens (max {max(r.prompt_tokens for r in reqs):,}), outputs mean {output:,.0f}"
    seqs = min(32, scenario.fleet.max_batch_seqs)
    # One line per pool whose instances differ (tp, GPU type, power cap); one line if they agree.
    costs = {}
    for pool, cost in zip(scenario.pools(), core.pool_costs(scenario)):
        costs.setdefault((cost.gpu, cost.tp, cost.power_cap_w), (pool.role, cost))
    for role, cost in costs.values():
        where = f"{cost.gpu}" if cost.tp == 1 and cost.power_cap_w is None else cost.describe()
        who = f"{role}: " if len(costs) > 1 else ""
        unit = "GPU" if cost.tp == 1 else "instance"
        kv = f"KV {model.kv_bytes_per_token / 1024:.0f} KiB/token, {cost.kv_tokens:,} tokens/{unit}"
        if reqs:
            step = cost.step_s
            context = round(prompt + output / 2)
            lines.append(
                f"{who}{model.cost} cost model, {model.llm} on {where}: prefill {prompt:,.0f} tokens {step(0, 0, round(prompt)) * 1000:.1f} ms; "
                f"decode {seqs} seqs x {context:,} ctx {step(seqs, seqs * context, 0) * 1000:.1f} ms; {kv}"
            )
        else:
            lines.append(f"{who}{model.cost} cost model, {model.llm} on {where}; {kv}")
    lines.extend(_prefix_cache_lines(scenario))
    return lines


def _prefix_cache_lines(scenario):
    """What a prefix cache holds (README "Prefix caching"); nothing when it is off."""
    from lab.core.prefix_cache import cache_blocks, kv_taken_tokens

    fleet = scenario.fleet
    block = scenario.workload.prefix_block_tokens
    if fleet.prefix_cache == "per_gpu":
        gb = fleet.prefix_setting("prefix_cache_gb")
        pool = next(p for p in scenario.pools() if p.role != "decode")
        return [f"prefix cache per_gpu: {gb:g} GB per prefilling GPU, {cache_blocks(scenario, gb):,} blocks of {block:,} "
                f"tokens, {kv_taken_tokens(scenario, pool):,} KV tokens taken from each {pool.role} instance"]
    if fleet.prefix_cache == "shared":
        gb = fleet.prefix_setting("prefix_pool_gb")
        return [f"prefix cache shared: a {gb:g} GB host pool, {cache_blocks(scenario, gb):,} blocks of {block:,} tokens, "
                f"fetched at {fleet.prefix_setting('prefix_fetch_gbytes_per_s'):g} GB/s"]
    return []


def describe_fleet(scenario):
    """'8 colocated GPUs (4 instances of TP 2), whole prefill' and the like, for `lab run`."""
    fleet, model = scenario.fleet, scenario.model

    pools = scenario.pools()
    mixed = any(pool.gpu != model.gpu for pool in pools)  # then every pool names its GPU type

    def pool_text(pool, noun):
        extra = []
        if pool.tp > 1:
            extra.append(f"{pool.instances} instance{'s' if pool.instances != 1 else ''} of TP {pool.tp}")
        if mixed:
            extra.append(pool.gpu)
        if pool.power_cap_w is not None:
            extra.append(f"capped at {pool.power_cap_w:g} W")
        return f"{pool.gpus} {noun}" + (f" ({', '.join(extra)})" if extra else "")

    if fleet.layout == "colocated":
        chunk = f", chunked prefill {fleet.chunk_tokens} tokens" if fleet.chunk_tokens else ", whole prefill"
        return pool_text(pools[0], "colocated GPUs") + chunk
    return (f"{pool_text(pools[0], 'prefill')} + {pool_text(pools[1], 'decode GPUs')}, "
            f"link {fleet.link.gbytes_per_s:g} GB/s {fleet.link.sharing}")


def cmd_run(args):
    from lab import core
    from lab.core.engine import MAX_STEPS

    scenario = core.load_scenario(args.file, overrides=args.set)
    started = time.perf_counter()
    result = core.simulate(scenario)
    rows = core.request_metrics(result)
    metrics = core.summarize(result, rows)
    elapsed = time.perf_counter() - started
    blames = core.request_blame(result, rows)
    why = core.blame_summary(blames)
    if args.requests_csv:
        write_requests_csv(args.requests_csv, rows, metrics, blames)
    if args.json:
        out = {k: _json_safe(v) for k, v in metrics.items()}
        out.update(why)  # core.BLAME_NAMES, after the metrics
        print(json.dumps(out, indent=2))
    else:
        print(f"{args.file}: {describe_fleet(scenario)}")
        for line in describe_run(scenario, result):
            print(f"  {line}")
        print(format_metrics(metrics))
        if scenario.fleet.admission is not None:  # (off, the table is as it always was)
            served = metrics["served_slo_attainment"]
            print(f"  {'Early rejection':<25} rejected {metrics['rejected']:,}   served met "
                  + ("—" if served is None else f"{served:.1%}"))
        if scenario.fleet.planner_on:  # fleet.planner: the role changes and what they cost
            moves = metrics["reconfigurations"]
            print(f"  {'Role changes':<25} {moves} move{'' if moves == 1 else 's'}   "
                  f"lost {metrics['reconfig_lost_gpu_s']:,.1f} GPU-s (draining and reloading)")
        if why["missed"]:
            causes = sorted(((share, c) for c, share in why["missed_by_cause"].items() if share), key=lambda x: -x[0])
            print(f"  {'Why requests missed':<25} {why['missed']} missed: "
                  + "   ".join(f"{c} {share:.0%}" for share, c in causes))
        if result.capped == "drain_s":
            print(f"  note: overloaded; the run stopped {scenario.drain_s:g} s after arrivals ended with "
                  f"{metrics['unfinished']} requests unfinished (counted as SLO misses)")
        elif result.capped == "max_steps":
            print(f"  note: the run was cut at {MAX_STEPS:,} GPU steps (t = {result.end_time:.1f} s) with "
                  f"{metrics['unfinished']} requests unfinished (counted as SLO misses)")
        dropped = sum(1 for r in result.requests if r.dropped)
        if dropped:
            print(f"  note: {dropped} requests can never fit in one instance's KV memory and were dropped")
        print(f"  simulated {result.end_time:.1f} s in {elapsed * 1000:.0f} ms")
    if args.requests_csv:
        print(f"wrote {len(rows)} rows to {args.requests_csv}", file=sys.stderr)
    return 0


def cmd_sweep(args):
    from lab import core
    from lab.core.sweep import max_rate_meeting_slo, parse_range, sweep

    scenario = core.load_scenario(args.file, overrides=args.set)
    path, values = parse_range(args.vary)
    scenario.with_changes({path: values[0]})  # fail fast on a bad path or value

    def progress(done, total):
        if sys.stderr.isatty() or args.progress:
            print(f"\rsweeping {path}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)

    points = sweep(scenario, path, values, progress)
    best = None
    gpus = scenario.fleet.total_gpus
    if path == "workload.rate":
        best = max_rate_meeting_slo(scenario, points, target=args.target)
    if args.json:
        out = {
            "vary": path,
            "points": [{"value": v, "metrics": {k: _json_safe(x) for k, x in m.items()}} for v, m in points],
        }
        if path == "workload.rate":
            out["max_rate_meeting_slo"] = best
            out["max_rate_meeting_slo_per_gpu"] = best / gpus if best is not None else None
            out["slo_target"] = args.target
        print(json.dumps(out, indent=2))
        return 0
    header = f"{path:>16} {'SLO met':>8} {'goodput/GPU':>12} {'TTFT p99':>9} {'TPOT p99':>9} {'gap p99':>9} {'unfinished':>10}"
    print(header)
    for value, m in points:
        def f(key, fmt):
            return fmt.format(m[key]) if m[key] is not None else "-"
        print(f"{value:>16} {f('slo_attainment', '{:.1%}'):>8} {f('goodput_rps_per_gpu', '{:.3f}'):>12} "
              f"{f('ttft_p99_s', '{:.2f} s'):>9} {f('tpot_p99_ms', '{:.1f}ms'):>9} {f('worst_gap_p99_ms', '{:.0f}ms'):>9} {m['unfinished']:>10}")
    if path == "workload.rate":
        if best is None:
            print(f"No swept rate has {args.target:.0%} of requests meeting the SLO.")
        else:
            print(f"Goodput (highest rate with >= {args.target:.0%} meeting the SLO): {best:.2f} req/s "
                  f"= {best / gpus:.3f} req/s per GPU on {gpus} GPUs")
    return 0


def mission_files(paths):
    """Expand folders to their *.json files; leave out the JSON Schema, which is no mission."""
    from lab.core.missions import mission_file_names

    out = []
    for path in paths:
        if os.path.isdir(path):
            out.extend(os.path.join(path, name) for name in mission_file_names(path))
        else:
            out.append(path)
    return [p for p in out if os.path.basename(p) != "schema.json"]


def cmd_check(args):
    """Check every file and report each (OK or its errors); exit 1 if any failed."""
    from lab.core import LabError
    from lab.core.missions import load_each
    from lab.core.solver import check_mission

    seeds = args.seeds.strip()
    if not (seeds.isascii() and seeds.isdigit() and len(seeds) <= 3 and 1 <= int(seeds) <= 100):
        raise LabError("--seeds", f"expected a whole number from 1 to 100, got {seeds[:20]!r}")
    seeds = int(seeds)
    files = mission_files(args.files)
    if not files:
        raise LabError("check", f"no mission files in {' '.join(args.files)}")
    failed = 0
    reports = []

    def fail(path, problem):
        nonlocal failed
        failed += 1
        if args.json:
            reports.append({"file": path, "ok": False, "problems": [problem]})
        else:
            print(f"FAIL {path}\n  {problem}")

    for path, mission, error in load_each(files):
        if error is not None:
            fail(path, str(error))
            continue
        try:
            report = check_mission(mission, time_budget_s=args.time_budget, seeds=seeds)
        except LabError as exc:
            fail(path, str(exc))
            continue
        if args.json:
            reports.append({"file": path, **report.to_dict()})
        else:
            print(report.format())
        if not report.ok:
            failed += 1
    if args.json:
        print(json.dumps(reports, indent=2))
    elif len(files) > 1:
        print(f"{len(files) - failed} of {len(files)} missions OK")
    return 1 if failed else 0


def cmd_serve(args):
    from lab.ui.serve import main as serve_main

    forwarded = args.serve_args[1:] if args.serve_args[:1] == ["--"] else args.serve_args
    return serve_main(forwarded)


def build_parser():
    parser = argparse.ArgumentParser(prog="python -m lab", description="Split the Fleet: simulate LLM serving fleets.")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="simulate a scenario or mission file and print its metrics")
    run.add_argument("file", help="a scenario JSON or a mission JSON (its scenario is used)")
    run.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                     help="override a scenario field, e.g. --set fleet.layout=colocated --set fleet.chunk_tokens=512")
    run.add_argument("--json", action="store_true", help="print the metrics as JSON")
    run.add_argument("--requests-csv", metavar="OUT", help="write one row per request to OUT")
    run.set_defaults(func=cmd_run)

    sw = sub.add_parser("sweep", help="metrics across a range of one setting")
    sw.add_argument("file")
    sw.add_argument("--vary", required=True, metavar="PATH=START:STOP:STEP",
                    help="e.g. workload.rate=4:24:2 (inclusive) or fleet.chunk_tokens=256,512,1024")
    sw.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    sw.add_argument("--target", type=float, default=0.9, help="SLO attainment for the goodput rate (default 0.9)")
    sw.add_argument("--json", action="store_true")
    sw.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    sw.set_defaults(func=cmd_sweep)

    chk = sub.add_parser("check", help="validate and solve mission files")
    chk.add_argument("files", nargs="+", help="mission files or folders (schema.json is skipped)")
    chk.add_argument("--json", action="store_true", help="print the reports as JSON")
    chk.add_argument("--time-budget", type=float, default=60.0, help="seconds allowed per mission (default 60)")
    chk.add_argument("--seeds", default="5",
                     help="seeds each star's cheapest setting (and the start) is run on (default 5)")
    chk.set_defaults(func=cmd_check)

    srv = sub.add_parser("serve", help="serve the lab locally (offline)", add_help=False)
    srv.add_argument("serve_args", nargs=argparse.REMAINDER)
    srv.set_defaults(func=cmd_serve)
    return parser


def main(argv=None):
    from lab.core import LabError

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["serve"]:
        # Everything after `serve` (including --help) belongs to the server's own parser.
        argv = ["serve", "--", *argv[1:]]
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except LabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
