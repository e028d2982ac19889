"""The author page's draft (lab/ui/author/draft.py) and page (author_page.py) without a browser:
sections that make the mission back, every mistake under its section at once, a JSON slip
named where it is while the rest is still checked, the template the checker passes, and the
page's loading, address and links.

The browser side (typing, Check it, Play it, the link in a fresh browser) is in
test_author_browser.py and, for the static site, tests/test_site_offline.py.
"""

import json
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("panel")

import lab.core as core  # noqa: E402
from lab.core.mission_link import decode_mission, encode_mission  # noqa: E402
from lab.core.missions import Mission, mission_file_names  # noqa: E402
from lab.ui.author.author_page import AuthorApp  # noqa: E402
from lab.ui.author.draft import (SECTION_KEYS, check_draft, check_work, download_text, mission_from_sections,  # noqa: E402
                                 section_of, sections_from_mission, start_work, template)
from lab.ui.catalog import Catalog  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MISSIONS = REPO / "missions"


def shipped():
    return [(name, json.loads((MISSIONS / name).read_text(encoding="utf-8"))) for name in mission_file_names(MISSIONS)]


@pytest.fixture(scope="module")
def catalog():
    return Catalog(str(MISSIONS))


def test_every_shipped_mission_survives_its_sections_field_for_field():
    for name, data in shipped():
        verdict = check_draft(sections_from_mission(data), str(MISSIONS))
        assert verdict.ok and verdict.count == 0, (name, verdict.errors)
        want = Mission.from_dict(data, str(MISSIONS)).to_dict()
        assert verdict.mission.to_dict() == want, name
        assert list(verdict.data["controls"]) == list(data["controls"]), name  # the order a student sees them in


def test_three_mistakes_are_named_at_once_each_under_its_section():
    texts = sections_from_mission(template())
    texts["about"] = {**texts["about"], "id": "My Mission"}
    texts["workload"] = texts["workload"].replace('"rate": 6', '"rate": -6')
    texts["stars"] = texts["stars"].replace("slo_attainment", "slo_atainment", 1)
    verdict = check_draft(texts, str(MISSIONS))
    assert not verdict.ok and verdict.count == 3
    assert set(verdict.errors) == {"about", "workload", "stars"}
    assert "'My Mission' is not a slug" in verdict.errors["about"][0]
    assert verdict.errors["workload"][0].startswith("scenario.workload.rate: -6")
    assert "did you mean 'slo_attainment'" in verdict.errors["stars"][0]


def test_a_json_slip_is_named_at_its_line_and_the_other_sections_are_still_checked():
    good = template()
    texts = sections_from_mission(good)
    texts["fleet"] = '{\n  "layout": "colocated",\n  "gpus": 4,,\n}'
    texts["slo"] = '{"ttft_s": 0, "tpot_ms": 20}'
    verdict = check_draft(texts, str(MISSIONS), fallback=good)
    assert not verdict.ok and verdict.slips == ("fleet",)
    assert verdict.errors["fleet"] == [verdict.errors["fleet"][0]]  # its slip alone, not the stand-in's mistakes
    assert verdict.errors["fleet"][0].startswith("fleet: line 3, column 13: malformed JSON")
    assert verdict.errors["slo"][0].startswith("scenario.slo.ttft_s")
    assert verdict.data["scenario"]["fleet"] == good["scenario"]["fleet"]  # the last good fleet stood in


def test_a_section_that_is_not_an_object_is_named_there():
    texts = sections_from_mission(template())
    texts["scenario"] = "[1, 2]"
    verdict = check_draft(texts, str(MISSIONS), fallback=template())
    assert "scenario" in verdict.errors and not verdict.ok


@pytest.mark.parametrize("path,section", [
    ("id", "about"), ("order", "about"), ("summary", "about"), ("brief", "brief"), ("outro", "outro"),
    ("scenario.workload.rate", "workload"), ("scenario.workload.phases[1].rate", "workload"),
    ("scenario.fleet.gpus", "fleet"), ("scenario.slo.tpot_ms", "slo"), ("scenario.seed", "scenario"),
    ("scenario.model.llm", "scenario"), ("controls.gpus.max", "controls"), ("stars[2].when[0].value", "stars"),
    ("stars: line 4, column 2", "stars"), ("", ""), ("something.else", ""),
])
def test_a_field_path_falls_in_its_section(path, section):
    assert section_of(path) == section


def test_the_template_has_no_mistake_and_passes_the_checker():
    verdict = check_draft(sections_from_mission(template()), str(MISSIONS))
    assert verdict.ok
    out = check_work(template(), str(MISSIONS))
    assert out["ok"], out["problems"]
    assert any("cheapest" in line for line in out["lines"])


def test_the_start_run_is_the_cores_run_of_that_mission():
    data = template()
    out = start_work(data, str(MISSIONS))
    mission = core.load_mission(data, str(MISSIONS))
    metrics = core.summarize(core.simulate(mission.scenario))
    assert out["metrics"] == metrics
    assert out["stars"] == list(mission.evaluate(metrics))
    assert out["requests"] == metrics["requests"]


def test_the_download_is_the_mission_with_its_schema_first_and_loads_back():
    data, _ = mission_from_sections(sections_from_mission(template()))
    text = download_text(data)
    back = json.loads(text)
    assert list(back)[0] == "$schema" and back["id"] == "my-mission"
    assert Mission.from_dict(back, str(MISSIONS)).to_dict() == Mission.from_dict(template(), str(MISSIONS)).to_dict()


# ---------------------------------------------------------------- the page's object

def test_the_page_opens_the_draft_in_its_address_and_writes_its_link(catalog):
    data = json.loads((MISSIONS / "03-slow-link.json").read_text(encoding="utf-8"))
    app = AuthorApp(catalog, "?draft=" + encode_mission(data))
    app._check_now()
    assert app.about["title"].value == data["title"]
    assert app.verdict.ok and app.verdict.mission.id == data["id"]
    assert "The start:" in app.summary.object and "on time" in app.summary.object
    search = app.url.address["search"]
    code = urllib.parse.parse_qs(search[1:])["draft"][0]
    assert decode_mission(code)["scenario"] == data["scenario"]
    assert 'href="lab?draft=' in app.links.object and app.share.value.endswith("lab?draft=" + code)


def test_a_broken_draft_in_the_address_gives_the_template_and_says_why(catalog):
    app = AuthorApp(catalog, "?draft=1.notacode!")
    assert app.about["id"].value == "my-mission"
    assert "could not be opened" in app.notes.object and "characters a link code never holds" in app.notes.object


def test_mistakes_withhold_the_links_and_the_start_and_a_fix_brings_them_back(catalog):
    app = AuthorApp(catalog, "")
    app.about["id"].value = "Not A Slug"
    app.editors["slo"].value = '{"ttft_s": -1, "tpot_ms": 20}'
    app._check_now()
    assert "2 mistakes" in app.summary.object and "About" in app.summary.object
    assert "not a slug" in app.error_panes["about"].object and "scenario.slo.ttft_s" in app.error_panes["slo"].object
    assert app.share.value == "" and "stf-author-play" not in app.links.object and app.start_pane.object == ""
    app._on_check()
    assert "Fix the mistakes first" in app.verdict_pane.object
    app.about["id"].value = "a-slug"
    app.editors["slo"].value = '{"ttft_s": 1.5, "tpot_ms": 20}'
    app._check_now()
    assert "No mistakes" in app.summary.object and app.share.value and "stf-author-play" in app.links.object
    assert all(pane.object == "" for pane in app.error_panes.values())


def test_loading_a_mission_asks_twice_then_replaces_every_section(catalog):
    app = AuthorApp(catalog, "")
    app.start_from.value = "book-store"
    app.load_button.clicks += 1
    assert app.about["id"].value == "my-mission" and "again" in app.load_button.label  # armed, nothing replaced
    app.load_button.clicks += 1
    assert app.about["id"].value == "book-store"
    assert json.loads(app.editors["controls"].value) == json.loads((MISSIONS / "07-book-store.json").read_text())["controls"]
    assert app.verdict.ok and app.verdict.mission.id == "book-store"


def test_a_workload_can_be_taken_from_a_mission(catalog):
    app = AuthorApp(catalog, "")
    app.workload_from.value = "conversation-trace"
    want = json.loads((MISSIONS / "08-conversation-trace.json").read_text())["scenario"]["workload"]
    assert json.loads(app.editors["workload"].value) == want
    assert app.workload_from.value == "" and app.verdict.ok


def test_every_section_has_an_editor_and_an_error_pane(catalog):
    app = AuthorApp(catalog, "")
    assert set(app.error_panes) == set(SECTION_KEYS)
    assert set(app.editors) | {"about"} == set(SECTION_KEYS)


class _Fired:
    def stop(self):
        pass


@pytest.fixture
def timers_now(monkeypatch):
    """The page's timers fire at once (the checker waits a turn for its "Checking…" to show)."""
    import lab.ui.author.author_page as page

    monkeypatch.setattr(page, "later", lambda callback, _ms: (callback(), _Fired())[1])


def test_a_verdict_is_marked_stale_once_the_draft_changes(catalog, timers_now):
    app = AuthorApp(catalog, "")
    app._check_now()
    app._on_check()
    assert "The checker finds nothing wrong: ok." in app.verdict_pane.object
    app.editors["slo"].value = '{"ttft_s": 2, "tpot_ms": 20}'
    app._check_now()
    assert "changed since the last check" in app.verdict_pane.object


def test_the_download_is_named_after_a_valid_id_only(catalog):
    app = AuthorApp(catalog, "")
    app._check_now()
    assert app.download.filename == "my-mission.json"
    app.about["id"].value = "../../etc/passwd"
    app._check_now()
    assert app.download.filename == "my-mission.json"
    app.about["id"].value = "rag-heavy"
    app._check_now()
    assert app.download.filename == "rag-heavy.json"


def test_a_trace_file_in_the_folder_can_be_the_workload(tmp_path):
    from trace_mission import write_trace_mission

    write_trace_mission(tmp_path)
    app = AuthorApp(Catalog(str(tmp_path)), "")
    assert "traces/replayed.csv" in "".join(app.workload_from.options.values())
    app.workload_from.value = "trace:traces/replayed.csv"
    assert json.loads(app.editors["workload"].value) == {"trace": {"path": "traces/replayed.csv"}}
    assert app.verdict.ok, app.verdict.errors  # the template's controls and stars still hold on the trace


def test_a_start_past_the_pages_bounds_is_refused_before_it_runs(catalog):
    from lab.core.page_bounds import PAGE_MAX_REQUESTS

    data = template()
    data["scenario"]["workload"].update(rate=800, duration_s=1200)  # 960,000 requests: valid for lab run, not a page
    with pytest.raises(core.LabError, match=f"at most {PAGE_MAX_REQUESTS:,}"):
        start_work(data, str(MISSIONS))
    app = AuthorApp(catalog, "?draft=" + encode_mission(data))
    app._check_now()
    assert "The start did not run" in app.summary.object and "lab page runs at most" in app.summary.object
