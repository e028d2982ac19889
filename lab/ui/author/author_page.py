"""The author page: write a mission in the browser, see every mistake as you type, run its
start, ask the checker, play it as a student would, download it or share it by link.

    author_page()  -> the page: /author under `lab serve`, author.html in the static site
                      (?draft=CODE opens that mission: lab.core.mission_link)

The draft lives in the page's editors (draft.py's sections). A pause in typing
(CHECK_DELAY_MS) checks the whole draft: each section shows its own mistakes under its
editor, the summary counts them, and a draft without mistakes runs its start (metrics,
stars at the start, why requests missed) and gets a mission link. The address carries that
link's code too (replaced, not pushed), so a reload or a bookmark keeps the draft; a section
whose JSON does not parse keeps its last good value there. "Check it" runs the mission
checker (lab check's search: each star's cheapest fix, margins, seeds, stars earned in
passing) and reads its verdict out in a live region. Under `lab serve` the start's run and
the check go to the worker processes (runs/offload.py); in the browser they run in Pyodide's
worker, beside the page.

Everything written here is untrusted on the way out too: the brief's preview goes through
mission_text.py, messages are escaped, and the lab reads a shared draft as it reads a file.
"""

import functools
import html
import json
import urllib.parse

import panel as pn

from lab.core.errors import LabError
from lab.core.mission_link import decode_mission, encode_mission
from lab.core.missions import ID_PATTERN

from ..browser.a11y import A11yBridge, landmark_spec
from ..browser.page_bridge import PageBridge, guard_location
from ..browser.panel_shims import Html
from ..browser.timers import later
from ..pages import brand_html, get_catalog, hub_href, lab_href, page_extension, search
from ..runs import offload
from ..runs.run_work import HEAVY_REQUESTS, expected_requests
from ..url_state import parse_search
from ..views.blame_view import BLAME_CSS, blame_bar_html
from ..views.confirm_button import confirm_button
from ..views.metrics_view import metrics_html
from ..words.figures import star_test_text
from ..words.mission_text import brief_html, plain
from ..words.theme import CSS, HUB_CSS, PALETTE
from .draft import (ABOUT_FIELDS, SECTIONS, check_draft, check_work, download_text, sections_from_mission, start_work,
                    template, trace_files)

__all__ = ["AuthorApp", "author_page", "CHECK_DELAY_MS", "AUTHOR_CSS"]

CHECK_DELAY_MS = 350  # a pause in typing this long checks the draft (each key would re-run the start)
TEMPLATE_CHOICE = "template"
TRACE_CHOICE = "trace:"  # + a trace file's path in the missions folder (draft.trace_files)

AUTHOR_CSS = """
.stf-author-errors { margin: 2px 0 0 0; padding: 0 0 0 18px; color: #8a1c0a; font-size: 13px; }
.stf-author-errors li { margin: 2px 0; overflow-wrap: anywhere; }
.stf-author-ok { color: #1f6b3a; font-size: 13px; margin: 2px 0 0 0; }
.stf-author-hint { color: var(--muted); font-size: 12px; margin: 0; }
.stf-author-summary { font-size: 14px; margin: 0; padding: 8px 12px; border-radius: 6px; border-left: 4px solid var(--good);
                      background: #eef7f0; }
.stf-author-summary.bad { border-left-color: var(--slow); background: #fdeee6; }
.stf-author-verdict { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; white-space: pre-wrap;
                      overflow-wrap: anywhere; background: #f6f8fb; border: 1px solid #dde2ea; border-radius: 6px;
                      padding: 8px 10px; margin: 0; }
.stf-author-verdict-head { font-weight: 650; margin: 0 0 4px 0; }
.stf-author-stars { list-style: none; padding: 0; margin: 4px 0; font-size: 13px; }
.stf-author-stars li { margin: 2px 0; }
.stf-author-links { font-size: 13px; margin: 0; overflow-wrap: anywhere; }
.stf-brief { font-size: 14px; }
"""


def _errors_html(messages):
    if not messages:
        return ""
    items = "".join(f"<li>{html.escape(m)}</li>" for m in messages)
    return f'<ul class="stf-author-errors">{items}</ul>'


class AuthorApp:
    """One author's page: the editors, the checks as they type, the start's run, the checker and the links."""

    def __init__(self, catalog, search=""):
        self.catalog = catalog
        self.base_dir = catalog.directory
        params = parse_search(search)
        self.note = ""
        data = template()
        if "draft" in params:
            try:
                data = decode_mission(params["draft"])
            except LabError as exc:
                self.note = f"The draft in this address could not be opened ({exc.detail}); you have the blank template."
        self._texts = sections_from_mission(data)
        self._last_good = data  # the last mission object whose sections all parsed (stands in for a slip)
        self.verdict = None
        self._check_timer = None
        self._start_for = None  # the mission object whose start run is under way or shown
        self._checking = False
        self._checked_key = None  # the mission object the verdict shown is for
        self.url = PageBridge()
        self.url.title("Write a mission · Split the Fleet")
        self.a11y = A11yBridge(widgets={"stf-author": landmark_spec("main", "Write a mission")})
        self._build_widgets()
        self.summary.object = '<p class="stf-author-summary" role="status">Checking…</p>'
        self.view = self._layout()
        pn.state.onload(self._check_now)  # (a run handed back before the page is served would be lost)

    # ------------------------------------------------------------ widgets

    def _build_widgets(self):
        options = {"Blank template": TEMPLATE_CHOICE}
        for m in self.catalog.missions:
            options[f"Mission {m.order}: {m.title}"] = m.id
        self.start_from = pn.widgets.Select(label="Start from", options=options, value=TEMPLATE_CHOICE,
                                            sizing_mode="stretch_width", max_width=320,
                                            css_classes=["stf-author-start-from"])
        self.load_button = confirm_button("Load it", "Click again to replace", self._load_chosen, armed_type="warning",
                                          button_type="primary", button_style="outline", width=170,
                                          css_classes=["stf-author-load"],
                                          description="Replace the draft with the chosen mission (asks to confirm)")
        workloads = {"—": ""} | {f"Mission {m.order}: {m.title}": m.id for m in self.catalog.missions}
        workloads |= {f"Trace file {name}": TRACE_CHOICE + name for name in trace_files(self.base_dir)}
        self.workload_from = pn.widgets.Select(label="Use the workload of", options=workloads, value="",
                                               sizing_mode="stretch_width", max_width=320,
                                               css_classes=["stf-author-workload-from"])
        self.workload_from.param.watch(self._on_workload_from, "value")
        self.about = {}
        labels = {"id": "Id (a slug: lowercase, digits, hyphens)", "title": "Title", "order": "Order (its number on the hub)",
                  "summary": "Summary (one line)"}
        for name in ABOUT_FIELDS:
            w = pn.widgets.TextInput(label=labels[name], value=self._texts["about"][name], sizing_mode="stretch_width",
                                     css_classes=[f"stf-author-{name}"])
            w.param.watch(functools.partial(self._on_edit, "about", name), ["value_input", "value"])
            self.about[name] = w
        self.editors, self.error_panes = {}, {}
        for section in SECTIONS:
            self.error_panes[section.key] = Html("", stylesheets=[CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(0, 4),
                                                 css_classes=[f"stf-author-errors-{section.key}"])
            if section.kind == "about":
                continue
            rows = {"text": 7, "json": 9}[section.kind]
            w = pn.widgets.TextAreaInput(label=section.title, value=self._texts[section.key], rows=rows, max_length=60_000,
                                         sizing_mode="stretch_width", css_classes=[f"stf-author-{section.key}"],
                                         stylesheets=[":host textarea { font-family: ui-monospace, SFMono-Regular, Menlo, "
                                                      "monospace; font-size: 13px; }"] if section.kind == "json" else [])
            w.param.watch(functools.partial(self._on_edit, section.key, None), ["value_input", "value"])
            self.editors[section.key] = w
        self.brief_preview = Html("", stylesheets=[CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(0, 4),
                                  css_classes=["stf-author-brief-preview"])
        self.general_errors = Html("", stylesheets=[CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(0, 4))
        self.summary = Html("", stylesheets=[CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(4, 4),
                            css_classes=["stf-author-status"])
        self.start_pane = Html("", stylesheets=[CSS, HUB_CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(0, 4),
                               css_classes=["stf-author-start"])
        self.blame_pane = Html("", stylesheets=[CSS, BLAME_CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(0, 4),
                               css_classes=["stf-author-blame"])
        self.check_button = pn.widgets.Button(label="Check it", button_type="primary", width=150,
                                              css_classes=["stf-author-check"],
                                              description="Run the mission checker: each star's cheapest fix, margins, seeds")
        self.check_button.on_click(self._on_check)
        self.verdict_pane = Html("", stylesheets=[CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(4, 4),
                                 css_classes=["stf-author-verdict-pane"])
        self.download = pn.widgets.FileDownload(callback=self._download, filename="my-mission.json", label="Download JSON",
                                                button_type="light", width=170, embed=False,
                                                css_classes=["stf-author-download"])
        self.links = Html("", stylesheets=[CSS, AUTHOR_CSS], sizing_mode="stretch_width", margin=(4, 4),
                          css_classes=["stf-author-links-pane"])
        self.share = pn.widgets.TextInput(label="Mission link (copy it into a course page)", value="", disabled=False,
                                          sizing_mode="stretch_width", css_classes=["stf-author-share"])
        self.notes = Html(f'<p class="stf-notes">{html.escape(self.note)}</p>' if self.note else "",
                          stylesheets=[CSS], sizing_mode="stretch_width", margin=(4, 16), css_classes=["stf-notes-pane"])

    # ------------------------------------------------------------ editing

    def _on_edit(self, key, field, *events):
        """A keystroke in an editor: keep its text, and check the draft after a pause."""
        text = events[-1].new if isinstance(events[-1].new, str) else ""
        if field is None:
            if self._texts.get(key) == text:
                return
            self._texts[key] = text
        else:
            if self._texts["about"].get(field) == text:
                return
            self._texts["about"] = {**self._texts["about"], field: text}
        if self._check_timer is not None:
            self._check_timer.stop()
        self.summary.object = '<p class="stf-author-summary">Checking…</p>'
        self._check_timer = later(self._check_now, CHECK_DELAY_MS)

    def _check_now(self):
        self._check_timer = None
        verdict = check_draft(self._texts, self.base_dir, fallback=self._last_good)
        if not verdict.slips:
            self._last_good = verdict.data
        self.verdict = verdict
        self._show_verdict()

    def _show_verdict(self):
        v = self.verdict
        for section in SECTIONS:
            self.error_panes[section.key].object = _errors_html(v.errors.get(section.key, []))
        self.general_errors.object = _errors_html(v.errors.get("", []))
        brief = self._texts["brief"]
        self.brief_preview.object = f'<div class="stf-brief">{brief_html(brief)}</div>' if brief.strip() else ""
        mid = v.data.get("id")
        self.download.filename = f"{mid}.json" if isinstance(mid, str) and ID_PATTERN.fullmatch(mid) else "my-mission.json"
        if self._checked_key is not None and self._checked_key != _key(v.data):
            self._checked_key = None  # the verdict shown is an older draft's
            self.verdict_pane.object = ('<p class="stf-author-summary bad" role="status">The draft changed since the last '
                                        'check: check it again.</p>')
        code = self._code(v.data)
        if code and not v.slips:  # (a slip's stand-in is not what the author wrote)
            self.url.replace("?" + urllib.parse.urlencode({"draft": code}))
        if v.count:
            where = sorted({s.title for s in SECTIONS if v.errors.get(s.key)} | ({"the mission"} if v.errors.get("") else set()))
            text = (f"{v.count} mistake{'' if v.count == 1 else 's'}, in {', '.join(where)}: each is shown under its field. "
                    "The start runs once there are none.")
            # The panes that go with the verdict first, its summary last: the page gets them in
            # this order, so a summary on screen never sits beside the last draft's play link.
            self.start_pane.object = ""
            self.blame_pane.object = ""
            self._set_links(None)
            self.summary.object = f'<p class="stf-author-summary bad" role="status">{html.escape(text)}</p>'
            self.a11y.say(text)
            return
        self._set_links(code)
        self.summary.object = '<p class="stf-author-summary" role="status">No mistakes. Running the start…</p>'
        self._run_start(v.data)

    def _code(self, data):
        try:
            return encode_mission(data)
        except LabError:
            return None

    def _set_links(self, code):
        if code is None:
            self.share.value = ""
            self.links.object = ('<p class="stf-author-links">Play it and the mission link wait for a draft without '
                                 'mistakes.</p>') if self.verdict and self.verdict.count else (
                '<p class="stf-author-links">This mission is too long for a link: download the JSON instead.</p>')
            return
        href = lab_href(None, code)
        absolute = _absolute(href)
        self.share.value = absolute
        self.links.object = (f'<p class="stf-author-links"><a class="stf-author-play" href="{plain(href)}" target="_blank" '
                             f'rel="noopener">▶ Play it</a> (opens the lab in a new tab, as students will see it) · '
                             f'link: {len(absolute):,} characters</p>')

    # ------------------------------------------------------------ the start's run

    def _run_start(self, data):
        key = _key(data)
        self._start_for = key

        def then(outcome):
            if self._start_for != key:
                return  # a newer draft's run follows
            try:
                out = outcome.get()
            except LabError as exc:
                self._show_start_error(str(exc))
                return
            except Exception as exc:  # noqa: BLE001 (a bug: say it, never leave "Running…")
                self._show_start_error(f"{type(exc).__name__}: {exc}")
                return
            self._show_start(out)

        # A big start goes to lab serve's low-priority pool, as the lab's own big runs do.
        heavy = (expected_requests(self.verdict.mission.scenario, None) or 0) > HEAVY_REQUESTS
        offload.run(functools.partial(start_work, data, self.base_dir), then, heavy=heavy)

    def _show_start_error(self, message):
        text = f"The start did not run: {message}"
        self.summary.object = f'<p class="stf-author-summary bad" role="status">{html.escape(text)}</p>'
        self.a11y.say(text)

    def _show_start(self, out):
        mission = self.verdict.mission
        metrics, stars = out["metrics"], out["stars"]
        items = []
        for star, earned in zip(mission.stars, stars):
            tests = "; ".join(star_test_text(p, metrics.get(p.metric)) for p in star.when)
            items.append(f"<li>{'★' if earned else '☆'} {plain(star.label)} <small>({html.escape(tests)})</small></li>")
        got = sum(1 for s in stars if s)
        warn = (" A star the start earns needs no change from the student: the checker will say so."
                if got else "")
        self.start_pane.object = (
            f'<div class="stf-section" style="margin:6px 0 2px">The start: {out["requests"]:,} requests</div>'
            + metrics_html(metrics, out["scenario"])
            + f'<div class="stf-section" style="margin:8px 0 2px">Stars at the start: {got} of {len(stars)}</div>'
            + f'<ul class="stf-author-stars">{"".join(items)}</ul>')
        self.blame_pane.object = blame_bar_html(out["blame"], total=out["requests"], key="author")
        attain = metrics.get("slo_attainment")
        text = (f"No mistakes. The start: {out['requests']:,} requests, "
                f"{'—' if attain is None else f'{attain:.1%}'} on time, {got} of {len(stars)} stars earned at the start.{warn}")
        self.summary.object = f'<p class="stf-author-summary" role="status">{html.escape(text)}</p>'
        self.a11y.say(text)

    # ------------------------------------------------------------ the checker

    def _on_check(self, _event=None):
        if self._checking:
            return
        if self._check_timer is not None:  # typing not yet checked: check it first
            self._check_timer.stop()
            self._check_now()
        v = self.verdict
        if v is None or not v.ok:
            text = "Fix the mistakes first: the checker needs a mission that loads."
            self.verdict_pane.object = f'<p class="stf-author-summary bad" role="status">{html.escape(text)}</p>'
            self.a11y.say(text)
            return
        self._checking = True
        self.check_button.label = "Checking…"
        self.verdict_pane.object = ('<p class="stf-author-summary" role="status">Checking: the start, then each star\'s '
                                    'cheapest fix over the seeds. This takes a few seconds.</p>')
        data = v.data

        def then(outcome):
            self._checking = False
            self._checked_key = _key(data)
            self.check_button.label = "Check it"
            try:
                out = outcome.get()
            except Exception as exc:  # noqa: BLE001 (LabError or a bug: the verdict says which)
                text = f"The checker stopped: {exc}"
                self.verdict_pane.object = f'<p class="stf-author-summary bad" role="status">{html.escape(text)}</p>'
                self.a11y.say(text)
                return
            self._show_check(out)

        # One turn later, so "Checking…" reaches the page before the check holds Python.
        later(lambda: offload.run(functools.partial(check_work, data, self.base_dir), then), 30)

    def _show_check(self, out):
        problems = out["problems"]
        head = ("The checker finds nothing wrong: ok." if out["ok"] else
                f"The checker finds {len(problems)} problem{'' if len(problems) == 1 else 's'}: NOT OK.")
        head += f" {out['runs']:,} runs in {out['elapsed_s']:.1f} s."
        body = html.escape("\n".join(out["lines"]))
        self.verdict_pane.object = (f'<p class="stf-author-verdict-head">{html.escape(head)}</p>'
                                    f'<pre class="stf-author-verdict">{body}</pre>')
        self.a11y.say(head + (" " + " ".join(problems[:3]) if problems else ""))

    # ------------------------------------------------------------ loading, the workload, download

    def _load_chosen(self):
        data = self._mission_data(self.start_from.value)
        self._fill(sections_from_mission(data))
        self._last_good = data
        self._check_now()

    def _mission_data(self, mission_id):
        if mission_id == TEMPLATE_CHOICE:
            return template()
        mission = self.catalog.get(mission_id)
        try:
            with open(mission.path, encoding="utf-8") as fh:
                return json.load(fh)
        except (OSError, ValueError, AttributeError, TypeError):
            return mission.to_dict() if mission is not None else template()

    def _fill(self, texts):
        self._texts = texts
        for name, w in self.about.items():
            w.value = texts["about"][name]
        for key, w in self.editors.items():
            w.value = texts[key]

    def _on_workload_from(self, event):
        if not event.new:
            return
        if event.new.startswith(TRACE_CHOICE):
            workload = {"trace": {"path": event.new[len(TRACE_CHOICE):]}}
        else:
            workload = (self._mission_data(event.new).get("scenario") or {}).get("workload", {})
        self._texts["workload"] = json.dumps(workload, indent=2, ensure_ascii=False)
        self.editors["workload"].value = self._texts["workload"]
        self.workload_from.value = ""
        self._check_now()

    def _download(self):
        import io

        data = self.verdict.data if self.verdict is not None else template()
        return io.StringIO(download_text(data))

    # ------------------------------------------------------------ layout

    def _layout(self):
        section_head = lambda text: Html(f'<div class="stf-section">{html.escape(text)}</div>', stylesheets=[CSS],
                                         margin=(12, 4, 0, 4), sizing_mode="stretch_width")
        hint = lambda text: Html(f'<p class="stf-author-hint">{html.escape(text)}</p>', stylesheets=[CSS, AUTHOR_CSS],
                                 margin=(0, 4), sizing_mode="stretch_width")
        card_style = {"background": "#ffffff", "border": "1px solid #dde2ea", "border-radius": "10px", "padding": "4px 8px"}
        parts = [pn.FlexBox(self.start_from, self.load_button, flex_wrap="wrap", align_items="flex-end",
                            sizing_mode="stretch_width", margin=(4, 0), css_classes=["stf-author-row"])]
        for section in SECTIONS:
            parts.append(section_head(section.title))
            parts.append(hint(section.hint))
            if section.kind == "about":
                parts.extend(self.about.values())
            else:
                if section.key == "workload":
                    parts.append(self.workload_from)
                parts.append(self.editors[section.key])
            parts.append(self.error_panes[section.key])
            if section.key == "brief":
                parts.append(self.brief_preview)
        editor = pn.Column(*parts, sizing_mode="stretch_width", margin=0, css_classes=["stf-author-editor"],
                           styles={**card_style, "flex": "1 1 520px", "min-width": "min(300px, 100%)"})
        results = pn.Column(
            section_head("Your mission"), self.summary, self.general_errors, self.links, self.share,
            pn.FlexBox(self.check_button, self.download, flex_wrap="wrap", sizing_mode="stretch_width", margin=(4, 0)),
            self.verdict_pane, self.start_pane, self.blame_pane,
            sizing_mode="stretch_width", margin=0, css_classes=["stf-author-results"],
            # Beside the editor on a wide screen, the verdict stays in view while the author scrolls.
            styles={**card_style, "flex": "1 1 420px", "min-width": "min(300px, 100%)", "position": "sticky", "top": "8px"},
        )
        header = pn.Row(
            Html(f'<div class="stf-header">{brand_html()}<a href="{hub_href()}">← All missions</a></div>',
                 stylesheets=[CSS], sizing_mode="stretch_width", margin=(8, 16, 0, 16)),
            sizing_mode="stretch_width", margin=0, styles={"background": "#ffffff", "border-bottom": "1px solid #dde2ea"},
        )
        title = Html('<div class="stf-kicker">For instructors</div><h1 class="stf-title">Write a mission</h1>'
                     '<p class="stf-author-hint" style="font-size:13px">Edit any part; mistakes show under their field as '
                     'you type, and a mission without mistakes runs its start. Nothing leaves this browser until you '
                     'download it or share its link. The guide: missions/README.md.</p>',
                     stylesheets=[CSS, AUTHOR_CSS], margin=(10, 16, 0, 16), sizing_mode="stretch_width")
        body = pn.FlexBox(editor, results, gap="14px", flex_wrap="wrap", align_items="flex-start", sizing_mode="stretch_width",
                          margin=(6, 8, 16, 8))
        return pn.Column(header, title, self.notes, body, self.url, self.a11y, sizing_mode="stretch_width", margin=0,
                         css_classes=["stf-author"], styles={"background": PALETTE["page"], "min-height": "100vh"})


def _key(data):
    return json.dumps(data, sort_keys=True)


def _absolute(href):
    """`href` against the page's own address (what a course page needs), else as it is."""
    loc = pn.state.location
    base = getattr(loc, "href", "") if loc is not None else ""
    if isinstance(base, str) and base.startswith(("http://", "https://")):
        return urllib.parse.urljoin(base, href)
    return href


def author_page(missions_dir=None):
    """The author page for the mission folder (`lab serve --missions DIR`, or the shipped missions)."""
    guard_location()
    page_extension()
    return AuthorApp(get_catalog(missions_dir), search()).view

