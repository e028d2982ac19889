"""One voice for numbers and stars (issue 33): every figure on the page through one formatter,
star lines in the cards' words and units, an earned star that says so, refusals in the
student's words. No browser: the views' HTML and the state."""

import re
from pathlib import Path

import pytest

pytest.importorskip("panel")

from lab.core.stars import Predicate  # noqa: E402
from lab.ui.catalog import Catalog  # noqa: E402
from lab.ui.views.metrics_view import metrics_html, stars_html  # noqa: E402
from lab.ui.state import LabState  # noqa: E402

MISSIONS = Path(__file__).resolve().parents[2] / "missions"
NBSP = "\u00a0"


def plain(text):
    """Visible text of an HTML fragment, spaces as spaces."""
    return re.sub(r"<[^>]+>", "", text).replace(NBSP, " ").replace("&amp;", "&")


@pytest.fixture(scope="module")
def missions():
    cat = Catalog(MISSIONS)
    assert not cat.error, cat.error
    return cat


def values_of(fragment):
    """{data-value name: shown text} of a metrics fragment."""
    return {k: plain(v) for k, v in re.findall(r'data-value="(\w+)">(.*?)</span>', fragment)}


# ---------------------------------------------------------------- one formatter

def test_a_time_of_a_second_or_more_reads_in_seconds_with_one_decimal_everywhere():
    from lab.ui.browser import a11y  # noqa: F401 (they format through figures)
    from lab.ui.views import result_strip, story, twin_view  # noqa: F401
    from lab.ui.words.figures import fmt_ms, fmt_seconds

    assert fmt_ms(7164.0).replace(NBSP, " ") == "7.2 s"  # was "7,164 ms" beside a brief's "7.2 s"
    assert fmt_seconds(7.164).replace(NBSP, " ") == "7.2 s"
    assert fmt_seconds(0.34).replace(NBSP, " ") == "340 ms"
    assert fmt_ms(13.44).replace(NBSP, " ") == "13.4 ms"
    assert fmt_seconds(0.9996).replace(NBSP, " ") == "1.0 s"  # not "1,000 ms"
    # The story, the twin table and the screen reader's summary use the same functions.
    assert story.fmt_ms is fmt_ms and twin_view.fmt_ms is fmt_ms and a11y.fmt_ms is fmt_ms
    assert result_strip.fmt_seconds is fmt_seconds


def test_dollars_keep_two_decimals_so_neighbours_read_alike(missions):
    from lab.ui.views.metrics_view import cost_cards

    m = {"usd_per_good_request": 0.0003, "usd_per_hour": 41.2, "usd_per_million_tokens": 0.28,
         "energy_j_per_token": 0.6, "power_w_mean": 700.0, "energy_j_per_request": 120.0}
    shown = values_of("".join(cost_cards(m)))
    assert shown["usd_per_good_request"] == "$0.30"  # was "$0.3" beside "$0.28"
    assert shown["usd_per_million_tokens"] == "$0.28"
    assert shown["usd_per_hour"] == "$41.20"


def test_the_worst_gap_card_and_its_star_line_read_the_same_figure_as_the_brief(missions):
    """Mission 16's brief says "the p99 worst gap is **7.2 s**"; the card said "7,164 ms"."""
    mission = missions.get("memory-on-demand")
    assert "**7.2 s**" in " ".join(mission.brief) if isinstance(mission.brief, (list, tuple)) else "7.2 s" in mission.brief
    metrics = {"worst_gap_p99_ms": 7164.0, "slo_attainment": 0.39, "gpus": 5, "requests": 570,
               "goodput_rps_per_gpu": 0.7, "goodput_rps": 3.5, "ttft_p50_s": 0.4, "ttft_p99_s": 3.1,
               "tpot_p99_ms": 30.0, "preemptions": 251}
    cards = plain(metrics_html(metrics, mission.scenario))
    assert "7.2 s" in cards and "7,164" not in cards
    stars = plain(stars_html(mission, metrics, [False] * 3, [False] * 3))
    assert "Worst gap p99 ≤ 100 ms (now 7.2 s)" in stars


def test_a_value_that_misses_its_target_never_reads_as_the_target():
    from lab.ui.words.figures import fmt_metric

    assert fmt_metric("slo_attainment", 0.9496, against=0.95) == "94.96%"
    assert fmt_metric("ttft_p99_s", 2.04, against=2.0).replace(NBSP, " ") == "2.04 s"
    assert fmt_metric("slo_attainment", 0.86, against=0.95) == "86%"


# ---------------------------------------------------------------- star lines

def test_star_lines_use_the_cards_words_and_units(missions):
    mission = missions.get("tp-per-phase")
    metrics = {"slo_attainment": 0.93, "gpus": 8, "tpot_p99_ms": 13.44, "ttft_p90_s": 0.31,
               "goodput_rps_per_gpu": 0.19}
    text = plain(stars_html(mission, metrics, [True, False, False], [False] * 3))
    assert "Meeting the SLO ≥ 90% (now 93%)" in text  # was "slo_attainment >= 0.9 (now 0.93)"
    assert "GPUs ≤ 8 (now 8)" in text
    assert "TPOT p99 ≤ 10.0 ms (now 13.4 ms)" in text
    assert "TTFT p90 ≤ 250 ms (now 310 ms)" in text
    assert "Goodput per GPU ≥ 0.21 req/s (now 0.19 req/s)" in text
    assert "slo_attainment" not in text and ">=" not in text
    # The card says the same share the same way.
    assert "93%" in plain(metrics_html({**metrics, "requests": 180, "goodput_rps": 1.5}, mission.scenario))


def test_every_metric_a_mission_star_tests_has_a_title_and_a_unit(missions):
    from lab.ui.words.figures import METRIC_TITLES, star_test_text

    for mission in missions.missions:
        for star in mission.stars:
            for pred in star.when:
                assert pred.metric in METRIC_TITLES, (mission.id, pred.metric)
                assert "_" not in star_test_text(pred, pred.value)


def test_an_earned_star_reads_earned_even_when_these_settings_miss_it(missions):
    mission = missions.get("tp-per-phase")
    metrics = {"slo_attainment": 0.5, "gpus": 8}
    html_ = stars_html(mission, metrics, [False, False, False], [True, False, False])
    first = plain(re.search(r'<li class="stf-star earned" data-star="0".*?</li>', html_, re.S).group(0))
    assert "✓ earned" in first and "not with these settings" not in first
    second = plain(re.search(r'<li class="stf-star" data-star="1".*?</li>', html_, re.S).group(0))
    assert "✗ not with these settings" in second


# ---------------------------------------------------------------- refusals

def test_mission_12s_refusal_names_the_slider_and_a_value_that_works(missions):
    state = LabState.from_query(missions, "?mission=tp-per-phase")
    assert state.change("prefill_tp", 8) is False
    assert state.refusal == ("Prefill tensor parallel 8 was not applied: 4 Prefill GPUs do not split into instances "
                             "of 8 GPUs. Set Prefill GPUs to 8 first, or choose Prefill tensor parallel 2 or 4.")
    assert "fleet." not in state.refusal and "prefill_tp" not in state.refusal
    # The spec's message stays, as the detail line.
    assert state.error.startswith("fleet.prefill_gpus: 4 GPUs is not a whole number")
    # A fix the sentence names works.
    assert state.change("prefill_gpus", 8) and state.change("prefill_tp", 8)
    assert state.refusal == "" and state.error == ""


def test_the_refusal_shows_the_students_words_and_folds_the_config_path(missions):
    from lab.ui.views.controls import Controls

    state = LabState.from_query(missions, "?mission=tp-per-phase")
    controls = Controls(state, on_change=state.change)
    state.change("decode_tp", 8)
    shown = controls.error.object
    lead = plain(shown.split("<details")[0])
    assert lead.startswith("Decode tensor parallel 8 was not applied") and "fleet." not in lead
    assert "Not applied:" not in shown
    assert re.search(r"<details[^>]*><summary>Details</summary><code>fleet\.decode_gpus: ", shown)


def test_a_refusal_reads_the_cores_reason_not_its_message(missions):
    """refusal.py takes the why from LabError.reason and .facts; the message's text only when
    an error has none. Facts that disagree with the text show which one the sentence read."""
    from lab.core.errors import WEIGHTS_DO_NOT_FIT, WHOLE_INSTANCES, LabError
    from lab.ui.words.control_words import control_words
    from lab.ui.words.refusal import refusal_text

    mission = missions.get("tp-per-phase")
    settings = mission.settings()
    msg = "4 GPUs is not a whole number of instances of decode_tp = 8 GPUs: use a multiple of 8"

    def why(exc, values=None):
        text = refusal_text(mission, settings, values or {"decode_tp": 8}, exc, control_words)
        return text.split(" was not applied")[1].split(".")[0]

    structured = LabError("fleet.decode_gpus", "reworded, no numbers in it", WHOLE_INSTANCES,
                          {"gpus": 6, "tp_field": "decode_tp", "tp": 8})
    assert why(structured) == ": 6 Decode GPUs do not split into instances of 8 GPUs"
    assert why(LabError("fleet.decode_gpus", msg)) == ": 4 Decode GPUs do not split into instances of 8 GPUs"  # text only
    # The spec's own refusal carries its reason: the sentence agrees with its message.
    with pytest.raises(LabError) as info:
        mission.apply({**settings, "decode_tp": 8})
    assert info.value.reason == WHOLE_INSTANCES and why(info.value) == why(LabError("fleet.decode_gpus", msg))
    fit = LabError("fleet.decode_tp", "reworded", WEIGHTS_DO_NOT_FIT, {"llm": "llama3-70b", "weights_gb": 141.1,
                                                                        "tp": 1, "gpu": "a100", "usable_gb": 72.0})
    assert why(fit) == ": the 141 GB of weights do not fit on 1 A100 GPU"
    assert why(LabError("fleet.decode_tp", "reworded")) == ""  # neither: no why, only the fixes


def test_a_model_too_big_for_its_gpus_is_refused_with_its_weights(missions):
    state = LabState.from_query(missions, "?mission=sandbox")
    assert state.settings["tp"] == 1
    assert state.change("llm", "llama3-70b") is False
    gb = re.search(r"\((\d+) GB of weights\)", state.error).group(1)
    assert state.refusal.startswith(f"Model Llama 3 70B was not applied: the {gb} GB of weights do not fit on 1 H100 GPU.")
    assert "Set Tensor parallel to 2 first" in state.refusal


def test_a_locked_control_is_refused_by_its_label(missions):
    state = LabState.from_query(missions, "?mission=tp-per-phase")
    assert state.change("rate", 5) is False
    assert state.refusal == "Request rate is locked in this mission."


def test_mission_12s_third_star_states_its_90_percent_condition(missions):
    star = missions.get("tp-per-phase").stars[2]
    assert any(p.metric == "slo_attainment" and p.value == 0.9 for p in star.when)
    assert "90%" in star.label


def test_a_predicate_in_the_cards_words():
    from lab.ui.words.figures import star_test_text

    line = star_test_text(Predicate("slo_attainment", ">=", 0.95), 0.86)
    assert line == "Meeting the SLO ≥ 95% (now 86%)"
    line = star_test_text(Predicate("usd_per_good_request", "<=", 0.0003), 0.00028).replace(NBSP, " ")
    assert line == "Cost per good request ≤ $0.30 per 1k (now $0.28 per 1k)"


# ---------------------------------------------------------------- which model drew a run

def test_the_cards_and_the_status_name_the_model_that_drew_them(missions):
    from lab.core.spec import Model
    from lab.ui.words.figures import model_words

    calibrated = Model.from_dict({"cost": "calibrated", "llm": "llama3-70b", "gpu": "a100", "dtype": "fp8"})
    assert model_words(calibrated) == ("Step times: calibrated on published measurements (a current optimised engine), "
                                       "Llama 3 70B on A100, FP8.")
    assert model_words(calibrated, short=True) == "calibrated model"
    assert model_words(Model.from_dict({"cost": "roofline"}), short=True) == "roofline model"
    mission = missions.get("tp-per-phase")  # a roofline mission
    metrics = {"slo_attainment": 0.93, "gpus": 8, "requests": 180, "goodput_rps": 1.5}
    page = metrics_html(metrics, mission.scenario)
    assert '<span class="stf-model" data-model="roofline">Step times: the textbook roofline, Llama 3 70B on H100' in page
    linear = missions.get("mixing-hurts")
    assert 'data-model="linear">Step times: the lab\'s constants, a simple model' in metrics_html(metrics, linear.scenario)
