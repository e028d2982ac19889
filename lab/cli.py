"""`python -m lab run | sweep | plan | check | link | serve`: the instructor's, author's and practitioner's command line."""

import argparse
import json
import math
import os
import shlex
import sys
import time

from lab.terminal import printable

__all__ = ["main", "flag_number"]

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
    """One row per request to `path` (columns: core.report.REQUESTS_CSV_COLUMNS), written whole."""
    from lab.core.report import write_requests_csv as write
    from lab.outputs import write_atomic

    write_atomic(path, "--requests-csv", lambda fh: write(fh, rows, metrics, blames))


def scenario_inputs(scenario, *paths):
    """The files a command reads: `paths` and the scenario's trace (outputs must be none of them)."""
    trace = scenario.workload.trace
    if trace is not None:
        paths += (os.path.join(trace.base_dir or os.getcwd(), trace.path),)
    return paths


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
    """What a prefix cache holds (docs/model.md "Prefix caching"); nothing when it is off."""
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
    from lab.outputs import check_outputs

    scenario = core.load_scenario(args.file, overrides=args.set)
    check_outputs([("--requests-csv", args.requests_csv)], scenario_inputs(scenario, args.file))
    started = time.perf_counter()
    progress = _RunProgress(args, started)
    result = core.simulate(scenario, progress=progress if progress.on else None)
    progress.done()
    rows = core.request_metrics(result) if args.requests_csv else None  # (only the CSV needs a dict per request)
    metrics = core.summarize(result, rows)
    elapsed = time.perf_counter() - started
    # The CSV blames every request; the summary reads only the misses', and a run in which
    # every request met the SLO (met / requests is 1.0 only then) has none.
    if rows is not None:
        blames = core.request_blame(result, rows)
    elif metrics["slo_attainment"] in (None, 1.0):
        blames = []
    else:
        blames = core.request_blame(result, missed_only=True)
    why = core.blame_summary(blames)
    if args.requests_csv:
        write_requests_csv(args.requests_csv, rows, metrics, blames)
    if args.json:
        out = {k: _json_safe(v) for k, v in metrics.items()}
        out.update(why)  # core.BLAME_NAMES, after the metrics
        print(json.dumps(out, indent=2))
    else:
        print(f"{printable(args.file)}: {describe_fleet(scenario)}")
        for line in describe_run(scenario, result):
            print(f"  {printable(line)}")
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
        print(f"wrote {len(rows)} rows to {printable(args.requests_csv)}", file=sys.stderr)
    return 0


PROGRESS_AFTER_S = 2.0  # a run shows its progress once it has taken this long (lab run)
PROGRESS_EVERY_S = 0.5  # ...and then at most this often


class _RunProgress:
    """`lab run`'s progress on stderr: simulated time against the arrivals' end, once the run
    has taken PROGRESS_AFTER_S (the STF_PROGRESS_AFTER_S variable sets it), at most every
    PROGRESS_EVERY_S, when stderr is a terminal or --progress asks; never with --json. Called
    by the engine (`simulate`'s `progress`); `done()` ends the line once the simulation is over."""

    def __init__(self, args, started):
        self.tty = sys.stderr.isatty()
        self.on = not args.json and (self.tty or args.progress)
        self.started, self.shown, self.last = started, False, -PROGRESS_EVERY_S
        try:
            self.after = float(os.environ.get("STF_PROGRESS_AFTER_S", PROGRESS_AFTER_S))
        except ValueError:
            self.after = PROGRESS_AFTER_S

    def __call__(self, simulated_s, end_s):
        now = time.perf_counter()
        if not self.on or now - self.started < self.after or now - self.last < PROGRESS_EVERY_S:
            return
        self.last = now
        share = f" ({min(simulated_s / end_s, 1):.0%})" if end_s > 0 else ""
        print(f"simulated {simulated_s:,.0f} s of {end_s:,.0f} s of arrivals{share}", end="\r" if self.tty else "\n",
              file=sys.stderr, flush=True)
        self.shown = True

    def done(self):
        if self.shown:
            print(("\n" if self.tty else "") + "simulated; measuring the requests", file=sys.stderr, flush=True)


def cmd_sweep(args):
    from lab import core
    from lab.core.sweep import max_rate_meeting_slo, parse_range, sweep

    target = flag_number(args.target, "--target", hi=1)
    scenario = core.load_scenario(args.file, overrides=args.set)
    path, values = parse_range(args.vary)
    scenario.with_changes({path: values[0]})  # fail fast on a bad path or value

    def progress(done, total):
        if sys.stderr.isatty() or args.progress:
            print(f"\rsweeping {path}: {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)

    with _run_map(args) as map_fn:
        points = sweep(scenario, path, values, progress, map_fn=map_fn)
    best = None
    gpus = scenario.fleet.total_gpus
    if path == "workload.rate":
        best = max_rate_meeting_slo(scenario, points, target=target)
    if args.json:
        out = {
            "vary": path,
            "points": [{"value": v, "metrics": {k: _json_safe(x) for k, x in m.items()}} for v, m in points],
        }
        if path == "workload.rate":
            out["max_rate_meeting_slo"] = best
            out["max_rate_meeting_slo_per_gpu"] = best / gpus if best is not None else None
            out["slo_target"] = target
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
            print(f"No swept rate has {target:.0%} of requests meeting the SLO.")
        else:
            print(f"Goodput (highest rate with >= {target:.0%} meeting the SLO): {best:.2f} req/s "
                  f"= {best / gpus:.3f} req/s per GPU on {gpus} GPUs")
    return 0


def _run_map(args):
    """The map `--workers` / `--dask` choose (lab/parallel.py), after checking both flags."""
    from lab.core import LabError
    from lab.parallel import DASK_RUN_TIMEOUT_S, DASK_TIMEOUT_S, check_dask_address, default_workers, parse_workers, run_map

    timeout_s = flag_number(args.dask_timeout, "--dask-timeout") if args.dask_timeout is not None else DASK_TIMEOUT_S
    run_timeout_s = (flag_number(args.dask_run_timeout, "--dask-run-timeout") if args.dask_run_timeout is not None
                     else DASK_RUN_TIMEOUT_S)
    if args.dask is not None:
        if args.workers is not None:
            raise LabError("--workers", "give --workers or --dask, not both (a Dask cluster has its own workers)")
        return run_map(dask_address=check_dask_address(args.dask), timeout_s=timeout_s, run_timeout_s=run_timeout_s)
    for flag, value in (("--dask-timeout", args.dask_timeout), ("--dask-run-timeout", args.dask_run_timeout)):
        if value is not None:
            raise LabError(flag, "applies to --dask only (local processes need no timeout)")
    workers = default_workers() if args.workers is None else parse_workers(args.workers)
    return run_map(workers=workers)


def flag_number(text, field, whole=False, hi=None):
    """A numeric flag: finite and above 0 (whole, at most `hi`), else LabError naming the flag.

    Read as a scenario field is (core.fields' readers), so a flag's limits read as a field's.
    """
    from lab.core import LabError
    from lab.core import fields as F

    value = F.number_from_text(text)
    if value is None:
        raise LabError(field, f"expected a number, got {F.describe(str(text).strip())}")
    if whole:
        return F.read_int({field: value}, field, "", lo=1, hi=hi)
    return F.read_number({field: value}, field, "", lo=0, lo_open=True, hi=hi)


def plan_constraints(args):
    """`lab plan`'s flags as plan.Constraints (every flag checked, named in its error)."""
    from lab.core.spec import GPU_PRESETS, MAX_GPUS
    from lab.plan import Constraints
    from lab.plan.space import LAYOUTS, TP_CHOICES, parse_list, parse_number_list

    target = flag_number(args.target, "--target", hi=1)
    max_gpus = flag_number(args.max_gpus, "--max-gpus", whole=True, hi=MAX_GPUS)
    return Constraints(
        target=target,
        max_gpus=max_gpus,
        layouts=parse_list(args.layouts, "--layouts", LAYOUTS),
        gpu_types=parse_list(args.gpu_types, "--gpu-types", tuple(GPU_PRESETS)) if args.gpu_types else None,
        tps=parse_number_list(args.tp, "--tp", 1, 8, allowed=TP_CHOICES) if args.tp else None,
        chunks=parse_number_list(args.chunks, "--chunks", 16, 1_000_000, zero_ok=True),
        links=parse_number_list(args.links, "--links", 0.001, 10_000, whole=False) if args.links else None,
        budget_usd_per_hour=flag_number(args.budget, "--budget") if args.budget is not None else None,
    )


def cmd_plan(args):
    from lab.outputs import check_outputs
    from lab.plan import plan, plan_scenario

    slo = {"ttft_s": flag_number(args.ttft_s, "--ttft-s") if args.ttft_s is not None else None,
           "tpot_ms": flag_number(args.tpot_ms, "--tpot-ms") if args.tpot_ms is not None else None,
           "max_gap_ms": flag_number(args.max_gap_ms, "--max-gap-ms") if args.max_gap_ms is not None else None}
    constraints = plan_constraints(args)
    scenario, what = plan_scenario(args.workload, slo, args.set)
    check_outputs([("--write-scenario", args.write_scenario)], scenario_inputs(scenario, args.workload))
    tty = sys.stderr.isatty()
    show = tty or args.progress
    names = {"size": "sizing pools", "screen": "screening fleets", "confirm": "confirming on the whole workload",
             "robustness": "robustness of the winner"}

    def progress(phase, done, total):
        unit = "fleet shapes" if phase == "size" else "runs"
        if show and tty:
            print(f"\rplan: {names[phase]}: {done}/{total} {unit} ", end="" if done < total else "\n", file=sys.stderr, flush=True)
        elif show and (done == total or done % max(1, total // 4) == 0):  # a log: a few lines per phase
            print(f"plan: {names[phase]}: {done}/{total} {unit}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    with _run_map(args) as map_fn:
        result = plan(scenario, constraints, map_fn=map_fn, progress=progress)
    elapsed = time.perf_counter() - started
    run_winner = None  # the command that runs the written winner
    if args.write_scenario and result.winner is not None:
        run_winner = _write_winner(args.write_scenario, scenario, result.winner)
    if args.json:
        print(json.dumps(plan_json(args, scenario, what, result, elapsed, run_winner), indent=2))
    else:
        print("\n".join(format_plan(args, scenario, what, result, elapsed, run_winner)))
    return 0 if result.winner is not None else 1


def _write_winner(path, scenario, winner):
    """Write the winner's scenario to `path`; returns the command that runs it."""
    from lab.core.workload import path_inside
    from lab.outputs import write_atomic

    raw = scenario.with_changes(winner["changes"]).to_dict()
    trace = raw["workload"].get("trace")
    command = f"python -m lab run {shlex.quote(path)}"
    if trace is not None:
        # `lab run` reads a trace inside the scenario's folder or the working directory (Trace
        # files): beside OUT it is named relative to it, elsewhere by its absolute path, and
        # where neither holds it, OUT runs from the trace's folder.
        full = os.path.realpath(os.path.join(scenario.base_dir, trace["path"]))
        folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        beside = path_inside(full, folder)
        trace["path"] = os.path.relpath(full, folder) if beside else full
        if not beside and not path_inside(full, os.path.realpath(os.getcwd())):
            command = f"cd {shlex.quote(os.path.dirname(full))} && python -m lab run {shlex.quote(os.path.abspath(path))}"
    write_atomic(path, "--write-scenario", lambda fh: fh.write(json.dumps(raw, indent=2) + "\n"))
    return command


def _plan_model(model):
    from lab.core.calibration import expected_error, model_note

    error, rows, matched = expected_error(model) if model.cost == "calibrated" else (None, 0, False)
    return {"cost": model.cost, "llm": model.llm, "gpu": model.gpu, "dtype": model.dtype,
            "stack": model.stack if model.cost == "calibrated" else None, "expected_error": error,
            "calibration_rows": rows, "rows_match": matched, "note": model_note(model)}


def plan_json(args, scenario, what, result, elapsed, run_winner=None):
    load = result.load
    clean = lambda row: {k: _json_safe(v) for k, v in row.items()}  # noqa: E731
    return {
        "workload": {"source": what, "requests": load.requests, "span_s": load.span_s, "rate": load.rate,
                     "prompt_tokens_per_s": load.prompt_tps, "output_tokens_per_s": load.output_tps},
        "slo": scenario.slo.to_dict(),
        "model": _plan_model(scenario.model),
        "target": result.target,
        "screened_on": result.screened_on,
        "bounds": [{"config": c.describe(), "instances": list(b.instances), "loads": list(b.loads)} for c, b in result.bounds],
        "winner": clean(result.winner) if result.winner else None,
        "robustness": result.robustness,
        "pareto": [clean(r) for r in result.pareto],
        "evaluated": [clean(r) for r in result.rows],
        "skipped": [{"fleet": f, "reason": why} for f, why in result.skipped],
        "runs": result.runs,
        "seconds": round(elapsed, 3),
        "seconds_by_phase": result.seconds,
        "winner_scenario": {"path": args.write_scenario, "run": run_winner} if run_winner else None,
    }


def format_plan(args, scenario, what, result, elapsed, run_winner=None):
    from lab.plan.workload import is_trace_path

    load = result.load
    slo = ", ".join(f"{k} {v:g}" for k, v in scenario.slo.to_dict().items())
    from lab.core.calibration import model_note

    lines = [f"{printable(args.workload)}: {printable(what)}, {load.requests:,} requests over {load.span_s:,.0f} s "
             f"({load.rate:.2f} req/s; {load.prompt_tps:,.0f} prompt and {load.output_tps:,.0f} output tokens/s)",
             f"  model: {model_note(scenario.model)}",
             f"  SLO {slo}; target {result.target:.0%} of requests; screened on {result.screened_on}",
             "  lower bounds (instances): " + "; ".join(f"{c.describe()}: {'+'.join(map(str, b.instances))}" for c, b in result.bounds)]
    w = result.winner
    if w is None:
        lines.append(f"No fleet within the constraints has {result.target:.0%} of requests meeting the SLO "
                     f"({result.runs} runs in {elapsed:.1f} s).")
        if not result.rows:
            lines.append(f"  every shape's lower bound is over --max-gpus {args.max_gpus}"
                         + (" or --budget" if args.budget else "") + ": allow more GPUs, or other --tp or --gpu-types")
    else:
        lines.append(f"Cheapest fleet meeting the target: {w['fleet']}: ${w['usd_per_hour']:,.2f}/h, "
                     f"{w['slo_attainment']:.1%} meet the SLO, goodput {w['goodput_rps_per_gpu']:.3f} req/s per GPU")
        sets = " ".join(f"--set '{s}'" for s in w["set"])
        if run_winner:
            lines.append(f"  wrote its scenario to {printable(args.write_scenario)}: {printable(run_winner)}")
        elif is_trace_path(args.workload):
            lines.append("  to run it: --write-scenario OUT.json, then python -m lab run OUT.json")
        else:
            lines.append(f"  python -m lab run {printable(args.workload)} {sets}")
        rob = result.robustness
        runs = "   ".join(f"{r['run']} {r['slo_attainment']:.1%}" for r in rob["runs"])
        lines.append(f"  robustness: min {rob['min']:.1%}, median {rob['median']:.1%} ({runs})")
        if rob["note"]:
            lines.append(f"  ({rob['note']})")
    lines.append("Pareto front ($/hour against goodput per GPU and attainment; * = screened only):")
    lines.append(f"  {'fleet':<48} {'GPUs':>4} {'$/hour':>8} {'SLO met':>8} {'goodput/GPU':>11}")
    for r in result.pareto:
        mark = "*" if r["measured"] == "screen" else " "
        lines.append(f"  {r['fleet']:<48} {r['gpus']:>4} {r['usd_per_hour']:>8.2f} {r['slo_attainment']:>7.1%}{mark} "
                     f"{r['goodput_rps_per_gpu']:>11.3f}")
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    lines.append(f"{len(result.rows)} fleets evaluated in {result.runs} runs, {elapsed:.1f} s ({phases})")
    return lines


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
    time_budget_s = flag_number(args.time_budget, "--time-budget")
    files = mission_files(args.files)
    if not files:
        raise LabError("check", f"no mission files in {' '.join(args.files)}")
    failed = 0
    reports = []

    def fail(path, error):
        """Report every mistake `error` names (LabErrors: several), one a line."""
        nonlocal failed
        failed += 1
        problems = mistakes_of(error)
        if args.json:
            reports.append({"file": path, "ok": False, "problems": problems})
        else:
            print(f"FAIL {printable(path)}" + "".join(f"\n  {printable(p)}" for p in problems))

    for path, mission, error in load_each(files):
        if error is not None:
            fail(path, error)
            continue
        try:
            report = check_mission(mission, time_budget_s=time_budget_s, seeds=seeds)
        except LabError as exc:
            fail(path, exc)
            continue
        if args.json:
            reports.append({"file": path, **report.to_dict()})
        else:
            print("\n".join(printable(line) for line in report.lines()))
        if not report.ok:
            failed += 1
    if args.json:
        print(json.dumps(reports, indent=2))
    elif len(files) > 1:
        print(f"{len(files) - failed} of {len(files)} missions OK")
    return 1 if failed else 0


def cmd_schema(args):
    """The missions' JSON Schema on stdout: saved next to your own missions as schema.json, the
    `"$schema": "./schema.json"` they begin with lets an editor check them as you type."""
    from lab.core.missions import default_missions_dir

    path = os.path.join(default_missions_dir(), "schema.json")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        print(f"error: cannot read the missions' schema {printable(path)}: {printable(exc.strerror or exc)}", file=sys.stderr)
        return 1
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


LINK_BASE = "http://localhost:5006/lab"  # `lab serve`'s lab page on its default port


def cmd_link(args):
    """Check a mission file (every mistake named, exit 1, as `lab check` names them), then print
    the lab's address that carries it whole: BASE?draft=CODE (lab.core.mission_link)."""
    from lab.core import LabError
    from lab.core.loading import MAX_JSON_BYTES, read_text
    from lab.core.mission_link import MAX_CODE_CHARS, encode_mission
    from lab.core.missions import Mission, parse_mission_text

    base = args.base.strip()
    if not base or "#" in base or any(c.isspace() or not c.isprintable() for c in base):
        raise LabError("--base", f"expected the lab's address, like {LINK_BASE} or https://HOST/PATH/lab.html "
                                 f"(no spaces, no #), got {base[:60]!r}")
    path = args.file
    try:
        data = parse_mission_text(read_text(path, path, MAX_JSON_BYTES), os.path.basename(path))
        Mission.from_dict(data, os.path.dirname(os.path.abspath(path)), path)
        code = encode_mission(data)
    except LabError as exc:  # the file's mistakes, all of them; or a mission too big for a link
        problems = mistakes_of(exc)
        print(f"FAIL {printable(path)}" + "".join(f"\n  {printable(p)}" for p in problems), file=sys.stderr)
        return 1
    link = f"{base}{'&' if '?' in base else '?'}draft={code}"
    print(link)
    trace = data.get("scenario", {}).get("workload", {}).get("trace")
    notes = [f"the link is {len(link):,} characters (its mission's code {len(code):,}; a link holds at most "
             f"{MAX_CODE_CHARS:,}). A static site's lab is .../lab.html: --base https://HOST/PATH/lab.html"]
    if isinstance(trace, dict):
        notes.append(f"its trace ({printable(str(trace.get('path')))}) is read from the missions folder of the lab "
                     "that opens the link, which must hold it")
    print("\n".join(notes), file=sys.stderr)
    return 0


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
    run.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    run.set_defaults(func=cmd_run)

    sw = sub.add_parser("sweep", help="metrics across a range of one setting")
    sw.add_argument("file")
    sw.add_argument("--vary", required=True, metavar="PATH=START:STOP:STEP",
                    help="e.g. workload.rate=4:24:2 (inclusive) or fleet.chunk_tokens=256,512,1024")
    sw.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    sw.add_argument("--target", default="0.9", help="share of requests meeting the SLO at the goodput rate, above 0 and at most 1 (default 0.9)")
    sw.add_argument("--json", action="store_true")
    sw.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    _parallel_flags(sw)
    sw.set_defaults(func=cmd_sweep)

    pl = sub.add_parser("plan", help="search the cheapest fleet whose runs meet the SLO for a workload")
    pl.add_argument("workload", help="a trace (.csv, Mooncake .jsonl), replayed whole, or a scenario or mission JSON")
    pl.add_argument("--target", default="0.9", help="share of requests that must meet the SLO (default 0.9)")
    pl.add_argument("--ttft-s", help="SLO: time to first token, seconds (a trace's default: 1)")
    pl.add_argument("--tpot-ms", help="SLO: time per output token, ms (a trace's default: 20)")
    pl.add_argument("--max-gap-ms", help="SLO: the worst gap between tokens, ms (default: none)")
    pl.add_argument("--max-gpus", default="16", help="most GPUs a fleet may have (default 16)")
    pl.add_argument("--layouts", default="colocated,disaggregated", help="colocated, disaggregated or both (default)")
    pl.add_argument("--gpu-types", help="GPU types to build from, e.g. h100,a100 (default: the scenario's model.gpu)")
    pl.add_argument("--tp", help="tensor-parallel degrees, e.g. 1,2 (default: the smallest whose weights fit)")
    pl.add_argument("--chunks", default="256,512,1024", help="colocated chunk sizes, 0 = whole prefill (default 256,512,1024)")
    pl.add_argument("--links", help="split fleets' link GB/s, e.g. 25,50 (default: the scenario's link)")
    pl.add_argument("--budget", help="most $/hour a fleet may cost (the presets' illustrative prices)")
    pl.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="change the base scenario first")
    pl.add_argument("--write-scenario", metavar="OUT", help="write the winner's scenario JSON to OUT (for lab run)")
    pl.add_argument("--json", action="store_true", help="print the plan as JSON")
    pl.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    _parallel_flags(pl)
    pl.set_defaults(func=cmd_plan)

    chk = sub.add_parser("check", help="validate and solve mission files")
    chk.add_argument("files", nargs="+", help="mission files or folders (schema.json is skipped)")
    chk.add_argument("--json", action="store_true", help="print the reports as JSON")
    chk.add_argument("--time-budget", default="60", help="seconds allowed per mission, above 0 (default 60)")
    chk.add_argument("--seeds", default="5",
                     help="seeds each star's cheapest setting (and the start) is run on (default 5)")
    chk.set_defaults(func=cmd_check)

    sch = sub.add_parser("schema", help="print the JSON Schema of mission files (python -m lab schema > schema.json)")
    sch.set_defaults(func=cmd_schema)

    lnk = sub.add_parser("link", help="check a mission file and print a lab address that carries it (a shared draft)")
    lnk.add_argument("file", help="a mission JSON")
    lnk.add_argument("--base", default=LINK_BASE,
                     help=f"the lab's address (default {LINK_BASE}, lab serve's; a static site's: .../lab.html)")
    lnk.set_defaults(func=cmd_link)

    srv = sub.add_parser("serve", help="serve the lab locally (offline)", add_help=False)
    srv.add_argument("serve_args", nargs=argparse.REMAINDER)
    srv.set_defaults(func=cmd_serve)
    return parser


def _parallel_flags(parser):
    from lab.parallel import DASK_PORT, DASK_RUN_TIMEOUT_S, DASK_TIMEOUT_S

    parser.add_argument("--workers", help="local processes to run on (default: one per CPU; 1 = this process)")
    parser.add_argument("--dask", metavar="ADDRESS", help=f"run on a Dask cluster: tcp://HOST:PORT, HOST:PORT or HOST "
                                                          f"(port {DASK_PORT}), e.g. tcp://10.0.0.5:8786 (pip install '.[cluster]')")
    parser.add_argument("--dask-timeout", metavar="SECONDS", help="longest wait for the scheduler's answer, a worker and "
                                                                  f"closing (default {DASK_TIMEOUT_S:g})")
    parser.add_argument("--dask-run-timeout", metavar="SECONDS", help="longest wait with no run finishing on the cluster "
                                                                      f"(default {DASK_RUN_TIMEOUT_S:g})")


def mistakes_of(error):
    """The messages of a LabError: one, or each of a LabErrors' (every mistake of one input)."""
    return [str(e) for e in getattr(error, "errors", [error])]


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
        problems = mistakes_of(exc)
        if len(problems) == 1:
            print(f"error: {printable(exc)}", file=sys.stderr)
        else:  # a file with several mistakes (a scenario's workload and SLO, say): one a line
            print(f"error: {len(problems)} mistakes:" + "".join(f"\n  {printable(p)}" for p in problems), file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
