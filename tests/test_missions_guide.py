"""The instructors' guide (missions/README.md) works from start to end: its quick start, run
line by line as written in a fresh folder, makes a mission that `lab run` and `lab check`
accept and that `lab serve --missions` lists on its hub by its order."""

import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from static_server import free_port

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "missions" / "README.md"

# The guide's $EDITOR step, done as its comment says: a new id, order and title.
EDIT = """import json, sys
path = sys.argv[1]
data = json.load(open(path, encoding="utf-8"))
data.update(id="my-mission", order=90, title="My own mission")
json.dump(data, open(path, "w", encoding="utf-8"), indent=2)
"""


def quick_start_lines():
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_quick_start_runs_as_written_in_a_fresh_folder(tmp_path):
    lines = quick_start_lines()
    assert lines[-1].startswith("python -m lab serve"), lines  # (served last: it does not return)
    (tmp_path / "missions").symlink_to(REPO / "missions")  # the checkout's missions, as the guide's cp reads them
    (tmp_path / "edit.py").write_text(EDIT, encoding="utf-8")
    env = dict(os.environ, EDITOR=f"{shlex.quote(sys.executable)} edit.py", PYTHONPATH=str(REPO))
    python = shlex.quote(sys.executable)
    for line in lines[:-1]:
        command = re.sub(r"^python ", python + " ", line)
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if " lab check " in line:
            assert "FAIL" not in done.stdout, done.stdout
    folder = tmp_path / "my-missions"
    schema = json.loads((folder / "schema.json").read_text(encoding="utf-8"))
    assert schema == json.loads((REPO / "missions" / "schema.json").read_text(encoding="utf-8"))
    mission = json.loads((folder / "90-my-mission.json").read_text(encoding="utf-8"))
    assert mission["$schema"] == "./schema.json" and mission["order"] == 90
    assert not {p.name for p in folder.iterdir()} & {p.name for p in (REPO / "missions").glob("*.json")} - {"schema.json"}

    port = free_port()
    serve = re.sub(r"^python ", python + " ", lines[-1]) + f" --port {port} --no-show"
    server = subprocess.Popen(["bash", "-c", "exec " + serve], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _get(f"http://127.0.0.1:{port}/", server)  # (up)
        hub = _hub_list(f"http://127.0.0.1:{port}/")
        assert "Mission 90" in hub and "My own mission" in hub
        assert "The book store" not in hub  # only the folder's missions
    finally:
        server.terminate()
        server.wait(30)


_READ_HUB = """import sys
import panel, lab.ui.hub  # (the page's model types, to read its document)
from bokeh.client import pull_session
session = pull_session(url=sys.argv[1])
lists = [m.text for m in session.document.models if "stf-hub-list" in (getattr(m, "css_classes", None) or [])]
session.close()
assert len(lists) == 1, lists
print(lists[0])
"""


def _hub_list(url):
    """The hub's mission list as the page's document holds it, read as a browser's session would
    (in a process of its own: a browser test's event loop may be running in this one)."""
    done = subprocess.run([sys.executable, "-c", _READ_HUB, url], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _get(url, server, timeout_s=120):
    """The page at `url` once the server answers (polled: it is starting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as reply:
                return reply.read().decode("utf-8")
        except OSError:
            if server.poll() is not None:
                pytest.fail(f"lab serve exited {server.returncode}: {server.stdout.read()[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"lab serve did not answer {url} in {timeout_s} s")
            time.sleep(0.2)  # (polling a server that is starting, not timing anything)


def test_the_draft_links_lines_run_as_written(tmp_path):
    """"Sharing a draft by link": each `lab link` line prints one address carrying the mission."""
    from lab.core.mission_link import decode_mission

    section = GUIDE.read_text(encoding="utf-8").split("## Sharing a draft by link", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert lines and all(line.startswith("python -m lab link my-missions/90-my-mission.json") for line in lines)
    (tmp_path / "my-missions").mkdir()
    data = json.loads((REPO / "missions" / "07-book-store.json").read_text(encoding="utf-8"))
    data.update(id="my-mission", order=90, title="My own mission")
    (tmp_path / "my-missions" / "90-my-mission.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for line in lines:
        command = re.sub(r"^python ", shlex.quote(sys.executable) + " ", line)
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
        base = line.split("--base ", 1)[1] if "--base " in line else "http://localhost:5006/lab"
        link = done.stdout.strip()
        assert link.startswith(base + "?draft=") and decode_mission(link.split("?draft=", 1)[1]) == data
