"""Where the UI finds missions: the mission folder, plus the sandbox.

The sandbox is a pseudo-mission built here (id "sandbox"): every control open over
wide ranges, no stars. It uses the core's own `Mission` and `Control` classes, so
settings are validated exactly as a mission's are.

The folder is read file by file: a broken file is set aside (listed in `broken` and
`error`, logged) and the others still load. `refresh()` reloads the folder when its
mission files changed (names, sizes, modification times: a cheap check, made on each
page load), so `lab serve` sees a mission added or edited while it runs.
"""

import os
import sys

from lab.core.mission_link import is_draft_id
from lab.core.missions import CONTROL_SPECS, Control, Mission, default_missions_dir, load_each, mission_file_names
from lab.core.spec import Scenario

from .words.draft_words import DRAFT_KICKER

__all__ = ["SANDBOX_ID", "Catalog", "get_catalog", "sandbox_mission", "folder_fingerprint", "TRACE_SOURCES", "MISSIONS_ENV"]

SANDBOX_ID = "sandbox"

# Every control, with the ranges the sandbox offers (display order = this order: the model, then
# the colocated fleet, each pool of a split fleet, the link, the traffic, the routing and early rejection).
_SANDBOX_CONTROLS = {
    "layout": {},
    "llm": {},
    "cost": {},
    "attention": {},
    "gpus": {"min": 1, "max": 16},
    "gpu": {},
    "tp": {},
    "power_cap_w": {"min": 0, "max": 700, "step": 25},
    "chunk_tokens": {"min": 0, "max": 8192, "step": 256},
    "prefill_gpus": {"min": 1, "max": 12},
    "prefill_gpu": {},
    "prefill_tp": {},
    "prefill_power_cap_w": {"min": 0, "max": 700, "step": 25},
    "prefill_chunk_tokens": {"min": 0, "max": 8192, "step": 256},
    "long_prefill_tokens": {"min": 0, "max": 4096, "step": 256},
    "decode_gpus": {"min": 1, "max": 12},
    "decode_gpu": {},
    "decode_tp": {},
    "decode_power_cap_w": {"min": 0, "max": 700, "step": 25},
    "link_gbytes_per_s": {"min": 0.5, "max": 200, "step": 0.5},
    "link_sharing": {},
    "layerwise": {},
    "first_token": {},
    "rate": {"min": 1, "max": 40, "step": 0.5},
    "prefill_batch_tokens": {"min": 512, "max": 32768, "step": 512},
    "dispatch": {},
    "long_prompt_tokens": {"min": 500, "max": 32000, "step": 500},
    "long_gpus": {"min": 1, "max": 15},
    "decode_pick": {},
    "admission": {},
    "prefix_cache": {},
    "prefix_cache_gb": {"min": 1, "max": 40, "step": 1},
    "prefix_pool_gb": {"min": 10, "max": 2000, "step": 10},
    "kv_policy": {},
    "kv_block_tokens": {"min": 16, "max": 256, "step": 16},
    "planner": {},
    "planner_threshold": {"min": 0, "max": 1, "step": 0.05},
    "plan_at_s": {"min": 1, "max": 59, "step": 1},
    "plan_prefill_gpus": {"min": 1, "max": 12},
}

_SANDBOX_SCENARIO = {
    "workload": {"rate": 12, "duration_s": 60, "prompt_tokens": 2500, "output_tokens": 220},
    # long_prompt_tokens and long_gpus matter only once the student picks length_split routing;
    # each pool's GPU type is its own control (not model.gpu, the colocated fleet's).
    "fleet": {"layout": "colocated", "gpus": 4, "prefill_gpus": 2, "decode_gpus": 2,
              "long_prompt_tokens": 8000, "long_gpus": 1, "prefill_gpu": "h100", "decode_gpu": "h100",
              "prefix_cache_gb": 8, "prefix_pool_gb": 200,
              # Off until the student picks a policy (a split fleet only); its first schedule row
              # is what the two plan_ controls move.
              "planner": {"policy": "off", "interval_s": 5, "threshold": 0.2, "switch_s": 3,
                          "schedule": [{"at_s": 30, "prefill_gpus": 1}]}},
    "slo": {"ttft_s": 1.5, "tpot_ms": 25},
    "seed": 0,
}

_SANDBOX_BRIEF = """\
**Free play.** Every knob is open and there are no stars to earn.

The workload: 12 requests/s of 2,500-token prompts with 220-token answers, for 60 s,
against a TTFT target of 1.5 s and a TPOT target of 25 ms.

Try a colocated fleet with whole prefills, then chunk them, then split the fleet and
starve the link. Switch to Llama 3 70B on the roofline and give each pool its own tensor
parallelism, GPU type and power cap, and watch the cost and energy cards. Push the rate past
what the fleet serves with early rejection on, and watch who is turned away. Or replay a
trace of your own: upload a CSV under the controls, or Mooncake's JSON lines, whose block
hashes give the prefix cache something to find (the generated workload shares no prefixes).

Step times start on the lab's constants. Switch the step cost model to the roofline or to
the calibrated model (measured GPUs), pin a fleet under "Compare with…" and switch again:
the twin runs the pinned fleet on the other model's step times, on the same requests, and
shows which conclusions survive.
"""

# Where real request traces come from (shown next to the sandbox's upload, and in docs/page.md "The sandbox").
TRACE_SOURCES = (
    ("Azure LLM inference traces", "https://github.com/Azure/AzurePublicDataset"),
    ("Mooncake traces", "https://github.com/kvcache-ai/Mooncake"),
)


def sandbox_mission():
    """The sandbox: a `Mission` with every control and no stars."""
    scenario = Scenario.from_dict(_SANDBOX_SCENARIO)
    controls = {}
    for name, spec in _SANDBOX_CONTROLS.items():
        if name not in CONTROL_SPECS:  # the core dropped a control: skip it
            continue
        controls[name] = Control.from_dict(name, spec, f"controls.{name}")
    return Mission(
        id=SANDBOX_ID,
        title="Sandbox",
        order=10_000,
        summary="Free play: every control open, no stars.",
        brief=_SANDBOX_BRIEF,
        scenario=scenario,
        controls=controls,
        stars=(),
    )


def folder_fingerprint(directory):
    """What `refresh` compares: each mission file's name, size and modification time."""
    try:
        names = mission_file_names(directory)
    except OSError as exc:
        return ("error", str(exc))
    out = []
    for name in names:
        try:
            info = os.stat(os.path.join(directory, name))
        except OSError:
            continue
        out.append((name, info.st_size, info.st_mtime_ns))
    return tuple(out)


def _broken_note(name, why):
    """One note for a file that did not load: its name once (the loader's message may start with it)."""
    if name.endswith(".json"):
        if why.startswith(name + ": "):
            why = why[len(name) + 2:]
        return f"{name} could not be loaded, so it is not listed: {why}"
    return f"Could not read the missions in {name}: {why}"


class Catalog:
    """The missions of one folder, in order, plus the sandbox.

    A file that fails to load does not take the others (or the UI) down: it is listed in
    `broken` ([(file name, why)]) and `error` says so, and the hub shows it.
    """

    def __init__(self, missions_dir=None):
        self.directory = str(missions_dir) if missions_dir else default_missions_dir()
        self.sandbox = sandbox_mission()
        self._load()

    def _load(self):
        self.fingerprint = folder_fingerprint(self.directory)
        missions, broken = [], []
        try:
            names = mission_file_names(self.directory)
        except OSError as exc:
            names = []
            broken.append((self.directory, f"cannot read the folder: {exc.strerror or exc}"))
        for path, mission, error in load_each(os.path.join(self.directory, n) for n in names):
            if error is not None:
                broken.append((os.path.basename(path), str(error)))
            else:
                missions.append(mission)
        missions.sort(key=lambda m: (m.order, m.id))
        self.missions = missions
        self.broken = broken
        self.error = ""
        self.broken_notes = [_broken_note(name, why) for name, why in broken]
        if broken:
            self.error = " ".join(self.broken_notes)
            for note in self.broken_notes:
                print(f"warning: {note}", file=sys.stderr)

    def refresh(self):
        """Reload the folder if its mission files changed since the last load. True if it did."""
        if folder_fingerprint(self.directory) == self.fingerprint:
            return False
        self._load()
        return True

    def get(self, mission_id):
        """The mission with this id (or the sandbox), else None. Never touches the filesystem."""
        if not isinstance(mission_id, str):
            return None
        if mission_id == SANDBOX_ID:
            return self.sandbox
        for m in self.missions:
            if m.id == mission_id:
                return m
        return None

    def first(self):
        return self.missions[0] if self.missions else self.sandbox

    def kicker(self, mission):
        """What the lab page calls the mission: "Mission 7" by its order, as the hub numbers it,
        and "of 21" after it when the folder's orders run 1 to 21 (an instructor's folder
        may hold only missions 20 and 30)."""
        if mission.id == SANDBOX_ID:
            return "Sandbox"
        if is_draft_id(mission.id):
            return DRAFT_KICKER
        run = [m.order for m in self.missions] == list(range(1, len(self.missions) + 1))
        return f"Mission {mission.order}" + (f" of {len(self.missions)}" if run else "")

    def position(self, mission):
        """1-based position in the hub's list (0 for the sandbox)."""
        for i, m in enumerate(self.missions):
            if m.id == mission.id:
                return i + 1
        return 0

    def next_after(self, mission):
        pos = self.position(mission)
        if 0 < pos < len(self.missions):
            return self.missions[pos]
        return None


MISSIONS_ENV = "SPLIT_THE_FLEET_MISSIONS"  # `lab serve --missions DIR` passes the folder through this
_CATALOGS = {}


def get_catalog(missions_dir=None):
    """The catalog for a folder, loaded once per process and reloaded when its files change."""
    directory = missions_dir or os.environ.get(MISSIONS_ENV) or None
    key = os.path.abspath(directory) if directory else ""
    if key not in _CATALOGS:
        _CATALOGS[key] = Catalog(directory)
    else:
        _CATALOGS[key].refresh()  # a mission file added or edited while `lab serve` runs
    return _CATALOGS[key]
