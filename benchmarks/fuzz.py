"""Fuzz the core with random extreme scenarios, valid and invalid, each isolated in a worker.

    python benchmarks/fuzz.py --n 10000 --seed 1 [--workers 1] [--save-dir fuzz-out]

Every scenario (a tenth of them replaying a random trace CSV) is loaded (sometimes
through JSON text), simulated and summarised in a
worker process that runs under a memory limit (RLIMIT_AS) and a timeout in CPU seconds
(a scenario that loops forever burns CPU; one starved by a busy machine does not).
The counts printed at the end:

    ok        loaded, simulated, every metric finite or undefined (None)
    rejected  LabError: the scenario was refused with a message (what bad input must do)
    crashed   any other exception, a non-finite metric, or the worker died (a signal,
              the memory limit); the first few are saved to --save-dir for replay
    hung      no answer after --timeout seconds of the worker's CPU time, or ten times that
              of wall-clock time (the worker is killed); saved too

Replay a saved scenario with `python -m lab run SAVED.json` (each file is the scenario,
with its trace in SAVED.csv if it has one; the failure is in SAVED.txt). Scenarios are kept short (1 to 20 s of arrivals) so
10,000 of them take minutes on one core.
"""

import argparse
import json
import math
import multiprocessing as mp
import os
import random
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

__all__ = ["random_scenario", "random_trace", "random_job", "run_one", "main"]

STATUSES = ("ok", "rejected", "crashed", "hung")
MEMORY_MB = 4096
TIMEOUT_S = 120.0


# ---------------------------------------------------------------- the generator

class _Gen:
    """The generator's random source and how often a field gets an invalid value."""

    def __init__(self, rng, p_bad):
        self.rng = rng
        self.p_bad = p_bad

    def __getattr__(self, name):  # random(), choice(), uniform(), ...
        return getattr(self.rng, name)


def _pick(rng, common, extreme, weight=1.0):
    """Usually `common()` (already spanning a wide valid range), sometimes an invalid or edge value."""
    return rng.choice(extreme) if rng.random() < rng.p_bad * weight else common()


def _log_uniform(rng, lo, hi):
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


BAD = ["x", True, False, None, [], {}, -1, 0, 1e999, float("nan"), 10**400]


def _length(rng):
    kind = rng.choice(["n", "fixed", "uniform", "lognormal", "mix"])
    big = lambda: rng.choice([1, 2, 16, 1000, 8000, 100_000, 1_000_000])  # noqa: E731
    if kind == "n":
        return _pick(rng, big, BAD + [1_000_001, 0.5])
    if kind == "fixed":
        return {"dist": "fixed", "value": _pick(rng, big, BAD)}
    if kind == "uniform":
        lo = big()
        return {"dist": "uniform", "low": lo, "high": _pick(rng, lambda: max(lo, big()), BAD + [lo - 1])}
    if kind == "lognormal":
        out = {"dist": "lognormal", "median": _pick(rng, lambda: _log_uniform(rng, 1, 1e6), BAD),
               "sigma": _pick(rng, lambda: rng.uniform(0, 5), BAD + [5.01])}
        if rng.random() < 0.5:
            out["min"] = rng.choice([1, 10, 1000])
            out["max"] = _pick(rng, lambda: rng.choice([1000, 100_000, 1_000_000]), BAD)
        return out
    comps = [{"weight": _pick(rng, lambda: rng.choice([1e-9, 0.5, 1, 1e9]), BAD), "length": _length(rng) if rng.random() < 0.2 else big()}
             for _ in range(rng.randint(0 if rng.random() < 0.05 else 1, 4))]
    return {"dist": "mix", "components": comps}


def _duration(rng):
    return _pick(rng, lambda: rng.uniform(1, 20), BAD + [1e-9, 7200, 7201])


def random_scenario(rng):
    """A random scenario dict: short runs at extreme settings, with some invalid fields."""
    # Half the scenarios have only valid values (at extreme settings); the rest some invalid ones.
    rng = _Gen(rng, rng.choice([0.0, 0.0, 0.02, 0.1]))
    duration = _duration(rng)
    rate = _pick(rng, lambda: _log_uniform(rng, 0.01, 500), BAD + [0, 1e-9, 10_000, 10_001], weight=2)
    workload = {"rate": rate, "duration_s": duration, "prompt_tokens": _length(rng), "output_tokens": _length(rng)}
    if rng.random() < 0.3 and isinstance(duration, float) and duration > 1:
        starts = sorted(rng.uniform(0, duration) for _ in range(rng.randint(1, 4)))
        phases = []
        for s in starts:
            phase = {"start_s": _pick(rng, lambda: s, BAD + [duration + 1])}
            if rng.random() < 0.7:
                phase["rate"] = _pick(rng, lambda: _log_uniform(rng, 0.01, 1000), BAD)
            if rng.random() < 0.3:
                phase["prompt_tokens"] = _length(rng)
            if rng.random() < 0.3:
                phase["output_tokens"] = _length(rng)
            phases.append(phase)
        workload["phases"] = phases
    gpus = lambda: rng.choice([1, 2, 3, 8, 32, 64])  # noqa: E731
    layout = _pick(rng, lambda: rng.choice(["colocated", "disaggregated"]), ["split", 1, None])
    fleet = {"layout": layout}
    if layout == "colocated" or rng.random() < 0.2:
        fleet["gpus"] = _pick(rng, gpus, BAD + [65, 1000])
        if rng.random() < 0.5:
            fleet["chunk_tokens"] = _pick(rng, lambda: rng.choice([0, 16, 64, 512, 8192, 1_000_000]), BAD + [8, 17.5, 1_000_001])
    if layout != "colocated" or rng.random() < 0.2:
        fleet["prefill_gpus"] = _pick(rng, gpus, BAD + [65])
        fleet["decode_gpus"] = _pick(rng, gpus, BAD + [65])
        fleet["link"] = {
            "gbytes_per_s": _pick(rng, lambda: _log_uniform(rng, 0.001, 100_000), BAD + [0.0009]),
            "sharing": _pick(rng, lambda: rng.choice(["fifo", "independent"]), ["shared", 0]),
            "layerwise": _pick(rng, lambda: rng.random() < 0.5, ["yes", 1, None]),
        }
        fleet["first_token"] = _pick(rng, lambda: rng.choice(["decode", "prefill"]), ["never"])
    if rng.random() < 0.4:
        fleet["prefill_batch_tokens"] = _pick(rng, lambda: rng.choice([1, 16, 2048, 8192, 10_000_000]), BAD)
    if rng.random() < 0.4:
        fleet["max_batch_seqs"] = _pick(rng, lambda: rng.choice([1, 2, 64, 256, 100_000]), BAD)
    if rng.random() < 0.25:  # fleets as they are built: parallelism and routing
        for key in ("tp", "prefill_tp", "decode_tp"):
            if rng.random() < 0.5:
                fleet[key] = _pick(rng, lambda: rng.choice([1, 2, 4, 8]), BAD + [3, 16])
        fleet["dispatch"] = _pick(rng, lambda: rng.choice(
            ["queue", "round_robin", "least_loaded", "length_split", "cache_affinity"]), ["random", 0])
        fleet["long_prompt_tokens"] = _pick(rng, lambda: rng.choice([1, 500, 8000]), BAD)
        fleet["long_gpus"] = _pick(rng, lambda: rng.choice([1, 2, 4]), BAD + [64])
    # Memory and control: KV on demand, prefix caching, early rejection, pools that change roles.
    if rng.random() < 0.3:
        fleet["kv_policy"] = _pick(rng, lambda: rng.choice(["reserve", "on_demand"]), ["paged", 1])
        if rng.random() < 0.5:
            fleet["kv_block_tokens"] = _pick(rng, lambda: rng.choice([1, 16, 256, 4096]), BAD + [4097])
    if rng.random() < 0.25:
        fleet["prefix_cache"] = _pick(rng, lambda: rng.choice(["off", "per_gpu", "shared"]), ["lru", 0])
        fleet["prefix_cache_gb"] = _pick(rng, lambda: _log_uniform(rng, 0.001, 100), BAD)
        fleet["prefix_pool_gb"] = _pick(rng, lambda: _log_uniform(rng, 0.001, 10_000), BAD)
        fleet["prefix_fetch_gbytes_per_s"] = _pick(rng, lambda: _log_uniform(rng, 0.001, 1000), BAD)
        workload["prefix_block_tokens"] = _pick(rng, lambda: rng.choice([1, 16, 512, 100_000]), BAD)
        workload["prefixes"] = {
            "system_tokens": _pick(rng, lambda: rng.choice([0, 1, 512, 50_000]), BAD),
            "system_share": _pick(rng, lambda: rng.random(), BAD + [1.5]),
            "followup_share": _pick(rng, lambda: rng.random(), BAD + [-0.1]),
            "open_conversations": _pick(rng, lambda: rng.choice([1, 4, 1000]), BAD),
        }
    if rng.random() < 0.2:
        fleet["admission"] = _pick(rng, lambda: rng.choice([None, "off", {"reject_when": "predicted_ttft_over_slo"}]),
                                   ["always", {"reject_when": "never"}, {"when": 1}, 1])
    if rng.random() < 0.2:
        at = rng.uniform(0, duration) if isinstance(duration, float) else 1.0
        fleet["planner"] = _pick(rng, lambda: rng.choice([
            {"policy": "utilization", "interval_s": rng.choice([0.01, 0.5, 2, 10]), "threshold": rng.uniform(0, 1),
             "switch_s": rng.choice([0, 0.5, 5, 100]), "min_per_pool": rng.choice([1, 2, 3])},
            {"policy": "schedule", "switch_s": rng.choice([0, 1, 5]),
             "schedule": [{"at_s": at, "prefill_gpus": rng.choice([1, 2, 3, 8])}]},
            {"policy": "off"}]), [{"policy": "sometimes"}, {"policy": "schedule", "schedule": []}, "on", 1])
    together = rng.random() < 0.15 and isinstance(duration, float)
    if together:  # memory and control together, on a fleet a planner can run (docs/model.md "Pools that change roles")
        for key in ("gpus", "chunk_tokens", "tp", "prefill_tp", "decode_tp", "long_prompt_tokens", "long_gpus"):
            fleet.pop(key, None)
        fleet.update(layout="disaggregated", dispatch="queue", prefill_gpus=rng.choice([1, 2, 3]),
                     decode_gpus=rng.choice([1, 2, 3]), link={"gbytes_per_s": rng.choice([0.5, 5, 50]), "layerwise": False})
        if rng.random() < 0.5:
            fleet["prefill_chunk_tokens"] = rng.choice([64, 512, 4096])
        fleet["kv_policy"] = rng.choice(["reserve", "on_demand", "on_demand"])
        fleet["kv_block_tokens"] = rng.choice([1, 16, 256])
        fleet["prefix_cache"] = rng.choice(["off", "per_gpu", "shared"])
        fleet["prefix_cache_gb"] = _log_uniform(rng, 0.01, 10)
        fleet["prefix_pool_gb"] = _log_uniform(rng, 0.01, 100)
        workload["prefix_block_tokens"] = rng.choice([16, 512])
        workload["prefixes"] = {"system_tokens": rng.choice([0, 512, 4000]), "system_share": rng.random(),
                                "followup_share": rng.random(), "open_conversations": rng.choice([1, 8, 100])}
        fleet["admission"] = rng.choice([None, {"reject_when": "predicted_ttft_over_slo"}])
        total = fleet["prefill_gpus"] + fleet["decode_gpus"]
        fleet["planner"] = rng.choice([
            {"policy": "utilization", "interval_s": rng.choice([0.05, 0.5, 2]), "threshold": rng.uniform(0, 0.5),
             "switch_s": rng.choice([0, 0.5, 5])},
            {"policy": "schedule", "switch_s": rng.choice([0, 1]),
             "schedule": [{"at_s": rng.uniform(0, duration * 0.99), "prefill_gpus": rng.randint(1, max(1, total - 1))}]}])
    model = {"cost": _pick(rng, lambda: rng.choice(["linear", "roofline"]), ["cubic"])}
    if rng.random() < 0.4:
        model["llm"] = _pick(rng, lambda: rng.choice(["llama3-8b", "llama3-70b"]), ["gpt"])
        model["gpu"] = _pick(rng, lambda: rng.choice(["h100", "a100", "h200"]), ["tpu"])
    if rng.random() < 0.4:
        model["kv_capacity_tokens"] = _pick(rng, lambda: rng.choice([1, 100, 10_000, 1_000_000, 100_000_000]), BAD)
    if rng.random() < 0.3:
        model["prefill_ms_per_token"] = _pick(rng, lambda: _log_uniform(rng, 0.0001, 100), BAD)
        model["decode_step_ms"] = _pick(rng, lambda: _log_uniform(rng, 0.1, 10_000), BAD)
        model["decode_ms_per_seq"] = _pick(rng, lambda: rng.uniform(0, 1000), BAD)
        model["decode_ms_per_context_token"] = _pick(rng, lambda: rng.uniform(0, 1), BAD)
    if rng.random() < 0.3:
        model["efficiency"] = _pick(rng, lambda: rng.uniform(0.001, 1), BAD)
        model["memory_utilization"] = _pick(rng, lambda: rng.uniform(0.01, 1), BAD)
    slo = {}
    for key, lo, hi in (("ttft_s", 0.001, 100), ("tpot_ms", 0.1, 10_000), ("max_gap_ms", 0.1, 100_000)):
        if rng.random() < 0.6:
            slo[key] = _pick(rng, lambda: _log_uniform(rng, lo, hi), BAD)
    if together and fleet["admission"] is not None:
        slo["ttft_s"] = _log_uniform(rng, 0.05, 10)  # early rejection needs the SLO's TTFT
    if rng.random() < 0.1:  # replay a random trace instead (its CSV text comes from random_trace)
        workload = {"trace": {"path": "trace.csv"}}
        for key, valid, bad in (("start_s", lambda: rng.choice([0, 0.5, 5, 1e6]), BAD + [1e13]),
                                ("duration_s", lambda: rng.uniform(0.1, 20), BAD + [7201]),
                                ("time_scale", lambda: _log_uniform(rng, 0.001, 1000), BAD + [1001])):
            if rng.random() < 0.5:
                workload["trace"][key] = _pick(rng, valid, bad)
    raw = {"workload": workload, "fleet": fleet, "model": model, "slo": slo,
           "seed": _pick(rng, lambda: rng.randrange(2**63), BAD + [2**63]),
           "drain_s": _pick(rng, lambda: rng.choice([0, 1, 10, 60, 120]), BAD + [7200, 7201])}
    return raw


def random_trace(rng):
    """CSV text in one of the trace formats, with extreme (sometimes invalid) cells."""
    rng = _Gen(rng, rng.choice([0.0, 0.0, 0.05]))
    header = _pick(rng, lambda: rng.choice(["arrival_s,prompt_tokens,output_tokens", "arrived_at,num_prefill_tokens,num_decode_tokens"]),
                   ["TIMESTAMP,ContextTokens,GeneratedTokens", "a,b,c", ""])
    t = 0.0
    lines = [header]
    for _ in range(rng.randint(0, 200)):
        t += _log_uniform(rng, 1e-6, 10) if rng.random() < 0.9 else rng.choice([0, 1e6, 1e11])
        cells = [repr(t), str(rng.choice([1, 16, 2000, 100_000, 1_000_000])), str(rng.choice([1, 2, 200, 10_000]))]
        if rng.random() < rng.p_bad:
            cells[rng.randrange(3)] = rng.choice(["", "x", "-1", "nan", "inf", "1e306", "2.5", "1e999", "1" * 400])
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def random_job(rng):
    """(scenario dict, load through JSON text?, trace CSV text or None): run_one's arguments."""
    raw = random_scenario(rng)
    trace = random_trace(rng) if "trace" in raw["workload"] else None
    return raw, rng.random() < 0.3, trace


# ---------------------------------------------------------------- one run

def _finite(metrics):
    return all(v is None or isinstance(v, (bool, str)) or math.isfinite(v) for v in metrics.values())


def run_one(raw, as_text=False, trace_text=None):
    """("ok" | "rejected" | "crashed", detail). `as_text` loads the scenario through JSON text;
    `trace_text` is written as trace.csv in a temporary folder the scenario is loaded from."""
    import tempfile

    from lab import core
    from lab.core.loading import parse_json

    try:
        with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
            if trace_text is not None:
                with open(os.path.join(folder, "trace.csv"), "w", encoding="utf-8") as fh:
                    fh.write(trace_text)
            data = parse_json(json.dumps(raw), "fuzz.json") if as_text else raw
            scenario = core.load_scenario(data, base_dir=folder)
            metrics = core.summarize(core.simulate(scenario))
    except core.LabError as exc:  # every mistake it names, one a line (a scenario's parts are read independently)
        from lab.cli import mistakes_of

        return "rejected", "\n".join(m[:300] for m in mistakes_of(exc))
    except Exception:  # noqa: BLE001 - every other exception is what the fuzz looks for
        return "crashed", traceback.format_exc()
    if not _finite(metrics):
        bad = {k: v for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)}
        return "crashed", f"non-finite metrics: {bad}"
    return "ok", ""


def _worker(conn, memory_bytes):
    import resource

    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    while True:
        job = conn.recv()
        if job is None:
            return
        try:
            conn.send(run_one(*job))
        except MemoryError:
            conn.send(("crashed", "MemoryError (over the memory limit)"))


class Worker:
    """One child process running scenarios; killed and replaced when it hangs or dies."""

    def __init__(self, ctx, memory_bytes):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, memory_bytes), daemon=True)
        self.proc.start()
        child.close()

    @property
    def alive(self):
        return self.proc.is_alive()

    def kill(self):
        self.proc.kill()
        self.proc.join(5)

    def stop(self):
        try:
            self.conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.kill()


def _save(save_dir, index, status, job, detail, saved):
    if save_dir is None or saved[status] >= 10:
        return
    saved[status] += 1
    save_dir.mkdir(parents=True, exist_ok=True)
    stem = save_dir / f"{status}-{index:05d}"
    raw, _, trace_text = job
    if trace_text is not None:  # replayable as a bare scenario: the trace sits next to it
        raw = json.loads(json.dumps(raw))
        raw["workload"]["trace"]["path"] = stem.name + ".csv"
        stem.with_suffix(".csv").write_text(trace_text, encoding="utf-8")
    stem.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=repr, allow_nan=True) + "\n", encoding="utf-8")
    stem.with_suffix(".txt").write_text(detail, encoding="utf-8")


def _cpu_seconds(pid):
    """User + system CPU time of process `pid` (Linux /proc), or None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _answered(worker, timeout_s):
    """Wait for the worker's answer: False once it has spent `timeout_s` of CPU on this scenario
    (wall-clock time where CPU time cannot be read), or ten times that of wall-clock time."""
    start_wall = time.perf_counter()
    start_cpu = _cpu_seconds(worker.proc.pid)
    while not worker.conn.poll(0.25):
        wall = time.perf_counter() - start_wall
        cpu = _cpu_seconds(worker.proc.pid)
        used = cpu - start_cpu if cpu is not None and start_cpu is not None else wall
        if used > timeout_s or wall > 10 * timeout_s:
            return False
    return True


def main(argv=None):
    parser = argparse.ArgumentParser(description="Fuzz the core with random extreme scenarios.")
    parser.add_argument("--n", type=int, default=1000, help="how many scenarios (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generator (default 0)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1: the machine is shared)")
    parser.add_argument("--save-dir", type=Path, default=None, help="save the first crashed/hung scenarios here")
    # Longer than an accepted scenario takes: the runs' caps (steps, drain) end the slowest
    # seen in about a minute of CPU (benchmarks/README.md), which 30 s once counted as hung.
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help=f"CPU seconds per scenario before it counts as hung (default {TIMEOUT_S:g})")
    # The scale target's memory (docs/architecture.md "Scale": a million requests on 128 GPUs in at most 4 GB):
    # an accepted scenario may take that much, so a smaller limit would count a legal run as a crash.
    parser.add_argument("--memory-mb", type=int, default=MEMORY_MB, help=f"address-space limit per worker (default {MEMORY_MB})")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    jobs = [random_job(rng) for _ in range(args.n)]
    ctx = mp.get_context("fork" if sys.platform != "win32" else "spawn")
    memory = args.memory_mb * 1024 * 1024
    counts = dict.fromkeys(STATUSES, 0)
    saved = dict.fromkeys(STATUSES, 0)
    reasons = {}
    slowest = (0.0, -1)
    started = time.perf_counter()
    workers = [Worker(ctx, memory) for _ in range(max(1, args.workers))]
    # One job per worker at a time; with several workers, hand out jobs round-robin.
    pending = list(enumerate(jobs))
    try:
        while pending:
            batch, pending = pending[: len(workers)], pending[len(workers):]
            for slot, (index, job) in enumerate(batch):
                workers[slot].conn.send(job)
            for slot, (index, job) in enumerate(batch):
                worker = workers[slot]
                t0 = time.perf_counter()
                if not _answered(worker, args.timeout):
                    status, detail = "hung", f"no answer after {args.timeout:g} s of CPU time"
                else:
                    try:
                        status, detail = worker.conn.recv()
                    except (EOFError, OSError):
                        worker.proc.join(5)
                        status, detail = "crashed", f"the worker died (exit code {worker.proc.exitcode})"
                elapsed = time.perf_counter() - t0
                slowest = max(slowest, (elapsed, index))
                counts[status] += 1
                if status == "rejected":
                    for mistake in detail.splitlines():
                        field = mistake.split(":", 1)[0]
                        reasons[field] = reasons.get(field, 0) + 1
                if status in ("crashed", "hung"):
                    _save(args.save_dir, index, status, job, detail, saved)
                    print(f"{status} #{index}: {detail.strip().splitlines()[-1][:200]}", file=sys.stderr)
                if status == "hung" or not worker.alive:
                    worker.kill()
                    workers[slot] = Worker(ctx, memory)
            done = args.n - len(pending)
            if done % 500 == 0 or not pending:
                print(f"  {done:,}/{args.n:,}: " + ", ".join(f"{s} {counts[s]}" for s in STATUSES), file=sys.stderr, flush=True)
    finally:
        for worker in workers:
            worker.stop()
    total = time.perf_counter() - started
    print(f"{args.n:,} scenarios (seed {args.seed}) in {total:.0f} s: " + ", ".join(f"{s} {counts[s]:,}" for s in STATUSES))
    print(f"slowest scenario #{slowest[1]}: {slowest[0]:.2f} s")
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:8]
    print("most rejected fields: " + ", ".join(f"{f} {c}" for f, c in top))
    return 1 if counts["crashed"] or counts["hung"] else 0


if __name__ == "__main__":
    sys.exit(main())
