"""The missions the site publishes: validated by lab.core into the hub's index, their source
files (also packed into the lab's wheel), and missions/ in the site."""

import json
from pathlib import Path

from site_build.common import MISSIONS_SRC, BuildError, _write

__all__ = ["missions_index", "write_missions"]


def missions_index(missions_dir=MISSIONS_SRC):
    """Every mission, validated by the core, as the hub needs it (in order)."""
    from lab.core.errors import LabError
    from lab.core.missions import list_missions

    try:
        missions = list_missions(str(missions_dir))
    except LabError as exc:
        raise BuildError(f"{missions_dir}: {exc}") from None
    if not missions:
        raise BuildError(f"{missions_dir} holds no mission")
    return [
        {"id": m.id, "title": m.title, "order": m.order, "summary": m.summary,
         "stars": [s.label for s in m.stars], "file": Path(m.path).name}
        for m in missions
    ]


def _mission_source_files(missions_dir=MISSIONS_SRC):
    """{path relative to the folder: bytes}: its *.json and traces/, plus the repo's schema.json if it has none."""
    missions_dir = Path(missions_dir)
    paths = sorted(missions_dir.glob("*.json"))
    traces = missions_dir / "traces"
    paths += sorted(p for p in traces.glob("*") if p.is_file()) if traces.is_dir() else []
    out = {p.relative_to(missions_dir).as_posix(): p.read_bytes() for p in paths}
    out.setdefault("schema.json", (MISSIONS_SRC / "schema.json").read_bytes())
    return out


def write_missions(site, missions_dir, missions):
    """missions/: the source files, and index.json (what the hub lists)."""
    for rel, data in _mission_source_files(missions_dir).items():
        _write(site, "missions/" + rel, data)
    _write(site, "missions/index.json", json.dumps({"version": 1, "missions": missions}, indent=1, ensure_ascii=False) + "\n")
