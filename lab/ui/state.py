"""The one state object every view of the lab page reads (Panel's DataStore pattern).

`LabState` holds the mission, the current control settings, the latest simulation
(result, fleet metrics, per-request rows, live stars), the busy flag and the notes
shown to the student. It has no widgets and does no I/O, so it is tested without a
browser and runs unchanged in Pyodide's web worker.

Flow: a view calls `change(name, value)` (validated at once through the mission's
`apply`; the state turns `busy`), then the app runs it (at once, or after a short
debounce when changes come in a burst) in two halves: `simulate()` publishes the new
result (`sim_id`: the canvas draws from it alone), `finish()` its metrics, blames and
stars (`run_id`: every other view), in parts the page runs a turn each (`finish_steps`).
`run()` is both in one go. A run that a newer `simulate` replaces before its finish is not
shown; its stars are judged (and saved) with the next finish, or the next failure.
URL query strings go through `from_query`/`query` (read by url_state.py), which never trust a value: anything
bad falls back to the mission's start with a note; `query` adds the window start (`t`)
once `share_window` is set.

A run never leaves the page busy: whatever it raises (a LabError, an unreadable trace,
a bug) ends up in `run_error` with the state idle, and the next change runs again.
The sandbox can replay an uploaded trace CSV (`load_trace_text`): its requests replace
the generated workload until `clear_replay`.

Runs are kept (`_kept`, the last MAX_KEPT_RUNS, at most MAX_HELD_STEPS steps in all): a setting the student comes back to (a slider
moved back and forth, a layout switched and switched back) reuses its run, since the same
scenario and requests give the same result (the core is deterministic), and its metrics,
blames and stars once measured, so the canvas does not wait on a simulation it has seen.

Each run also blames its misses once (`blame_summary`: lab.core.blame); every request's
blame (`request_blames`: the table, a request clicked) is made when first asked for. Twin
runs: `pin_fleet` pins a fleet (the fleet controls' values, `pin`); while pinned, a run
also runs the pinned fleet on the same requests (the current workload, seed and any
replayed trace) into `twin`, cached until the pin or the workload changes (`run_twin`).
The address carries the pin (`pin=start` or `pin=layout:colocated,gpus:4`, values off
the mission's start).
Stars count only after the student changed a control on this page (`touched`): a loaded
link (a shared solution, say) shows its fleet and which stars it meets, but earns and saves
nothing until then. A change counts when it alters the settings (a reset at the start does
not); restoring a history entry (Back/Forward, `change_many(..., by_student=False)`) does
not count either: the student did not choose it on this page.
"""

import dataclasses
import functools
import html
import itertools
import math
import sys
import time
import traceback
import urllib.parse
import weakref

import param

import lab.core as core
from lab.core.errors import LabError
from lab.core.missions import control_applies, control_value
from lab.core.page_bounds import PAGE_MAX_S

from .catalog import SANDBOX_ID
from .words.control_words import control_words, format_value
from .words.refusal import refusal_text, short_label
from .words.draft_words import open_draft
from .url_state import (FLOAT_RE, HIDE_PANELS, MAX_SHOWN, MAX_VALUE_CHARS, RESERVED_PARAMS, carried_note,  # noqa: F401
                        fleet_settings, format_pin, parse_hide, parse_pin, parse_search, parse_settings, query_note,
                        short_text, shown_value)
from .runs.run_work import HEAVY_REQUESTS, expected_requests, measure, refused, run_work, twin_work, upload_work
from .runs.sweep import run_in_place, sweep_curve, sweep_rates

__all__ = [
    "LabState",
    "RESERVED_PARAMS",
    "parse_search",
    "query_note",
    "parse_settings",
    "parse_hide",
    "parse_pin",
    "format_pin",
    "fleet_settings",
    "HIDE_PANELS",
    "format_value",
    "carried_note",
    "WINDOW_S",
    "MAX_VALUE_CHARS",
]

WINDOW_S = 2.5  # seconds of simulated time the canvas shows at once
MAX_UNJUDGED = 8  # runs replaced unfinished kept for judging at most (each holds its step logs)
MAX_KEPT_RUNS = 6  # runs kept for settings the student comes back to (see LabState._kept)
# ...and at most this many logged steps in all, in either: a step log costs about 100 bytes a
# step in Pyodide (result.py), so a few big replays must not fill the tab's memory. The
# newest run is always kept; an older one goes (kept runs) or is judged now (unjudged).
MAX_HELD_STEPS = 2_000_000
MAX_CARRY_TRIES = 64  # tp combinations a layout switch tries for the new layout (4 x 4 at most today)


def _same_requests(a, b):
    """Whether two runs replayed the same requests: the same object, or (a run that came back
    from a worker process is a copy) equal ones; None is the generated workload."""
    return a is b or (a is not None and b is not None and len(a) == len(b) and a == b)


def _held_steps(results):
    """Steps logged by these runs, all GPUs (a setting visited twice is one run)."""
    return sum(sum(len(log) for log in r.gpus) for r in {id(r): r for r in results}.values())


class LabState(param.Parameterized):
    """Everything the lab page shows, for one mission. Views watch its parameters."""

    mission = param.Parameter(doc="The lab.core Mission (or the sandbox).")
    position = param.Integer(default=0, doc="1-based position among the missions; 0 for the sandbox.")
    settings = param.Dict(default={}, doc="{control name: value} for the mission's controls.")
    scenario = param.Parameter(doc="The Scenario the settings give.")
    result = param.Parameter(doc="The latest core Result (None before the first run).")
    metrics = param.Dict(default={}, doc="core.summarize of the latest result.")
    rows = param.List(default=[], doc="core.request_metrics of the latest result.")
    stars_now = param.List(default=[], doc="Per star: earned by the latest run.")
    saved_stars = param.List(default=[], doc="Per star: earned before (from browser storage) or now.")
    busy = param.Boolean(default=False, doc="Settings changed and the new run is not in yet.")
    notes = param.List(default=[], doc="Notes for the student (HTML-safe), e.g. URL values ignored.")
    error = param.String(default="", doc="Why the last control change was refused.")
    carried = param.String(default="", doc="What the last change also set, and why (plain text; see _carry_tp); ''.")
    run_error = param.String(default="", doc="Why the last run failed (plain text: views escape it); '' after a good run.")
    replay = param.Dict(default=None, allow_None=True, doc="{name, requests, span_s} of the uploaded trace the "
                        "sandbox replays, else None.")
    upload_error = param.String(default="", doc="Why the last uploaded trace was refused (plain text).")
    run_id = param.Integer(default=0, doc="Increments after every finished run (metrics, stars in).")
    sim_id = param.Integer(default=0, doc="Increments when a run's simulation is in (`result`, the canvas's data), "
                           "before its metrics; `run_id` catches up to it when the run finishes (or fails).")
    run_ms = param.Number(default=0.0, doc="How long the last run's simulation and metrics took (wall clock, the two halves summed).")
    window_start = param.Number(default=0.0, bounds=(0, None), doc="Canvas window start (s).")
    share_window = param.Boolean(default=False, doc="Put the window start in the address (`t`): the link "
                                 "came with one, or the student scrubbed or paused.")
    sweep = param.Dict(default=None, allow_None=True, doc="{rates, goodput, attainment, key} of the last sweep.")
    sweep_progress = param.Number(default=None, allow_None=True, doc="0..1 while a sweep runs.")
    hidden = param.Parameter(default=(), doc="Controls and panels a classroom link hides (`hide`); kept in the address.")
    blame_summary = param.Dict(default={}, doc="core.blame_summary of the latest result's misses ({} before a run or "
                               "after a failed one).")
    pin = param.Dict(default=None, allow_None=True, doc="{fleet control: value} of the pinned fleet (twin runs), "
                     "else None.")
    twin = param.Dict(default=None, allow_None=True, doc="The pinned fleet's run on the same requests: {scenario, "
                      "result, metrics, rows, blames (its misses' only), blame_summary, key}, else None.")
    twin_error = param.String(default="", doc="Why the pinned fleet's run failed (plain text); '' otherwise.")
    twin_id = param.Integer(default=0, doc="Increments after every change of `twin` or `twin_error`.")
    run_settings = param.Dict(default={}, doc="The settings the shown run simulated (its metrics' and stars'): "
                              "equal to `settings` once the page is idle; the page writes them on its status line.")
    touched = param.Boolean(default=False, doc="The student changed a control on this page: only then do stars "
                            "count (see the module docstring).")
    from_link = param.Boolean(default=False, doc="The page opened a link's settings (its query set controls off "
                              "the mission's start): the stars then say why the link's fleet earns nothing yet. "
                              "False for a mission opened from the hub.")
    refusal = param.String(default="", doc="`error` in the student's words (plain text): which control, which value "
                           "works; '' when `error` is.")

    def __init__(self, mission, position=0, **params):
        super().__init__(mission=mission, position=position, **params)
        start = mission.settings(mission.scenario)
        self._start = dict(start)
        self.settings = dict(start)
        self.scenario = mission.scenario
        self.saved_stars = [False] * len(mission.stars)
        self.stars_now = [False] * len(mission.stars)
        self.draft_code = None  # a shared mission's link code (`?draft=`), which the address keeps instead of its id
        self._replay_requests = None  # [(arrival_s, prompt, output)] of an uploaded trace
        self._pending_run = None  # (result, simulate ms, its settings) that `simulate` published and `finish` has not measured
        # Runs a newer one replaced before their finish: only their stars are judged, at the next
        # finish (or failure), so the new run's canvas never waits on an old run's metrics.
        self._unjudged = []
        self._twin_work = None  # twin_work's value for the pinned fleet, run with the run (run_twin takes it)
        # run key -> {"result", "requests", and once measured "rows", "metrics", "now", "missed" (its
        # misses' blames), and once asked for "blames" (every request's)}:
        # the last MAX_KEPT_RUNS runs, newest last (see the module docstring).
        self._kept = {}
        self._blames_of = None  # (a weak reference to the result request_blames last answered for, its blames)

    # ------------------------------------------------------------ building

    @classmethod
    def from_query(cls, catalog, search):
        """The state a URL asks for. Never raises: bad parts become notes.

        `search` is the raw query string ('?mission=...&gpus=5') or a dict of raw values.
        """
        params = parse_search(search) if isinstance(search, str) else {
            str(k): str(v) for k, v in dict(search or {}).items()
        }
        notes = [n for n in (query_note(search),) if n]
        wanted = params.get("mission")
        mission = catalog.get(wanted) if wanted else None
        draft_code = draft_note = None
        if "draft" in params:  # a mission carried by the link itself (lab.core.mission_link)
            mission, draft_note = open_draft(catalog, params["draft"])
            if mission is not None:
                draft_code = params["draft"]
            else:  # its settings were for that mission: none apply to the one opened instead
                wanted = None
                params = {k: v for k, v in params.items() if k in RESERVED_PARAMS and k != "pin"}
        if mission is None:
            mission = catalog.first()
            label = "the sandbox" if mission.id == SANDBOX_ID else f"mission {mission.order}, {html.escape(mission.title)}"
            if draft_note:
                notes.append(f"{draft_note} Opened {label} instead.")
            if wanted:
                notes.append(f"There is no mission <code>{shown_value(wanted)}</code>; opened {label} instead.")
            if catalog.error:
                notes.append(html.escape(catalog.error))
            if any(k not in RESERVED_PARAMS or k == "pin" for k in params) and wanted:  # a pin is settings too
                params = {k: v for k, v in params.items() if k in RESERVED_PARAMS and k != "pin"}
                notes.append("The settings in the link were for that mission, so they were not applied.")
        state = cls(mission, position=catalog.position(mission))
        state.draft_code = draft_code
        settings, bad = parse_settings(mission, params)
        notes.extend(bad)
        if settings:
            try:
                scenario = mission.apply(state._clean({**state._start, **settings}))
            except LabError as exc:
                notes.append(
                    f"Ignored the settings in the link: {html.escape(str(exc))}; using the mission's start."
                )
            else:
                state.settings = {**state._start, **settings}
                state.scenario = scenario
                state.from_link = state.settings != state._start
        if "hide" in params:
            state.hidden, bad = parse_hide(params["hide"])
            notes.extend(bad)
        if "pin" in params:
            pin, bad = parse_pin(mission, params["pin"], state._start)
            notes.extend(bad)
            if pin is not None:
                try:
                    state.set_pin(pin)
                except LabError as exc:
                    notes.append(f"Ignored <code>pin={shown_value(params['pin'])}</code>: {html.escape(str(exc))}; "
                                 "nothing is pinned.")
        if "t" in params:
            raw = params["t"].strip()
            if FLOAT_RE.fullmatch(raw) and math.isfinite(float(raw)) and 0 <= float(raw) <= 1e6:
                state.window_start = float(raw)
                state.share_window = True
            else:
                notes.append(f"Ignored <code>t={shown_value(raw)}</code>: expected a time in seconds.")
        state.notes = notes
        return state

    # ------------------------------------------------------------ settings

    @property
    def start_settings(self):
        return dict(self._start)

    @property
    def is_start(self):
        return self.settings == self._reset_target()

    def _reset_target(self):
        kept = {n: self.settings[n] for n in self.hidden if n in self.settings}
        return {**self._start, **kept}

    def _clean(self, settings):
        """Drop settings without a value (e.g. a pool size a colocated start leaves unset)."""
        return {k: v for k, v in settings.items() if v is not None}

    @property
    def can_reject(self):
        """Whether early rejection can turn requests away here (the mission starts with it on or
        offers its control): the legends then list the rejection mark."""
        return "admission" in self.mission.controls or self.mission.scenario.fleet.admission is not None

    def applies(self, name):
        """Whether control `name` matters for the current scenario (its layout; the long-prompt
        split only with length_split routing, attention only in the roofline)."""
        return control_applies(name, self.scenario)

    def value_of(self, name):
        """The current value of any control, allowed or locked (None when unset)."""
        if name in self.mission.controls:
            return self.settings.get(name)
        return control_value(name, self.scenario)

    def change(self, name, value):
        """Move one control. True if accepted (the state turns busy until `run()`)."""
        if name not in self.mission.controls:
            self._refuse(LabError(f"controls.{name}", f"this mission keeps {name} locked"),
                         f"{short_label(self.mission, name)} is locked in this mission.")
            return False
        return self.change_many({name: value})

    def change_many(self, values, by_student=True):
        """Apply several settings at once (all or nothing). `by_student`: the student did it on
        this page (False for a restored history entry), so a change makes stars count."""
        try:  # each value as its control holds it (a dragged slider's 43.75000000000001 is 43.75)
            values = {k: self.mission.controls[k].check(v) if k in self.mission.controls and v is not None else v
                      for k, v in values.items()}
        except LabError as exc:
            self._refuse(exc, self._refusal(values, exc))
            return False
        new = {**self.settings, **values}
        carried = {}
        try:
            scenario = self.mission.apply(self._clean(new))
        except LabError as exc:
            carried = self._carry_tp(new) if by_student and values.get("layout", self.settings.get("layout")) != \
                self.settings.get("layout") else {}
            if not carried:
                self._refuse(exc, self._refusal(values, exc))
                return False
            new = {**new, **carried}
            scenario = self.mission.apply(self._clean(new))
        # One batch: a view that saw `error` cleared before `settings` changed would put its
        # widget back to the old value on the way, and Panel then drops the new value as an
        # echo of the page's own (the page kept showing the old one).
        with param.parameterized.batch_call_watchers(self):
            self.error = ""
            self.refusal = ""
            if by_student and new != self.settings:
                self.touched = True
            self.carried = carried_note(self.mission, carried)
            self.settings = new
            self.scenario = scenario
            self.busy = True
        return True

    def _refuse(self, exc, words):
        """A refused change: the spec's message (`error`, the detail line) and the student's
        words for it (`refusal`), in one batch."""
        with param.parameterized.batch_call_watchers(self):
            self.refusal = words
            self.error = str(exc)

    def _refusal(self, values, exc):
        """`refusal_text` for this page: values as the controls show them; the fixes only
        among the controls the student can move now (not hidden, not greyed out)."""
        return refusal_text(self.mission, self.settings, values, exc, control_words,
                            movable=lambda n: n not in self.hidden and self.applies(n))

    def _carry_tp(self, new):
        """A layout switch the spec refuses for the new layout's tp (70B on TP 1, a GPU count in
        whole instances): {tp control: value} for the new layout's greyed-out tp controls that
        make it fit, the old layout's tp tried first; {} if none does. The student could not
        have set those controls before the switch, so the page does (and says so, `carried`)."""
        layout = new.get("layout")
        names, source = (("prefill_tp", "decode_tp"), ("tp",)) if layout == "disaggregated" else (
            ("tp",), ("prefill_tp", "decode_tp"))
        names = [n for n in names if n in self.mission.controls and not self.applies(n)]
        carry = max((new[n] for n in source if isinstance(new.get(n), int)), default=None)
        options = [sorted(self.mission.controls[n].choices, key=lambda c: (c != carry, c)) for n in names]
        for combo in itertools.islice(itertools.product(*options), MAX_CARRY_TRIES):
            trial = dict(zip(names, combo))
            try:
                self.mission.apply(self._clean({**new, **trial}))
            except LabError:
                continue
            return {n: v for n, v in trial.items() if v != new.get(n)}
        return {}

    def reset(self):
        """Back to the mission's start (needs a `run()` like any change). A control the link
        hides keeps the value it came with: the student has no way to move it back."""
        return self.change_many(self._reset_target())

    def query(self):
        """URL params for the current state: the mission, the settings off its start, and the
        window start (`t`, to a hundredth of a second) once it is worth sharing."""
        out = {"draft": self.draft_code} if self.draft_code else {"mission": self.mission.id}
        for name, value in self.settings.items():
            if value is None or value == self._start.get(name):
                continue
            out[name] = format_value(value)
        if self.hidden:
            out["hide"] = ",".join(self.hidden)
        if self.pin is not None:
            out["pin"] = format_pin(self.pin, self._start)
        if self.share_window:
            out["t"] = format_value(round(float(self.window_start), 2))
        return out

    def search(self, embed=False):
        params = self.query()
        if embed:
            params["embed"] = "1"
        return "?" + urllib.parse.urlencode(params, safe=",:")  # hide=plots,brief and pin=gpus:4 stay readable

    def dismiss_notes(self):
        self.notes = []

    # ------------------------------------------------------------ running

    def run(self):
        """Simulate the current scenario and publish the result, metrics and stars.

        Returns the metrics, or None when the run failed: then `run_error` says why, the
        result and metrics are cleared (no stale numbers) and the state is idle again.
        The same as `simulate()` then `finish()`, which the page calls in two turns.
        """
        if not self.simulate():
            return None
        return self.finish()

    def prepare_run(self, whole=False, plot_px=None):
        """The next run's slow part, as a function of no arguments (lab/ui/runs/run_work.py on what the
        state holds now), whose value `simulate` takes. `whole`: its measures, blames, whole-run
        views (for a canvas `plot_px` high) and the pinned fleet's run too, which `finish` and
        the views then find done; the page asks for that when the function runs in a worker
        process (lab/ui/runs/offload.py), and not in the browser, where the canvas goes out first and
        the rest follows in turns of their own."""
        try:
            scenario, requests = self.run_input()
        except Exception as exc:
            return functools.partial(refused, exc)
        simulate = self._kept_run(scenario, requests) is None
        twin = self._twin_input() if whole else None
        return functools.partial(run_work, self.mission, scenario, requests, simulate, twin, measured=whole,
                                 plot_px=plot_px)

    def simulate(self, work=None):
        """A run's first half: publish `result` (the canvas's data), `sim_id` += 1, from `work`
        (what `prepare_run()`'s function returned; None: run it now).

        The page sends this to the browser at once and measures the rest (`finish`) in a
        later turn, so the canvas does not wait on the metrics. True if the simulation ran;
        False when it failed (then the run is over: `run_error`, idle, `run_id` too)."""
        work = self.prepare_run()() if work is None else work
        began = time.perf_counter()
        ran_ms = work.get("ms", 0.0)  # the simulation's own time, wherever it ran
        if self._pending_run is not None:  # never finished: this run replaces it (its stars are judged later)
            self._to_judge(self._pending_run[0])
            self._pending_run = None
            held = _held_steps(result for result, _met in self._unjudged if result is not None)
            if len(self._unjudged) > MAX_UNJUDGED or held > MAX_HELD_STEPS:
                # a long burst with no finish between, or big runs: judge them now
                self._judge_unjudged()
        try:
            self._twin_work = work.get("twin")
            if "error" in work:
                raise work["error"]
            result = self._kept_result(work)
        except Exception as exc:
            self._failed(self._why(exc), began, ran_ms)
            return False
        end = max(result.end_time - WINDOW_S, 0.0)
        sim_ms = (time.perf_counter() - began) * 1000.0 + ran_ms
        self._pending_run = (result, sim_ms, dict(self.settings))
        with param.parameterized.batch_call_watchers(self):
            self.result = result
            if self.window_start > end:
                self.window_start = end
            self.sim_id += 1
        return True

    def finish(self):
        """A run's second half: the metrics, blames and stars of the result `simulate` published,
        then the pinned fleet's run; then idle and `run_id` = `sim_id`. Returns the metrics, or
        None (nothing to finish, or the measuring failed: `run_error`). The same as running
        `finish_steps()` to its end."""
        metrics = None
        for metrics in self.finish_steps():
            pass
        return metrics

    def finish_steps(self):
        """`finish` in parts, for the page to run one per turn (a student's next change can land
        between them): yields None after the stars of runs replaced unfinished are judged, after
        the metrics and stars, after the blames; the last value is `finish`'s. A page that stops
        early leaves the run pending: a newer `simulate` then replaces it, and it is judged, stars
        only, with the next finish. Every simulated run is judged; only the newest is shown."""
        if self._pending_run is None:
            yield None
            return
        began = time.perf_counter()
        if self._unjudged:
            self._judge_unjudged()
            yield None
        result, sim_ms, run_settings = self._pending_run
        try:
            rows, metrics, now = self._measured(result)
        except Exception as exc:
            yield self._failed(self._why(exc), began, sim_ms)
            return
        yield None
        if self._pending_run is None or self._pending_run[0] is not result:  # the run was replaced meanwhile
            return
        try:
            missed = self._missed_blames(result, rows)
        except Exception as exc:
            yield self._failed(self._why(exc), began, sim_ms)
            return
        self._pending_run = None
        saved = self._saved_with(now)
        elapsed = sim_ms + (time.perf_counter() - began) * 1000.0
        with param.parameterized.batch_call_watchers(self):
            self.rows = rows
            self.metrics = metrics
            self.blame_summary = core.blame_summary(missed)
            self.stars_now = now
            self.saved_stars = saved
            self.run_settings = run_settings
            self.run_ms = elapsed
            self.run_error = ""
            self.run_twin()  # the pinned fleet, when the workload changed (cached otherwise)
            self.busy = False
            self.run_id = self.sim_id
        yield metrics

    def _saved_with(self, now):
        """The saved stars with those `now` meets added (once the student changed a control)."""
        return [a or (b and self.touched) for a, b in zip(self.saved_stars, now)] if now else []

    def _judge_unjudged(self):
        """The stars of the runs a newer one replaced before their finish: judged and saved,
        their metrics not shown. A run whose measuring fails earns nothing (the newest run's
        own failure is what the page says)."""
        runs, self._unjudged = self._unjudged, []
        if not self.mission.stars:
            return
        saved = list(self.saved_stars)
        measured = set()
        for result, now in runs:
            if now is None:
                if id(result) in measured:  # a setting visited twice is judged once
                    continue
                measured.add(id(result))
                try:
                    now = self._measured(result)[2]
                except Exception:
                    traceback.print_exc(file=sys.stderr)
                    continue
            saved = [a or (b and self.touched) for a, b in zip(saved, now)]
        if saved != self.saved_stars:
            self.saved_stars = saved

    # ------------------------------------------------------------ kept runs

    @staticmethod
    def _run_key(scenario):
        return repr(scenario.to_dict())

    def _kept_run(self, scenario, requests):
        """The kept run of this scenario on these requests (now the newest), or None."""
        key = self._run_key(scenario)
        kept = self._kept.get(key)
        if kept is None or not _same_requests(kept["requests"], requests):  # another uploaded trace: not the same run
            return None
        self._kept[key] = self._kept.pop(key)
        return kept

    def _kept_result(self, work):
        """The result of run_work's `work`, kept with its measures (the newest kept run)."""
        scenario, requests = work["scenario"], work["requests"]
        if requests is not self._replay_requests and _same_requests(requests, self._replay_requests):
            requests = self._replay_requests  # (one copy of the trace held, not one per run back from a worker)
        kept = self._kept_run(scenario, requests)
        if kept is None:
            # (simulated on the loop only if the kept run `work` counted on went meanwhile)
            kept = self._keep(scenario, requests, work.get("result") or core.simulate(scenario, requests))
            if work.get("result") is kept["result"]:
                self._remember(kept, work)
        return kept["result"]

    @staticmethod
    def _remember(kept, work):
        """What run_work measured, kept with its run (so `finish` need not measure it)."""
        if "measured" in work:
            kept["rows"], kept["metrics"], kept["now"] = work["measured"]
        if "blames" in work:
            kept["blames"] = work["blames"]

    def count_unshown(self, work):
        """A run the page will not show (a newer one was asked for while it ran): kept, and its
        stars judged with the next finish, like a run replaced before its finish."""
        if "error" in work:
            return
        try:
            result = self._kept_result(work)
        except Exception:
            traceback.print_exc(file=sys.stderr)
            return
        self._to_judge(result)

    def _to_judge(self, result):
        """Hold `result` for `_judge_unjudged`: only the stars it met when they are known (a
        worker measured it), so its kept entry may go without the loop measuring it again
        (a run at the page's bound: 2 s on the loop, every page waiting)."""
        kept = self._entry_of(result) or {}
        now = kept.get("now")
        self._unjudged.append((None, now) if now is not None else (result, None))

    def _keep(self, scenario, requests, result):
        key = self._run_key(scenario)
        self._kept.pop(key, None)
        self._kept[key] = kept = {"result": result, "requests": requests}
        while len(self._kept) > MAX_KEPT_RUNS or (
                len(self._kept) > 1 and _held_steps(k["result"] for k in self._kept.values()) > MAX_HELD_STEPS):
            del self._kept[next(iter(self._kept))]
        return kept

    def _entry_of(self, result):
        return next((k for k in self._kept.values() if k["result"] is result), None)

    def is_kept(self, result):
        """Whether `result` is one of the kept runs (what may hold on to its data)."""
        return self._entry_of(result) is not None

    def _measured(self, result):
        """(rows, metrics, stars met) of `result`: measured once per kept run."""
        kept = self._entry_of(result) or {}
        if "metrics" not in kept:
            rows, metrics, now = measure(self.mission, result)
            kept.update(rows=rows, metrics=metrics, now=now)
            return rows, metrics, now
        return kept["rows"], kept["metrics"], kept["now"]

    def _missed_blames(self, result, rows):
        """The blames of `result`'s misses (all its summary reads), made once per kept run."""
        kept = self._entry_of(result) or {}
        if "missed" not in kept:
            kept["missed"] = ([b for b in kept["blames"] if b.missed] if "blames" in kept else
                              core.request_blame(result, rows, missed_only=True))
        return kept["missed"]

    def request_blames(self):
        """Every request's lab.core `Blame` of the shown result, in request order ([] with no
        run): made when first asked for (the table, a request clicked; a run's finish blames
        only its misses) and kept with the run, and with the state while it is shown."""
        result = self.result
        if result is None:
            return []
        if self._blames_of is None or self._blames_of[0]() is not result:
            kept = self._entry_of(result) or {}
            if "blames" not in kept:
                kept["blames"] = core.request_blame(result, self._measured(result)[0])
            self._blames_of = (weakref.ref(result), kept["blames"])  # (not keeping a run the state let go)
        return self._blames_of[1]

    @property
    def finishing(self):
        """A simulated run waits for `finish` (its canvas is out, its metrics not yet)."""
        return self._pending_run is not None

    @staticmethod
    def _why(exc):
        """A failed run's message: a LabError's own; anything else is a bug, said as such
        (a bug must not leave the page on "Simulating…" forever)."""
        if isinstance(exc, LabError):
            return str(exc)
        traceback.print_exc(file=sys.stderr)
        return f"the simulation failed unexpectedly ({type(exc).__name__}: {short_text(exc)})"

    def _failed(self, message, began, sim_ms=0.0):
        self._pending_run = None
        if self._unjudged:  # the runs before it still count
            self._judge_unjudged()
        with param.parameterized.batch_call_watchers(self):
            self.result = None
            self.rows = []
            self.metrics = {}
            self.blame_summary = {}
            self.stars_now = [False] * len(self.mission.stars)
            self.run_ms = sim_ms + (time.perf_counter() - began) * 1000.0
            self.run_error = message
            self.run_settings = dict(self.settings)
            self.busy = False
            self.sim_id += 1
            self.run_id = self.sim_id
        return None

    # ------------------------------------------------------------ twin runs (a pinned fleet)

    def set_pin(self, pin):
        """Pin a fleet ({fleet control: value}); it runs at the next `run_twin`. Raises LabError
        when the mission refuses it with the current settings. True if the pin changed."""
        pin = fleet_settings(dict(pin))
        self.mission.apply(self._clean({**self.settings, **pin}))
        if pin == self.pin:
            return False
        self.pin = pin
        return True

    def pin_fleet(self, which="current"):
        """Pin the current fleet (`which="current"`) or the mission's start (`"start"`). True if it changed."""
        try:
            return self.set_pin(self._reset_target() if which == "start" else self.settings)
        except LabError as exc:
            self.twin_error = str(exc)
            self.twin_id += 1
            return False

    def unpin(self):
        """Nothing pinned any more (drops the pinned run). True if something was pinned."""
        if self.pin is None:
            return False
        self.pin = None
        self.run_twin()
        return True

    @property
    def pinned_start(self):
        """Whether the pinned fleet is the mission's start."""
        return self.pin is not None and self.pin == fleet_settings(self._reset_target())

    def _twin_input(self):
        """(scenario, requests, key) of the pinned fleet's run when it must run (pinned, not
        cached), else None (nothing to run, or the mission refuses the pin: `run_twin` says so)."""
        if self.pin is None:
            return None
        try:
            scenario, requests = self._input_for(self.mission.apply(self._clean({**self.settings, **self.pin})))
        except LabError:
            return None
        key = repr(scenario.to_dict())
        cached = self.twin
        if cached is not None and cached["key"] == key and _same_requests(cached["requests"], requests):
            return None
        return scenario, requests, key

    def prepare_twin(self):
        """`run_twin`'s slow part, as `prepare_run`'s: a function of no arguments whose value
        `run_twin` takes; None when nothing needs to run."""
        twin = self._twin_input()
        return None if twin is None else functools.partial(twin_work, *twin)

    def run_twin(self, work=None):
        """Run the pinned fleet on the current requests (the current workload, seed and replayed
        trace), unless the cached run already is that; from `work` (twin_work's value, as
        `prepare_twin` or `prepare_run` had it run) when it is that run. True if `twin` changed."""
        work, self._twin_work = work or self._twin_work, None
        if self.pin is None:
            if self.twin is None and not self.twin_error:
                return False
            with param.parameterized.batch_call_watchers(self):
                self.twin, self.twin_error = None, ""
                self.twin_id += 1
            return True
        try:
            scenario, requests = self._input_for(self.mission.apply(self._clean({**self.settings, **self.pin})))
            key = repr(scenario.to_dict())
            cached = self.twin
            if cached is not None and cached["key"] == key and _same_requests(cached["requests"], requests):
                return False
            if not (work and work["key"] == key and _same_requests(work["requests"], requests)):
                work = twin_work(scenario, requests, key)  # (the pin or workload moved since `work` ran)
            if "error" in work:
                raise work["error"]
        except LabError as exc:
            twin, error = None, str(exc)
        except Exception as exc:  # like run(): a bug must not leave the page busy
            traceback.print_exc(file=sys.stderr)
            twin, error = None, f"the pinned fleet's run failed unexpectedly ({type(exc).__name__}: {short_text(exc)})"
        else:
            twin, error = work["twin"], ""
        with param.parameterized.batch_call_watchers(self):
            self.twin, self.twin_error = twin, error
            self.twin_id += 1
        return True

    # ------------------------------------------------------------ replaying a trace (sandbox)

    def heavy(self):
        """Whether this page's runs are heavy (run_work.HEAVY_REQUESTS): its next run's expected
        requests, or for a trace the workload reads itself, its last run's."""
        expected = expected_requests(*self.run_input())
        if expected is None:
            expected = len(self.result.requests) if self.result is not None else 0
        return expected > HEAVY_REQUESTS

    def run_input(self):
        """(scenario, requests or None) for the next run: the uploaded trace's requests, if any,
        with the workload's duration stretched over them (arrivals end at the last one)."""
        return self._input_for(self.scenario)

    def _input_for(self, scenario):
        requests = self._replay_requests
        if not requests:
            return scenario, None
        span = max(requests[-1][0], 1e-3)
        workload = dataclasses.replace(scenario.workload, duration_s=min(span, PAGE_MAX_S), phases=())
        return dataclasses.replace(scenario, workload=workload), requests

    def load_trace_text(self, text, name):
        """Replay a trace CSV (text) in the sandbox. True if accepted (needs a `run()` like a change);
        a bad file sets `upload_error` and keeps the current workload. The same as
        `take_upload(upload_work(text, name)())`, which the page does in two turns (the parse in a
        worker process under `lab serve`)."""
        return self.take_upload(self.upload_work(text, name)())

    def upload_work(self, text, name):
        """The parse of an uploaded trace, as a function of no arguments: (name, requests or LabError)."""
        return functools.partial(upload_work, text, str(name or "trace.csv")[:MAX_SHOWN], self.mission.id == SANDBOX_ID)

    def take_upload(self, parsed):
        """Replay the requests `upload_work` parsed, or say why the file was refused."""
        name, requests = parsed
        if isinstance(requests, LabError):
            self.upload_error = str(requests)
            return False
        self._replay_requests = requests
        with param.parameterized.batch_call_watchers(self):
            self.upload_error = ""
            self.replay = {"name": name, "requests": len(requests), "span_s": requests[-1][0]}
            self.sweep = None
            self.busy = True
        return True

    def clear_replay(self):
        """Back to the generated workload (needs a `run()`)."""
        if self._replay_requests is None:
            return False
        self._replay_requests = None
        with param.parameterized.batch_call_watchers(self):
            self.replay = None
            self.upload_error = ""
            self.busy = True
        return True

    @property
    def stars_credited(self):
        """Per star: earned by the latest run and counted (the student changed a control)."""
        return [bool(n) and self.touched for n in self.stars_now]

    def blame_of(self, request_id):
        """The lab.core `Blame` of one request of the latest run (from `request_blames`), or None
        (no run, unknown id)."""
        blames = self.request_blames()
        if not blames or not isinstance(request_id, int) or request_id < 0:
            return None
        if request_id < len(blames) and blames[request_id].id == request_id:
            return blames[request_id]
        return next((b for b in blames if b.id == request_id), None)

    def merge_saved(self, earned):
        """OR stars saved in the browser into `saved_stars` (a bad list is ignored)."""
        if not isinstance(earned, (list, tuple)):
            return
        n = len(self.mission.stars)
        merged = [bool(self.saved_stars[i]) or (i < len(earned) and earned[i] is True) for i in range(n)]
        if merged != self.saved_stars:
            self.saved_stars = merged

    # ------------------------------------------------------------ sweep

    def sweep_key(self):
        """What a sweep depends on: the scenario without its rate."""
        raw = self.scenario.to_dict()
        raw.get("workload", {}).pop("rate", None)
        return repr(raw)

    def can_sweep(self):
        return self.scenario.workload.trace is None and bool(self.scenario.workload.rate) and not self._replay_requests

    def sweep_steps(self, points=8):
        """The rate sweep a point at a time (runs/sweep.py's `sweep_curve`): `sweep_progress`
        moves after each point and `sweep` holds the curve at the end. The page runs each
        point in its own turn (in a worker process under `lab serve`), so progress shows and
        the page stays responsive; `run_sweep` runs them in place."""
        if not self.can_sweep():
            self.sweep = None
            return
        self.sweep_progress = 0.0
        try:
            self.sweep = yield from sweep_curve(self.scenario, self.sweep_key(), points,
                                                on_point=lambda done: setattr(self, "sweep_progress", done))
        finally:
            self.sweep_progress = None

    def run_sweep(self, points=8, progress=None):
        """The whole sweep now; `progress(done, total)` after each point."""
        total = len(sweep_rates(self.scenario.workload.rate, points)) if self.can_sweep() else 0
        run_in_place(self.sweep_steps(points), total, progress)
        return self.sweep

    @property
    def sweep_stale(self):
        return self.sweep is not None and self.sweep.get("key") != self.sweep_key()
