"""Colours and CSS shared by every view.

The palette is Okabe & Ito's (2008), chosen so that the categories stay apart for the
common forms of colour blindness, with one exception: steps over the per-token target
are a clear red (what the briefs call them: "red, hatched"), told apart from the amber
of prefill by their white hatching and dark outline, not by hue alone. Colour is never
the only cue: pass/fail metrics carry a tick or a cross, and the plots use marker
shapes as well as colours.

CSS lives here as a string (not in a file) so that the same wheel works under
`lab serve` and in Pyodide, where the package's data files are not served.
"""

__all__ = ["PALETTE", "CSS", "HUB_CSS", "FONT_STACK", "INERT_STYLE", "LIVE_STYLE", "SLIDER_CSS", "FOCUS_CSS", "FOCUS_RING"]

# A button with nothing to do (reset at the start, no slow step to jump to): it looks
# disabled and ignores the mouse. Its `disabled` flag is not used for this because
# Bokeh re-renders a button whose flag flips and then re-lays out the whole page.
INERT_STYLE = {"opacity": "0.5", "pointer-events": "none"}
LIVE_STYLE = {"opacity": "1", "pointer-events": "auto"}  # explicit: an empty dict leaves the old style in place

PALETTE = {
    "decode": "#0072B2",  # blue
    "prefill": "#E69F00",  # orange / amber
    "slow": "#D7191C",  # red (+ white hatch + dark outline): a step over the per-token target
    "slow_edge": "#5a0a0a",  # its outline
    "link": "#009E73",  # bluish green: KV on the wire
    "link_wait": "#999999",  # grey: waiting (KV for the link or decode memory; the queue rows)
    "kv": "#CC79A7",  # reddish purple: KV memory reserved on a GPU, and KV waiting for room there
    "kv_track": "#f7eef3",  # the KV band's empty part
    "kv_edge": "#8a4a70",  # its outline: the top edge is the GPU's KV capacity
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "ink": "#1d2430",
    "muted": "#5b6472",
    "good": "#00735a",  # a darker bluish green for text contrast
    "bad": "#b34700",  # a darker vermillion for text contrast
    "grid": "#e6e9ef",
    "panel": "#ffffff",
    "page": "#f4f6f9",
}

FOCUS_RING = "#0072B2"  # the decode blue: 5:1 on white, and drawn outside a blue button (offset)

# Adopted by every shadow root of the page (a11y.A11yBridge): whatever Panel's and Bokeh's
# own styles say (Bokeh's is a 1 px grey dotted line), the keyboard focus shows. Only
# :focus-visible, so a mouse click draws no ring.
FOCUS_CSS = """
:focus-visible, .bk-btn:focus-visible, .bk-input:focus-visible, a:focus-visible, summary:focus-visible {
  outline: 3px solid %(ring)s !important; outline-offset: 2px !important; }
.noUi-handle:focus-visible { outline: 3px solid %(ring)s !important; outline-offset: 1px !important;
  box-shadow: 0 0 0 5px rgba(0, 114, 178, .25) !important; }
""" % {"ring": FOCUS_RING}

FONT_STACK = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

# Applied inside the shadow roots of the HTML panes (Panel renders each component in
# its own shadow DOM, so page-level CSS does not reach in).
CSS = """
:host { --ink: %(ink)s; --muted: %(muted)s; --good: %(good)s; --bad: %(bad)s;
        --decode: %(decode)s; --prefill: %(prefill)s; --slow: %(slow)s; --link: %(link)s;
        font-family: %(font)s; color: var(--ink); }
a { color: #005a8c; }
a:focus-visible, button:focus-visible, summary:focus-visible { outline: 3px solid #0072B2; outline-offset: 2px; }
.stf-header { display: flex; align-items: center; gap: 14px; flex-wrap: wrap; }
.stf-brand { font-weight: 700; font-size: 15px; letter-spacing: .02em; color: var(--ink); text-decoration: none; }
.stf-brand .logo { display: inline-block; width: 12px; height: 12px; border-radius: 2px; background: var(--prefill);
                   box-shadow: 14px 0 0 var(--decode); margin-right: 20px; vertical-align: -1px; }
.stf-title { font-size: 20px; font-weight: 650; margin: 0; }
.stf-kicker { color: var(--muted); font-size: 13px; text-transform: uppercase; letter-spacing: .06em; }
.stf-spacer { flex: 1; }
.stf-draft-mark { margin: 4px 0 0 0; padding: 4px 10px; font-size: 13px; border-left: 4px solid var(--decode);
                  background: #eef5fb; border-radius: 4px; }
.stf-notes { border-left: 4px solid var(--prefill); background: #fff8e6; padding: 8px 12px; border-radius: 4px;
             font-size: 13px; margin: 0; }
.stf-notes ul { margin: 2px 0 0 0; padding-left: 18px; }
.stf-error { border-left-color: var(--slow); background: #fdeee6; }
.stf-refusal-detail { margin-top: 4px; font-size: 12px; }
.stf-refusal-detail summary { cursor: pointer; }
.stf-refusal-detail code { overflow-wrap: anywhere; }
.stf-status { display: inline-flex; align-items: center; gap: 8px; font-size: 13px; color: var(--muted); min-height: 22px; }
.stf-status.busy { color: var(--ink); font-weight: 600; }
.stf-spin { width: 12px; height: 12px; border-radius: 50%%; border: 2px solid #c9d2de; border-top-color: var(--decode);
            animation: stf-spin .7s linear infinite; }
@keyframes stf-spin { to { transform: rotate(360deg); } }
@media (prefers-reduced-motion: reduce) { .stf-spin { animation-duration: 2.5s; } }

/* metrics */
.stf-metrics { display: grid; grid-template-columns: repeat(auto-fill, minmax(136px, 1fr)); gap: 8px;
               grid-auto-rows: minmax(88px, auto); }  /* as tall for 1 busy bar as for 3: no re-layout on a switch */
/* A card is a size container: a value shrinks with its card (cqi = 1%% of the card's width) and, as a
   last resort, wraps between its parts (number and unit are joined by no-break spaces), never overflows. */
.stf-card { background: #fff; border: 1px solid #dde2ea; border-radius: 8px; padding: 8px 10px; min-width: 0;
            container-type: inline-size; overflow-wrap: anywhere; }
/* a title too long for its card wraps (at spaces; mid-word only as the card's last resort): an ellipsis
   hid which metric it was ("Goodput per G…" in the 700 px embed) */
.stf-card .k { font-size: 11.5px; color: var(--muted); }
.stf-card .v { font-size: clamp(14px, 15cqi, 19px); white-space: normal; overflow-wrap: normal; font-weight: 650;
               font-variant-numeric: tabular-nums; line-height: 1.25; }
.stf-card .v.pair { font-size: clamp(12px, 12.5cqi, 19px); }
.stf-card .v small { font-size: 12px; font-weight: 500; color: var(--muted); }
.stf-card .t { font-size: 11.5px; color: var(--muted); }
.stf-card.ok { border-top: 3px solid var(--good); }
.stf-card.bad { border-top: 3px solid var(--bad); }
.stf-card .ok { color: var(--good); font-weight: 600; }
.stf-card .bad { color: var(--bad); font-weight: 600; }
.stf-util { display: grid; grid-template-columns: auto minmax(12px, 1fr) auto; gap: 1px 6px; align-items: center;
            font-size: 12px; line-height: 16px; }
.stf-bar { height: 8px; background: #e9edf3; border-radius: 4px; overflow: hidden; min-width: 12px; }
.stf-bar > span { display: block; height: 100%%; border-radius: 4px; }
.stf-cut { display: inline-block; color: var(--bad); font-weight: 600; background: #fdeee6; border-radius: 4px;
           padding: 1px 6px; }
.stf-run-error { margin: 0; font-size: 13.5px; min-height: 88px; box-sizing: border-box; }
.stf-foot { font-size: 12px; color: var(--muted); margin-top: 6px; min-height: 16px; line-height: 16px; }

/* stars */
.stf-stars { list-style: none; margin: 0; padding: 0; display: grid; gap: 6px; }
.stf-star { display: grid; grid-template-columns: 26px minmax(0, 1fr); gap: 2px 8px; align-items: start; background: #fff;
            border: 1px solid #dde2ea; border-radius: 8px; padding: 7px 9px; }
.stf-star .glyph { font-size: 22px; line-height: 1; color: #b9c1cc; }
.stf-star.earned .glyph { color: #E69F00; text-shadow: 0 0 1px #7a5200; }
.stf-star .label { font-weight: 600; font-size: 13.5px; }
.stf-star .tests { grid-column: 2; font-size: 12px; color: var(--muted); display: flex; flex-wrap: wrap; gap: 4px 10px; }
/* a long test ("usd_per_good_request <= 0.0018 (now 0.00225)") wraps inside its star, never widens it */
.stf-tick { font-variant-numeric: tabular-nums; overflow-wrap: anywhere; }
.stf-tick.ok { color: var(--good); }
.stf-tick.no { color: var(--bad); }
.stf-star .now { grid-column: 2; font-size: 12px; }
.stf-star .now.ok { color: var(--good); font-weight: 600; }
.stf-star .now.no { color: var(--muted); }

/* brief */
.stf-brief { font-size: 14px; line-height: 1.5; }
.stf-brief h1, .stf-brief h2, .stf-brief h3 { font-size: 16px; margin: .2em 0 .4em; }
.stf-brief p { margin: .35em 0; }
.stf-brief ul { margin: .3em 0; padding-left: 20px; }
/* Mission text is an author's: a word wider than its box (a long URL, a 300-letter word) breaks
   anywhere rather than run under the canvas or past a phone's edge. */
.stf-brief, .stf-title, .stf-star .label, .stf-locked-line, .stf-choice-caption { overflow-wrap: anywhere; }
.stf-section { font-size: 12px; font-weight: 700; color: var(--muted); text-transform: uppercase; letter-spacing: .07em;
               margin: 4px 0 2px; }
.stf-legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12px; color: var(--ink); align-items: center; }
.stf-legend .sw { display: inline-block; width: 16px; height: 11px; border-radius: 2px; vertical-align: -1px; margin-right: 5px; }
.stf-legend .sw.slow { background: repeating-linear-gradient(135deg, var(--slow) 0 3px, #fff 3px 4.5px); outline: 1.5px solid %(slow_edge)s; outline-offset: -1.5px; }
.stf-legend .sw.mixed { background: linear-gradient(to top, var(--prefill) 0 40%%, var(--decode) 40%% 100%%); }
.stf-legend .sw.wait { background: %(link_wait)s; height: 4px; vertical-align: 2px; }
.stf-legend .sw.queue { background: linear-gradient(to top, %(link_wait)s 0 60%%, transparent 60%% 100%%); }
.stf-legend .sw-mark { display: inline-block; width: 16px; margin-right: 5px; font-size: 11px; text-align: center; }
/* three bands: amber prefill, hatched grey reloading (its own layer: a gradient cannot be a colour stop), blue decode */
.stf-legend .sw.roles { background: repeating-linear-gradient(135deg, %(link_wait)s 0 2px, #fff 2px 3.5px) 50%% 0 / 20%% 100%% no-repeat, linear-gradient(to right, rgba(230,159,0,0.35) 0 40%%, transparent 40%% 60%%, rgba(0,114,178,0.3) 60%% 100%%); }
.stf-legend .sw.kv { background: linear-gradient(to top, %(kv)s 0 55%%, %(kv_track)s 55%% 100%%); outline: 1px solid %(kv_edge)s; outline-offset: -1px; }
.stf-legend .stf-legend-over { flex-basis: 100%%; }
.stf-lock { color: var(--muted); font-size: 12px; }
.stf-choice-caption { font-size: 13px; color: var(--ink); }
.stf-choice-caption.idle { color: #687180; }
.stf-replay { font-size: 13px; margin: 4px 0; border-left: 4px solid var(--link); padding: 2px 8px; background: #eef8f4; }
.stf-upload-error { margin: 4px 0; overflow-wrap: anywhere; }
.stf-trace-sources code { font-size: 11px; overflow-wrap: anywhere; }
.stf-lock svg { width: 11px; height: 11px; vertical-align: -1px; fill: currentColor; }
.stf-locked-list > li { line-height: 18px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.stf-locked-list > li.idle { color: #687180; }  /* muted but 4.5:1 on white (opacity fell to 2.6:1) */
.stf-locked-list > li.idle b { font-weight: 500; }
.stf-kbd { font-size: 11.5px; color: var(--muted); }
.stf-rows { position: relative; height: 100%%; }
.stf-rows > div { position: absolute; right: 6px; transform: translateY(-50%%); white-space: nowrap; line-height: 1.1;
                  color: var(--ink); }
.stf-rows > div .ty { display: block; text-align: right; font-size: 0.85em; color: var(--muted); }
.stf-locked-compact { font-size: 12px; color: var(--muted); }
.stf-locked-compact > summary { cursor: pointer; white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
                                list-style-position: inside; }
.stf-locked-compact > summary svg { width: 11px; height: 11px; vertical-align: -1px; fill: currentColor; }
.stf-locked-compact .stf-locked-title { font-weight: 600; }
.stf-locked-compact[open] .stf-locked-line { display: none; }
.stf-locked-compact ul { margin: 2px 0 0 16px; padding: 0; }
/* embed (a 700 x 760 iframe): narrower metric cards, so the four headline cards share a row beside the
   controls column; each star on two short lines (its label and whether it holds now; the tests stay in
   the tooltip of the line) */
:host(.stf-metrics-compact) .stf-metrics { grid-template-columns: repeat(auto-fill, minmax(96px, 1fr)); gap: 6px;
                                          grid-auto-rows: minmax(78px, auto); }
:host(.stf-metrics-compact) .stf-card { padding: 6px 8px; }
:host(.stf-metrics-compact) .stf-card[data-metric="util"] { grid-column: span 2; }  /* "Decode" stays a word */
:host(.stf-stars-compact) .stf-stars { gap: 4px; }
.stf-stars-note { margin: 0 0 6px 0; font-size: 12.5px; color: var(--ink); background: #eef5fb;
  border-left: 4px solid var(--decode); padding: 5px 8px; border-radius: 4px; }
:host(.stf-stars-compact) .stf-stars-note { font-size: 11.5px; padding: 3px 6px; margin-bottom: 4px; }
:host(.stf-stars-compact) .stf-stars-note .more { display: none; }
:host(.stf-keys-compact) .stf-kbd { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
:host(.stf-stars-compact) .stf-star { padding: 4px 7px; grid-template-columns: 20px minmax(0, 1fr); }
:host(.stf-stars-compact) .stf-star .glyph { font-size: 17px; }
:host(.stf-stars-compact) .stf-star .label { font-size: 12.5px; }
:host(.stf-stars-compact) .stf-star .tests { display: none; }
/* a request's story (story.py) */
.stf-story { font-size: 13px; line-height: 1.45; overflow-wrap: anywhere; }
.stf-story-head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 2px 10px; }
.stf-story-head h3 { font-size: 14.5px; margin: 0; }
.stf-story .ok { color: var(--good); font-weight: 600; }
.stf-story .bad { color: var(--bad); font-weight: 600; }
.stf-story-why { margin: 6px 0; padding: 5px 9px; background: #fdeee6; border-left: 4px solid var(--slow); border-radius: 4px; }
.stf-story-bar { display: flex; height: 12px; border-radius: 3px; overflow: hidden; margin: 6px 0 2px; background: #eef1f5; }
.stf-story-bar span { display: block; height: 100%%; min-width: 2px; }
.stf-story-steps { margin: 4px 0 0; padding-left: 22px; }
.stf-story-steps li { margin: 2px 0; }
.stf-story-steps .sw { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.stf-story mark.stf-worst { background: #fdeee6; color: var(--bad); font-weight: 700; padding: 0 3px;
  border: 2px solid var(--ink); border-radius: 3px; }
/* table view */
.stf-card-title { font-size: 14px; font-weight: 650; margin: 0; color: var(--ink); }
.stf-tables { overflow: auto; max-height: 520px; font-size: 12.5px; }
.stf-table { border-collapse: collapse; margin: 4px 0 14px; font-variant-numeric: tabular-nums; }
.stf-table caption { text-align: left; font-weight: 600; padding: 2px 0 4px; color: var(--ink); }
.stf-table th, .stf-table td { padding: 3px 7px; border-bottom: 1px solid #e6e9ef; text-align: right; white-space: nowrap; }
.stf-table thead th { position: sticky; top: 0; background: #f4f6f9; font-weight: 600; }
.stf-table th[scope="row"] { text-align: left; font-weight: 600; }
.stf-table thead th:first-child, .stf-gpu-table :is(th, td):nth-child(2) { text-align: left; }
kbd { border: 1px solid #c9d2de; border-bottom-width: 2px; border-radius: 3px; padding: 0 4px; font-size: 11px; background: #fff; }
""" % {**PALETTE, "font": FONT_STACK}

# Inside a slider's shadow root. A live slider's bar is the decode blue (its `bar_color`);
# a disabled one's is a light grey, whatever Bokeh left inline from when it was live.
SLIDER_CSS = """
.noUi-target[disabled] .noUi-connect { background: #d3d8df !important; }
.noUi-target[disabled] .noUi-handle { background: #f1f3f6; box-shadow: none; }
.bk-slider-title { white-space: normal; overflow-wrap: anywhere; }  /* a mission's control label: Bokeh keeps it on one line */
"""

HUB_CSS = CSS + """
.stf-hero { padding: 6px 0 2px; }
.stf-hero h1 { font-size: 28px; margin: 4px 0 6px; }
.stf-hero p { color: var(--muted); font-size: 15px; max-width: 70ch; margin: 0; }
.stf-missions > li { display: flex; }
.stf-missions > li > a { flex: 1; }
.stf-missions { list-style: none; padding: 0; margin: 0; display: grid; gap: 12px;
                grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); }
.stf-mission { display: flex; flex-direction: column; gap: 6px; background: #fff; border: 1px solid #dde2ea; border-radius: 10px;
               padding: 14px 16px; text-decoration: none; color: var(--ink); transition: box-shadow .15s, border-color .15s; height: 100%%;
               box-sizing: border-box; }
.stf-mission:hover { border-color: #0072B2; box-shadow: 0 2px 10px rgba(0, 60, 110, .12); }
.stf-mission:focus-visible { outline: 3px solid #0072B2; outline-offset: 2px; }
.stf-mission .num { font-size: 12px; font-weight: 700; color: var(--muted); letter-spacing: .06em; text-transform: uppercase; }
.stf-mission .name { font-size: 17px; font-weight: 650; }
.stf-mission .one { font-size: 13.5px; color: #3c4452; flex: 1; }
.stf-mission .name, .stf-mission .one { overflow-wrap: anywhere; }  /* an author's text: see .stf-brief */
.stf-mission .stars { font-size: 20px; letter-spacing: 2px; color: #b9c1cc; }
.stf-mission .stars .on { color: #E69F00; text-shadow: 0 0 1px #7a5200; }
.stf-mission .stars small { font-size: 12px; letter-spacing: 0; color: var(--muted); margin-left: 6px; }
.stf-mission.sandbox { background: #f7fbff; border-style: dashed; }
.stf-total { font-size: 14px; color: var(--muted); }
.stf-head-stars .stars { font-size: 26px; letter-spacing: 3px; color: #b9c1cc; }
.stf-head-stars .stars .on { color: #E69F00; text-shadow: 0 0 1px #7a5200; }
.stf-head-stars small { font-size: 13px; color: var(--muted); margin-left: 6px; vertical-align: 4px; }
"""
