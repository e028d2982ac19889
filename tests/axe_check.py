"""axe-core (npm, pinned in package.json) in a Playwright page: the accessibility checks of the browser tests.

`axe_violations(page)` injects node_modules/axe-core/axe.min.js into the page and runs
`axe.run()` over the whole document. axe walks open shadow roots by itself, so Panel's
components (each in its own shadow root) are checked too. It returns the violations of
impact serious or critical, each shortened to what a failing assert needs to say where:
the rule, its help text and the first few offending nodes (their selector path, through
shadow roots, and axe's summary of what to fix).
"""

from pathlib import Path

__all__ = ["AXE_JS", "SEVERE", "axe_missing", "axe_violations", "describe"]

AXE_JS = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
SEVERE = ("serious", "critical")
NODES_SHOWN = 4  # offending nodes listed per rule in a report

_RUN = """async ([impacts, shown]) => {
    const out = await axe.run(document, {resultTypes: ["violations"]});
    return out.violations.filter((v) => impacts.includes(v.impact)).map((v) => ({
        id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
        nodes: v.nodes.slice(0, shown).map((n) => ({target: n.target, summary: n.failureSummary, html: n.html.slice(0, 160)})),
    }));
}"""


def axe_missing():
    """Why axe cannot run here (None when it can)."""
    if not AXE_JS.exists():
        return f"{AXE_JS} missing: run `npm ci` (or scripts/setup.sh)"
    return None


def axe_violations(page, impacts=SEVERE, nodes=NODES_SHOWN):
    """The violations of `impacts` axe finds on `page` now (injecting axe once per document),
    with at most `nodes` offending nodes each."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.add_script_tag(path=str(AXE_JS))
    return page.evaluate(_RUN, [list(impacts), nodes])


def describe(violations):
    """Violations as readable lines, for an assert's message."""
    lines = []
    for v in violations:
        lines.append(f"{v['impact']} {v['id']} ({v['count']} nodes): {v['help']}")
        for node in v["nodes"]:
            lines.append(f"    {node['target']}: {node['summary']}\n      {node['html']}")
    return "\n".join(lines)
