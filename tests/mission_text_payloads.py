"""Hostile mission text for the safety tests: XSS payloads and a folder of missions carrying them.

Every payload that ran would set `window.__pwned`; the tests assert it never is set.
Used by tests/ui/test_mission_text_safety.py (`lab serve`) and tests/test_site_browser.py
(the static hub), tests/test_site_offline.py (the static lab page), with the Playwright
helpers that poke a page for them.
"""

import copy
import json
from pathlib import Path

__all__ = ["PAYLOADS", "HOSTILE_TITLE", "HOSTILE_LABEL", "EASY_ID", "CONSTRUCTOR_ID", "DANGEROUS", "write_hostile_missions",
           "pwned", "settle", "poke", "FILL_TO_QUOTA", "FILL_ALL"]

PAYLOADS = [
    '<script>window.__pwned=1</script>',
    '<img src=x onerror="window.__pwned=1">',
    '<details open ontoggle="window.__pwned=1"><summary>open me</summary>inside</details>',
    '<iframe srcdoc="<script>parent.__pwned=1</script>"></iframe>',
    '<a href="javascript:window.__pwned=1">a javascript link</a>',
    '<svg onload="window.__pwned=1"><circle r="5"/></svg>',
    '[a markdown javascript link](javascript:window.__pwned=1)',
    '![a markdown javascript image](javascript:window.__pwned=1)',
    '![a remote image](http://127.0.0.1:9/x.png)',
    '<math><mi xlink:href="javascript:window.__pwned=1">math link</mi></math>',
    '"><img src=x onerror=window.__pwned=1>',
    '<!--<script>',
    '</script><script>window.__pwned=1</script>',
    '[a data link](data:text/html,<script>window.__pwned=1</script>)',
    '[a data link 2](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX19wd25lZD0xPC9zY3JpcHQ+)',
    '<style>* { display: none !important }</style><link rel="stylesheet" href="http://127.0.0.1:9/x.css">',
    '<base href="javascript:window.__pwned=1//">',
    '<javascript:window.__pwned=1>',
    '[an entity link](jav&#x61;script:window.__pwned=1)',
    '[a tab link](<java\tscript:window.__pwned=1>)',
    '[a percent link](jav%61script:window.__pwned=1)',
    '<a href="#x" onmouseover="window.__pwned=1">hover me</a>',
    '<form action="javascript:window.__pwned=1"><button>send</button></form>',
    '<object data="javascript:window.__pwned=1"></object><embed src="javascript:window.__pwned=1">',
    '<meta http-equiv="refresh" content="0;url=javascript:window.__pwned=1">',
]
HOSTILE_TITLE = '"><img src=x onerror=window.__pwned=1> Hostile <b>title</b>'
HOSTILE_LABEL = '"><img src=x onerror=window.__pwned=1><script>window.__pwned=1</script> star'
EASY_ID = "first-run-star"
CONSTRUCTOR_ID = "constructor"

_BASE = {
    "scenario": {
        "workload": {"rate": 4, "duration_s": 20, "prompt_tokens": 1000, "output_tokens": 100},
        "fleet": {"layout": "colocated", "gpus": 2, "prefill_gpus": 1, "decode_gpus": 1},
        "slo": {"ttft_s": 1.5, "tpot_ms": 25},
        "seed": 3,
        "drain_s": 30,
    },
    "controls": {"layout": {"choices": ["colocated", "disaggregated"]}, "gpus": {"min": 1, "max": 4}},
    "stars": [
        {"label": "Any fleet at all", "when": [{"metric": "gpus", "op": ">=", "value": 1}]},
        {"label": "More GPUs than allowed", "when": [{"metric": "gpus", "op": ">=", "value": 9}]},
    ],
}


def _mission(mid, order, title, summary, brief, star_labels=None, control_label=None):
    data = copy.deepcopy(_BASE)
    data.update(id=mid, order=order, title=title, summary=summary, brief=brief)
    if star_labels:
        for star, label in zip(data["stars"], star_labels):
            star["label"] = label
    if control_label:
        data["controls"]["gpus"]["label"] = control_label
    return data


def write_hostile_missions(folder):
    """Write the hostile missions (and two plain ones the stars tests use) into `folder`; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    brief = ["Every line below is hostile and must show as text.", ""]
    for p in PAYLOADS:
        brief += [p, ""]
    brief += ["A [safe relative link](#stf-safe) and **bold** text.", "", "**Try:** nothing here runs."]
    missions = [
        _mission("xss-brief", 1, HOSTILE_TITLE, '<script>window.__pwned=1</script> "><img src=x onerror=window.__pwned=1>',
                 brief, star_labels=[HOSTILE_LABEL, '<svg onload="window.__pwned=1"></svg>'],
                 control_label='<img src=x onerror=window.__pwned=1>GPUs'),
        _mission("xss-comment", 2, "<!--<script>", "</script><script>window.__pwned=1</script>",
                 ["<!--<script>", "", "**Try:** nothing."]),
        _mission("xss-close", 3, "</script><script>window.__pwned=1</script>", "<!-- a summary -->",
                 ["</script>", "", "**Try:** nothing."], star_labels=["<!--", "</script>"]),
        _mission(CONSTRUCTOR_ID, 4, "A mission named constructor", "Its id is an Object.prototype name.",
                 ["Plain.", "", "**Try:** nothing."]),
        _mission(EASY_ID, 5, "A star on the first run", "The start earns star 1 at once.",
                 ["The first run earns a star.", "", "**Try:** nothing."]),
    ]
    for data in missions:
        (folder / f"{data['order']:02d}-{data['id']}.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return folder


# Both storage test files (lab serve and the static site) probe the quota this one way.
FILL_TO_QUOTA = """() => {
    // The longest value this origin's storage takes (binary search), then clear it again.
    localStorage.clear();
    let lo = 0, hi = 64 * 1024 * 1024;
    while (hi - lo > 1024) {
        const mid = Math.floor((lo + hi) / 2);
        try { localStorage.setItem("probe", "x".repeat(mid)); lo = mid; } catch (e) { hi = mid; }
        localStorage.removeItem("probe");
    }
    return lo;
}"""


# Fill this origin's localStorage to the last character: one value of the quota's size, then
# ever smaller ones until not even one character fits. Returns [the keys used, the error one
# more character gets], or null if it still fit.
FILL_ALL = """(quota) => {
    const keys = [];
    let size = quota;
    while (size >= 1) {
        const key = "filler" + keys.length;
        try { localStorage.setItem(key, "x".repeat(size)); keys.push(key); } catch (e) { size = Math.floor(size / 2); }
    }
    try { localStorage.setItem("one-more", "x"); return null; } catch (e) { return [keys, e.name]; }
}"""


# Elements no mission text may ever become.
DANGEROUS = ("script", "img", "iframe", "svg", "math", "details", "style", "link", "base", "object", "embed", "form",
             "meta")


def pwned(page):
    """'undefined' unless a payload ran (each sets window.__pwned)."""
    return page.evaluate("typeof window.__pwned")


def settle(page):
    """Until the lab's status line says a run is drawn."""
    page.locator('.stf-status[data-busy="false"][data-run]').wait_for(state="attached")


def poke(page, scope):
    """Hover and click whatever a payload could hang an event on inside `scope`."""
    nodes = page.locator(f"{scope} *")
    for i in range(min(nodes.count(), 200)):
        node = nodes.nth(i)
        if node.is_visible():
            node.hover(timeout=5_000)
    links = page.locator(f"{scope} a")
    for i in range(links.count()):
        href = links.nth(i).get_attribute("href") or ""
        if href.startswith("#"):  # a link that stays on the page; anything else is checked, not followed
            links.nth(i).click(timeout=5_000)
    for sel in ("details", "summary"):
        for i in range(page.locator(f"{scope} {sel}").count()):
            page.locator(f"{scope} {sel}").nth(i).click(timeout=5_000)
