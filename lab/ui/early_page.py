"""The first view answering its controls while the live page is still loading.

In the static site, the worker has the lab's modules, numpy and param about two seconds into a
load, and Panel a second or two later (benchmarks/README.md, "Where a load's seconds go").
In between, the pre-rendered first view (prerender.py) is the page: once `start` has run,
loader.js enables its controls, and each change comes here (`answer`): the same state the
live page keeps (LabState: the control checked, the run simulated and judged), drawn as the
first view is. The worker then builds the live page at the address of the last answer, and
`claim` hands it what the address cannot say: that the student chose those settings on this
page, so the stars count.

One early page per worker (this module's `_page`); under `lab serve` there is none, and
`claim` does nothing.

    start(query, missions_dir=None)   the view of lab.html?QUERY, ready for changes
    answer(name, raw) -> dict         {"query", "html"} after the change ("error" too if its run
                                      failed), or {"refusal", "query", "html"} when it was not made;
                                      name RESET: "↺ Back to the start"
    claim(state)                      the live page's state takes the student's touch
"""

from .catalog import get_catalog
from .prerender import first_window, view_html
from .state import LabState
from .url_state import is_embed, parse_search, parse_value
from .words.refusal import refusal_html, short_label

__all__ = ["EarlyPage", "start", "answer", "claim", "RESET"]

RESET = "reset"  # the name loader.js sends for "↺ Back to the start" (no control has it: a test checks)
_page = None


class EarlyPage:
    """lab.html?QUERY's state, changed control by control (its first run made by the first change)."""

    def __init__(self, query, missions_dir=None):
        self.catalog = get_catalog(missions_dir)
        # Not run yet: the page shows this run already (pre-rendered), and the first change
        # needs its own; so the controls work a run sooner.
        self.state = LabState.from_query(self.catalog, "?" + query)
        self.embed = is_embed(parse_search("?" + query))
        self.query = query

    def answer(self, name, raw):
        """Move control `name` to `raw` (its value as the address writes it), or every control
        back to the mission's start (`name` RESET, as "↺ Back to the start" does on the live
        page), and run: the new address's query and view, or, when the change is refused, why
        (plain text) with the view as it was (so a moved slider goes back)."""
        state = self.state
        if name == RESET:
            if state.is_start:  # nothing to undo (the button is greyed then, as on the live page)
                return self._refused("Nothing to undo: the controls are at the mission's start.")
            changed = state.reset()
        else:
            if name not in state.mission.controls or not state.applies(name):
                return self._refused(f"Not changed: {str(name)[:40]} is not a control this view can change.")
            value, why = parse_value(state.mission.controls[name], str(raw))
            if why:
                return self._refused(f"Not changed: {short_label(state.mission, name)}: {why}.")
            changed = state.change(name, value)
        if not changed:  # (the spec refused it: its words and detail, as the live page shows them)
            return self._refused(state.refusal or state.error, refusal_html(state.refusal, state.error))
        self._run()  # (a run that fails says why where its metrics would be, as on the live page)
        self.query = state.search(self.embed)[1:]
        out = {"query": self.query, "html": view_html(state, self.catalog, self.query, self.embed, early=True)}
        return dict(out, error=state.run_error) if state.run_error else out

    def _run(self):
        """Simulate and judge the current settings, the window where the live page opens it."""
        state = self.state
        if not state.simulate():
            return False
        state.window_start = first_window(state.result)
        state.finish()
        return True

    def _refused(self, why, note=None):
        """The answer to a change not made: `why` for the bar, and the view as it was with the
        note under its controls (`note`, or `why` as one)."""
        if self.state.result is None and not self.state.run_error:
            self._run()  # (the start's run, not made yet: the view is drawn from it)
        note = refusal_html(why, "") if note is None else note
        return {"refusal": why, "query": self.query,
                "html": view_html(self.state, self.catalog, self.query, self.embed, early=self.state.touched, note=note)}


def start(query, missions_dir=None):
    """The early page of lab.html?QUERY (the worker calls it once, before Panel is imported)."""
    global _page
    _page = EarlyPage(query, missions_dir)
    return _page


def answer(name, raw):
    return _page.answer(name, raw)


def claim(state):
    """The live page's state, built at the early page's last address: when the student changed
    a control on the early page and the live page opened those settings, they count as the
    student's own (stars count; not a link's fleet). Once: the early page is done."""
    global _page
    page, _page = _page, None
    if page is None or not page.state.touched or state.mission.id != page.state.mission.id:
        return
    if state.settings == page.state.settings:
        state.touched = True
        state.from_link = False
