"""What every build step shares: the repository's paths, BuildError, say(), writing a file
into the site, and the table of the site's files (sizes and hashes)."""

import hashlib
import tomllib
from pathlib import Path

__all__ = ["REPO", "SITE_SRC", "STARS_JS", "MISSIONS_SRC", "NODE_PYODIDE", "STORAGE_KEY", "BuildError", "say"]

REPO = Path(__file__).resolve().parent.parent
SITE_SRC = REPO / "static" / "site"
STARS_JS = REPO / "lab" / "ui" / "stars" / "stars_store.js"  # the stars' storage logic: the lab's bridge and the hub share it
MISSIONS_SRC = REPO / "missions"
NODE_PYODIDE = REPO / "node_modules" / "pyodide"

STORAGE_KEY = "split-the-fleet:stars:v1"


class BuildError(Exception):
    """A build that cannot go on; the message says what to do."""


def say(quiet, *args):
    if not quiet:
        print(*args, flush=True)


def _project():
    data = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return data


def _write(root, rel, data):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def _file_table(root):
    table = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            table[path.relative_to(root).as_posix()] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return table
