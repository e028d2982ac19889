"""The mission hub: every mission in order with the stars earned in this browser, the
sandbox, progress codes, and resetting progress (with backups kept until cleared)."""

import html

import panel as pn

from .browser.a11y import A11yBridge, landmark_spec
from .browser.page_bridge import guard_location
from .browser.panel_shims import Html
from .catalog import SANDBOX_ID
from .pages import author_href, brand_html, get_catalog, hub_href, lab_href, page_extension, star_text
from .stars.stars_bridge import STORAGE_NOTES, ProgressTools, StarsBridge
from .views.confirm_button import confirm_button
from .words.mission_text import plain
from .words.theme import CSS, HUB_CSS, PALETTE

__all__ = ["HubApp", "hub_page", "TAGLINE"]

TAGLINE = ("When should an LLM serving fleet split into a prefill pool and a decode pool? "
           "Reshape a small simulated fleet and watch every GPU's timeline and the latency targets react.")




class HubApp:
    """Every mission in order with the stars earned in this browser; the sandbox; reset."""

    def __init__(self, catalog):
        self.catalog = catalog
        self.bridge = StarsBridge()
        self.list = Html("", stylesheets=[HUB_CSS], sizing_mode="stretch_width", margin=0,
                                 css_classes=["stf-hub-list"])
        self.total = Html("", stylesheets=[HUB_CSS], margin=(10, 0, 12, 0), css_classes=["stf-hub-total"])
        self.note = Html("", stylesheets=[HUB_CSS], sizing_mode="stretch_width", margin=(6, 0), visible=False,
                                 css_classes=["stf-hub-note"])
        self.reset_button = confirm_button(
            "Reset progress", "Click again to forget all stars", self.bridge.reset, armed_type="danger",
            button_type="light", margin=(14, 0, 4, 0), width=190, css_classes=["stf-reset-progress"],
            description="Forget the stars earned in this browser (asks to confirm)",
        )
        # Every backup of old stars is kept until the student clears them (stars_store.js).
        self.backups = Html("", stylesheets=[HUB_CSS], margin=(4, 0), visible=False, css_classes=["stf-hub-backups"])
        self.clear_button = confirm_button("Clear backups", "Click again to delete the backups", self.bridge.clear_backups,
                                           button_type="light", margin=(0, 0, 4, 0), width=190, visible=False,
                                           css_classes=["stf-clear-backups"],
                                           description="Delete the backups of earlier stars (asks to confirm)")
        self.bridge.param.watch(self._render, ["stars", "loaded", "status", "backups"])
        self.a11y = A11yBridge(widgets={"stf-hub": landmark_spec("main", "Split the Fleet missions")})
        self.progress = ProgressTools(self.bridge, hub_href())  # copy / paste a progress code; the full-lab link in an iframe
        self._render()
        self.view = self._layout()

    def _render(self, *_):
        keys = self.bridge.backups
        self.backups.object = (f'<span class="stf-total" data-backups="{len(keys)}">{len(keys)} backup'
                               f'{"" if len(keys) == 1 else "s"} of earlier stars kept in this browser: '
                               f'{plain(", ".join(keys))}.</span>') if keys else ""
        self.backups.visible = self.clear_button.visible = bool(keys)
        stars = self.bridge.stars
        loaded = self.bridge.loaded
        items = []
        earned_all = 0
        total_all = 0
        for m in self.catalog.missions:
            total = len(m.stars)
            saved = stars.get(m.id, [])
            got, glyphs = star_text(saved, total)
            earned_all += got
            total_all += total
            items.append(
                f'<li><a class="stf-mission" href="{plain(lab_href(m.id))}" data-mission="{plain(m.id)}" data-stars="{got}">'
                f'<span class="num">Mission {m.order}</span><span class="name">{plain(m.title)}</span>'
                f'<span class="one">{plain(m.summary)}</span>'
                f'<span class="stars" aria-label="{got} of {total} stars earned">{glyphs}'
                f"<small>{got}/{total}</small></span></a></li>"
            )
        items.append(
            f'<li><a class="stf-mission sandbox" href="{lab_href(SANDBOX_ID)}" data-mission="{SANDBOX_ID}">'
            '<span class="num">Free play</span><span class="name">Sandbox</span>'
            '<span class="one">Every control open, no stars: try anything.</span></a></li>'
        )
        self.list.object = f'<ul class="stf-missions" data-loaded="{str(loaded).lower()}">{"".join(items)}</ul>'
        self.total.object = (f'<span class="stf-total" data-earned="{earned_all}">★ {earned_all} of {total_all} stars earned '
                             f'in this browser</span>' if loaded else '<span class="stf-total">Reading your stars…</span>')
        notes = []
        notes.extend(html.escape(note) for note in self.catalog.broken_notes)
        if self.bridge.status in STORAGE_NOTES:
            notes.append(html.escape(STORAGE_NOTES[self.bridge.status], quote=False))
        self.note.object = ('<div class="stf-notes" role="status"><ul>' + "".join(f"<li>{n}</li>" for n in notes)
                            + "</ul></div>") if notes else ""
        self.note.visible = bool(notes)

    def _layout(self):
        header = pn.Row(
            Html(f'<div class="stf-header">{brand_html()}<span class="stf-spacer"></span>'
                 f'<a class="stf-author-link" href="{author_href()}">Write a mission</a></div>', stylesheets=[CSS], sizing_mode="stretch_width",
                         margin=(8, 16, 0, 16)),
            sizing_mode="stretch_width", margin=0, styles={"background": "#ffffff", "border-bottom": "1px solid #dde2ea"},
        )
        hero = Html(
            f'<div class="stf-hero"><div class="stf-kicker">An interactive lab</div><h1>Split the Fleet</h1>'
            f"<p>{html.escape(TAGLINE)}</p></div>",
            stylesheets=[HUB_CSS], sizing_mode="stretch_width", margin=0,
        )
        body = pn.Column(hero, self.total, self.note, self.list, self.progress.view, self.reset_button, self.backups,
                         self.clear_button, self.bridge, self.a11y,
                         sizing_mode="stretch_width", margin=(12, 24, 24, 24), styles={"max-width": "1180px"})
        return pn.Column(header, body, sizing_mode="stretch_width", margin=0, css_classes=["stf-hub"],
                         styles={"background": PALETTE["page"], "min-height": "100vh"})


def hub_page(missions_dir=None):
    """The mission hub."""
    page_extension()
    guard_location()
    return HubApp(get_catalog(missions_dir)).view
