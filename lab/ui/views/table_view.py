"""The table alternative to the canvas and the plots: the latest run as rows a screen reader reads.

A collapsed "Table view" card under the metrics. Opened, it shows per GPU (per instance of
tensor-parallel GPUs) its type, steps, busy share and slow steps (the decode steps over the per-token target, the ones the canvas draws
red, hatched: `Slo.per_token_target_ms`), per pool and for the fleet its cost and energy, and per
request (the first ROWS_SHOWN) its arrival, TTFT and the TTFT's parts (lab.core.blame),
TPOT, worst gap and whether it met the SLO. "Download CSV" gives every request with the
columns of `lab run --requests-csv` (lab.core.report writes both).

Nothing is built while the card is closed: a run only marks the table stale, and the
table is built when the card opens or, while it is open, after each run. The blame it
shows is the state's (LabState.request_blames, made once per run). The CSV is written when
the button is pressed.
"""

import html
import io

import panel as pn

import lab.core as core
from lab.core.blame import LINK_PARTS  # the TTFT parts only a split fleet has
from lab.core.report import gpu_rows, write_requests_csv

from ..browser.panel_shims import Html
from ..words.figures import fmt_joules, fmt_share, fmt_usd, fmt_watts
from ..words.fleet_words import gpu_type_text, pool_text
from ..words.targets import target_phrase
from ..words.theme import CSS
from .blame_view import CAUSE_LABELS

__all__ = ["TableView", "gpu_table_html", "pool_table_html", "requests_table_html", "ROWS_SHOWN", "CSV_NAME"]

ROWS_SHOWN = 50  # request rows on the page; the CSV has them all
CSV_NAME = "requests.csv"
# FileDownload draws a default (grey, borderless) button whatever its button_type: outline it like Sweep.
DOWNLOAD_CSS = (".bk-btn.bk-btn-default { border: 1px solid #0072B2 !important; color: #005a8c !important;"
                " background: #fff !important; font-weight: 600; }"
                " .bk-btn.bk-btn-default:hover { background: #eaf4fb !important; } .bk-btn a { color: inherit; }")
_PART_LABELS = {p: CAUSE_LABELS[p] for p in core.TTFT_PARTS}  # the blame bar's and the story's words


def _num(value, fmt):
    return "—" if value is None else format(value, fmt)


def gpu_table_html(result, slo):
    """Per GPU: steps, busy share of the run, slow steps (over `slo`'s per-token target)."""
    rows = gpu_rows(result, slo.per_token_target_ms)
    phrase = target_phrase(slo)
    target = f"decode steps longer than {phrase}" if phrase else "none without a per-token target"
    logs = result.gpus
    body = "".join(
        f'<tr data-gpu="{r["gpu"]}"><th scope="row">{html.escape(log.label)}</th><td>{html.escape(r["role"])}</td>'
        f'<td>{html.escape(gpu_type_text(log.gpu_type, log.tp))}</td>'
        f'<td>{r["steps"]:,}</td><td data-busy="{r["busy_share"]:.6f}">{fmt_share(r["busy_share"])}</td>'
        f'<td data-slow="{r["slow_steps"]}">{r["slow_steps"]:,}</td></tr>'
        for r, log in zip(rows, logs))
    return (f'<table class="stf-table stf-gpu-table" data-gpus="{len(rows)}"><caption>Per GPU (per instance of tensor-parallel '
            f'GPUs) over the whole run (slow steps: {target})</caption>'
            f'<thead><tr><th scope="col">GPU</th><th scope="col">role</th><th scope="col">built of</th><th scope="col">steps</th>'
            f'<th scope="col">busy</th><th scope="col">slow steps</th></tr></thead><tbody>{body}</tbody></table>')


def pool_table_html(result, metrics):
    """Per pool and for the fleet: what it is built of, $/hour, mean power (in all and per GPU)
    and the run's energy (lab.core.metrics' cost_and_energy: prefill_*, decode_* and the fleet's)."""
    if "usd_per_hour" not in metrics:
        return ""
    scenario = result.scenario
    span = result.end_time
    fleet_watts = metrics.get("power_w_mean")
    # power_w_mean is the fleet's energy over the run's span, so this is that energy again.
    fleet = (metrics.get("usd_per_hour"), fleet_watts, None if fleet_watts is None else fleet_watts * span)
    pools = scenario.pools()
    if scenario.fleet.layout == "disaggregated":
        rows = [(p.role, pool_text(p), p.gpus, metrics.get(f"{p.role}_usd_per_hour"),
                 metrics.get(f"{p.role}_power_w_mean"), metrics.get(f"{p.role}_energy_j")) for p in pools]
        rows.append(("fleet", f"{scenario.fleet.total_gpus} GPUs", scenario.fleet.total_gpus, *fleet))
    else:
        rows = [("colocated", pool_text(pools[0]), pools[0].gpus, *fleet)]
    body = "".join(
        f'<tr data-pool="{role}"><th scope="row">{role}</th><td>{html.escape(built)}</td>'
        f'<td>{fmt_usd(usd)}</td><td>{fmt_watts(watts)}</td><td>{fmt_watts(None if watts is None else watts / gpus)}</td>'
        f'<td>{fmt_joules(joules)}</td></tr>'
        for role, built, gpus, usd, watts, joules in rows)
    return (f'<table class="stf-table stf-pool-table"><caption>Cost and energy over the run ({span:,.1f} s; '
            f'prices and power are illustrative presets)</caption>'
            '<thead><tr><th scope="col">pool</th><th scope="col">built of</th><th scope="col">$/hour</th>'
            '<th scope="col">mean power</th><th scope="col">per GPU</th><th scope="col">energy</th></tr></thead>'
            f'<tbody>{body}</tbody></table>')


def requests_table_html(result, rows, blames, shown=ROWS_SHOWN):
    """The first `shown` requests: arrival, TTFT and its parts, TPOT, worst gap, met SLO."""
    split = result.scenario.fleet.layout == "disaggregated"
    parts = [p for p in core.TTFT_PARTS if split or p not in LINK_PARTS]
    finished = sum(1 for r in rows if r["finished"])
    head = ('<th scope="col">request</th><th scope="col">arrival (s)</th><th scope="col">TTFT (s)</th>'
            + "".join(f'<th scope="col">{_PART_LABELS[p]} (s)</th>' for p in parts)
            + '<th scope="col">TPOT (ms)</th><th scope="col">worst gap (ms)</th><th scope="col">met SLO</th>')
    body = []
    for row, blame in zip(rows[:shown], blames[:shown]):
        met = "✓ yes" if row["met_slo"] else ("✗ no" if row["finished"] else
                                             "✗ no (rejected)" if row.get("rejected") else "✗ no (unfinished)")
        cells = [f'<th scope="row">{row["id"]}</th>', f'<td>{row["arrival_s"]:.3f}</td>',
                 f'<td data-ttft="{row["ttft_s"]!r}">{_num(row["ttft_s"], ".3f")}</td>']
        cells += [f'<td>{blame.parts[p]:.3f}</td>' for p in parts]
        cells += [f'<td>{_num(row["tpot_ms"], ".1f")}</td>', f'<td>{_num(row["worst_gap_ms"], ".1f")}</td>',
                  f'<td data-met="{str(bool(row["met_slo"])).lower()}">{met}</td>']
        body.append(f'<tr data-request="{row["id"]}">{"".join(cells)}</tr>')
    n = len(rows)
    caption = (f"All {n:,} requests" if n <= shown else f"The first {shown:,} of {n:,} requests (the CSV has all)")
    return (f'<table class="stf-table stf-request-table" data-requests="{n}" data-finished="{finished}" '
            f'data-shown="{min(n, shown)}"><caption>{caption}; {finished:,} finished</caption>'
            f'<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')


class TableView:
    """The "Table view" card over a LabState (built only while open)."""

    def __init__(self, state):
        self.state = state
        self._built = -1  # the run_id the tables show
        self.pane = Html("", stylesheets=[CSS], sizing_mode="stretch_width", margin=(0, 4),
                                 css_classes=["stf-table-pane"])
        self.download = pn.widgets.FileDownload(
            callback=self._csv, filename=CSV_NAME, label="Download CSV (every request)", stylesheets=[DOWNLOAD_CSS],
            embed=False, width=230, margin=(6, 4, 2, 4), css_classes=["stf-download-csv"],
            description="Every request of this run, with the columns of `lab run --requests-csv`",
        )
        # An h2 header (Panel's default title is an h3, a skipped level under the page's h1).
        header = Html('<h2 class="stf-card-title">Table view</h2>', stylesheets=[CSS], margin=(0, 4))
        self.card = pn.Card(self.download, self.pane, header=header, title="Table view", collapsed=True,
                            sizing_mode="stretch_width",
                            margin=(10, 0, 0, 0), css_classes=["stf-table-card"])
        self.view = self.card
        self.card.param.watch(self._on_open, "collapsed")
        state.param.watch(self._on_run, "run_id")

    @property
    def is_open(self):
        return not self.card.collapsed

    def _on_open(self, event):
        if not event.new:
            self._build()

    def _on_run(self, *_):
        if self.is_open:
            self._build()

    def _blame(self):
        return self.state.request_blames()

    def _build(self):
        s = self.state
        if self._built == s.run_id:
            return
        self._built = s.run_id
        if s.result is None:
            self.pane.object = '<p class="stf-lock">No run to show.</p>'
            return
        tables = (gpu_table_html(s.result, s.scenario.slo) + pool_table_html(s.result, s.metrics)
                  + requests_table_html(s.result, s.rows, self._blame()))
        # A scrolling box is a tab stop with a name, so a keyboard can scroll it (axe: scrollable-region-focusable).
        self.pane.object = (f'<div class="stf-tables" role="region" aria-label="Tables of run {s.run_id}" tabindex="0" '
                            f'data-run="{s.run_id}">{tables}</div>')

    def _csv(self):
        s = self.state
        buf = io.StringIO(newline="")
        if s.result is not None:
            write_requests_csv(buf, s.rows, s.metrics, self._blame())
        return io.BytesIO(buf.getvalue().encode("utf-8"))
