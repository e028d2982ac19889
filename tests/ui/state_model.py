"""A model-based test of the lab page's one source of truth, for `lab serve` and the static site.

A seeded random walk of the actions a student takes: slider moves by keyboard and by drag,
choice toggles, "Back to the start", the browser's Back and Forward, reload, opening a
shared link, pinning and unpinning a fleet. After each action has settled, the page must
describe one scenario:

    the controls  =  the address  =  the settings of the run it shows (the status line's
    `data-settings`),

and what it shows of that run must be `lab run` on that scenario, computed here in CPython:
the metric cards (through the page's own formatter, `metrics_html`), the canvas's GPU rows,
and, while a fleet is pinned, the twin's pinned fleet (the address's `pin`).

"Settled" is not a sleep: the page is idle (status `data-busy="false"`), has painted the run
it shows, the three views agree, and the twin's Unpin button shows exactly while the address
pins a fleet (Back past a pin changes nothing else, so the rest agrees before the lab has
answered), read in one pass over the page and polled (SETTLE_S at most; LOAD_S after a page
load). A page that never agrees fails with what each view said.

Every walk prints its seed. A failure is shrunk (`shrink`: drop chunks of the actions before
it while it still fails, from a fresh page each try) and reported as the shortest action
sequence found that reproduces it. Actions are written down as they were taken ("key gpus
+1", "toggle layout disaggregated"), so a sequence replays the same way on any page.
"""

import dataclasses
import html as html_mod
import json
import os
import random
import re
import time
import urllib.parse

import lab.core as core
from playwright.sync_api import Error as PlaywrightError
from lab.core.errors import LabError
from lab.ui.data.canvas_data import run_layers
from lab.ui.words.control_words import CHOICE_LABELS
from lab.ui.views.metrics_view import metrics_html
from lab.ui.state import fleet_settings, format_value, parse_pin, parse_search, parse_settings
from lab.ui.views.twin_view import fleet_phrase

__all__ = ["Failure", "Page", "walk", "shrink", "replay", "SETTLE_S", "SEED", "WALK_ACTIONS", "MODEL_MISSIONS"]

# One seed for the session's walks, printed in pytest's header (tests/conftest.py) and in any failure.
SEED = int(os.environ.get("STF_MODEL_SEED") or random.SystemRandom().randrange(1, 10**6))
WALK_ACTIONS = int(os.environ.get("STF_MODEL_ACTIONS") or 50)  # a walk's length, on each mission
# Sliders by key and drag, the layout toggle, TP pools, a link, KV on demand.
MODEL_MISSIONS = ("mixing-hurts", "decode-drowns", "slow-link", "chunk-it", "tp-per-phase", "memory-on-demand")
SETTLE_S = 15  # a page that has not agreed with itself this long after an action is wrong
LOAD_S = 180  # ...or this long after a page load (Pyodide starts in the static site)
SHRINK_BUDGET_S = 300  # how long a failure's shrinking may take, at most
# How often an unsettled page is read again: a read costs the page 2-3 ms; at 100 ms a walk of 40
# actions on mission 03 took 14.8 s (median of 4), at 25 ms 14.2 s.
POLL_MS = 25
CARDS = ("ttft", "tpot", "gap", "slo", "goodput")  # metric cards compared with lab run's

# Weights of the action kinds in a walk (a student mostly moves controls).
WEIGHTS = {"key": 30, "drag": 12, "toggle": 20, "reset": 8, "back": 7, "forward": 4, "reload": 3,
           "link": 4, "pin": 4, "unpin": 3}

# Deep queries through Panel's shadow roots, and the page's three views of the settings.
_JS_VIEWS = """(spec) => {
    const roots = (from) => {  // `from` and every shadow root under it, depth first
        const out = [], stack = [from];
        while (stack.length) {
            const root = stack.pop();
            out.push(root);
            if (root.shadowRoot) stack.push(root.shadowRoot);
            for (const el of root.querySelectorAll("*")) if (el.shadowRoot) stack.push(el.shadowRoot);
        }
        return out;
    };
    // The page's roots are found once per call, not once per query: a poll that walks the
    // whole page for each control takes the renderer's time from the page it waits on.
    const pageRoots = roots(document);
    const all = (sel, from) => (from ? roots(from) : pageRoots).flatMap((root) => [...root.querySelectorAll(sel)]);
    const inControl = (name, sel) => all(`.stf-control-${name}`).flatMap((host) => all(sel, host));
    const controls = {};
    for (const c of spec.controls) {
        if (c.kind === "choice") {
            const active = [...new Set(inControl(c.name, ".bk-btn.bk-active"))];
            controls[c.name] = active.length === 1 ? (c.labels[active[0].textContent.trim()] ?? "?" + active[0].textContent) : null;
        } else {
            // noUiSlider's own value (aria-valuenow is rounded to one decimal: 6.25 reads 6.3)
            const t = [...new Set(inControl(c.name, ".noUi-target"))];
            controls[c.name] = t.length === 1 && t[0].noUiSlider ? String(t[0].noUiSlider.get(true)) : null;
        }
    }
    const status = all(".stf-status")[0];
    const root = document.documentElement;
    return {
        controls, search: location.search,
        busy: status ? status.dataset.busy : null,
        run: status && status.dataset.run ? Number(status.dataset.run) : null,
        settings: status && status.dataset.settings ? JSON.parse(status.dataset.settings) : null,
        failed: status ? status.dataset.failed === "true" : false,
        painted: Number(root.dataset.canvasPainted || 0),
        rows: root.dataset.canvasRows || "",
        // the twin card shows a fleet pinned while its Unpin button shows
        unpinShown: all(".stf-unpin").flatMap((host) => all("button", host)).some((b) => b.checkVisibility()),
    };
}"""


@dataclasses.dataclass
class Failure(Exception):
    mission: str
    step: int
    actions: list
    why: str

    def __str__(self):
        lines = "\n".join(f"  {i + 1}. {a}" for i, a in enumerate(self.actions))
        return f"{self.mission}: after action {self.step + 1} of:\n{lines}\n{self.why}"


def _spec(mission):
    controls = []
    for name, c in mission.controls.items():
        labels = {}
        if c.kind == "choice":
            words = CHOICE_LABELS.get(name, {})
            labels = {words.get(v, format_value(v)): format_value(v) for v in c.choices}
        controls.append({"name": name, "kind": c.kind, "labels": labels})
    return {"controls": controls}


def _norm(mission, settings):
    """{control: value in the address's words} for the mission's controls that have a value."""
    out = {}
    for name, c in mission.controls.items():
        v = settings.get(name)
        if v is None:
            continue
        if c.kind == "int":
            v = int(round(float(v)))
        elif c.kind == "float":
            v = round(float(v), 9)
        out[name] = format_value(v) if not isinstance(v, str) else v
    return out


def address_settings(mission, search):
    params = parse_search(search)
    good, _notes = parse_settings(mission, params)
    start = mission.settings(mission.scenario)
    return {**start, **good}


def _typed(mission, shown):
    """Settings in the address's words -> values, through the lab's own URL parser."""
    good, notes = parse_settings(mission, shown)
    assert not notes, notes
    return good


class Page:
    """One mission's lab page, driven as a student would."""

    def __init__(self, page, url_of, mission):
        self.page, self.url_of, self.mission = page, url_of, mission
        self.spec = _spec(mission)
        self.start = mission.settings(mission.scenario)
        self._expected = {}  # run settings (address words) -> what lab run shows for them
        self.shown = None  # the views of the page when it last settled

    def open(self, query=""):
        self.page.goto(self.url_of(f"mission={self.mission.id}{query}"))
        self.settle(LOAD_S)

    def views(self):
        return self.page.evaluate(_JS_VIEWS, self.spec)

    def settle(self, timeout_s=SETTLE_S):
        """Poll (every POLL_MS, SETTLE_S at most) until the page agrees with itself (module
        docstring); raise AssertionError with what disagreed if it never does."""
        deadline = time.monotonic() + timeout_s
        while True:
            v = self.views()
            why = self._disagreement(v)
            if not why:
                self.shown = v
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"after {timeout_s} s: {why}")
            self.page.wait_for_timeout(POLL_MS)

    def _disagreement(self, v):
        m = self.mission
        controls = {k: val for k, val in v["controls"].items() if val is not None}
        shown = _norm(m, {k: (val if m.controls[k].kind != "choice" else None) for k, val in controls.items()})
        shown.update({k: val for k, val in controls.items() if m.controls[k].kind == "choice"})
        address = _norm(m, address_settings(m, v["search"]))
        run = v["settings"]
        if v["busy"] != "false" or run is None:
            return f"not idle: {v}"
        if not v["failed"] and v["painted"] < v["run"]:
            return f"run {v['run']} not painted yet ({v['painted']})"
        pinned = "pin" in parse_search(v["search"])
        if v["unpinShown"] != pinned:  # Back past a pin changes only the pin: the run agrees at once
            return f"the address {'pins' if pinned else 'pins nothing'} but Unpin is {'shown' if v['unpinShown'] else 'hidden'}"
        if not (shown == address == run):
            diff = {k: (shown.get(k), address.get(k), run.get(k)) for k in set(shown) | set(address) | set(run)
                    if not (shown.get(k) == address.get(k) == run.get(k))}
            return f"controls / address / run disagree (control: (controls, address, run)): {diff}"
        return ""

    def check_run(self):
        """What the page shows of its run is lab run on the run's settings."""
        v = self.shown
        run = v["settings"]
        key = json.dumps(run, sort_keys=True)
        if key not in self._expected:
            self._expected[key] = self._lab_run(_typed(self.mission, run))
        want = self._expected[key]
        if v["failed"] or want is None:
            assert v["failed"] and want is None, f"page failed={v['failed']}, lab run {'failed' if want is None else 'ran'} ({run})"
            return
        cards, rows = want["cards"], want["rows"]
        got = self._cards(list(cards))
        assert got == cards, f"metric cards {got} != lab run's {cards} for {run}"
        assert v["rows"] == rows, f"canvas rows {v['rows']!r} != lab run's {rows!r} for {run}"
        pin = parse_search(v["search"]).get("pin")
        if pin is not None:
            pinned, notes = parse_pin(self.mission, pin, self.start)
            assert not notes, notes
            twin = self.mission.apply({**_typed(self.mission, run), **pinned})
            want = f"Pinned {fleet_phrase(twin)}"
            # The pinned run comes after the run (its own callback): poll for it, SETTLE_S at most.
            sel = self.page.locator(".stf-twin-fleets").first
            deadline = time.monotonic() + SETTLE_S
            while True:
                text = sel.inner_text().replace("\n", " ") if sel.count() else ""
                if want in text:
                    break
                assert time.monotonic() < deadline, f"twin shows {text!r}, not {want!r} (pin={pin!r})"
                self.page.wait_for_timeout(POLL_MS)

    def _cards(self, names):
        """The metric cards' values, {name: text}, read in one call (None for a card not shown)."""
        return self.page.locator(".stf-metrics").first.evaluate("""(pane, names) => Object.fromEntries(names.map(
            (name) => { const v = pane.querySelector(`[data-metric="${name}"] .v`); return [name, v ? v.textContent.trim() : null]; }))""",
            names)

    def _lab_run(self, settings):
        try:
            scenario = self.mission.apply(settings)
            result = core.simulate(scenario)
            rows = core.request_metrics(result)
            metrics = core.summarize(result, rows)
        except LabError:
            return None
        page = metrics_html(metrics, scenario)
        cards = {}
        for name in CARDS:
            found = re.search(rf'data-metric="{name}"><div class="k">.*?</div><div class="v[^"]*">(.*?)</div><div class="t">',
                              page, re.S)
            if found:
                cards[name] = html_mod.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip()
        meta = run_layers(result)["meta"]
        return {"cards": cards, "rows": " | ".join(meta["labels"][i] for i in range(meta["rows"]))}

    # ------------------------------------------------------------ actions

    def do(self, action):
        self.settle(LOAD_S if self.act(action) else SETTLE_S)

    def act(self, action):
        """Do `action` without waiting for the page to settle; True if it loads a page."""
        kind, *args = action
        return getattr(self, f"_{kind}")(*args)

    def _live(self, name):
        """The control's element, if it is on the page and live (not greyed out)."""
        loc = self.page.locator(f".stf-control-{name}").first
        if loc.count() == 0 or not loc.is_visible():
            return None
        disabled = loc.locator(".noUi-target[disabled], [disabled]")
        return None if disabled.count() else loc

    def _key(self, name, steps):
        loc = self._live(name)
        if loc is None:
            return
        loc.locator(".noUi-handle").focus()
        for _ in range(abs(steps)):
            self.page.keyboard.press("ArrowRight" if steps > 0 else "ArrowLeft")

    def _drag(self, name, share):
        loc = self._live(name)
        if loc is None:
            return
        base = loc.locator(".noUi-base").bounding_box()
        handle = loc.locator(".noUi-handle").bounding_box()
        if not base or not handle:
            return
        y = handle["y"] + handle["height"] / 2
        self.page.mouse.move(handle["x"] + handle["width"] / 2, y)
        self.page.mouse.down()
        self.page.mouse.move(base["x"] + share * base["width"], y, steps=6)
        self.page.mouse.up()

    def _toggle(self, name, value):
        loc = self._live(name)
        if loc is None:
            return
        label = CHOICE_LABELS.get(name, {}).get(value, format_value(value))
        button = loc.get_by_role("button", name=label, exact=True)
        if button.count():
            button.click()

    def _reset(self):
        button = self.page.locator(".stf-reset button").first
        if button.get_attribute("aria-disabled") == "true":  # at the start: nothing to undo
            return
        button.click()
        # The click changes nothing in the page until the lab answers: wait for its answer, the
        # start's settings in the address, so the next settle does not see the page before it.
        start = json.dumps(_norm(self.mission, self.start))
        self.page.wait_for_function(f"""() => {{
            const want = {start};
            const got = Object.fromEntries(new URLSearchParams(location.search));
            return Object.keys(got).every((k) => !(k in want) || got[k] === want[k]);
        }}""", timeout=SETTLE_S * 1000)

    def _navigate(self, go):
        self.page.evaluate("window.__stfSame = true")
        go()
        if self.page.evaluate("window.__stfSame !== true"):  # a new document (a reload, or Back left the page)
            if f"mission={self.mission.id}" not in self.page.url:  # Back left the lab: come back
                self.page.go_forward()
            return True
        return False

    def _back(self):
        return self._navigate(self.page.go_back)

    def _forward(self):
        return self._navigate(self.page.go_forward)

    def _reload(self):
        self.page.reload()
        return True

    def _link(self, query):
        self.page.goto(self.url_of(f"mission={self.mission.id}{query}"))
        return True

    def _pin(self):
        button = self.page.locator(".stf-pin-current button").first
        if not (button.count() and button.is_visible()):
            return
        button.click()
        # Wait for the address to pin the fleet it shows: a pin already in the address (a second
        # pin) says nothing about whether this click has been answered yet.
        deadline = time.monotonic() + SETTLE_S
        while True:
            search = self.page.evaluate("location.search")
            raw = parse_search(search).get("pin")
            if raw is not None:
                pinned, _notes = parse_pin(self.mission, raw, self.start)
                if pinned == fleet_settings(address_settings(self.mission, search)):
                    return
            assert time.monotonic() < deadline, f"pin: the address never pinned its own fleet ({search})"
            self.page.wait_for_timeout(POLL_MS)

    def _unpin(self):
        button = self.page.locator(".stf-unpin button").first
        if button.count() and button.is_visible():
            button.click()
            self.page.wait_for_function("!location.search.includes('pin=')", timeout=SETTLE_S * 1000)


def _choose(rng, mission, start, state_settings):
    """One random action (a tuple of words) for a page whose settings are `state_settings`."""
    names = list(mission.controls)
    while True:
        kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        sliders = [n for n in names if mission.controls[n].kind != "choice"]
        choices = [n for n in names if mission.controls[n].kind == "choice" and len(mission.controls[n].choices) > 1]
        if kind == "key" and sliders:
            return ("key", rng.choice(sliders), rng.choice((-2, -1, -1, 1, 1, 2, 3)))
        if kind == "drag" and sliders:
            return ("drag", rng.choice(sliders), round(rng.random(), 3))
        if kind == "toggle" and choices:
            name = rng.choice(choices)
            return ("toggle", name, rng.choice(mission.controls[name].choices))
        if kind == "link":
            picks = rng.sample(names, k=min(len(names), rng.randint(1, 2)))
            query = ""
            for n in picks:
                grid = mission.controls[n].grid() or []
                if grid:
                    query += f"&{n}={format_value(rng.choice(list(grid)))}"
            return ("link", query)
        if kind in ("reset", "back", "forward", "reload", "pin", "unpin"):
            return (kind,)


def walk(page, url_of, mission, seed, actions):
    """`actions` random actions on `mission`'s page from `seed`; returns the list taken.
    Raises Failure (not shrunk) at the first action after which the page disagrees."""
    rng = random.Random(f"{seed}:{mission.id}")
    lab = Page(page, url_of, mission)
    taken = []
    try:
        lab.open()
        lab.check_run()
    except (AssertionError, PlaywrightError) as exc:
        raise Failure(mission.id, -1, [], str(exc)) from None
    for i in range(actions):
        action = _choose(rng, mission, lab.start, None)
        taken.append(action)
        try:
            lab.do(action)
            lab.check_run()
        except (AssertionError, PlaywrightError) as exc:
            raise Failure(mission.id, i, list(taken), str(exc)) from None
    return taken


def replay(new_page, url_of, mission, actions):
    """Run `actions` on a fresh page; the Failure they end in, or None."""
    page = new_page()
    try:
        lab = Page(page, url_of, mission)
        lab.open()
        for i, action in enumerate(actions):
            try:
                lab.do(action)
                lab.check_run()
            except (AssertionError, PlaywrightError) as exc:
                return Failure(mission.id, i, list(actions[: i + 1]), str(exc))
        return None
    finally:
        page.close()


def shrink(new_page, url_of, mission, failure, budget_s=SHRINK_BUDGET_S):
    """The shortest sequence found (ddmin-style chunk removal, within `budget_s`) that still fails."""
    best = failure
    deadline = time.monotonic() + budget_s
    chunk = max(1, len(best.actions) // 2)
    while chunk >= 1 and time.monotonic() < deadline:
        removed = False
        start = 0
        while start < len(best.actions) - 1 and time.monotonic() < deadline:  # the last action stays: it failed
            trial = best.actions[:start] + best.actions[start + chunk:]
            if not trial:
                break
            again = replay(new_page, url_of, mission, trial)
            if again is not None:
                best, removed = again, True
            else:
                start += chunk
        if not removed:
            chunk //= 2
    return best
