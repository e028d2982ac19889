"""The lab's state object and the pure helpers behind the views, without a browser.

Uses the fixture missions in tests/ui/missions (stable on purpose: the real missions
are tuned by their authors) plus the sandbox.
"""

import math
import re

import numpy as np
import pytest

pytest.importorskip("panel")
pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from lab.core.errors import LabError  # noqa: E402
from lab.ui.catalog import SANDBOX_ID, Catalog, sandbox_mission  # noqa: E402
from lab.ui.views.metrics_view import STARS_WAIT_NOTE, stars_html  # noqa: E402
from lab.ui.runs.sweep import sweep_rates  # noqa: E402
from lab.ui.state import LabState, format_value  # noqa: E402
from lab.ui.url_state import (MAX_QUERY_CHARS, MAX_QUERY_FIELDS, MAX_UNKNOWN_NOTES, parse_search,  # noqa: E402
                              parse_settings, query_note)

M1 = "ui-mixing-hurts"
M2 = "ui-decode-drowns"


@pytest.fixture(scope="module")
def ran(catalog):
    """Mission 1 at its start, simulated once (shared: runs are the slow part)."""
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.run()
    return state


# ---------------------------------------------------------------- catalog

def test_catalog_lists_missions_in_order_and_finds_the_sandbox(catalog):
    assert [m.id for m in catalog.missions] == [M1, M2]
    assert catalog.get(SANDBOX_ID).id == SANDBOX_ID
    assert catalog.get("nope") is None
    assert catalog.get(None) is None
    assert catalog.get(["x"]) is None
    assert catalog.position(catalog.get(M2)) == 2
    assert catalog.next_after(catalog.get(M1)).id == M2
    assert catalog.next_after(catalog.get(M2)) is None


def test_catalog_reports_a_bad_folder_instead_of_raising(tmp_path):
    (tmp_path / "bad.json").write_text("{ not json", encoding="utf-8")
    cat = Catalog(tmp_path)
    assert cat.missions == []
    assert "bad.json" in cat.error
    assert cat.first().id == SANDBOX_ID


def test_sandbox_opens_every_control_and_has_no_stars():
    from lab.core.missions import CONTROL_SPECS

    sb = sandbox_mission()
    assert set(sb.controls) == set(CONTROL_SPECS)
    assert sb.stars == ()
    start = sb.settings(sb.scenario)
    assert sb.apply(start) == sb.scenario  # the start is a valid setting of every control
    for control in sb.controls.values():  # every control's ends are valid scenarios
        if control.kind != "choice":
            for end in (control.min, control.max):
                sb.apply({**start, control.name: control.check(end)})


# ---------------------------------------------------------------- URL parsing

def test_no_query_opens_the_first_mission_at_its_start(catalog):
    state = LabState.from_query(catalog, "")
    assert state.mission.id == M1
    assert state.notes == []
    assert state.is_start
    assert state.query() == {"mission": M1}


@pytest.mark.parametrize("changes", [
    {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 3},
    {"chunk_tokens": 512, "gpus": 5},
    {"gpus": 8},
])
def test_url_round_trip_reproduces_the_state(catalog, changes):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.change_many(changes)
    search = state.search()
    again = LabState.from_query(catalog, search)
    assert again.notes == []
    assert again.settings == state.settings
    assert again.scenario == state.scenario
    assert again.search() == search


def test_url_round_trip_in_the_sandbox_with_every_kind(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}")
    assert state.change_many({"layout": "disaggregated", "layerwise": True, "rate": 7.5, "link_gbytes_per_s": 6.5,
                              "link_sharing": "independent", "first_token": "prefill"})
    q = state.query()
    assert q["layerwise"] == "true" and q["rate"] == "7.5" and q["link_gbytes_per_s"] == "6.5"
    again = LabState.from_query(catalog, state.search(embed=True))
    assert again.settings == state.settings and again.notes == []


def test_hostile_url_falls_back_with_visible_escaped_notes(catalog):
    state = LabState.from_query(catalog, "?mission=../../etc&gpus=1e99&layout=<script>alert(1)</script>")
    assert state.mission.id == M1  # the first mission
    assert state.is_start
    text = " ".join(state.notes)
    assert "../../etc" in text
    assert "<script>" not in text
    assert "were for that mission" in text


@pytest.mark.parametrize("query, needle", [
    ("gpus=abc", "expected a whole number"),
    ("gpus=1e99", "expected a whole number"),
    ("gpus=4.5", "expected a whole number"),
    ("gpus=99", "out of range"),
    ("gpus=-3", "out of range"),
    ("gpus=99999999999999999999999", "expected a whole number"),
    ("layout=<b>x</b>", "expected one of colocated, disaggregated"),
    ("chunk_tokens=100", "not a setting of this control"),
    ("rate=3", "keeps rate locked"),
    ("frobnicate=1", "not a setting of the lab"),
])
def test_each_bad_value_is_ignored_with_a_note_naming_it(catalog, query, needle):
    state = LabState.from_query(catalog, f"?mission={M1}&{query}")
    assert state.mission.id == M1
    assert state.is_start
    assert len(state.notes) == 1
    note = state.notes[0]
    assert needle in note
    assert "<b>" not in note
    assert "Ignored" in note


def test_good_values_survive_next_to_bad_ones(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}&gpus=zz&chunk_tokens=512")
    assert state.settings["chunk_tokens"] == 512
    assert state.settings["gpus"] == 4
    assert len(state.notes) == 1 and "gpus=zz" in state.notes[0]


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e400", "0x10", "", " ", "１２"])
def test_non_finite_and_odd_numbers_are_refused(raw):
    sb = sandbox_mission()
    settings, notes = parse_settings(sb, {"rate": raw})
    assert settings == {} and len(notes) == 1


@pytest.mark.parametrize("raw", ["1e308", "-1e308", "1e300", "123456789012.5e290"])
def test_a_huge_value_is_abbreviated_in_its_note_as_the_cli_writes_it(raw):
    from lab.core.fields import number  # how the CLI's errors write a refused value

    sb = sandbox_mission()
    settings, notes = parse_settings(sb, {"rate": raw})
    assert settings == {} and len(notes) == 1
    assert f": {number(float(raw))} is out of range" in notes[0], notes[0]
    assert not re.search(r"[0-9]{20}", notes[0]), notes[0]
    assert len(notes[0]) < 200


class Refusing:
    """A mission whose apply refuses the settings `refuse(settings)` names (as a cross-field check
    would), with `message`."""

    def __init__(self, inner, refuse, message):
        self._inner, self._refuse, self._message = inner, refuse, message

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def apply(self, settings, base=None):
        if self._refuse(settings):
            raise LabError("controls.gpus", self._message)
        return self._inner.apply(settings)


class OneMission:
    """A catalog of one mission."""

    missions, error = [], ""

    def __init__(self, m):
        self.m = m

    def get(self, mid):
        return self.m if mid == self.m.id else None

    def first(self):
        return self.m

    def position(self, m):
        return 1


def test_settings_that_fail_together_fall_back_to_the_start(catalog):
    inner = catalog.get(M1)
    wrapped = Refusing(inner, lambda settings: settings != inner.settings(inner.scenario), "too many GPUs for this link")
    state = LabState.from_query(OneMission(wrapped), f"?mission={M1}&gpus=5")
    assert state.is_start
    assert any("too many GPUs" in n and "mission's start" in n for n in state.notes)


def test_query_string_parsing_is_bounded():
    assert parse_search("?a=1&a=2&b=") == {"a": "1", "b": ""}
    assert parse_search(None) == {}
    huge = "?" + "&".join(f"k{i}=v" for i in range(5000))
    assert len(parse_search(huge)) <= 64
    long_value = "?mission=" + "x" * 100_000
    assert len(parse_search(long_value)["mission"]) < 5000


def test_an_address_longer_than_the_lab_reads_gets_one_note_saying_so(catalog):
    many = f"?mission={M1}&" + "&".join(f"k{i}=v" for i in range(1_200))
    params = parse_search(many)
    assert list(params)[:3] == ["mission", "k0", "k1"] and len(params) == MAX_QUERY_FIELDS  # the first ones, in order
    assert query_note(many) == (f"The address has 1,201 parameters: the lab read the first {MAX_QUERY_FIELDS} "
                                "and ignored the rest.")
    state = LabState.from_query(catalog, many)
    assert state.mission.id == M1 and state.notes[0] == query_note(many)
    unknown = [n for n in state.notes if "not a setting of the lab" in n]
    assert len(unknown) == MAX_UNKNOWN_NOTES + 1  # one each for the first few, then one for the rest
    assert f"Ignored {MAX_QUERY_FIELDS - 1 - MAX_UNKNOWN_NOTES} more parameters" in unknown[-1]
    long = f"?mission={M1}&junk=" + "j" * MAX_QUERY_CHARS
    assert query_note(long).startswith(f"The address is {len(long) - 1:,} characters long: the lab read the first")
    assert query_note(f"?mission={M1}&gpus=3") is None and query_note(None) is None


@pytest.mark.parametrize("pin_changes", [None, {"layout": "disaggregated", "prefill_gpus": 1, "decode_gpus": 3},
                                         {"chunk_tokens": 512, "gpus": 5}])
def test_a_pinned_fleet_round_trips_through_the_url(catalog, pin_changes):
    state = LabState.from_query(catalog, f"?mission={M1}")
    if pin_changes:
        assert state.change_many(pin_changes)
    assert state.pin_fleet("current")
    assert state.change("gpus", 7)  # the fleet moves on; the pin stays
    search = state.search()
    assert ("pin=start" in search) == (pin_changes is None)  # readable: no %3A or %2C
    again = LabState.from_query(catalog, search)
    assert again.notes == []
    assert again.pin == state.pin and again.settings == state.settings
    assert again.search() == search
    assert again.pinned_start == (pin_changes is None)


@pytest.mark.parametrize("raw, needle", [
    ("", "expected start or name:value"),
    ("gpus", "is not name:value"),
    ("gpus:99", "out of range"),
    ("gpus:abc", "expected a whole number"),
    ("gpus:4,gpus:5", "named twice"),
    ("rate:3", "keeps rate locked"),
    ("frobnicate:1", "not a setting of the lab"),
    ("layout:<script>alert(1)</script>", "expected one of colocated, disaggregated"),
    ("<b>x</b>:1", "not a setting of the lab"),
    ("x" * 5000, "is not name:value"),
])
def test_a_bad_pin_is_ignored_whole_with_a_note_naming_it(catalog, raw, needle):
    from urllib.parse import quote

    state = LabState.from_query(catalog, f"?mission={M1}&gpus=5&pin={quote(raw)}")
    assert state.pin is None and state.settings["gpus"] == 5  # the rest of the link still applies
    assert len(state.notes) == 1
    note = state.notes[0]
    assert needle in note and "nothing is pinned" in note and "Ignored <code>pin=" in note
    assert "<script>" not in note and "<b>" not in note
    assert len(note) < 400
    assert "pin" not in state.query()


def test_a_pin_for_a_mission_that_is_not_there_is_not_applied_to_another(catalog):
    state = LabState.from_query(catalog, "?mission=gone&pin=gpus:5")
    assert state.mission.id == M1 and state.pin is None
    assert any("were for that mission" in n for n in state.notes)


def test_a_pin_of_the_workload_is_refused_in_the_sandbox(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&pin=rate:5")
    assert state.pin is None and "belongs to the workload" in state.notes[0]


def test_a_pin_the_mission_refuses_is_a_note_not_a_crash(catalog):
    refusing = Refusing(catalog.get(M1), lambda settings: settings.get("gpus") == 6, "six GPUs do not fit this rack")
    state = LabState.from_query(OneMission(refusing), f"?mission={M1}&pin=gpus:6")
    assert state.pin is None
    assert any("six GPUs" in n and "nothing is pinned" in n for n in state.notes)


def test_window_start_from_the_url(catalog):
    assert LabState.from_query(catalog, f"?mission={M1}&t=12.5").window_start == 12.5
    state = LabState.from_query(catalog, f"?mission={M1}&t=-1")
    assert state.window_start == 0 and "t=-1" in state.notes[0]
    assert not state.share_window and "t" not in state.query()


def test_window_start_is_written_back_once_worth_sharing(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.window_start = 7.25
    assert "t" not in state.query()  # the automatic window is not put in the address
    state.share_window = True  # the student scrubbed or paused
    state.window_start = 12.3456
    assert state.query()["t"] == "12.35"
    assert state.change("gpus", 5)
    assert state.query() == {"mission": M1, "gpus": "5", "t": "12.35"}  # settings keep the moment
    again = LabState.from_query(catalog, state.search(embed=True))
    assert again.window_start == 12.35 and again.share_window and again.notes == []
    assert again.search(embed=True) == state.search(embed=True)
    state.window_start = 20.0
    assert state.query()["t"] == "20"


def test_format_value_round_trips():
    sb = sandbox_mission()
    for name, control in sb.controls.items():
        for value in (control.grid() or [])[:5]:
            settings, notes = parse_settings(sb, {name: format_value(value)})
            assert notes == [] and settings[name] == value


# ---------------------------------------------------------------- changes and runs

def test_change_validates_through_the_mission_and_turns_busy(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert not state.busy
    assert state.change("chunk_tokens", 512)
    assert state.busy and state.error == ""
    assert state.scenario.fleet.chunk_tokens == 512
    before = dict(state.settings)
    assert not state.change("gpus", 99)
    assert "controls.gpus" in state.error
    assert state.settings == before
    assert not state.change("rate", 5)  # locked in this mission
    assert "locked" in state.error


def test_run_publishes_metrics_rows_and_live_stars(ran):
    assert ran.run_id == 1 and not ran.busy
    assert ran.metrics["requests"] == len(ran.rows) > 0
    assert set(core.METRIC_NAMES) <= set(ran.metrics)
    assert ran.stars_now == ran.mission.evaluate(ran.metrics)
    assert ran.run_ms > 0
    assert ran.window_start <= max(ran.result.end_time - 2.5, 0)


def test_each_run_blames_its_misses_once_and_every_request_when_asked(ran, monkeypatch):
    missed = [r for r in ran.rows if not r["met_slo"]]
    assert ran.blame_summary["missed"] == len(missed) > 0
    assert ran.blame_summary == core.blame_summary(core.request_blame(ran.result, ran.rows))
    calls = []
    real = core.request_blame
    monkeypatch.setattr(core, "request_blame", lambda *a, **k: calls.append(k) or real(*a, **k))
    blames = ran.request_blames()
    assert [b.id for b in blames] == [r["id"] for r in ran.rows]  # index = request id order of rows
    assert [b.missed for b in blames] == [not r["met_slo"] for r in ran.rows]
    assert blames == real(ran.result, ran.rows)
    assert ran.request_blames() is blames and ran.blame_of(missed[0]["id"]) is blames[missed[0]["id"]]
    assert calls == [{}]  # made once, when first asked for


def test_a_failed_run_clears_the_blames(catalog, monkeypatch):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.run()
    assert state.request_blames() and state.blame_summary
    state.change("gpus", state.settings["gpus"] + 1)  # a new run (a kept one would not simulate again)
    monkeypatch.setattr(core, "simulate", lambda *a, **k: (_ for _ in ()).throw(LabError("x", "boom")))
    assert state.run() is None
    assert state.request_blames() == [] and state.blame_summary == {} and state.blame_of(0) is None


def test_stars_are_only_ever_added(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.change("layout", "disaggregated")
    state.run()
    assert all(state.stars_now)  # the fixture's split earns every star
    earned = list(state.saved_stars)
    state.reset()
    state.run()
    assert not any(state.stars_now)
    assert state.saved_stars == earned  # earned before: still earned


def test_a_solution_link_shows_its_stars_but_earns_none_until_a_control_changes(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}&layout=disaggregated")
    state.run()
    assert all(state.stars_now)  # the link's split meets every star ...
    assert not state.touched and state.stars_credited == [False, False, False]
    assert state.saved_stars == [False, False, False]  # ... and earns none
    state.reset()  # back to the start is a change (it alters the settings) ...
    state.change("layout", "disaggregated")  # ... and so is choosing the split again
    state.run()
    assert state.touched and state.stars_credited == [True, True, True]
    assert state.saved_stars == [True, True, True]


def test_only_a_student_change_that_alters_the_settings_makes_stars_count(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    assert state.reset() and not state.touched  # a reset at the start changes nothing
    assert state.change("layout", "colocated") and not state.touched  # the value it already has
    assert not state.change("gpus", 99) and not state.touched  # refused
    assert state.change_many({"layout": "disaggregated"}, by_student=False)  # a restored history entry
    state.run()
    assert all(state.stars_now) and not state.touched and state.saved_stars == [False, False, False]
    assert state.change("gpus", 5) and state.touched


def test_the_stars_say_they_count_after_a_change_only_while_that_applies(catalog):
    mission = catalog.get(M1)
    waiting = stars_html(mission, {"gpus": 4}, [True, False, False], [False] * 3, counting=False, from_link=True)
    assert STARS_WAIT_NOTE in waiting and "change a control to earn it" in waiting
    counting = stars_html(mission, {"gpus": 4}, [True, False, False], [False] * 3, counting=True, from_link=True)
    assert STARS_WAIT_NOTE not in counting and "this run earns it" in counting


def test_the_shared_link_note_shows_only_for_a_link_with_settings_not_from_the_hub(catalog):
    """The hub opens /lab?mission=ID: no link's fleet to explain, so no note about links."""
    from lab.ui.views.metrics_view import StarsView

    hub = LabState.from_query(catalog, f"?mission={M1}")
    assert not hub.from_link
    hub.run()
    assert STARS_WAIT_NOTE not in StarsView(hub).pane.object
    link = LabState.from_query(catalog, f"?mission={M1}&layout=disaggregated")
    assert link.from_link
    link.run()
    assert STARS_WAIT_NOTE in StarsView(link).pane.object and "A link opens its fleet" in StarsView(link).pane.object
    # Settings in the link equal to the start: the page is the hub's; no note either.
    same = LabState.from_query(catalog, f"?mission={M1}&layout=colocated")
    assert not same.from_link


def test_merge_saved_ignores_garbage(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    state.merge_saved("garbage")
    state.merge_saved([1, "true", None])
    assert state.saved_stars == [False, False, False]
    state.merge_saved([False, True])
    assert state.saved_stars == [False, True, False]
    state.merge_saved([])
    assert state.saved_stars == [False, True, False]


def test_sweep_reports_progress_and_goes_stale(catalog):
    state = LabState.from_query(catalog, f"?mission={M1}")
    seen = []
    sweep = state.run_sweep(points=4, progress=lambda done, total: seen.append((done, total)))
    total = len(sweep["rates"])
    assert seen == [(i, total) for i in range(1, total + 1)]
    assert state.sweep_progress is None
    assert len(sweep["goodput"]) == total and all(g >= 0 for g in sweep["goodput"])
    assert 12.0 in sweep["rates"]
    assert not state.sweep_stale
    state.change("gpus", 5)
    assert state.sweep_stale


def test_sweep_rates_cover_a_quarter_to_twice_the_rate():
    rates = sweep_rates(12, 8)
    assert rates[0] == 3.0 and rates[-1] == 24.0 and 12.0 in rates
    assert sweep_rates(0) == [] and sweep_rates(None) == []


# ---------------------------------------------------------------- views' pure parts

def test_timeline_data_accounts_for_every_step(ran):
    from lab.ui.data.canvas_data import timeline_data

    tpot = ran.scenario.slo.per_token_target_ms
    data = timeline_data(ran.result, tpot)
    steps = sum(len(g) for g in ran.result.gpus)
    # Decode steps within the target come as runs of steps back to back (canvas.decode_runs).
    assert int(data["decode"]["steps"].sum()) + sum(len(data[k]["left"]) for k in ("slow", "prefill")) == steps
    slow = data["slow"]
    # Times travel as float32 (µs precision over a run): durations agree to 0.02 ms.
    dur_ms = lambda layer: (layer["right"].astype(float) - layer["left"]) * 1000.0  # noqa: E731
    assert np.all(dur_ms(slow) > tpot - 0.02) and np.all(slow["batch"] > 0)
    assert np.all(dur_ms(data["decode"]) <= data["decode"]["steps"] * (tpot + 0.02))
    assert len(data["bounds"]["left"]) == 3 * int((data["decode"]["steps"] - 1).sum())  # a tick inside a run per step
    assert np.all(data["prefill"]["batch"] == 0)
    mixed = sum(1 for g in ran.result.gpus for b, p in zip(g.decode_seqs, g.prefill_tokens) if b and p)
    assert len(data["strip"]["left"]) == mixed
    assert np.all(data["strip"]["right"] >= data["strip"]["left"])
    assert data["meta"]["rows"] == len(ran.result.gpus) + 1 and data["meta"]["link_row"] is None  # + the prefill queue
    assert data["meta"]["labels"][0] == "prefill queue" and data["meta"]["link_queue_row"] is None
    assert len(data["wire"]["left"]) == 0
    ov = data["overview"]
    assert np.all((ov["slow"] >= 0) & (ov["slow"] <= ov["busy"] + 1e-9)) and np.all(ov["busy"] <= 1 + 1e-9)


def test_timeline_data_of_a_split_fleet_has_a_link_row(catalog):
    from lab.ui.data.canvas_data import timeline_data

    state = LabState.from_query(catalog, f"?mission={M2}")
    state.run()
    data = timeline_data(state.result, state.scenario.slo.per_token_target_ms)
    meta = data["meta"]
    assert meta["rows"] == len(state.result.gpus) + 3  # the prefill queue, the link queue, the link
    assert meta["labels"][meta["link_row"]] == "link (KV)"
    assert meta["labels"][meta["link_queue_row"]] == "link queue" and meta["link_queue_row"] == meta["link_row"] - 1
    assert len(data["wire"]["left"]) == len(state.result.transfers)
    assert np.all(data["wire"]["right"] >= data["wire"]["left"])
    assert np.all(data["wait"]["right"] > data["wait"]["left"])


def test_token_gaps_match_the_core_per_request_gaps(ran):
    from lab.ui.views.plots import token_gaps

    gaps, weights = token_gaps(ran.result)
    expected = sorted(g * 1000.0 for rec in ran.result.requests for g in core.request_gaps(ran.result, rec))
    got = sorted(v for v, w in zip(gaps.tolist(), weights.tolist()) for _ in range(int(w)))
    assert len(got) == len(expected)
    assert np.allclose(got, expected)


def test_itl_histogram_shares_sum_to_one(ran):
    from lab.ui.views.plots import itl_histogram

    hist = itl_histogram(ran.result, 25.0)
    assert math.isclose(float(np.sum(hist["share"])), 1.0, rel_tol=1e-9)
    assert 25.0 in list(hist["left"]) + list(hist["right"])
    assert all(o == (math.sqrt(a * b) > 25.0) for a, b, o in zip(hist["left"], hist["right"], hist["over"]))


def test_gap_scatter_splits_met_and_missed(ran):
    from lab.ui.views.plots import gap_scatter_data

    data = gap_scatter_data(ran.rows)
    with_gap = [r for r in ran.rows if r["worst_gap_ms"] is not None]
    assert len(data["met"]["x"]) + len(data["miss"]["x"]) == len(with_gap)
    assert len(data["met"]["x"]) == sum(r["met_slo"] for r in with_gap)


def test_metric_cards_and_stars_escape_and_mark_pass_fail(ran):
    from lab.ui.views.metrics_view import metrics_html, stars_html

    page = metrics_html(ran.metrics, ran.scenario)
    assert 'data-metric="tpot"' in page and ("✓" in page or "✗" in page)
    assert metrics_html({}, ran.scenario).startswith('<div class="stf-metrics"')

    class Star:
        label = "<script>x</script>"

        def explain(self, metrics):
            return []

    class M:
        stars = (Star(),)

    html_text = stars_html(M(), ran.metrics, [True], [False])
    assert "<script>" not in html_text and "&lt;script&gt;" in html_text
    assert 'data-live="true"' in html_text and 'data-earned="false"' in html_text


def test_an_earned_star_shows_its_debrief_and_all_earned_show_the_outro():
    from lab.core.missions import load_mission
    from lab.ui.views.metrics_view import stars_html

    def star(label, debrief):
        return {"label": label, "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.9}], "debrief": debrief}

    m = load_mission({
        "id": "t", "title": "T", "order": 0, "summary": "s", "brief": "b\n\n**Try:** x",
        "scenario": {"workload": {"rate": 2, "duration_s": 5, "prompt_tokens": 100, "output_tokens": 10},
                     "fleet": {"layout": "colocated", "gpus": 2}, "slo": {"tpot_ms": 25}},
        "controls": {"gpus": {"min": 1, "max": 4}},
        "stars": [star("one", "Prefill **leaves** the decode GPUs."), star("two", "A <script>x</script> two-step."),
                  star("three", "Third [why](javascript:alert(1)).")],
        "outro": ["You split the fleet.", "", "Next: [the surge](lab?mission=long-document-surge)."],
    })
    page = stars_html(m, {"slo_attainment": 0.95}, [True, True, True], [True, False, False])
    assert 'data-debrief="0"' in page and "Prefill <strong>leaves</strong> the decode GPUs." in page
    assert 'data-debrief="1"' not in page and "two-step" not in page  # not earned yet: no debrief
    assert "three" in page and "Third" not in page
    assert 'data-outro' not in page and "You split the fleet" not in page  # not all earned
    page = stars_html(m, {"slo_attainment": 0.95}, [True, True, True], [True, True, True])
    assert [f'data-debrief="{i}"' in page for i in range(3)] == [True, True, True]
    assert "<script>" not in page and "&lt;script&gt;" in page  # the mission's text never becomes markup
    assert 'href="javascript' not in page and "Third [why](javascript:alert(1))." in page  # left as text
    assert page.index('data-outro="true"') > page.index("</ul>")
    assert "<p>You split the fleet.</p>" in page and 'href="lab?mission=long-document-surge"' in page
    # A mission without an outro shows none even when every star is earned.
    bare = load_mission({**m.to_dict(), "outro": None, "stars": [{"label": "one", "when": [
        {"metric": "slo_attainment", "op": ">=", "value": 0.9}]}]})
    page = stars_html(bare, {"slo_attainment": 0.95}, [True], [True])
    assert "data-outro" not in page and "data-debrief" not in page


def test_clean_stars_keeps_readable_entries_only():
    from lab.ui.stars.stars_bridge import clean_stars

    assert clean_stars("x") == {}
    data = {"good-one": [True, False, 1, "true"], "Bad Id": [True], "../x": [True], "fine": "nope", "ok": [],
            "newline\n": [True]}  # a final newline is not part of an id
    assert clean_stars(data) == {"good-one": [True, False, False, False], "ok": []}
    assert len(clean_stars({"m": [True] * 100})["m"]) == 16


def test_the_canvas_is_sized_for_the_most_rows_the_mission_can_reach(catalog):
    from lab.ui.data.canvas_data import FRAME_MAX_PX, frame_px, max_rows

    # Queue rows: the prefill queue always; a split fleet's link queue too.
    rows, longest = max_rows(catalog.get(M1))  # colocated up to 8 GPUs, or 6 + 6, the link and 2 queues
    assert rows == 15 and longest.endswith("colocated")
    rows, longest = max_rows(catalog.get(M2))  # split only: 7 + 7, the link and 2 queues
    assert rows == 17 and len(longest) == len("GPU 13 · decode")  # as long as "GPU 6 · prefill"
    assert max_rows(sandbox_mission())[0] == 12 + 12 + 1 + 2
    assert frame_px(2) == frame_px(6) < frame_px(9) < frame_px(25) == FRAME_MAX_PX


def test_changing_the_fleet_never_changes_the_canvas_height(catalog):
    """A new height re-lays out the whole page in the browser: the rows share a fixed frame."""
    from lab.ui.timeline.canvas import Canvas

    state = LabState.from_query(catalog, f"?mission={M1}")
    canvas = Canvas(state)
    heights, rows, halves = set(), [], []
    for changes in ({}, {"gpus": 8}, {"gpus": 2}, {"layout": "disaggregated", "prefill_gpus": 6, "decode_gpus": 6}):
        if changes:
            assert state.change_many(changes)
        state.run()
        heights.add(canvas.figure.height)
        n = len(canvas.row_labels.data["y"])
        assert canvas.row_labels.data["text"][0] == "prefill queue"
        assert canvas.row_labels.data["text"][1].startswith("GPU 0 · ")
        rows.append(n)
        assert canvas.figure.y_range.start == n - 0.5 and canvas.figure.y_range.end == -0.5
        halves.append(canvas._geometry)
        # A GPU's step boxes share its row's box with the KV band above them.
        assert 0 < canvas._box_glyphs[0].height < 2 * canvas._geometry == canvas._wire_glyph.height
    assert len(heights) == 1
    assert rows == [5, 9, 3, 15]
    # Boxes are at most 30 px and fill at most 80% of a row.
    frame = canvas.plot_px
    for n, half in zip(rows, halves):
        assert half <= 0.4 + 1e-9 and 2 * half * frame / n <= 30 + 1e-6


def test_plot_legends_have_a_swatch_for_every_series_even_without_points(ran):
    from lab.ui.views.plots import Plots

    plots = Plots(ran, on_sweep=lambda: None)
    assert ran.sweep is None and len(plots.sweep_src.data["rate"]) == 0  # nothing swept yet
    for fig in (plots.gap_fig, plots.itl_fig, plots.sweep_fig):
        items = fig.legend[0].items
        assert len(items) >= 2
        for item in items:
            for renderer in item.renderers:
                data = renderer.data_source.data
                # A legend draws its swatch from the renderer's first point: legend-only
                # renderers always have one (at NaN, so the plot itself never shows it).
                assert data and all(len(v) == 1 for v in data.values()), item.label
                assert renderer.data_source not in (plots.gap_met, plots.gap_miss, plots.hist_ok, plots.hist_over,
                                                    plots.sweep_src)
    labels = [item.label.value for item in plots.gap_fig.legend[0].items]
    assert labels == ["met the SLO", "missed"]


def test_log_ticks_read_one_two_five():
    from lab.ui.views.plots import log_ticks

    assert log_ticks(7, 600) == [10, 20, 50, 100, 200, 500]
    assert log_ticks(0.5, 3) == [0.5, 1, 2]
    assert log_ticks(1, 1e6) == [1, 10, 100, 1000, 10000, 100000, 1000000]
    assert log_ticks(6, 35) == [7, 10, 20, 30]  # a short range gets more marks
    assert log_ticks(11, 19) == [12, 14, 16, 18]  # a sliver of a decade: round numbers
    assert log_ticks(0, 10) == [1, 10, 100, 1000]  # not a log range: a harmless default


def test_locked_settings_are_one_collapsed_line_in_the_embed(catalog):
    from lab.ui.views.controls import locked_html

    state = LabState.from_query(catalog, f"?mission={M2}")  # keeps the rate, chunking, ... locked
    full = locked_html(state)
    compact = locked_html(state, compact=True)
    assert "Locked in this mission" in full and full.count("<li>") >= 2
    assert compact.startswith('<details class="stf-locked-compact"') and " open" not in compact.split(">")[0]
    summary = compact.split("<summary>")[1].split("</summary>")[0]
    assert summary.count("<b>") == full.count("<li>")  # every locked value is on the one line
    assert "<br" not in summary and "<li" not in summary
    assert compact.count("<li>") == full.count("<li>")  # and listed in full when opened
    sandbox = LabState.from_query(catalog, f"?mission={SANDBOX_ID}")
    assert locked_html(sandbox) == locked_html(sandbox, compact=True) == ""  # nothing locked


def test_the_locked_list_keeps_its_length_when_the_layout_switches(catalog):
    """A sidebar that changes height re-lays out the page in the browser."""
    from lab.ui.views.controls import locked_html

    state = LabState.from_query(catalog, f"?mission={M1}")  # both layouts allowed
    colocated = locked_html(state)
    assert state.change("layout", "disaggregated")
    split = locked_html(state)
    assert colocated.count("<li") == split.count("<li") > colocated.count('<li class="idle"') > 0
    assert "(split fleet)" in colocated and "(colocated fleet)" not in colocated
    assert "(colocated fleet)" in split or '<li class="idle"' not in split
    compact = locked_html(state, compact=True)  # the embed: only what matters now
    assert compact.count("<li>") == split.count("<li>") - split.count('<li class="idle"')


def test_a_lone_change_runs_at_once_and_a_burst_is_debounced(monkeypatch):
    from types import SimpleNamespace

    import lab.ui.app as app

    clock = [100.0]
    monkeypatch.setattr(app.time, "monotonic", lambda: clock[0])
    lab = SimpleNamespace(_pending=None, _last_change=-1e9)
    assert app.LabApp._change_delay(lab) == app.FIRST_MS  # the first change: no wait
    lab._pending = object()  # its run has not started yet
    clock[0] += 0.010
    assert app.LabApp._change_delay(lab) == app.DEBOUNCE_MS
    lab._pending = None  # that run is done, but the changes keep coming
    clock[0] += app.DEBOUNCE_MS / 2000.0
    assert app.LabApp._change_delay(lab) == app.DEBOUNCE_MS
    clock[0] += 1.0  # a quiet second later
    assert app.LabApp._change_delay(lab) == app.FIRST_MS
    assert app.FIRST_MS < app.DEBOUNCE_MS <= 80


def test_a_layerwise_fifo_link_row_draws_only_the_wire_time_and_never_overlaps():
    """Layer-wise chunks of several transfers share the fifo wire: the row shows each chunk, not start..end."""
    from lab.ui.data.canvas_data import timeline_data

    sc = core.load_scenario({"seed": 3, "workload": {"rate": 20, "duration_s": 6, "prompt_tokens": 2000, "output_tokens": 50},
                             "fleet": {"layout": "disaggregated", "prefill_gpus": 3, "decode_gpus": 2,
                                       "link": {"gbytes_per_s": 5, "layerwise": True}}})
    result = core.simulate(sc)
    wire = timeline_data(result, 25.0)["wire"]
    layers = len(result.transfers[0].layer_starts)
    assert layers > 1 and len(wire["left"]) == layers * len(result.transfers)
    order = np.argsort(wire["left"], kind="stable")
    left, right = np.asarray(wire["left"], float)[order], np.asarray(wire["right"], float)[order]
    assert np.all(left[1:] >= right[:-1] - 1e-6), "two chunks on the fifo wire at once"
    hulls = sum(t.end - t.start for t in result.transfers)
    assert float(np.sum(right - left)) < 0.9 * hulls  # the wire is free between a stream's chunks
    # The hover still tells each transfer's own wire time, once per chunk.
    first = result.transfers[0]
    rows = [i for i, r in enumerate(wire["req"]) if r == first.request]
    assert len(rows) == layers
    assert np.allclose(np.asarray(wire["wire_ms"])[rows], layers * first.layer_s * 1000.0, rtol=1e-4)
