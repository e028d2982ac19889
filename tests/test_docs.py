"""The docs against the repository and the code (issue 36: the README as a front door, figures
that cannot drift).

- every relative link and every repository path in backticks in README.md and docs/*.md exists;
- README.md stays a front door: at most 300 lines, and the two fresh-machine commands on its
  first screen;
- the user-facing docs name no internal class, attribute or private function (only
  docs/architecture.md does);
- every figure the docs quote from a command, and that no script writes, is computed here by
  the code that produces it and compared with the text (FIGURES below; the power paragraph,
  the GPU table and the generated blocks are tests/test_calibration.py's, the page's bounds
  tests/ui/test_page_state.py's, the fuzz limits tests/test_fuzz.py's).
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lab.core.cost import PoolCost
from lab.core.spec import Model

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted((REPO / "docs").glob("*.md"))
FILES = [REPO / "README.md", *DOCS]


def text(name):
    """A doc's text with its line breaks and runs of spaces made single spaces."""
    return " ".join((REPO / name).read_text(encoding="utf-8").split())


# ------------------------------------------------------------------ links and paths

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
TICKED = re.compile(r"`([^`\n]+)`")
TOP_FILES = ("build.py", "package.json", "package-lock.json", "pyproject.toml")
TOP = ("lab/", "tests/", "benchmarks/", "scripts/", "site_build/", "static/", "missions/", "docs/", ".ci/")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path):
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.*)$", path.read_text(encoding="utf-8"), re.M)}


LINKED = [*FILES, REPO / "missions" / "README.md", REPO / "benchmarks" / "README.md"]


@pytest.mark.parametrize("doc", LINKED, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(doc):
    bad = []
    prose = re.sub(r"`[^`\n]*`", "", doc.read_text(encoding="utf-8"))  # a link shown as code is an example
    for target in LINK.findall(prose):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(target)
    assert not bad, f"{doc.name}: links to nothing: {bad}"


@pytest.mark.parametrize("doc", FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_repository_path_in_backticks_exists(doc):
    """A path under one of the tree's folders, or one of its top-level files, in backticks."""
    bad = []
    for tick in TICKED.findall(doc.read_text(encoding="utf-8")):
        for word in tick.split():
            word = word.rstrip(".,;:)")
            if not (word.startswith(TOP) or word in TOP_FILES):
                continue
            if any(c in word for c in "*{}<>=?[") or re.search(r"\b(ID|DIR|OUT|NAME)\b", word):
                continue  # a pattern or a placeholder, not a path
            if not (REPO / word).exists():
                bad.append(word)
    assert not bad, f"{doc.name}: paths that do not exist: {bad}"


def test_the_readme_is_a_front_door():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail into docs/"
    first_screen = "\n".join(lines[:40])
    assert "bash scripts/start.sh      # set up, then serve the lab at http://localhost:5006" in first_screen
    assert "bash scripts/test.sh       # set up, then run every test" in first_screen
    # No hand-typed test count: it drifted with every commit.
    assert not re.search(r"\d[\d,]* tests\b", " ".join(lines))
    for doc in DOCS:
        assert f"docs/{doc.name}" in " ".join(lines) or doc.name == "calibration.md", f"README links no docs/{doc.name}"


@pytest.mark.parametrize("doc", FILES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_prose_lines_stay_readable(doc):
    """No prose line over 120 characters (code, tables and images aside)."""
    fence, long = False, []
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        elif not fence and len(line) > 120 and not line.startswith(("|", "![", "    ")):
            long.append(n)
    assert not long, f"{doc.name}: lines over 120 characters: {long}"


INTERNAL = re.compile(
    r"`[^`\n]*\b(?:LabState|GpuLog|RequestRecord|Result|Slo|PageBridge|PoolCost|Router|RangeMax|PagePatches|"
    r"LLM_PRESETS|GPU_PRESETS|CONTROL_REQUIRES|QUIET_DEFAULTS|TP_CHOICES|NONE_AS_ZERO|STORAGE_NOTES|"
    r"TWO_LINE_PX|EMBED_ROW_PX|HISTORY_SETTLE_MS)\b[^`\n]*`"
    r"|`(?:engine|canvas|app|state|metrics|cost|policies|missions|controls|spec|queues|report|core|blame|kv|"
    r"result|planner|page_bridge|theme|metrics_view)\.[A-Za-z_]\w*[^`\n]*`"
    r"|`_[a-z]\w*[^`\n]*`")


@pytest.mark.parametrize("doc", [d for d in FILES if d.name != "architecture.md"], ids=lambda p: p.name)
def test_user_facing_docs_name_no_internals(doc):
    found = INTERNAL.findall(doc.read_text(encoding="utf-8"))
    assert not found, f"{doc.name} names the code's internals (they belong in docs/architecture.md): {found}"


# ------------------------------------------------------------------ figures quoted from commands


def lab_json(*args):
    out = subprocess.run([sys.executable, "-m", "lab", "run", *args, "--json"], cwd=REPO, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def lab_text(*args):
    return subprocess.run([sys.executable, "-m", "lab", "run", *args], cwd=REPO, capture_output=True, text=True,
                          check=True).stdout


def cost(llm, tp=1, kind="roofline", gpu="h100", **more):
    return PoolCost(Model.from_dict({"cost": kind, "llm": llm, **more}), gpu, tp)


def routing():
    """docs/model.md "Routing": mission 01's fleet on the roofline, queue against round robin."""
    mixed = '{"dist": "lognormal", "median": 1500, "sigma": 0.8}'
    p99 = {}
    for dispatch in ("queue", "round_robin"):
        for prompts in ("mixed", "fixed"):
            sets = ["--set", "model.cost=roofline", "--set", f"fleet.dispatch={dispatch}", "--set", "workload.rate=24"]
            if prompts == "mixed":
                sets += ["--set", f"workload.prompt_tokens={mixed}"]
            p99[dispatch, prompts] = lab_json("missions/01-mixing-hurts.json", *sets)["ttft_p99_s"]
    assert json.loads((REPO / "missions/01-mixing-hurts.json").read_text())["scenario"].get("model", {}).get(
        "cost", "linear") == "linear"  # which is why the doc says "instead of the mission's linear constants"
    return (f"TTFT p99 {p99['queue', 'mixed']:.2f} s with `queue`, {p99['round_robin', 'mixed']:.2f} s with "
            f"`round_robin`. With its fixed 2,500-token prompts it goes the other way "
            f"({p99['queue', 'fixed']:.2f} s vs {p99['round_robin', 'fixed']:.2f} s)")


def mission_17():
    """docs/model.md "Prefix caching": mission 17's caches and routing."""
    def run(cache, dispatch, gb=None):
        sets = ["--set", f"fleet.prefix_cache={cache}", "--set", f"fleet.dispatch={dispatch}"]
        if gb:
            sets += ["--set", f"fleet.prefix_cache_gb={gb}"]
        return lab_json("missions/17-cache-remembers.json", *sets)

    q8, q24 = run("per_gpu", "queue", 8), run("per_gpu", "queue", 24)
    a8, a24 = run("per_gpu", "cache_affinity", 8), run("per_gpu", "cache_affinity", 24)
    shared = run("shared", "queue")
    pct = lambda m: f"{m['prefix_hit_rate']:.1%}"  # noqa: E731
    return (f"a per-GPU cache finds {pct(q8)} of the prompt tokens at 8 GB and {pct(q24)} at 24 GB (a follow-up "
            f"lands on whichever GPU is free), with `cache_affinity` {pct(a8)} and {pct(a24)}, the shared pool's "
            f"{pct(shared)} (p99 TTFT {q24['ttft_p99_s']:.2f} → {a24['ttft_p99_s']:.2f} s at 24 GB)")


def kv_capacity():
    return f"({cost('llama3-8b').kv_tokens:,} tokens for Llama-3-8B on H100)"


def kv_capacity_70b():
    return (f"holds {cost('llama3-70b', 2).kv_tokens:,} tokens at tp 2 on H100 and "
            f"{cost('llama3-70b', 4).kv_tokens:,} at tp 4")


def tp_steps():
    """docs/model.md "GPU presets": Llama-3-70B on H100, roofline, by tp."""
    out = []
    for tp in (2, 4, 8):
        c = cost("llama3-70b", tp)
        out.append((c.step_s(0, 0, 2000) * 1e3, c.step_s(32, 32 * 2000, 0) * 1e3))
    allreduce = cost("llama3-70b", 8).parts(32, 32 * 2000, 0)[2] * 1e3
    (p2, d2), (p4, d4), (p8, d8) = out
    return (f"tp 2: prefill {p2:.1f} ms, decode step {d2:.1f} ms; tp 4: {p4:.1f} ms, {d4:.1f} ms; "
            f"tp 8: {p8:.1f} ms, {d8:.1f} ms (of which {allreduce:.1f} ms all-reduce)")


def attention_share():
    def longer(n):
        return cost("llama3-8b", attention=True).step_s(0, 0, n, n * n / 2, 0) / cost("llama3-8b").step_s(0, 0, n) - 1
    return f"a 8,500-token prompt's prefill takes {longer(8500):.1%} longer and a 16,000-token one {longer(16000):.1%}"


def linear_rate():
    rates = {round(t / cost("llama3-8b", kind="linear").step_s(0, 0, t)) for t in (16, 512, 2048, 8192)}
    assert len(rates) == 1  # "whatever T"
    return f"Linear: {rates.pop():,} tokens/s per H100 whatever T"


def plan_tp():
    """docs/scale.md, `--tp`: why Llama 3 70B on H100s gets TP 4 under a 20 ms TPOT."""
    roof, cal = cost("llama3-70b", 2), cost("llama3-70b", 2, kind="calibrated")
    weights = Model.from_dict({"cost": "roofline", "llm": "llama3-70b"}).weight_bytes / (2 * 3.35e12)
    return (f"a one-sequence decode step takes {roof.step_s(1, 1, 0) * 1e3:.1f} ms on the roofline "
            f"({weights * 1e3:.0f} ms of it reading the weights at full bandwidth) and "
            f"{cal.step_s(1, 1, 0) * 1e3:.1f} ms calibrated")


def prefix_cache_line():
    out = lab_text("missions/17-cache-remembers.json", "--set", "fleet.prefix_cache=per_gpu")
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("prefix cache per_gpu:"))
    return f'("{line}")'


def kv_bytes():
    m = Model.from_dict({"cost": "roofline", "llm": "llama3-8b"})
    return f"Llama-3-8B = 2 × 32 × 8 × 128 × 2 = {m.kv_bytes_per_token // 1024} KiB"


def limits():
    from lab.core import engine, spec
    return (f"A run stops at {engine.MAX_STEPS:,} GPU steps", f"workloads at {spec.MAX_REQUESTS:,} (2²⁰) requests",
            f"over at most {spec.MAX_DURATION_S:,.0f} s on at most {spec.MAX_GPUS} GPUs")


def scale_limits():
    from lab.core import engine, spec
    return (f"a week of arrivals ({spec.MAX_DURATION_S:,.0f} s), {spec.MAX_REQUESTS:,} (2²⁰) requests, "
            f"{spec.MAX_GPUS} GPUs and {engine.MAX_STEPS:,} logged GPU steps")


def ticks_notes():
    """docs/architecture.md "Time base inside the engine": the engine's tick figures."""
    from lab.core import engine
    week = 604_800 * 10**12
    kv8 = cost("llama3-8b").model.kv_bytes_per_token / 3.35e12 * 1e12
    kv70 = cost("llama3-70b").model.kv_bytes_per_token / (8 * 3.35e12) * 1e12
    assert engine.FLOAT_TICKS_BELOW == 2**52 and round(2**52 / 1e12 / 60) == 75
    return (f"a week is {week / 1e17:.2f} × 10¹⁷", "2⁵² ticks (75 minutes",
            f"about {round(kv8, -3):,.0f} ticks a token for Llama-3-8B on one H100 and {round(kv70, -3):,.0f} for "
            "Llama-3-70B on 8")


def refused_fleet():
    """docs/page.md: the sentence a refused change shows (mission 12, decode tensor parallel 8)."""
    from lab.core.errors import LabError
    from lab.core.missions import load_mission
    from lab.ui.words.control_words import control_words
    from lab.ui.words.refusal import refusal_text

    mission = load_mission(str(REPO / "missions/12-tp-per-phase.json"))
    settings = mission.settings()
    with pytest.raises(LabError) as err:
        mission.apply({**settings, "decode_tp": 8})
    return f'"{refusal_text(mission, settings, {"decode_tp": 8}, err.value, control_words)}"'


def cli_errors():
    """docs/cli.md and docs/scale.md: error lines quoted word for word (a bare scenario)."""
    import tempfile
    scenario = json.loads((REPO / "missions/01-mixing-hurts.json").read_text())["scenario"]
    with tempfile.TemporaryDirectory() as folder:
        bare = Path(folder) / "bare.json"
        bare.write_text(json.dumps(scenario))

        def error(*args):
            out = subprocess.run([sys.executable, "-m", "lab", *args], cwd=REPO, capture_output=True, text=True)
            assert out.returncode == 2, out
            return out.stderr.strip()
        return (error("run", str(bare), "--set", "fleet.gpus=abc"),
                error("run", str(bare), "--set", "fleet.gpus=1" + "0" * 5000).removeprefix("error: "))


def plan_error():
    out = subprocess.run([sys.executable, "-m", "lab", "plan", "missions/01-mixing-hurts.json", "--max-gpus", "0"],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 2
    return out.stderr.strip()


def page_constants():
    """docs/architecture.md "The lab page's code": the constants it names, with their values."""
    from lab.ui import app
    from lab.ui.data import canvas_data
    assert canvas_data.EMBED_ROW_PX  # named there
    return (f"(`app.HISTORY_SETTLE_MS`, {app.HISTORY_SETTLE_MS} ms)",
            f"at least {canvas_data.TWO_LINE_PX} px apart (`canvas_data.TWO_LINE_PX`",
            f"(`PLOTS_WAIT_MS`, {app.PLOTS_WAIT_MS / 1000:g} s, at most)")


def calibrated_notes():
    """docs/model.md "The calibrated model", "Which lessons hold": the roofline's knee and a
    calibrated prompt token against the linear constants' 0.05 ms."""
    roof = cost("llama3-8b")
    m = roof.model
    knee = (m.weight_bytes / 3.35e12) / (2 * m.shape["params"] / (989e12 * m.efficiency))
    token = cost("llama3-8b", kind="calibrated").step_s(0, 0, 4000) / 4000 * 1e3
    linear = cost("llama3-8b", kind="linear").step_s(0, 0, 4000) / 4000 * 1e3
    return (f"its prefill knee (where a step turns compute-bound) sits near {round(knee, -1):.0f} tokens on an H100",
            f"a prompt token costs {linear:.2f} ms against {token:.3f} ms in a 4,000-token prompt")


def plan_constants():
    """docs/scale.md "What the search does": the search's constants."""
    import inspect

    from lab.plan import evaluate, search
    defaults = inspect.signature(evaluate.robustness_variants).parameters
    seeds, spread = defaults["seeds"].default, defaults["spread"].default
    assert f"the request rate × {1 - spread:g} and × {1 + spread:g}" in text("docs/scale.md")
    assert search.LEVELS_PER_ROUND == 2
    return ("two sizes per round",
            f"A trace longer than {2 * evaluate.SCREEN_WINDOWS * evaluate.SCREEN_S:.0f} s is screened on "
            f"{evaluate.SCREEN_WINDOWS} windows of {evaluate.SCREEN_S:.0f} s",
            f"(at most {search.MAX_CONFIRM_RUNS} such runs)", f"The winner again on {seeds} seeds",
            f"see {evaluate.SCREEN_WINDOWS * evaluate.SCREEN_S:.0f} s of a long trace "
            f"({evaluate.SCREEN_WINDOWS * evaluate.SCREEN_S / 3600:.0%} of an hour)")


def page_figures():
    """docs/page.md: the upload limit, the Table view's rows, the focus ring."""
    from lab.ui.browser import trace_upload
    from lab.ui.views import table_view
    from lab.ui.words import theme
    assert "outline: 3px solid" in theme.FOCUS_CSS
    return (f"at most {trace_upload.MAX_UPLOAD_BYTES // 1_000_000} MB (\"Replaying NAME",
            f"the first {table_view.ROWS_SHOWN} requests", "each with a 3 px blue focus ring")


# (doc, the function that computes the quoted text: one string, or several, each in the doc)
FIGURES = {
    "routing": ("docs/model.md", routing),
    "mission 17's caches": ("docs/model.md", mission_17),
    "KV capacity": ("docs/model.md", kv_capacity),
    "KV capacity at tp": ("docs/model.md", kv_capacity_70b),
    "KV bytes per token": ("docs/model.md", kv_bytes),
    "70B step times by tp": ("docs/model.md", tp_steps),
    "attention's share": ("docs/model.md", attention_share),
    "the linear prefill rate": ("docs/model.md", linear_rate),
    "the run's limits": ("docs/model.md", limits),
    "the run's limits, again": ("docs/scale.md", scale_limits),
    "the prefix cache line": ("docs/model.md", prefix_cache_line),
    "lab plan's tp": ("docs/scale.md", plan_tp),
    "lab plan's constants": ("docs/scale.md", plan_constants),
    "the calibrated model's notes": ("docs/model.md", calibrated_notes),
    "ticks": ("docs/architecture.md", ticks_notes),
    "the page's constants": ("docs/architecture.md", page_constants),
    "a refused change": ("docs/page.md", refused_fleet),
    "the page's figures": ("docs/page.md", page_figures),
    "error lines": ("docs/cli.md", cli_errors),
    "a plan flag's error": ("docs/scale.md", plan_error),
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_a_quoted_figure_is_the_codes(name):
    doc, compute = FIGURES[name]
    quoted = compute()
    for q in (quoted,) if isinstance(quoted, str) else quoted:
        assert " ".join(q.split()) in text(doc), f"{doc} should say: {q}"


def test_the_local_pyodide_folders_size_is_the_docs():
    """docs/embedding.md "A local Pyodide folder": its file count and bytes (scripts/setup.sh makes it)."""
    folder = REPO / ".cache" / "pyodide-0.29.3"
    if not folder.is_dir():
        pytest.skip("no local Pyodide folder: bash scripts/setup.sh assembles it")
    files = [f for f in folder.rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    quoted = f"the folder is {len(files)} files, {size / 1e6:.1f} MB ({size:,} bytes)"
    assert quoted in text("docs/embedding.md"), quoted


def test_the_mission_count_is_the_folders():
    words = {19: "nineteen", 20: "twenty", 21: "twenty-one", 22: "twenty-two", 23: "twenty-three", 24: "twenty-four"}
    count = len([p for p in (REPO / "missions").glob("*.json") if p.name != "schema.json"])
    for name in ("README.md", "docs/page.md"):
        assert f"{words[count]} missions" in text(name).lower(), name
