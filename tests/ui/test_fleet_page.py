"""The page for fleets as they are built (issue 11), without a browser: controls that move in
whole instances, refusals that name the spec's rule, rows per instance with their labels and
GPU types, each instance's own KV capacity, and the words of the story and the Table view."""

import numpy as np
import pytest

pytest.importorskip("panel")

from lab.core.cost import instance_costs  # noqa: E402
from lab.ui.data.canvas_data import max_rows, timeline_data  # noqa: E402
from lab.ui.catalog import SANDBOX_ID, sandbox_mission  # noqa: E402
from lab.ui.views.controls import Controls, locked_html  # noqa: E402
from lab.ui.views.metrics_view import fmt_joules, fmt_usd, fmt_watts  # noqa: E402
from lab.ui.data.queues import kv_usage  # noqa: E402
from lab.ui.state import LabState  # noqa: E402
from lab.ui.views.story import story_html  # noqa: E402
from lab.ui.views.table_view import gpu_table_html  # noqa: E402

FLEET = "ui-fleet-built"  # tests/ui/fleet_missions/01-fleet-built.json: 70B, H100 prefill TP 2, A100 decode TP 4
M1 = "ui-mixing-hurts"


@pytest.fixture(scope="module")
def built(fleet_catalog):
    state = LabState.from_query(fleet_catalog, f"?mission={FLEET}")
    state.run()
    return state


def labels_of(state):
    meta = timeline_data(state.result, state.scenario.slo.per_token_target_ms)["meta"]
    return [meta["labels"][i] for i in range(meta["rows"])]


def test_rows_are_instances_named_by_their_gpus_and_type_when_the_pools_differ(built, fleet_catalog):
    assert labels_of(built) == [
        "prefill queue", "GPUs 0–1 · prefill · H100 ×2", "GPUs 2–3 · prefill · H100 ×2", "link queue", "link (KV)",
        "GPUs 4–7 · decode · A100 ×4"]
    # One GPU type in the whole fleet: no type on the rows.
    same = LabState.from_query(fleet_catalog, f"?mission={FLEET}&decode_gpu=h100")
    same.run()
    assert labels_of(same)[1] == "GPUs 0–1 · prefill" and labels_of(same)[-1] == "GPUs 4–7 · decode"
    colo = LabState.from_query(fleet_catalog, f"?mission={FLEET}&layout=colocated&tp=4")
    colo.run()
    assert labels_of(colo) == ["prefill queue", "GPUs 0–3 · colocated", "GPUs 4–7 · colocated"]


def test_the_canvas_is_sized_for_the_most_instances_and_the_longest_label(catalog, fleet_catalog):
    rows, longest = max_rows(fleet_catalog.get(FLEET))
    # 70B fits no GPU at TP 1, so the most instances are 8 prefill GPUs / 2 + 8 decode GPUs / 2, and the
    # link and two queues (colocated: 12 / 2 + 1).
    assert rows == 8 // 2 + 8 // 2 + 3
    assert len(longest) == len("GPUs 14–15 · decode · H100 ×2")  # as long as "GPUs 8–15 · decode · H100 ×8"
    rows, longest = max_rows(sandbox_mission())
    # The sandbox offers the planner: its last decode instance may have moved ("→prefill").
    assert rows == 12 + 12 + 3 and len(longest) == len("GPUs 22–23 · →prefill · H100 ×2")
    assert max_rows(catalog.get(M1))[1] == "GPU 7 · colocated"  # no tp, one GPU type: as before


def test_a_gpu_type_takes_a_second_line_only_where_rows_have_room(built, fleet_catalog):
    from lab.ui.timeline.canvas import Canvas
    from lab.ui.data.canvas_data import TWO_LINE_PX, rows_html, split_label

    labels = labels_of(built)
    assert split_label(labels[1]) == ("GPUs 0–1 · prefill", "H100 ×2") and split_label("link (KV)") == ("link (KV)", None)
    roomy = rows_html(labels, TWO_LINE_PX * len(labels))
    assert 'GPUs 0–1 · prefill<span class="ty">H100 ×2</span>' in roomy
    thin = rows_html(labels, (TWO_LINE_PX - 1) * len(labels))
    assert "GPUs 0–1 · prefill</div>" in thin and "H100" not in thin
    # The gutter is as wide as the longest first line, not the type: a phone keeps its timeline.
    canvas = Canvas(LabState.from_query(fleet_catalog, f"?mission={FLEET}"))
    _, longest = max_rows(fleet_catalog.get(FLEET))
    assert canvas._gutter_px < len(longest) * 6.8


def test_kv_bands_fill_against_each_instances_own_capacity(built):
    data = timeline_data(built.result, built.scenario.slo.per_token_target_ms)
    costs = instance_costs(built.scenario)
    usage = kv_usage(built.result)
    decode = [g.index for g in built.result.gpus if g.role == "decode"]
    assert decode == [2] and costs[2].kv_tokens != built.scenario.model.kv_tokens_per_gpu
    _, _, tokens = usage[2]
    expected = np.clip(tokens / costs[2].kv_tokens, 0, 1)
    assert np.allclose(np.sort(data["kv"]["n"]), np.sort(expected.astype(np.float32)))
    assert 0 < data["kv"]["n"].max() < 1


def test_the_story_and_the_table_name_instances_by_label(built):
    rec = next(r for r in built.result.requests if r.finish is not None)
    html = story_html(built.rows[rec.id], built.blame_of(rec.id), built.result, built.scenario)
    assert "Prefill on <b>GPUs 0–1</b>" in html or "Prefill on <b>GPUs 2–3</b>" in html
    assert "Decode on <b>GPUs 4–7</b>" in html and "to <b>GPUs 4–7</b>" in html
    table = gpu_table_html(built.result, built.scenario.slo)
    assert '<th scope="row">GPUs 4–7</th><td>decode</td><td>A100 ×4</td>' in table
    assert '<th scope="row">GPUs 0–1</th><td>prefill</td><td>H100 ×2</td>' in table


# ---------------------------------------------------------------- controls

def test_a_gpu_count_slider_moves_in_whole_instances(fleet_catalog):
    state = LabState.from_query(fleet_catalog, f"?mission={FLEET}")
    controls = Controls(state, on_change=state.change)
    prefill, decode = controls.widgets["prefill_gpus"], controls.widgets["decode_gpus"]
    assert (prefill.start, prefill.end, prefill.step) == (2, 8, 2)  # TP 2
    assert (decode.start, decode.end, decode.step) == (4, 8, 4)  # TP 4, from 4 GPUs
    assert state.change("decode_tp", 2)
    assert (decode.start, decode.end, decode.step) == (2, 8, 2)
    assert state.change("decode_tp", 1) is False  # 70B does not fit on one A100
    assert (decode.start, decode.end, decode.step) == (2, 8, 2)


def test_a_refused_tp_shows_the_specs_message_and_keeps_the_run(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&gpus=3")
    controls = Controls(state, on_change=state.change)
    state.run()
    before = state.metrics
    assert controls.widgets["gpus"].step == 1
    assert state.change("tp", 2) is False
    assert state.error == "fleet.gpus: 3 GPUs is not a whole number of instances of tp = 2 GPUs: use a multiple of 2"
    assert controls.error.visible and "3 GPUs is not a whole number of instances of tp = 2" in controls.error.object
    assert controls.widgets["tp"].value == 1 and state.settings["tp"] == 1  # snapped back
    assert state.metrics is before and not state.busy
    assert state.change("gpus", 4) and state.change("tp", 2)
    assert state.error == "" and not controls.error.visible
    assert (controls.widgets["gpus"].start, controls.widgets["gpus"].step) == (2, 2)


def test_bad_fleet_values_in_the_address_are_named(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&tp=3&prefill_gpu=b200")
    assert state.settings["tp"] == 1
    notes = " ".join(state.notes)
    assert "Ignored <code>tp=3</code>: expected one of 1, 2, 4, 8" in notes
    assert "Ignored <code>prefill_gpu=b200</code>: expected one of h100, a100, h200" in notes
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&tp=2&gpus=3")
    assert state.settings["gpus"] == 4 and state.settings["tp"] == 1
    assert ("Ignored the settings in the link: fleet.gpus: 3 GPUs is not a whole number of instances of tp = 2 GPUs"
            in " ".join(state.notes))
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&decode_power_cap_w=350&layout=disaggregated&llm=llama3-70b")
    assert "does not fit on 1 h100" in " ".join(state.notes)  # 70B needs TP 2: the link's fleet is refused whole
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&decode_power_cap_w=350&layout=disaggregated")
    assert state.scenario.fleet.decode_power_cap_w == 350.0 and not state.notes
    assert state.query()["decode_power_cap_w"] == "350"


def test_greyed_controls_say_what_they_wait_for(catalog):
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}")
    controls = Controls(state, on_change=state.change)
    assert {"long_prompt_tokens", "long_gpus", "attention", "prefill_tp"} <= set(controls.idle)
    assert "with routing by length" in controls.hint.object and "with the roofline cost model" in controls.hint.object
    assert state.change("dispatch", "length_split") and state.change("cost", "roofline")
    assert not {"long_prompt_tokens", "long_gpus", "attention"} & set(controls.idle)


def test_the_locked_list_leaves_out_fleet_knobs_at_the_plain_default(catalog, built):
    plain = LabState.from_query(catalog, f"?mission={M1}")
    text = locked_html(plain)
    for label in ("Tensor parallel", "Power cap", "Routing", "Attention", "GPU type", "Long prompts"):
        assert label not in text
    # A mission that locks a knob off its default lists it.
    assert "Model: <b>Llama 3 70B</b>" in locked_html(built) and "Step cost model: <b>Roofline (textbook)</b>" in locked_html(built)


# ---------------------------------------------------------------- cost and energy

def test_cost_and_energy_cards_show_the_cores_metrics(built):
    from lab.ui.views.metrics_view import metrics_html

    m = built.metrics
    page = metrics_html(m, built.scenario)
    assert page.index('data-metric="goodput"') < page.index('data-metric="cost"') < page.index('data-metric="energy"')
    # Each value is the core's, formatted: cost per good request shown per 1,000 requests.
    assert f'data-value="usd_per_good_request">{fmt_usd(m["usd_per_good_request"] * 1000)}<' in page
    assert f'data-value="usd_per_hour">{fmt_usd(m["usd_per_hour"])}<' in page
    assert f'data-value="usd_per_million_tokens">{fmt_usd(m["usd_per_million_tokens"])}<' in page
    assert f'data-value="energy_j_per_token">{fmt_joules(m["energy_j_per_token"])}<' in page
    assert f'data-value="power_w_mean">{fmt_watts(m["power_w_mean"])}<' in page
    # 4 H100 at $2.50/h and 4 A100 at $1.30/h (the illustrative presets).
    assert fmt_usd(m["usd_per_hour"]) == "$15.20"
    none_good = metrics_html({**m, "usd_per_good_request": None}, built.scenario)
    assert 'data-value="usd_per_good_request">—<' in none_good


def test_money_energy_and_power_formats():
    assert [fmt_usd(v) for v in (None, 0.00023, 0.0016, 0.23, 1.59, 20, 1234.5)] == [
        "—", "$0.00023", "$0.0016", "$0.23", "$1.59", "$20.00", "$1,234"]
    assert [fmt_joules(v) for v in (None, 0.5, 2.13, 640, 3200, 1.4e6)] == [
        "—", "0.5\u00a0J", "2.1\u00a0J", "640\u00a0J", "3.2\u00a0kJ", "1.4\u00a0MJ"]
    assert fmt_joules(2.98) == "3.0\u00a0J" and fmt_joules(12.5) == "12\u00a0J"
    assert [fmt_watts(v) for v in (None, 310.4, 3210)] == ["—", "310\u00a0W", "3.2\u00a0kW"]


def test_a_star_tests_value_never_reads_in_e_notation():
    from lab.ui.words.figures import fmt_number  # a number with no card of its own

    values = (None, 3, 0.0, 0.95, 0.00225, 1.8e-05, 1243.5, -2500.0, 12345678.0)
    shown = [fmt_number(v) for v in values]
    assert shown == ["—", "3", "0", "0.95", "0.00225", "0.0000180", "1,244", "-2,500", "12,345,678"]
    assert not any("e" in text for text in shown)


def test_the_table_view_gives_cost_and_energy_per_pool(built):
    from lab.ui.views.table_view import pool_table_html

    m = built.metrics
    table = pool_table_html(built.result, m)
    assert '<tr data-pool="prefill"><th scope="row">prefill</th><td>4 × H100 in TP 2</td>' in table
    assert '<tr data-pool="decode"><th scope="row">decode</th><td>4 × A100 in TP 4</td>' in table
    assert f'<td>{fmt_usd(m["decode_usd_per_hour"])}</td><td>{fmt_watts(m["decode_power_w_mean"])}</td>' in table
    assert f'<td>{fmt_watts(m["decode_power_w_mean"] / 4)}</td><td>{fmt_joules(m["decode_energy_j"])}</td>' in table
    assert '<tr data-pool="fleet">' in table and "illustrative" in table


def test_the_twin_compares_cost_and_energy_and_names_what_fleets_are_built_of(built, fleet_catalog):
    from lab.ui.views.twin_view import fleet_phrase, metric_deltas

    cheaper = LabState.from_query(fleet_catalog, f"?mission={FLEET}&prefill_gpu=a100")
    cheaper.run()
    rows = {r["name"]: r for r in metric_deltas(cheaper.metrics, built.metrics)}
    assert rows["usd_per_hour"]["verdict"] == "better" and rows["usd_per_hour"]["change"] == "−$4.80"
    for name in ("usd_per_good_request", "energy_j_per_token", "power_w_mean"):
        assert rows[name]["verdict"] in ("better", "worse", "same"), name
    assert fleet_phrase(built.scenario) == "4 × H100 in TP 2 prefill + 4 × A100 in TP 4 decode, 50 GB/s link"


def test_the_story_says_which_queue_a_routed_request_waited_in(catalog):
    from lab.ui.views.story import story_html

    def queued(query):
        state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&rate=30&{query}")
        state.run()
        row = next(r for r, b in zip(state.rows, state.request_blames()) if b.parts["queue"] > 0)
        text = story_html(row, state.blame_of(row["id"]), state.result, state.scenario)
        return text[text.index('data-part="queue"'):].split("</li>")[0], state.result.requests[row["id"]]

    text, _ = queued("dispatch=queue")
    assert "for a GPU with a free slot and KV room" in text
    text, rec = queued("dispatch=round_robin")
    assert f"for <b>GPU {rec.prefill_gpu}</b>, the one it was bound to at arrival (round robin)" in text
    text, _ = queued("dispatch=length_split&long_prompt_tokens=2000")  # every 2,500-token prompt is long
    assert "among those for long prompts (routing by length)" in text


def test_a_layout_switch_carries_tp_to_the_greyed_out_pools(catalog):
    """70B on a colocated TP-2 fleet: the split pools' tp controls are greyed out (inert) while
    colocated, and at TP 1 the weights do not fit, so the switch sets them (and says so)."""
    state = LabState.from_query(catalog, f"?mission={SANDBOX_ID}&tp=2&cost=roofline&llm=llama3-70b")
    controls = Controls(state, on_change=state.change)
    assert state.settings["tp"] == 2 and not state.notes
    assert state.change("layout", "disaggregated")
    assert (state.settings["prefill_tp"], state.settings["decode_tp"]) == (2, 2)  # the colocated tp, carried
    assert state.error == "" and "Also set Prefill tensor parallel (GPUs per instance) 2 and Decode tensor " \
        "parallel (GPUs per instance) 2" in state.carried
    assert controls.carried.visible and "greyed out before the switch" in controls.carried.object
    assert state.change("decode_gpus", 4) and state.carried == ""  # the next change clears the note
    # Back to colocated: its tp (2) still fits, nothing to carry.
    assert state.change("layout", "colocated") and state.carried == ""
    # A switch the greyed-out tp cannot rescue (4 colocated GPUs in TP 8: tp applies, it is no
    # carry) is refused with the spec's message as before.
    assert state.change("tp", 8) is False and "fleet.gpus: 4 GPUs is not a whole number" in state.error


def test_a_locked_long_prompt_split_says_when_it_matters():
    from lab.core.missions import Mission

    mission = Mission.from_dict({
        "id": "routed", "title": "t", "order": 1, "summary": "s", "brief": "b",
        "scenario": {"workload": {"rate": 2, "duration_s": 5, "prompt_tokens": 1000, "output_tokens": 50},
                     "fleet": {"layout": "colocated", "gpus": 3, "dispatch": "round_robin",
                               "long_prompt_tokens": 8000, "long_gpus": 1},
                     "slo": {"ttft_s": 1.0}},
        "controls": {"dispatch": {"choices": ["round_robin", "length_split"]}},
        "stars": [{"label": "meet", "when": [{"metric": "slo_attainment", "op": ">=", "value": 0.9}]}],
    })
    state = LabState(mission)
    text = locked_html(state)
    assert 'Long prompts from (tokens): <b>8,000 tokens</b> <i>(length split)</i>' in text
    assert state.change("dispatch", "length_split")
    assert "<li>" in text and "Long prompts from (tokens): <b>8,000 tokens</b></li>" in locked_html(state)


def test_a_locked_count_of_one_reads_in_the_singular():
    from lab.ui.words.control_words import control_words

    assert control_words("decode_gpus", 1) == "1 GPU" and control_words("decode_gpus", 2) == "2 GPUs"
    assert control_words("decode_power_cap_w", 0) == "no cap" and control_words("decode_power_cap_w", 350) == "350 W"
