"""lab.core in bare Pyodide (npm `pyodide`, the version Panel's converter pins).

(a) the Pyodide we test against is the one the browser build will use;
(b) every lab.core module imports with the standard library alone;
(c) simulate/summarize and blame (request_blame, blame_summary) give bit-identical
    results in CPython and Pyodide (and in PyPy: scripts/test.sh --pypy runs (b) and (c)
    there, the "cpython" side then being PyPy's);
(d) the same summaries on numpy in Pyodide (numpy loaded, as the page has it) as on the
    pure path in CPython.
"""

import json
import os
import pkgutil
import platform
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.pyodide

REPO = Path(__file__).resolve().parent.parent
CORE = REPO / "lab" / "core"

_OUTPUT = {"dist": "lognormal", "median": 200, "sigma": 0.5, "min": 10, "max": 800}
_PROMPT = {"dist": "fixed", "value": 2000}
_SLO = {"ttft_s": 1.5, "tpot_ms": 25}


def _scenario(fleet, model=None, workload=None, seed=1):
    wl = {"rate": 8, "duration_s": 20, "prompt_tokens": _PROMPT, "output_tokens": _OUTPUT}
    wl.update(workload or {})
    return {"seed": seed, "workload": wl, "fleet": fleet, "model": model or {"cost": "linear"}, "slo": _SLO}


SCENARIOS = {
    "colocated-whole": _scenario({"layout": "colocated", "gpus": 3}),
    "colocated-chunked": _scenario({"layout": "colocated", "gpus": 3, "chunk_tokens": 512}, seed=2),
    "disagg-fifo": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2,
         "link": {"gbytes_per_s": 50, "sharing": "fifo", "layerwise": False}, "first_token": "decode"},
        seed=3,
    ),
    "disagg-independent-layerwise": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2,
         "link": {"gbytes_per_s": 10, "sharing": "independent", "layerwise": True}, "first_token": "prefill"},
        seed=4,
    ),
    # Layer chunks of transfers from three prefill GPUs interleaving on one wire.
    "disagg-fifo-layerwise": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 3, "decode_gpus": 2,
         "link": {"gbytes_per_s": 10, "sharing": "fifo", "layerwise": True}},
        workload={"rate": 12, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 6000}},
        seed=7,
    ),
    "roofline": _scenario(
        {"layout": "colocated", "gpus": 2, "chunk_tokens": 1024},
        model={"cost": "roofline", "gpu": "h100"},
        workload={"prompt_tokens": {"dist": "uniform", "low": 200, "high": 4000}},
        seed=5,
    ),
    "calibrated-fp8-tp2-chunked": _scenario(
        {"layout": "colocated", "gpus": 4, "tp": 2, "chunk_tokens": 512, "power_cap_w": 450},
        model={"cost": "calibrated", "gpu": "h100", "dtype": "fp8"},
        workload={"prompt_tokens": {"dist": "uniform", "low": 200, "high": 4000}},
        seed=6,
    ),
    "calibrated-vllm-2023-disagg": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2, "decode_gpu": "a100", "prefill_chunk_tokens": 1024},
        model={"cost": "calibrated", "gpu": "h100", "stack": "vllm-2023"},
        workload={"rate": 10, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 6000}},
        seed=8,
    ),
    # Exercises the other random paths: mixes, uniform lengths, rate phases.
    "mixed-phases": _scenario(
        {"layout": "colocated", "gpus": 3, "chunk_tokens": 256},
        workload={
            "prompt_tokens": {"dist": "mix", "components": [
                {"weight": 3, "length": {"dist": "uniform", "low": 100, "high": 1500}},
                {"weight": 1, "length": {"dist": "lognormal", "median": 3000, "sigma": 0.4, "min": 500, "max": 8000}},
            ]},
            "phases": [{"start_s": 8, "rate": 14}, {"start_s": 14, "rate": 4}],
        },
        seed=6,
    ),
    # Fleets as they are built: TP per pool, a GPU type per pool, power caps (the cap's
    # clock factor and every power and energy figure must agree bit for bit too).
    "disagg-tp-mixed-gpus-capped": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 4, "decode_gpus": 4, "prefill_tp": 2, "decode_tp": 4,
         "prefill_gpu": "h100", "decode_gpu": "a100", "prefill_power_cap_w": 450, "decode_power_cap_w": 250},
        model={"cost": "roofline", "llm": "llama3-70b", "gpu_overrides": {"a100": {"usd_per_hour": 1.1}}},
        workload={"rate": 3, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 4000}},
        seed=8,
    ),
    "colocated-tp2-capped-linear": _scenario(
        {"layout": "colocated", "gpus": 4, "tp": 2, "chunk_tokens": 512, "power_cap_w": 333}, seed=9),
    # Routing, chunked prefill pools and attention (docs/model.md "Routing", "Attention").
    "routed-colocated-least-loaded-attention": _scenario(
        {"layout": "colocated", "gpus": 3, "chunk_tokens": 512, "dispatch": "least_loaded"},
        model={"cost": "roofline", "gpu": "h100", "attention": True},
        workload={"rate": 14, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 9000}},
        seed=8,
    ),
    "routed-disagg-length-split-chunked-attention": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 3, "decode_gpus": 2, "dispatch": "length_split",
         "long_prompt_tokens": 4000, "long_gpus": 1, "decode_pick": "fewest_seqs", "prefill_chunk_tokens": 1024,
         "link": {"gbytes_per_s": 10, "sharing": "fifo", "layerwise": True}},
        model={"cost": "roofline", "gpu": "h100", "attention": True},
        workload={"rate": 10, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 9000}},
        seed=9,
    ),
    # Partial prefills (fleet.long_prefill_tokens): 30,000-token prompts among short ones,
    # several prompts' chunks in one step, with attention on.
    "partial-prefills-attention": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2, "prefill_chunk_tokens": 2048,
         "long_prefill_tokens": 512},
        model={"cost": "roofline", "gpu": "h100", "attention": True},
        workload={"rate": 12, "prompt_tokens": {"dist": "mix", "components": [
            {"weight": 30, "length": {"dist": "uniform", "low": 200, "high": 800}}, {"weight": 1, "length": 30000}]}},
        seed=11,
    ),
    "partial-prefills-colocated": _scenario(
        {"layout": "colocated", "gpus": 3, "chunk_tokens": 1024, "long_prefill_tokens": 256},
        workload={"rate": 12, "prompt_tokens": {"dist": "mix", "components": [
            {"weight": 30, "length": {"dist": "uniform", "low": 200, "high": 800}}, {"weight": 1, "length": 30000}]}},
        seed=12,
    ),
    "routed-disagg-round-robin": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2, "dispatch": "round_robin"}, seed=10,
    ),
    # Early rejection (fleet.admission): an overload whose predictions sit on both sides of
    # the TTFT target, colocated chunked with least_loaded routing, and split with layer-wise streaming.
    "admission-colocated-least-loaded": _scenario(
        {"layout": "colocated", "gpus": 2, "chunk_tokens": 512, "dispatch": "least_loaded",
         "admission": {"reject_when": "predicted_ttft_over_slo"}},
        workload={"rate": 30, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 6000}},
        seed=13,
    ),
    "admission-disagg-layerwise-roofline": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2,
         "link": {"gbytes_per_s": 5, "layerwise": True}, "admission": {"reject_when": "predicted_ttft_over_slo"}},
        model={"cost": "roofline", "gpu": "h100"},
        workload={"rate": 14, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 6000}},
        seed=14,
    ),
    # Prefix caching (fleet.prefix_cache) on generated shared prefixes: a small per-GPU
    # LRU that evicts, chunked; a shared pool with fetches on a split fleet, with attention.
    "prefix-per-gpu-chunked": _scenario(
        {"layout": "colocated", "gpus": 3, "chunk_tokens": 1024, "prefix_cache": "per_gpu", "prefix_cache_gb": 0.5},
        workload={"prefix_block_tokens": 256, "prefixes": {
            "system_tokens": 700, "systems": 3, "system_share": 0.8, "followup_share": 0.4, "open_conversations": 6,
            "followup_tokens": {"dist": "uniform", "low": 50, "high": 900}, "max_prompt_tokens": 9000}},
        seed=13,
    ),
    "prefix-shared-disagg-attention": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 2, "prefix_cache": "shared",
         "prefix_pool_gb": 2, "prefix_fetch_gbytes_per_s": 10},
        model={"cost": "roofline", "gpu": "h100", "attention": True},
        workload={"prefixes": {"system_tokens": 1024, "followup_share": 0.5,
                               "followup_tokens": {"dist": "lognormal", "median": 400, "sigma": 1, "min": 1, "max": 4000}}},
        seed=14,
    ),
    "prefix-cache-affinity": _scenario(
        {"layout": "colocated", "gpus": 3, "prefix_cache": "per_gpu", "prefix_cache_gb": 2, "dispatch": "cache_affinity"},
        workload={"prefixes": {"system_tokens": 512, "followup_share": 0.6, "open_conversations": 6,
                               "followup_tokens": {"dist": "uniform", "low": 100, "high": 1500}}},
        seed=15,
    ),
    # KV on demand (fleet.kv_policy): preemptions, re-prefills and re-transfers on tight memory.
    "on-demand-colocated-chunked": _scenario(
        {"layout": "colocated", "gpus": 2, "chunk_tokens": 512, "kv_policy": "on_demand"},
        model={"cost": "linear", "kv_capacity_tokens": 5000},
        workload={"rate": 5, "output_tokens": {"dist": "uniform", "low": 100, "high": 900}},
        seed=13,
    ),
    "on-demand-disagg-layerwise-first-token-prefill": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 2, "kv_policy": "on_demand", "kv_block_tokens": 64,
         "first_token": "prefill", "link": {"gbytes_per_s": 5, "sharing": "fifo", "layerwise": True}},
        model={"cost": "roofline", "gpu": "h100", "kv_capacity_tokens": 8000, "attention": True},
        workload={"rate": 8, "prompt_tokens": {"dist": "uniform", "low": 200, "high": 3000},
                  "output_tokens": {"dist": "uniform", "low": 100, "high": 900}},
        seed=14,
    ),
    "on-demand-colocated-least-loaded-whole": _scenario(
        {"layout": "colocated", "gpus": 3, "dispatch": "least_loaded", "kv_policy": "on_demand", "kv_block_tokens": 1},
        model={"cost": "linear", "kv_capacity_tokens": 5000},
        workload={"rate": 8, "prompt_tokens": {"dist": "uniform", "low": 100, "high": 2500},
                  "output_tokens": {"dist": "uniform", "low": 100, "high": 700}},
        seed=15,
    ),
    # Pools that change roles (fleet.planner): a chat phase then long prompts, so GPUs move
    # both ways and decode sequences are handed over mid-answer.
    "planner-utilization": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 3,
         "planner": {"policy": "utilization", "interval_s": 2, "threshold": 0.1, "switch_s": 1}},
        workload={"rate": 6, "phases": [{"start_s": 10, "prompt_tokens": 6000, "output_tokens": 60}]}, seed=13,
    ),
    "planner-schedule": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 4, "prefill_chunk_tokens": 1024,
         "planner": {"policy": "schedule", "switch_s": 0.5, "schedule": [
             {"at_s": 6, "prefill_gpus": 3, "decode_gpus": 2}, {"at_s": 14, "prefill_gpus": 2, "decode_gpus": 3}]}},
        workload={"rate": 10}, seed=14,
    ),
    # Memory and control together: a planner with KV on demand, a shared prefix cache and
    # early rejection; on-demand KV with a per-GPU cache (re-prefills look it up again).
    "planner-on-demand-shared-cache-admission": _scenario(
        {"layout": "disaggregated", "prefill_gpus": 2, "decode_gpus": 3, "kv_policy": "on_demand",
         "prefix_cache": "shared", "admission": {"reject_when": "predicted_ttft_over_slo"},
         "planner": {"policy": "utilization", "interval_s": 2, "threshold": 0.1, "switch_s": 1}},
        model={"cost": "linear", "kv_capacity_tokens": 12000},
        workload={"rate": 6, "output_tokens": {"dist": "uniform", "low": 50, "high": 600},
                  "prefixes": {"system_tokens": 1024, "followup_share": 0.4, "open_conversations": 8},
                  "phases": [{"start_s": 10, "prompt_tokens": 6000, "output_tokens": 60}]}, seed=16,
    ),
    "on-demand-per-gpu-cache-colocated": _scenario(
        {"layout": "colocated", "gpus": 2, "kv_policy": "on_demand", "prefix_cache": "per_gpu", "prefix_cache_gb": 0.5},
        model={"cost": "linear", "kv_capacity_tokens": 16000},
        workload={"rate": 8, "output_tokens": {"dist": "uniform", "low": 50, "high": 700},
                  "prefixes": {"system_tokens": 1024, "followup_share": 0.4, "open_conversations": 8}}, seed=17,
    ),
}


def _mission_files():
    """missions/*.json that hold a scenario, when the core can load them."""
    import lab.core as core

    if not (hasattr(core, "load_mission") or hasattr(core, "load_scenario")):
        return []
    out = []
    for path in sorted((REPO / "missions").glob("*.json")):
        if path.name == "schema.json":
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            continue  # a malformed mission is some other test's business
        if isinstance(data, dict) and ("scenario" in data or "workload" in data):
            out.append(path.relative_to(REPO).as_posix())
    return out


# The same program runs in CPython and in Pyodide (cwd = repo root / /repo).
# It prints one JSON object: {name: {"summary": ..., "fingerprint": ..., ...}}.
# Floats become repr() strings so the comparison is exact, NaN included.
_DETERMINISM_PROGRAM = r'''
import hashlib, json, os, sys
sys.path.insert(0, os.getcwd())
import lab.core as core

SPECS = json.loads(%(specs)r)
NUMPY = "--numpy" in sys.argv  # summarize on numpy (fast_metrics.py), else on the pure path

def canon(v):
    if isinstance(v, float):
        return "float:" + repr(v)
    if isinstance(v, dict):
        return {str(k): canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    return v

def load(spec):
    if "scenario" in spec:
        return core.load_scenario(spec["scenario"])
    path = spec["mission"]
    if hasattr(core, "load_mission"):
        mission = core.load_mission(path)
        scenario = getattr(mission, "scenario", mission)
        if isinstance(scenario, dict):
            scenario = core.load_scenario(scenario, base_dir=os.path.dirname(os.path.abspath(path)))
        return scenario
    return core.load_scenario(path)

out = {}
for name, spec in SPECS.items():
    result = core.simulate(load(spec))
    h = hashlib.sha256()
    for r in result.requests:
        h.update(repr((r.id, r.arrival, r.prompt_tokens, r.output_tokens, r.prefill_gpu, r.decode_gpu,
                       r.prefill_start, r.prefill_end, r.first_token, r.finish,
                       getattr(r, "earlier", None), getattr(r, "preemptions", 0))).encode())
        h.update(b"\n")
    t = hashlib.sha256()
    for x in result.transfers:
        t.update(repr((x.request, x.src_gpu, x.dst_gpu, x.ready, x.reserved, x.start, x.end, x.bytes,
                       getattr(x, "layer_starts", None))).encode())
    a = hashlib.sha256()  # early rejection: who was turned away, on what prediction
    for r in result.requests:
        a.update(repr((r.id, getattr(r, "rejected", None), getattr(r, "predicted_ttft_s", None))).encode())
    blames = core.request_blame(result)
    b = hashlib.sha256()
    for x in blames:
        b.update(repr((x.id, x.parts, x.open_part, x.worst_gap_s, x.worst_gap_cause, x.worst_gap_prompt_tokens,
                       x.worst_gap_batch, x.first_gap_parts, x.missed, x.dominant_cause)).encode())
        b.update(b"\n")
    out[name] = {
        "summary": canon(core.summarize(result, numpy=NUMPY)),
        "blame_summary": canon(core.blame_summary(blames)),
        "blame_fingerprint": b.hexdigest(),
        "requests": len(result.requests),
        "request_fingerprint": h.hexdigest(),
        "transfer_fingerprint": t.hexdigest(),
        "admission_fingerprint": a.hexdigest(),
        "steps": [len(g) for g in result.gpus],
        "attention": [repr(sorted(getattr(g, "attention", {}).items())) for g in result.gpus],
        "kv": [repr((getattr(g, "preempted", None), getattr(g, "kv_used", None))) for g in result.gpus],
        "end_time": canon(result.end_time),
        "roles": canon([g.roles for g in result.gpus]),
        "reconfigurations": canon(result.reconfigurations),
        "earlier": canon([r.earlier for r in result.requests if r.earlier]),
    }
print(json.dumps(out, sort_keys=True))
'''


def _specs():
    specs = {name: {"scenario": s} for name, s in SCENARIOS.items()}
    for path in _mission_files():
        specs["mission:" + Path(path).stem] = {"mission": path}
    return specs


def _determinism_program():
    return _DETERMINISM_PROGRAM % {"specs": json.dumps(_specs(), sort_keys=True)}


@pytest.fixture(scope="module")
def cpython_results(tmp_path_factory):
    program = tmp_path_factory.mktemp("cpython") / "determinism.py"
    program.write_text(_determinism_program(), encoding="utf-8")
    proc = subprocess.run([sys.executable, str(program)], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def pyodide_results(run_in_pyodide):
    return json.loads(run_in_pyodide(_determinism_program()))


@pytest.fixture(scope="module")
def pyodide_numpy_results(run_in_pyodide):
    """The same program in Pyodide with numpy loaded (the wheel the static site serves, from
    the folder scripts/setup.sh assembles), summarizing on numpy."""
    wheels = sorted(REPO.glob(".cache/pyodide-*/numpy-*.whl"))
    if not wheels:
        message = "no .cache/pyodide-*/numpy-*.whl: run scripts/setup.sh"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return json.loads(run_in_pyodide(_determinism_program(), wheels=wheels[-1:], args=["--numpy"]))


# ---------------------------------------------------------------- (a) version


def test_pyodide_version_matches_package_json_and_panel(run_in_pyodide):
    from panel.io import convert

    panel_pin = convert.PYODIDE_VERSION.lstrip("v")
    package = json.loads((REPO / "package.json").read_text(encoding="utf-8"))
    npm_pin = package["dependencies"]["pyodide"]
    lock = json.loads((REPO / "package-lock.json").read_text(encoding="utf-8"))
    locked = lock["packages"]["node_modules/pyodide"]["version"]

    running = run_in_pyodide(
        "import sys, pyodide\n"
        "print(pyodide.__version__)\n"
        "print(sys.platform)\n"
    ).split()

    assert running[1] == "emscripten"
    assert npm_pin == panel_pin, f"package.json pins pyodide {npm_pin}, Panel's converter uses {panel_pin}"
    assert locked == npm_pin, f"package-lock.json has pyodide {locked}, package.json pins {npm_pin}"
    assert running[0] == npm_pin, f"Pyodide reports {running[0]}, package.json pins {npm_pin}"


# ---------------------------------------------------------------- (b) imports


def _core_modules():
    names = ["lab.core"]
    for info in pkgutil.walk_packages([str(CORE)], prefix="lab.core."):
        names.append(info.name)
    return sorted(names)


def test_every_core_module_imports_in_bare_pyodide(run_in_pyodide):
    modules = _core_modules()
    assert len(modules) > 1, "lab/core has no modules?"
    out = run_in_pyodide(
        "import importlib, json, sys, traceback\n"
        f"MODULES = {modules!r}\n"
        "failed = {}\n"
        "for name in MODULES:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except BaseException:\n"
        "        failed[name] = traceback.format_exc()\n"
        # Pyodide's own runtime modules (pyodide, _pyodide, _pyodide_core, pyodide_js, js) are not packages.
        "allowed = set(sys.stdlib_module_names) | {'lab', 'js', '__main__'}\n"
        "foreign = sorted(m for m in {m.split('.')[0] for m in sys.modules} - allowed\n"
        "                 if not m.lstrip('_').startswith('pyodide'))\n"
        "print(json.dumps({'failed': failed, 'foreign': foreign}))\n"
    )
    report = json.loads(out)
    assert not report["failed"], "\n".join(f"{k}:\n{v}" for k, v in report["failed"].items())
    assert report["foreign"] == [], f"non-stdlib top-level modules loaded: {report['foreign']}"


# ---------------------------------------------------------------- (c) determinism


@pytest.mark.parametrize("name", sorted(_specs()))
def test_same_results_in_cpython_and_pyodide(name, cpython_results, pyodide_results):
    cp, py = cpython_results[name], pyodide_results[name]
    assert cp["requests"] > 0, f"{name}: the scenario generated no requests"
    diff = {
        k: (cp["summary"].get(k), py["summary"].get(k))
        for k in sorted(set(cp["summary"]) | set(py["summary"]))
        if cp["summary"].get(k) != py["summary"].get(k)
    }
    assert not diff, (
        f"{name}: summarize() differs ({platform.python_implementation()} {sys.version.split()[0]}, pyodide): {diff}\n"
        "hint: Python >= 3.12 (Pyodide) sums floats with compensated summation, so sum() of floats "
        "can differ from 3.11 in the last bits; math.fsum is correctly rounded everywhere"
    )
    for key in ("requests", "request_fingerprint", "transfer_fingerprint", "steps", "end_time",
                "blame_summary", "blame_fingerprint", "admission_fingerprint"):
        assert cp[key] == py[key], f"{name}: {key} differs: cpython {cp[key]!r}, pyodide {py[key]!r}"
    assert cp == py


@pytest.mark.parametrize("name", sorted(_specs()))
def test_the_numpy_metrics_in_pyodide_equal_the_pure_ones_in_cpython(name, cpython_results, pyodide_numpy_results):
    """The page summarizes on numpy (Panel has imported it): the same values, bit for bit."""
    cp, py = cpython_results[name]["summary"], pyodide_numpy_results[name]["summary"]
    assert {k: (cp.get(k), py.get(k)) for k in sorted(set(cp) | set(py)) if cp.get(k) != py.get(k)} == {}
