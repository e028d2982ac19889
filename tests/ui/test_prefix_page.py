"""Prefix caching on the page, without a browser: the metrics card, a request's story
naming its cached tokens and its fetch, the controls' words, and the KV band's capacity
less a per-GPU cache's share."""

import re

import pytest

pytest.importorskip("panel")
pytest.importorskip("numpy")

import lab.core as core  # noqa: E402
from lab.core.prefix_cache import kv_taken_tokens  # noqa: E402
from lab.ui.catalog import sandbox_mission  # noqa: E402
from lab.ui.words.control_words import control_words  # noqa: E402
from lab.ui.views.control_html import idle_reason  # noqa: E402
from lab.ui.views.metrics_view import metrics_html  # noqa: E402
from lab.ui.views.story import story_html  # noqa: E402

# Two turns of one conversation: the second resends the first's 1,536 tokens of full blocks.
REQUESTS = [(0.0, 2000, 20, (1, 2, 3, 4)), (1.0, 2300, 20, (1, 2, 3, 9, 10))]


def make(cache, layout="colocated"):
    return core.load_scenario({
        "workload": {"rate": 1, "duration_s": 2, "prompt_tokens": 100, "output_tokens": 10},
        "fleet": {"layout": layout, "gpus": 1, "prefill_gpus": 1, "decode_gpus": 1, "prefix_cache": cache,
                  "prefix_fetch_gbytes_per_s": 2},
        "model": {"cost": "linear"}, "slo": {"ttft_s": 1.0, "tpot_ms": 50}, "seed": 0,
    })


def story_of(scenario, i):
    result = core.simulate(scenario, REQUESTS)
    rows = core.request_metrics(result)
    blames = core.request_blame(result, rows)
    return result, story_html(rows[i], blames[i], result, scenario)


def test_the_metrics_card_appears_with_a_cache_and_says_what_it_saved():
    for cache in ("per_gpu", "shared"):
        sc = make(cache)
        m = core.summarize(core.simulate(sc, REQUESTS))
        text = metrics_html(m, sc)
        card = re.search(r'data-metric="prefix".*?</div></div>', text, re.S).group(0)
        assert "Prefix cache hits" in card and "1,536 prompt tokens not computed" in card
        assert ">36%<" in card  # 1,536 of 4,300 prompt tokens
        assert ("fetch p99" in card) == (cache == "shared")
    sc = make("off")
    assert 'data-metric="prefix"' not in metrics_html(core.summarize(core.simulate(sc, REQUESTS)), sc)


def test_a_story_names_the_cached_tokens_and_the_fetch():
    result, text = story_of(make("shared"), 1)
    rec = result.requests[1]
    assert rec.prefix_hit_tokens == 1536 and rec.prefix_fetch_s > 0
    plain = re.sub(r"<[^>]+>", "", text)
    assert "own compute for 764 tokens (1,536 cached)" in plain
    assert 'data-part="prefix_fetch"' in text or "prefix_fetch" in text
    assert "Fetched its 1,536 cached prompt tokens from the shared pool" in plain
    _, first = story_of(make("shared"), 0)  # the first turn found nothing
    assert "cached" not in re.sub(r"<[^>]+>", "", first)


def test_controls_say_what_a_cache_size_waits_for():
    sb = sandbox_mission()
    assert {"prefix_cache", "prefix_cache_gb", "prefix_pool_gb"} <= set(sb.controls)
    sc = sb.scenario
    assert idle_reason("prefix_cache_gb", sc) == "a per-GPU prefix cache"
    assert idle_reason("prefix_pool_gb", sc, short=True) == "shared pool"
    assert control_words("prefix_cache", "shared") == "Shared pool (host)"
    assert control_words("prefix_cache_gb", 8.0) == "8 GB"


def test_the_kv_band_capacity_leaves_out_a_per_gpu_cache():
    from lab.ui.data import canvas_data as canvas

    sc = make("per_gpu")
    result = core.simulate(sc, REQUESTS)
    seen = {}
    real = canvas.kv_taken_by_instance

    def spy(scenario):
        seen["taken"] = real(scenario)
        return seen["taken"]

    canvas.kv_taken_by_instance = spy
    try:
        canvas.timeline_data(result, 50)
    finally:
        canvas.kv_taken_by_instance = real
    assert seen["taken"] == [kv_taken_tokens(sc, sc.pools()[0])] and seen["taken"][0] > 0
