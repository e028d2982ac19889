"""lab/ui's rooms (lab/ui/__init__.py): every import points down the layers, so a room can be
read, tested and changed knowing only the rooms below it."""

import re
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "lab" / "ui"
# Lower numbers sit lower: a module imports only from rooms with a lower number (or its own room).
LAYERS = {
    "words": 0,
    "data": 1,
    "runs": 2, "catalog": 2, "url_state": 2,
    "browser": 3, "state": 3,
    "stars": 4,
    "views": 5,
    "timeline": 6,
    "app": 7, "hub": 7, "pages": 7, "prerender": 7, "early_page": 7, "serve": 7, "__init__": 7, "author": 7, "site_entry": 7,
}
PAGES = {"app", "hub", "pages", "prerender", "early_page", "serve", "__init__", "author", "site_entry"}  # the top: they may use each other


def _room(path):
    rel = path.relative_to(UI)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path):
    """The lab/ui modules `path` imports (relative imports), as files."""
    for m in re.finditer(r"^\s*from (\.+)([\w.]*) import \(?([\w, \n]+)\)?", path.read_text(encoding="utf-8"), re.M):
        base = path.parent
        for _ in range(len(m.group(1)) - 1):
            base = base.parent
        target = base.joinpath(*m.group(2).split(".")) if m.group(2) else base
        if target.is_dir():
            if m.group(2):
                yield target / "__init__.py"
            for name in (n.strip().split(" as ")[0] for n in m.group(3).split(",")):
                if (target / f"{name}.py").exists():
                    yield target / f"{name}.py"
        elif target.with_suffix(".py").exists():
            yield target.with_suffix(".py")


def test_every_module_sits_in_a_known_room():
    rooms = {_room(p) for p in UI.rglob("*.py") if "__pycache__" not in p.parts}
    assert rooms == set(LAYERS), f"a room without a layer, or a layer without a room: {rooms ^ set(LAYERS)}"
    for package in (p for p in UI.iterdir() if p.is_dir() and p.name != "__pycache__"):
        doc = (package / "__init__.py").read_text(encoding="utf-8")
        assert doc.startswith('"""') and len(doc) > 60, f"{package.name}/__init__.py does not say what the room holds"


def test_imports_point_down():
    upward = []
    for path in (p for p in UI.rglob("*.py") if "__pycache__" not in p.parts):
        here = _room(path)
        for target in _imports(path):
            there = _room(target)
            if there == here or (here in PAGES and there in PAGES):
                continue
            if LAYERS[there] >= LAYERS[here]:
                upward.append(f"{path.relative_to(UI)} -> {target.relative_to(UI)}")
    assert upward == []


MAX_SOURCE_LINES = 900  # a file past this holds more than one thing (issue 36: "no source file over 900 lines")


def test_no_source_file_is_over_900_lines():
    root = UI.parents[1]
    sources = [*root.joinpath("lab").rglob("*.py"), *root.joinpath("site_build").rglob("*.py"),
               *root.joinpath("scripts").rglob("*.py"), *root.joinpath("benchmarks").rglob("*.py"),
               *root.joinpath("static").rglob("*.js"), root / "build.py"]
    sizes = {p.relative_to(root).as_posix(): len(p.read_text(encoding="utf-8").splitlines())
             for p in sources if "__pycache__" not in p.parts and "node_modules" not in p.parts}
    assert len(sizes) > 100, "the walk found too few sources to mean anything"
    assert {name: n for name, n in sizes.items() if n > MAX_SOURCE_LINES} == {}
