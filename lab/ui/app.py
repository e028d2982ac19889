"""The lab page for one mission (the hub is hub.py; what both share, pages.py).

    lab_page()  -> the lab: ?mission=ID[&embed=1][&<control>=<value>...][&t=SECONDS]

It reads `pn.state.location` (filled from the request under `lab serve`, from the
page's address in Pyodide) and return a Panel layout; `serve.py` serves them, and a
Pyodide conversion can call them from a script ending in `.servable()`. Nothing here
uses threads, subprocesses or the filesystem beyond reading the mission folder; under
`lab serve` a run's slow part goes to worker processes through offload.py (one run under
way per page: a change made meanwhile runs when it ends).

Slow work never runs inside a widget callback: a change marks the state busy (the page
shows it at once) and the run happens in a one-shot callback a moment later: at once for a
lone change, after DEBOUNCE_MS for one that follows another closely (a held arrow key), so
a burst coalesces. A run reaches the browser in three document patches (`pn.io.hold`
each), canvas first: the simulation and the canvas's data (LabState.simulate), then, once
the page says it has painted that canvas (PageBridge's `on_painted`; at most
FINISH_WAIT_MS later, for a hidden tab that paints nothing), in callbacks of their own (a
part per turn: LabState.finish_steps), the metrics, stars, blame, story and tables, then
PLOTS_LAG_MS after that the two plots and the canvas's overview. So the browser paints the
canvas first, with the CPU to itself, and Python measures the run after. A run judged
before the page painted its canvas (the page's first run, simulated while the browser
still builds the page; a hidden tab) has its plots wait for that paint (at most
PLOTS_WAIT_MS): the metrics and stars go out alone, and the plots' figures, made at the
first plots, come after. A change that lands before a run's second half is done makes that
run stale: the rest of its half and its plots are dropped, and the state judges its stars
with the next run's finish (every simulated run counts, only the newest is shown), so the
new canvas never waits on an old run's metrics. The rate sweep runs one point per callback
so its progress bar moves.

What a change costs in the browser matters as much as the simulation: anything that
changes a component's size, or a button's `disabled` flag or label, makes Bokeh
re-lay out the whole page and repaint every plot. So the canvas keeps one height per
mission, buttons with nothing to do are styled inert rather than disabled, and views
send only what changed (see canvas.py, controls.py, plots.py).

The window start goes into the address (`t`) once it is worth sharing: the link came
with one, or the student scrubbed or paused (throttled while scrubbing).

History: the first change after a quiet spell (HISTORY_SETTLE_MS since the last one)
pushes a history entry; the rest of its burst (slider ticks, a held arrow key) and the
window position replace it. Back and Forward restore an entry's settings in the page
(`popstate`); Back from the entry the page opened with leaves the lab. An embed only
replaces (its entries would be the host page's: Back would step through the lab). At load, the
address is rewritten (replaced) to the values the lab accepted, so a rejected value
does not linger after its "Ignored…" note.

Twin runs ("Compare with…", twin_view.py): pinning runs the pinned fleet in a one-shot
callback of its own (the page first says it is running); after that each run includes
the pinned run (cached by the state until the pin or the workload changes), and the
comparison follows in the plots' patch.

A run never leaves the page on "Simulating…": a failure shows its reason where the
metrics would be (LabState.run), and anything else that goes wrong in `_run_now` ends
the busy spell too.
"""

import html
import json
import os
import re
import sys
import time

import panel as pn

from lab.core.errors import LabError

from .browser.a11y import A11yBridge, choice_spec, figure_spec, landmark_spec, run_summary, slider_spec
from .browser.page_bridge import PageBridge, guard_location
from .browser.panel_shims import Html
from .browser.timers import later
from . import early_page
from .catalog import SANDBOX_ID
from .pages import author_href, brand_html, get_catalog, hub_href, lab_href, page_extension, search, star_text
from .runs import offload
from .runs.run_work import HEAVY_UPLOAD_CHARS
from .stars.stars_bridge import STORAGE_NOTES, ProgressTools, StarsBridge
from .runs.sweep import sweep_next
from .state import LabState
from .timeline import collector
from .timeline.canvas import Canvas, legend_html
from .timeline.paint_speed import PaintSpeed
from .url_state import is_embed, parse_pin, parse_search, parse_settings
from .views.blame_view import BlameView
from .views.controls import Controls
from .views.metrics_view import MetricsView, StarsView
from .views.plots import Plots
from .views.result_strip import ResultStrip
from .views.story import StoryView
from .views.table_view import TableView
from .views.twin_view import TwinView, twin_sentence
from .words.control_words import format_value
from .words.figures import model_words
from .words.draft_words import DRAFT_MARK, is_draft
from .words.mission_text import brief_html, plain
from .words.theme import CSS, HUB_CSS, PALETTE

__all__ = ["lab_page", "lab_app", "LabApp", "DEBOUNCE_MS", "FIRST_MS", "FINISH_LAG_MS", "FINISH_WAIT_MS", "PLOTS_LAG_MS", "PLOTS_WAIT_MS",
           "URL_THROTTLE_MS", "HISTORY_SETTLE_MS"]

DEBOUNCE_MS = 40  # a change soon after another waits this long before simulating (coalesces bursts)
FIRST_MS = 1  # a change after a quiet spell simulates at once (once the "Simulating…" patch is out)
FINISH_LAG_MS = 1  # a run's metrics, stars and tables follow this long after the page painted its canvas (their own patch)
FINISH_WAIT_MS = 250  # ... or this long after the canvas's patch, when the page has not said so (a hidden tab paints nothing)
PLOTS_LAG_MS = 40  # the plots redraw this long after the metrics, in a patch of their own
PLOTS_WAIT_MS = 2000  # ... or, judged before the page painted the run's canvas, after that paint or this long
URL_THROTTLE_MS = 400  # while the student scrubs, write the window start to the address at most this often
HISTORY_SETTLE_MS = 600  # a change this long after the last one gets a history entry of its own
FULL_WIDTH = "100%"  # a flex item's min-width never beyond its row (no sideways scroll at 320 px)
_SECONDS_RE = re.compile(r"\d{1,7}(\.\d{0,6})?", re.ASCII)  # a window start in a popped address (fullmatch)
def _settings_attr(settings):
    """The settings a run simulated, as the status line carries them (`data-settings`): the
    address's words (format_value), so a test can hold controls = address = run."""
    return html.escape(json.dumps({k: format_value(v) for k, v in sorted(settings.items()) if v is not None}), quote=True)


def _debug(*args):
    if os.environ.get("STF_DEBUG"):
        print(f"{time.time() * 1000:.0f}", *args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- lab page

class LabApp:
    """One student's lab page: the state, its views, the bridges and the scheduling."""

    def __init__(self, catalog, search=""):
        params = parse_search(search)
        self.catalog = catalog
        self.embed = is_embed(params)
        self.state = LabState.from_query(catalog, search)
        early_page.claim(self.state)  # (the static site: settings the student chose before this page was built)
        self.state.busy = True  # the first run is on its way
        self._auto_window = "t" not in params
        self._pending = None
        self._running = False  # a run's slow part is under way (in a worker process under `lab serve`)
        self._run_again = False  # ...and a newer one waits for it
        self._last_change = -1e9  # time.monotonic() of the last accepted change
        self._sweep_iter = None
        self._sweep_work = None  # the sweep's next point to run (LabState.sweep_steps)
        self.bridge = StarsBridge()
        self.url = PageBridge(on_key=self._on_key, on_pop=self._on_pop, on_painted=self._on_painted)
        self._url_pending = None
        self._settle_pending = None
        self._history_settled = True  # the entry the page opened with is committed
        self._restoring = False  # applying a popped history entry: the address already shows it
        m = self.state.mission
        self.url.title(f"{m.title} · Split the Fleet" if m.id != SANDBOX_ID else "Sandbox · Split the Fleet")
        # Applied when the page renders: only the accepted values stay in the address.
        self.url.replace(self.state.search(self.embed))
        self.url.settle()
        self.canvas = Canvas(self.state, embed=self.embed)
        self.canvas.after_toggle = self._after_toggle
        self.canvas.on_user_window = self._on_user_window
        self.controls = Controls(self.state, self.on_change, on_reset=self.on_reset, embed=self.embed,
                                 on_upload=self.on_upload, on_clear_replay=self.on_clear_replay)
        self.metrics = MetricsView(self.state)
        self.blame = BlameView(self.state)
        self.twin = TwinView(self.state, self.on_pin, self.on_unpin, follow_runs=False)
        # The full-lab link (shown in an iframe) opens this mission at top level, stars carried in #progress=.
        self.stars = StarsView(self.state, ProgressTools(self.bridge, lab_href(self.state.mission.id, self.state.draft_code),
                                                             compact=self.embed))
        self.plots = Plots(self.state, self.on_sweep, embed=self.embed, follow_runs=False)
        self._plots_pending = None
        self._settled = False  # (collector.settle once, after the first run is shown)
        self._finish_pending = None
        self._finish_iter = None  # LabState.finish_steps of the run being finished, a part per turn
        self._paint_awaited = None  # the run (sim_id) whose canvas the page has not said it painted
        self._painted_run = 0  # the newest run (sim_id) whose canvas the page said it painted
        self._plots_awaited = None  # the judged run whose plots wait for the page to paint its canvas
        self.table = TableView(self.state)
        self.a11y = A11yBridge(widgets=self._a11y_specs())
        self.paint_speed = PaintSpeed()
        self.story = StoryView(self.state, self.canvas, say=self.a11y.say, plots=self.plots)
        self._announced = (list(self.state.stars_now), list(self.state.saved_stars))
        self.status = Html("", stylesheets=[CSS], margin=(0, 4), css_classes=["stf-status-pane"],
                                   sizing_mode="stretch_width")
        # Says which run is judged (never shown): the static site's loader swaps its pre-rendered
        # first view for the live page as soon as the first run's metrics and stars are in.
        self.judged_mark = Html("", visible=False, margin=0, css_classes=["stf-judged-mark"])
        self.strip = ResultStrip(self.state)
        self.notes = Html("", stylesheets=[CSS], margin=(4, 10), sizing_mode="stretch_width",
                                  css_classes=["stf-notes-pane"])
        self.header_stars = Html("", stylesheets=[HUB_CSS], margin=(14, 16, 0, 10), css_classes=["stf-header-stars"])
        s = self.state
        s.param.watch(self._on_busy, ["busy", "run_id"])
        s.param.watch(self._on_notes, ["notes"])
        s.param.watch(self._on_settings, ["settings", "pin"])
        s.param.watch(self._on_layout, ["scenario"])
        self._on_layout()
        s.param.watch(self._on_stars, ["run_id", "saved_stars"])
        s.param.watch(self._announce, ["run_id"])
        self.bridge.param.watch(self._on_bridge, ["stars", "status"])
        self._on_busy()
        self._on_notes()
        self._on_stars()
        self.view = self._layout()
        self._apply_hide()
        pn.state.onload(self._on_load)

    # ------------------------------------------------------------ scheduling

    def _on_load(self):
        self.schedule_run(delay_ms=10)
        self.bridge.read_until_loaded()  # its own first answer can be lost (StarsBridge.read_until_loaded)

    def schedule_run(self, delay_ms=DEBOUNCE_MS):
        """(Re)start the debounce timer; the run happens when it fires."""
        if self._pending is not None:
            self._pending.stop()
        self._pending = later(self._run_now, delay_ms)

    # ------------------------------------------------------------ the address

    def _write_url(self):
        """Write the address now (and drop a pending throttled write)."""
        if self._url_pending is not None:
            self._url_pending.stop()
        self._url_timer()

    def _url_timer(self):
        self._url_pending = None
        self.url.replace(self.state.search(self.embed))

    def _url_soon(self):
        """Write the address at most every URL_THROTTLE_MS while the window keeps moving."""
        if self._url_pending is None:
            self._url_pending = later(self._url_timer, URL_THROTTLE_MS)

    def _on_user_window(self):
        """The student scrubbed, jumped or nudged the window: a shared link shows this moment."""
        self.state.share_window = True
        if not self.canvas.playing:
            self._url_soon()

    def _after_toggle(self):
        self.url.refocus("stf-play")
        if not self.canvas.playing and self.state.run_id:  # paused (or played to the end)
            self.state.share_window = True
            self._write_url()

    def _run_now(self):
        """Start the run the settings ask for: its slow part (LabState.prepare_run) in a worker
        process under `lab serve` (offload.py), one at a time; a change made meanwhile runs when
        it is done, and the run it replaced is not shown (its stars still count)."""
        self._pending = None
        if self._running:
            self._run_again = True
            return
        self._running, self._run_again = True, False
        _debug("run start")
        self._stop_plots()  # they will show this run instead
        # A run whose finish has not come is stale now: it is not shown, and the state judges
        # its stars with this run's finish (every run counts), so this canvas does not wait.
        self._stop_finish()
        pooled = offload.pooled()
        if not pooled:  # (the browser's one thread: its simulation is the canvas's wait; see collector.py)
            collector.hold()  # no garbage collection until the canvas is out (the second half)
        offload.run(self.state.prepare_run(whole=pooled, plot_px=self.canvas.plot_px), self._ran,
                    heavy=self.state.heavy())

    def _ran(self, outcome):
        self._running = False
        state = self.state
        if self._run_again or self._pending is not None:  # asked for again while it ran: run that
            self._guarded(lambda: state.count_unshown(outcome.get()))
            if self._pending is None:
                self._run_now()
            return
        first = state.sim_id == 0
        # The canvas goes first, alone: its patch carries the simulation only, and the
        # browser paints it before this worker measures the run (metrics, blame, stars).
        simulated = self._guarded(lambda: self._simulate(first, outcome.get()))
        if simulated:  # measured once the page has painted the canvas (_on_painted), or after a wait
            self._finish_iter = state.finish_steps()
            self._paint_awaited = state.sim_id
            self._finish_pending = later(self._finish_step, FINISH_WAIT_MS)
        else:  # failed: the run is over (its reason is out), the plots show that
            collector.release()
            self._judged(await_paint=False)  # (no canvas of its own to paint)

    def _simulate(self, first, work):
        with pn.io.hold():  # one document patch for the canvas, not one per model change
            simulated = self.state.simulate(work)
            _debug("simulated")
            if first and self._auto_window and self.state.result is not None:
                self.canvas.set_window(min(10.0, self.state.result.arrivals_end * 0.25))
            if first:  # the page's first view: the overview comes with it (no paint to hurry)
                self.canvas.show_whole_run()
        return simulated

    def _stop_finish(self):
        if self._finish_pending is not None:
            self._finish_pending.stop()
            self._finish_pending = None
        self._finish_iter = None
        self._paint_awaited = None

    def _stop_plots(self):
        if self._plots_pending is not None:
            self._plots_pending.stop()
            self._plots_pending = None
        self._plots_awaited = None

    def _on_painted(self, run):
        """The page painted run `run`'s canvas: its second half starts now, not after the wait;
        plots held for this paint (_judged) follow."""
        self._painted_run = max(self._painted_run, run)
        if run == self._plots_awaited:
            self._stop_plots()
            self._plots_pending = later(self._update_plots, PLOTS_LAG_MS)
        if run != self._paint_awaited or self._finish_iter is None:
            return  # an older run's paint, or this one is under way already
        self._paint_awaited = None
        if self._finish_pending is not None:
            self._finish_pending.stop()
        self._finish_pending = later(self._finish_step, FINISH_LAG_MS)

    def _finish_step(self):
        """One part of the run's second half per turn (LabState.finish_steps), so a change the
        student makes meanwhile is taken between parts; once a change waits to run, the rest
        is dropped (that run is stale) and the plots stay for the newer run."""
        self._finish_pending = None
        self._paint_awaited = None  # begun: a paint heard later changes nothing
        collector.release()  # the canvas is out: collections put off since the run began happen now
        steps = self._finish_iter
        if steps is None:
            return
        if self._pending is not None:  # a newer run is scheduled: it judges this one's stars
            self._finish_iter = None
            return
        done = self._guarded(lambda: self._finish_part(steps))
        if done is None:
            self._finish_pending = later(self._finish_step, FINISH_LAG_MS)
            return
        self._finish_iter = None
        _debug("run end", done)
        self._judged()

    def _finish_part(self, steps):
        """The next part of `steps`: None while more follow, True once the run is finished."""
        with pn.io.hold():  # a part's changes (the last: metrics, stars, blame, story, tables) in one patch
            try:
                next(steps)
            except StopIteration:
                return True
        return None

    def _finish_now(self):
        """The run's whole second half at once (the pre-render, tests)."""
        self._stop_finish()
        collector.release()
        with_finish = self._guarded(self._finish)
        _debug("run end", with_finish)
        self._judged()

    def _judged(self, await_paint=True):
        """The run's metrics, stars and tables are out (or its failure): say so, and let the
        plots follow in their own patch once the browser has had time to paint those (their
        data and drawing would delay it), or once the page has painted the run's canvas if it has
        not yet."""
        self.judged_mark.object = f'<span data-judged-run="{self.state.run_id}"></span>'
        self._stop_plots()
        run = self.state.sim_id
        if await_paint and self._painted_run < run:
            self._plots_awaited = run
            self._plots_pending = later(self._update_plots, PLOTS_WAIT_MS)
        else:
            self._plots_pending = later(self._update_plots, PLOTS_LAG_MS)

    def _finish(self):
        with pn.io.hold():  # the metrics, stars, blame, story and tables in one patch
            self.state.finish()
        return True

    def _guarded(self, work):
        """`work()`, or False when a view failed on the new run: say so, and stay usable."""
        state = self.state
        try:
            return work()
        except Exception as exc:
            import traceback

            traceback.print_exc(file=sys.stderr)
            with pn.io.hold():
                if not state.run_error:
                    state.run_error = f"the page could not show this run ({type(exc).__name__}: {str(exc)[:300]})"
                state.busy = False
            return False

    def _update_plots(self):
        self._plots_pending = self._plots_awaited = None
        with pn.io.hold():
            self.canvas.show_whole_run()  # the overview and the slow steps: after the canvas's paint
            self.plots.update()
            self.twin.update()
        if not self._settled:  # the page is up: what lives now lives as long as the page
            self._settled = True
            collector.settle()

    def on_pin(self, which):
        """"Compare with…": pin this fleet or the mission's start; its run follows in a moment."""
        with pn.io.hold():
            if self.state.pin_fleet(which):
                self.twin.update()  # "Running the pinned fleet…"
                later(self._twin_now, FIRST_MS)
            else:
                self.twin.update()

    def _twin_now(self):
        work = self.state.prepare_twin()
        if work is None:  # cached, or the pin is refused: run_twin says which, at once
            self._twin_ran(offload.Outcome(value=None))
        else:
            offload.run(work, self._twin_ran, heavy=self.state.heavy())

    def _twin_ran(self, outcome):
        with pn.io.hold():
            self._guarded(lambda: self.state.run_twin(outcome.get()))
            self.twin.update()

    def on_unpin(self):
        with pn.io.hold():
            if self.state.unpin():
                self.twin.update()

    def on_change(self, name, value):
        _debug("change", name, value)
        with pn.io.hold():  # the controls, the busy status and the address in one patch
            if self.state.change(name, value):
                self.schedule_run(self._change_delay())
            elif self.state.error:  # refused: its note, under the controls, may start under a phone's result strip
                self.url.reveal("stf-control-error", self.state.refusal or self.state.error)

    def _change_delay(self):
        """Leading edge: a lone change runs at once; one hard on the heels of another (a held
        arrow key, quick clicks) restarts the debounce, so a burst costs one more run, not one each."""
        now = time.monotonic()
        burst = self._pending is not None or (now - self._last_change) * 1000.0 < DEBOUNCE_MS
        self._last_change = now
        return DEBOUNCE_MS if burst else FIRST_MS

    def on_reset(self):
        if self.state.is_start:  # nothing to undo (the button only looks disabled then)
            return
        with pn.io.hold():
            if self.state.reset():
                self.schedule_run(delay_ms=10)

    def on_upload(self, text, name):
        """The sandbox got a trace CSV: replay it (a bad one only says why). Parsed like a run's
        slow part, in a worker process under `lab serve`."""
        offload.run(self.state.upload_work(text, name), self._uploaded, heavy=len(text) > HEAVY_UPLOAD_CHARS)

    def _uploaded(self, outcome):
        with pn.io.hold():
            if self._guarded(lambda: self.state.take_upload(outcome.get())):
                self.schedule_run(FIRST_MS)

    def on_clear_replay(self):
        with pn.io.hold():
            if self.state.clear_replay():
                self.schedule_run(FIRST_MS)

    def on_sweep(self):
        state = self.state
        if self._sweep_iter is not None or not state.can_sweep():
            return
        self._sweep_iter = steps = state.sweep_steps()
        self._sweep_work = next(steps, None)
        later(self._sweep_step, 10)

    def _sweep_step(self):
        """The sweep's next point, in its own turn (in a worker process under `lab serve`)."""
        steps, work = self._sweep_iter, self._sweep_work
        if steps is None or work is None:
            self._sweep_iter = None
            return
        offload.run(work, lambda outcome: self._swept(steps, outcome), heavy=self.state.heavy())

    def _swept(self, steps, outcome):
        if steps is not self._sweep_iter:
            return
        try:
            self._sweep_work = work = sweep_next(steps, outcome)
        except Exception:
            self._sweep_iter = None
            raise
        if work is None:
            self._sweep_iter = None
            return
        later(self._sweep_step, 5)

    def _on_key(self, action):
        canvas = self.canvas
        if action == "toggle":
            canvas.toggle()
        elif action == "back":
            canvas.nudge(-1.0)
        elif action == "forward":
            canvas.nudge(1.0)
        elif action == "next_slow":
            canvas.jump_to_slow()

    # ------------------------------------------------------------ watchers

    def _on_busy(self, *_):
        s = self.state
        if s.busy:
            text = ('<span class="stf-status busy" data-busy="true">'
                    '<span class="stf-spin" aria-hidden="true"></span>Simulating…</span>')
        elif s.run_error:
            text = (f'<span class="stf-status failed" data-busy="false" data-run="{s.run_id}" '
                    f'data-settings="{_settings_attr(s.run_settings)}" data-failed="true">The simulation failed: see below</span>')
        elif s.metrics and s.result is not None:
            m = s.metrics
            text = (f'<span class="stf-status" data-busy="false" data-run="{s.run_id}" data-run-ms="{s.run_ms:.1f}" '
                    f'data-settings="{_settings_attr(s.run_settings)}" data-model="{s.result.scenario.model.cost}">'
                    f'{m.get("requests", 0):,} requests over {s.result.end_time:,.0f} s'
                    # An embed's line is narrow: the model fits where the wall-clock time would not.
                    f'{"" if self.embed else f" simulated in {s.run_ms:,.0f} ms"}'
                    f' · {model_words(s.result.scenario.model, short=True)}</span>')
        else:
            text = '<span class="stf-status" data-busy="false"></span>'
        self.status.object = text
        self.canvas.pane.loading = s.busy and s.run_id == 0

    def _announce(self, *_):
        """After a run, the live region reads the headline metrics and any star change."""
        s = self.state
        before, saved_before = self._announced
        self._announced = (list(s.stars_now), list(s.saved_stars))
        text = run_summary(s.metrics, s.scenario, before, s.stars_now, saved_before, s.saved_stars, s.run_error)
        self.a11y.say(" ".join(t for t in (text, twin_sentence(s)) if t))

    def _a11y_specs(self):
        """Names and value formats of the page's widgets and figures, by css class (a11y.A11yBridge)."""
        return {
            "stf-lab": landmark_spec("main", "Split the Fleet lab"),
            **self.controls.a11y_specs(),
            "stf-scrub": slider_spec("Window start", "s", self.canvas.slider.step),
            "stf-speed": choice_spec("Playback speed"),
            "stf-canvas": figure_spec("GPU timelines of the 2.5 s window, with the prefill queue, the link queue and each "
                                      "GPU's KV memory (the Table view lists the same run)"),
            "stf-overview": figure_spec("Whole run: share of GPU time in slow steps (the Table view counts them per GPU)"),
            "stf-twin-plot": figure_spec("Each request's value with the pinned fleet (across) and now (up): points "
                                         "above the diagonal got worse (the counts are written beside it)"),
            "stf-twin-measure": choice_spec("Compare each request by"),
        }

    def _on_notes(self, *_):
        notes = list(self.state.notes)
        if self.bridge.status in STORAGE_NOTES:
            notes.append(html.escape(STORAGE_NOTES[self.bridge.status], quote=False))
        if notes:
            items = "".join(f"<li>{n}</li>" for n in notes)  # notes are built HTML-safe by the state
            self.notes.object = f'<div class="stf-notes" role="status" data-notes="{len(notes)}"><ul>{items}</ul></div>'
        else:
            self.notes.object = ""
        self.notes.visible = bool(notes)

    def _on_settings(self, *_):
        """A change of the settings: a new history entry if the last one is committed, else
        it rewrites the entry of its burst. Committed = HISTORY_SETTLE_MS without a change."""
        if self._restoring:
            return
        search = self.state.search(self.embed)
        if self._history_settled and not self.embed:  # an embed's entries would take over its host page's Back
            self._history_settled = False
            self.url.push(search)
        else:
            self.url.replace(search)
        if self._settle_pending is not None:
            self._settle_pending.stop()
        self._settle_pending = later(self._settle, HISTORY_SETTLE_MS)

    def _on_layout(self, *_):
        """Controls that do nothing in this layout take no focus (see PageBridge.inert)."""
        inert = [f"stf-control-{n}" for n in self.controls.idle]
        if inert != self.url.inert:
            self.url.inert = inert

    def _settle(self):
        self._settle_pending = None
        self._history_settled = True
        self.url.settle()

    def _on_pop(self, search):
        """Back/Forward to an entry of this page: restore its settings (and moment)."""
        state = self.state
        params = parse_search(search)
        if params.get("mission", state.mission.id) != state.mission.id:
            return  # not one of this page's entries
        settings, _notes = parse_settings(state.mission, params)
        wanted = {**state.start_settings, **settings}
        pin = parse_pin(state.mission, params["pin"], state.start_settings)[0] if "pin" in params else None
        if self._settle_pending is not None:
            self._settle_pending.stop()
            self._settle_pending = None
        self._restoring = True
        try:
            with pn.io.hold():
                if wanted != state.settings and state.change_many(wanted, by_student=False):  # no star for Back
                    self.schedule_run(self._change_delay())
                if pin != state.pin:
                    if pin is None:
                        state.unpin()
                    else:
                        try:
                            state.set_pin(pin)
                        except LabError:  # refused with these settings: keep what is pinned
                            pass
                        later(self._twin_now, FIRST_MS)
                    self.twin.update()
                raw = params.get("t")
                if raw is not None and _SECONDS_RE.fullmatch(raw.strip()) and float(raw) <= 1e6:
                    self.canvas.set_window(float(raw))
                    state.share_window = True
        finally:
            self._restoring = False
        self._history_settled = True
        self.url.settle()

    def _on_stars(self, *_):
        s = self.state
        total = len(s.mission.stars)
        if not total:
            self.header_stars.object = ""
            return
        got, glyphs = star_text(s.saved_stars, total)
        self.header_stars.object = (f'<div class="stf-head-stars" data-earned="{got}"><span class="stars" '
                                    f'aria-label="{got} of {total} stars earned">{glyphs}</span>'
                                    f'<small>{got}/{total}</small></div>')
        credited = s.stars_credited  # nothing until the student changed a control (LabState.touched)
        if any(credited):
            saved = self.bridge.stars.get(s.mission.id, [])
            new = [now and not (i < len(saved) and saved[i]) for i, now in enumerate(credited)]
            if any(new) or not self.bridge.loaded:
                self.bridge.earn(s.mission.id, credited)

    def _on_bridge(self, *_):
        self.state.merge_saved(self.bridge.stars.get(self.state.mission.id, []))
        self._on_notes()

    # ------------------------------------------------------------ classroom links (hide=)

    def _apply_hide(self):
        """Hide what the link's `hide=` names (LabState.hidden), after the layout is built: the
        named parts are found by their css class or section title, so the layout stays free."""
        hidden = set(self.state.hidden)
        if not hidden:
            return
        panes = {
            "brief": ["stf-brief-pane"], "legend": ["stf-legend-pane"], "metrics": ["stf-metrics-pane", "stf-table-card", "stf-blame-pane",
                                                                                     "stf-twin-card"],
            "stars": ["stf-stars-panel", "stf-stars-pane", "stf-header-stars"], "progress": ["stf-progress-tools"],
            "controls": ["stf-controls"], "canvas-overview": ["stf-overview"], "plots": [],
        }
        titles = {"brief": "Brief", "controls": "Controls", "stars": "Stars", "plots": "Plots"}
        parts = {"plots": [self.plots.view]}

        def css(obj):
            return set(getattr(obj, "css_classes", None) or [])

        everything = self.view.select()
        for name in hidden & set(panes):
            targets = [o for o in everything if css(o) & set(panes[name])] + parts.get(name, [])
            title = titles.get(name)
            if title:  # its section heading, or the embed's card of that title
                targets += [o for o in everything if getattr(o, "object", None) == f'<div class="stf-section">{title}</div>'
                            or (isinstance(o, pn.Card) and o.title == title)]
            for obj in targets:
                obj.visible = False
        controls = [n for n in self.state.hidden if n in self.controls.widgets]
        for name in controls:
            self.controls.widgets[name].visible = False
        if controls:  # a hidden control keeps its value: say which, and at what
            shown = ", ".join(f"{html.escape(n)} <b>{html.escape(format_value(self.state.value_of(n)))}</b>"
                              for n in controls)
            self.controls.view.append(Html(
                f'<div class="stf-lock stf-hidden-controls" data-hidden="{len(controls)}">Hidden by this link '
                f'(locked): {shown}</div>', stylesheets=[CSS], margin=(6, 10, 0, 10), css_classes=["stf-hidden-pane"]))

    # ------------------------------------------------------------ layout

    def _layout(self):
        s = self.state
        m = s.mission
        kicker = self.catalog.kicker(m)
        title = plain(m.title)
        # Mission text never reaches the page as markup: see mission_text.py.
        brief = Html(f'<div class="stf-brief">{brief_html(m.brief)}</div>', sizing_mode="stretch_width",
                             margin=(0, 10), stylesheets=[CSS], css_classes=["stf-brief-pane"])
        may_preempt = s.scenario.fleet.kv_policy == "on_demand" or "kv_policy" in m.controls
        roles = "planner" in m.controls or s.scenario.fleet.planner_on
        legend = Html(legend_html(s.scenario.slo, self.embed, rejection=s.can_reject, preemptions=may_preempt,
                                          roles=roles),
                              stylesheets=[CSS], sizing_mode="stretch_width",
                              margin=(0, 4), css_classes=["stf-legend-pane"])
        section = lambda text: Html(f'<div class="stf-section">{text}</div>', stylesheets=[CSS],
                                            margin=(10, 10, 0, 10), sizing_mode="stretch_width")
        next_m = self.catalog.next_after(m)
        draft_mark = (f'<p class="stf-draft-mark" role="note">{html.escape(DRAFT_MARK)} '
                      f'<a class="stf-draft-edit" href="{plain(author_href())}?draft={plain(s.draft_code)}">Edit a copy</a></p>'
                      if is_draft(m) else "")
        card_style = {"background": "#ffffff", "border": "1px solid #dde2ea", "border-radius": "10px"}
        canvas_card = pn.Column(
            pn.Row(Html('<div class="stf-section" style="margin:0">GPU timelines'
                                f'{"" if self.embed else " · 2.5 s window"}</div>',
                                stylesheets=[CSS], margin=(4, 4)), self.status, sizing_mode="stretch_width", margin=0),
            legend, self.canvas.view, self.judged_mark, sizing_mode="stretch_width", styles=card_style, margin=(0, 0, 10, 0),
            css_classes=["stf-canvas-card"],
        )
        if self.embed:
            return self._embed_layout(kicker, title, brief, canvas_card, section)
        nav = (f'<a href="{plain(lab_href(next_m.id))}">Next: {plain(next_m.title)} →</a>' if next_m else "")
        header = pn.Row(
            Html(
                f'<div class="stf-header">{brand_html()}<a href="{hub_href()}">← All missions</a>'
                f'<span class="stf-spacer"></span>{nav}</div>',
                stylesheets=[CSS], sizing_mode="stretch_width", margin=(8, 16, 0, 16),
            ),
            sizing_mode="stretch_width", margin=0, styles={"background": "#ffffff", "border-bottom": "1px solid #dde2ea"},
        )
        title_row = pn.Row(
            # The title takes the room the stars leave and wraps there (a long title at 390 px
            # pushed the stars past the screen's edge).
            Html(f'<div class="stf-kicker">{html.escape(kicker)}</div><h1 class="stf-title">{title}</h1>{draft_mark}',
                         stylesheets=[CSS], margin=(10, 10, 0, 16), sizing_mode="stretch_width",
                         styles={"min-width": "0"}),
            self.header_stars, sizing_mode="stretch_width", margin=0,
        )
        sidebar = pn.Column(
            section("Brief"), brief, section("Controls"), self.controls.view, section("Stars"),
            pn.Column(self.stars.view, margin=(4, 10)),
            sizing_mode="stretch_width", margin=0,
            styles={**card_style, "flex": "0 1 340px", "min-width": f"min(280px, {FULL_WIDTH})"},
            css_classes=["stf-sidebar"],
        )
        main = pn.Column(
            canvas_card, self.story.view, self.metrics.view, self.blame.view, self.twin.view, self.table.view,
            pn.Spacer(height=10), self.plots.view,
            sizing_mode="stretch_width", margin=0, styles={"flex": "1 1 560px", "min-width": f"min(300px, {FULL_WIDTH})"},
            css_classes=["stf-main"],
        )
        body = pn.FlexBox(sidebar, main, gap="14px", flex_wrap="wrap", align_items="flex-start",
                          sizing_mode="stretch_width", margin=(6, 8, 16, 8), css_classes=["stf-body"])
        return pn.Column(header, title_row, self.notes, body, self.strip.pane, self.bridge, self.url, self.a11y, self.paint_speed,
                         sizing_mode="stretch_width", margin=0, css_classes=["stf-lab"],
                         styles={"background": PALETTE["page"], "min-height": "100vh"})


    def _embed_layout(self, kicker, title, brief, canvas_card, section):
        """The 700 x 760 iframe of docs/embedding.md: the folded brief, the controls and the stars in a narrow
        column beside the canvas and the metrics, so all but the plots (below the fold) show
        without scrolling. Under about 550 px the two columns stack (brief and controls first)."""
        head = Html(
            f'<div class="stf-header"><span class="stf-kicker">{html.escape(kicker)}</span>'
            f'<h1 class="stf-title" style="font-size:17px">{title}</h1><span class="stf-spacer"></span></div>',
            stylesheets=[CSS], sizing_mode="stretch_width", margin=(4, 10, 0, 10),
        )
        self.header_stars.margin = (4, 10, 0, 10)
        # The header an h2 (Panel's title is an h3: a skipped heading level under the h1).
        brief_card = pn.Card(brief, title="Brief", header=Html('<h2 class="stf-card-title">Brief</h2>',
                                                                        stylesheets=[CSS], margin=(0, 4)),
                             collapsed=True, sizing_mode="stretch_width", margin=(0, 0, 4, 0),
                             css_classes=["stf-brief-card"])
        self.stars.pane.css_classes = [*self.stars.pane.css_classes, "stf-stars-compact"]
        side = pn.Column(
            brief_card, self.controls.view, section("Stars"), pn.Column(self.stars.view, margin=(2, 6)),
            sizing_mode="stretch_width", margin=0, css_classes=["stf-embed-side"],
            styles={"flex": "1 1 200px", "min-width": f"min(190px, {FULL_WIDTH})", "max-width": "100%"},
        )
        main = pn.Column(
            canvas_card, self.metrics.view, self.blame.view, self.story.view, self.table.view, sizing_mode="stretch_width",
            margin=0,
            css_classes=["stf-embed-main"],
            styles={"flex": "3 1 340px", "min-width": f"min(300px, {FULL_WIDTH})"},
        )
        self.metrics.pane.css_classes = [*self.metrics.pane.css_classes, "stf-metrics-compact"]
        self.canvas.keys_pane.css_classes = [*self.canvas.keys_pane.css_classes, "stf-keys-compact"]
        row = pn.FlexBox(side, main, gap="8px", flex_wrap="wrap", align_items="flex-start",
                         sizing_mode="stretch_width", margin=0)
        return pn.Column(
            pn.Row(head, pn.HSpacer(), self.header_stars, sizing_mode="stretch_width", margin=0),
            self.notes, row, section("Plots"), self.plots.view, self.twin.view, self.strip.pane,
            self.bridge, self.url, self.a11y, self.paint_speed, sizing_mode="stretch_width", margin=(0, 6),
            css_classes=["stf-lab", "stf-embed"],
        )


def lab_app(missions_dir=None):
    """The LabApp for the mission named in the address (lab/ui/prerender.py runs its first run itself)."""
    page_extension()
    guard_location()  # before anything reads pn.state.location
    return LabApp(get_catalog(missions_dir), search())


def lab_page(missions_dir=None):
    """The lab for the mission named in the address (`?mission=ID`)."""
    return lab_app(missions_dir).view
