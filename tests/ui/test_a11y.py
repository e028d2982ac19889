"""The pieces behind the page's accessibility, without a browser: how values read, the
run summary the live region announces, and the Table view (built only while open)."""

import csv
import io

import pytest

pytest.importorskip("panel")

import lab.core as core  # noqa: E402
import lab.ui.views.table_view as table_view  # noqa: E402
from lab.core.report import REQUESTS_CSV_COLUMNS  # noqa: E402
from lab.ui.browser.a11y import decimals_for, run_summary, slider_spec  # noqa: E402
from lab.ui.views.controls import Controls  # noqa: E402
from lab.ui.state import LabState  # noqa: E402

M1 = "ui-mixing-hurts"


def test_whole_steps_read_as_whole_numbers():
    assert [decimals_for(s) for s in (1, 128, 1.0, 0.5, 0.25, 0.05, 0.001, None)] == [0, 0, 0, 1, 2, 2, 2, 0]
    assert slider_spec("GPUs", "GPUs", 1) == {"kind": "slider", "label": "GPUs", "unit": "GPUs", "decimals": 0,
                                              "zero": None}


def test_every_control_gets_a_name_and_its_unit(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    specs = Controls(state, lambda *_: None).a11y_specs()
    assert set(specs) == {f"stf-control-{n}" for n in state.mission.controls}
    for name, control in state.mission.controls.items():
        spec = specs[f"stf-control-{name}"]
        assert spec["label"] and spec["kind"] == ("choice" if control.kind == "choice" else "slider")
        if control.kind == "int":
            assert spec["decimals"] == 0
    assert specs["stf-control-gpus"]["unit"] == "GPUs"


def test_a_choice_other_than_the_layout_has_a_visible_caption_muted_when_it_does_nothing():
    # A button group shows no name of its own: "Decode GPU | Prefill GPU" alone does not say
    # it is where the first token counts. The layout's buttons name themselves.
    from lab.ui.catalog import Catalog

    state = LabState.from_query(Catalog(), "?mission=first-token-clock")
    controls = Controls(state, lambda *_: None)
    choices = [n for n, c in state.mission.controls.items() if c.kind == "choice"]
    assert "first_token" in choices and "layout" in choices
    assert set(controls.captions) == set(choices) - {"layout"}
    caption = controls.captions["first_token"]
    assert f"{controls.widgets['first_token'].name}:" in caption.object and "idle" not in caption.object
    assert state.change("layout", "colocated")
    assert 'stf-choice-caption idle' in caption.object  # first_token matters only for a split fleet


def test_the_summary_names_the_headline_metrics_and_star_changes(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    metrics = state.run()
    n = len(state.mission.stars)
    off = [False] * n
    text = run_summary(metrics, state.scenario, off, off, off, off)
    share = round(metrics["slo_attainment"] * 100)
    assert text.startswith(f"SLO met by {share}% of requests; TTFT p90 ") and "TPOT p99" in text
    assert text.endswith(".") and "star" not in text and "\u00a0" not in text
    first = [True] + [False] * (n - 1)
    assert text[:-1] + "; star 1 earned." == run_summary(metrics, state.scenario, off, first, off, first)
    assert text[:-1] + "; star 1 met." == run_summary(metrics, state.scenario, off, first, first, first)  # earned before
    assert text[:-1] + "; star 1 no longer met." == run_summary(metrics, state.scenario, first, off, first, first)
    assert run_summary({}, state.scenario, off, off, off, off, "bad input") == "The simulation failed: bad input"


def test_the_table_costs_nothing_while_closed_and_follows_runs_while_open(catalog, monkeypatch):
    calls = []
    real = core.request_blame
    monkeypatch.setattr(core, "request_blame", lambda *a, **k: calls.append(k.get("missed_only", False)) or real(*a, **k))
    state = LabState.from_query(catalog, f"?mission={M1}")
    view = table_view.TableView(state)
    state.run()
    state.change("gpus", state.settings["gpus"] + 1)
    state.run()
    assert view.pane.object == "" and calls == [True, True]  # closed: nothing built; each run blames its misses
    view.card.collapsed = False
    assert f'data-run="{state.run_id}"' in view.pane.object and calls == [True, True, False]  # every request, once
    assert f'data-gpus="{state.metrics["gpus"]}"' in view.pane.object
    assert f'data-requests="{state.metrics["requests"]}"' in view.pane.object
    assert f'data-finished="{state.metrics["finished"]}"' in view.pane.object
    view.card.collapsed = True
    view.card.collapsed = False
    assert len(calls) == 3  # the same run: not rebuilt
    state.change("gpus", state.settings["gpus"] + 1)
    state.run()
    assert f'data-run="{state.run_id}"' in view.pane.object and calls[3:] == [True, False]
    table = list(csv.reader(io.StringIO(view._csv().getvalue().decode("utf-8"))))
    assert len(calls) == 5  # the CSV reuses this run's blame
    assert tuple(table[0]) == REQUESTS_CSV_COLUMNS and len(table) - 1 == state.metrics["requests"]
    rows = view.pane.object.count("<tr data-request=")
    assert rows == min(table_view.ROWS_SHOWN, state.metrics["requests"])


def test_hiding_the_metrics_hides_the_table_view_too(catalog):
    from lab.ui.app import LabApp

    shown = LabApp(catalog, f"?mission={M1}")
    assert shown.table.card.visible
    hidden = LabApp(catalog, f"?mission={M1}&hide=metrics")
    assert not hidden.table.card.visible and not hidden.metrics.pane.visible
