"""scripts/pyodide_mirror.py: the local Pyodide folder, every file checked against its recorded hash.

The folder (.cache/pyodide-0.29.3) is assembled once per session if it is missing or wrong
(that downloads ~70 MB from npm and PyPI, a minute or two); the other tests work on copies
of it. Also here: the lab renders, runs, switches layout and sweeps in CPython with the
packages build.py no longer loads (UNUSED_DEPENDENCIES) made unimportable, which is what
lets the browser do without them. The browser runs of the lab on that folder are
tests/test_site_offline.py's (with tests/site_run.py).
"""

import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from site_build import dependencies, pyodide_dir  # build.py's steps: what it loads and copies

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "pyodide_mirror.py"
LOCK = REPO / "scripts" / "pyodide_mirror.lock.json"


def _module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mirror = _module("stf_pyodide_mirror", SCRIPT)


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _run(*args, cwd=REPO):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="session")
def folder():
    """The assembled folder: --check it, and assemble it when that fails (slow, once)."""
    out = mirror.DEFAULT_OUT
    if _run("--check", "--out", str(out)).returncode != 0:
        made = _run("--out", str(out))
        if made.returncode != 0:
            reason = f"could not assemble {out}:\n{made.stdout[-2000:]}\n{made.stderr[-2000:]}"
            if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                pytest.fail(reason)
            pytest.skip(reason)
    return out


@pytest.fixture
def copy(folder, tmp_path):
    """A throwaway copy of the folder (tests break it)."""
    dest = tmp_path / "pyodide"
    shutil.copytree(folder, dest)
    return dest


def _needed():
    lock_data = mirror.read_mirror_lock()
    npm_lock = json.loads((REPO / "node_modules" / "pyodide" / "pyodide-lock.json").read_text(encoding="utf-8"))
    entries, closure = mirror.needed_files(lock_data, npm_lock)
    return entries, closure, npm_lock


# ---------------------------------------------------------------------------- the folder

def test_check_passes_and_every_file_has_its_recorded_hash(folder):
    proc = _run("--check", "--out", str(folder))
    assert proc.returncode == 0, proc.stderr
    entries, _, _ = _needed()
    for entry in entries:
        path = folder / entry["file"]
        assert path.is_file(), entry["file"]
        assert _sha(path) == entry["sha256"], entry["file"]


def test_folder_serves_exactly_what_build_py_loads_and_its_lock_points_at_those_files(folder):
    entries, closure, npm_lock = _needed()
    served = json.loads((folder / "pyodide-lock.json").read_text(encoding="utf-8"))
    assert sorted(served["packages"]) == closure
    assert served["info"] == npm_lock["info"]
    for name, pkg in served["packages"].items():
        assert _sha(folder / pkg["file_name"]) == pkg["sha256"], name
        assert set(pkg["depends"]) <= set(served["packages"]), name
    # What build.py would copy from it is all there (its own list, from this lock).
    needed = pyodide_dir._pyodide_files(served, closure)
    assert all((folder / f).is_file() for f in needed)
    dropped = {dependencies._canon(n) for n in dependencies.UNUSED_DEPENDENCIES}
    assert not dropped & set(served["packages"])


def test_rewritten_entries_name_the_files_served(folder):
    served = json.loads((folder / "pyodide-lock.json").read_text(encoding="utf-8"))["packages"]
    npm = json.loads((REPO / "node_modules" / "pyodide" / "pyodide-lock.json").read_text(encoding="utf-8"))["packages"]
    assert "contourpy" not in served  # dropped (UNUSED_DEPENDENCIES): no longer served
    assert served["numpy"] == npm["numpy"]  # Pyodide's own file, byte for byte: entry unchanged
    for name in ("markupsafe", "pyyaml"):
        assert served[name]["file_name"].endswith("-py3-none-any.whl")
        assert served[name]["sha256"] != npm[name]["sha256"]


def test_sdist_wheels_are_pure_python_and_import(folder, tmp_path):
    for whl in ("markupsafe-3.0.2-py3-none-any.whl", "pyyaml-6.0.2-py3-none-any.whl"):
        with zipfile.ZipFile(folder / whl) as zf:
            names = zf.namelist()
            assert zf.testzip() is None
        assert not [n for n in names if n.endswith((".so", ".c", ".pyx"))], names
        assert names[-1].endswith(".dist-info/RECORD")
    code = ("import sys; sys.path[:0] = sys.argv[1:]; import markupsafe, yaml; "
            "assert markupsafe._escape_inner.__module__ == 'markupsafe._native'; "
            "assert not yaml.__with_libyaml__; "
            "print(markupsafe.escape('<a>'), yaml.safe_load('x: [1, 2]'))")
    proc = subprocess.run([sys.executable, "-S", "-c", code, str(folder / "markupsafe-3.0.2-py3-none-any.whl"),
                           str(folder / "pyyaml-6.0.2-py3-none-any.whl")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "&lt;a&gt; {'x': [1, 2]}"


# ---------------------------------------------------------------------------- failures are named

def test_check_names_a_damaged_file_with_its_source_and_both_hashes(copy):
    entries, _, _ = _needed()
    entry = next(e for e in entries if e["file"].startswith("pyodide_http-"))
    path = copy / entry["file"]
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    (copy / "pyodide.js").unlink()
    proc = _run("--check", "--out", str(copy))
    assert proc.returncode == 2
    assert f"{entry['file']}: from PyPI pyodide-http==0.2.2" in proc.stderr
    assert f"expected sha256 {entry['sha256']}, got {hashlib.sha256(bytes(data)).hexdigest()}" in proc.stderr
    assert "pyodide.js: missing (from npm pyodide@0.29.3 member package/pyodide.js" in proc.stderr
    assert "2 of" in proc.stderr and "Traceback" not in proc.stderr


def test_assemble_repairs_only_what_is_wrong_and_is_idempotent(copy):
    entries, _, _ = _needed()
    broken = next(e for e in entries if e["file"].startswith("jinja2-"))
    (copy / broken["file"]).write_bytes(b"not a wheel")
    first = _run("--out", str(copy))
    assert first.returncode == 0, first.stderr
    wrote = [line.split()[1] for line in first.stdout.splitlines() if line.strip().startswith("wrote")]
    assert wrote == [broken["file"]]
    assert _sha(copy / broken["file"]) == broken["sha256"]
    again = _run("--out", str(copy))
    assert again.returncode == 0 and "wrote" not in again.stdout


def test_a_recorded_hash_that_differs_stops_the_run_and_writes_nothing(tmp_path, folder):
    data = json.loads(LOCK.read_text(encoding="utf-8"))
    entry = next(e for e in data["files"] if e["file"].startswith("packaging-"))
    real = entry["sha256"]
    entry["sha256"] = "0" * 64
    bad_lock = tmp_path / "lock.json"
    bad_lock.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(mirror.MirrorError) as err:
        mirror.assemble(out, mirror_path=bad_lock)
    message = str(err.value)
    assert message.startswith(entry["file"] + ": from PyPI packaging==24.2")
    assert f"expected sha256 {'0' * 64}, got {real}" in message
    assert not (out / entry["file"]).exists()


def test_a_source_that_is_gone_is_named(tmp_path, folder):
    data = json.loads(LOCK.read_text(encoding="utf-8"))
    entry = next(e for e in data["files"] if e["file"].startswith("packaging-"))
    entry["from"]["requirement"] = "packaging==0.0.0.post999"  # no such release
    bad_lock = tmp_path / "lock.json"
    bad_lock.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "out"
    shutil.copytree(folder, out)
    (out / entry["file"]).unlink()
    with pytest.raises(mirror.MirrorError) as err:
        mirror.assemble(out, mirror_path=bad_lock, cache=tmp_path / "cache")
    assert str(err.value).startswith(f"{entry['file']}: PyPI packaging==0.0.0.post999: `")
    assert "failed (exit" in str(err.value)
    assert not (out / entry["file"]).exists()


def test_a_package_build_py_needs_without_a_source_is_named(tmp_path):
    data = json.loads(LOCK.read_text(encoding="utf-8"))
    data["files"] = [e for e in data["files"] if e.get("package") != "jinja2"]
    npm_lock = json.loads((REPO / "node_modules" / "pyodide" / "pyodide-lock.json").read_text(encoding="utf-8"))
    with pytest.raises(mirror.MirrorError, match=r"build.py needs Pyodide package\(s\) jinja2, which"):
        mirror.needed_files(data, npm_lock)


def test_an_embedded_zip_that_is_not_pyodides_own_file_is_refused(tmp_path):
    data = json.loads(LOCK.read_text(encoding="utf-8"))
    entry = next(e for e in data["files"] if e.get("package") == "numpy")
    npm_lock = json.loads((REPO / "node_modules" / "pyodide" / "pyodide-lock.json").read_text(encoding="utf-8"))
    entry = dict(entry, sha256="f" * 64)
    with pytest.raises(mirror.MirrorError, match="an embedded zip is kept only when it is Pyodide's file"):
        mirror.produce(entry, mirror.Sources(tmp_path), False, npm_lock)


# ---------------------------------------------------------------------------- the pieces

def _zip(files):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def test_embedded_zips_are_found_whole_by_their_end_records():
    one, two = _zip({"a.txt": b"alpha" * 50}), _zip({"b/c.py": b"print(1)\n", "b/d": b""})
    blob = b"\x7fELF" + b"x" * 1000 + one + b"PK\x05\x06 junk" + b"\0" * 300 + two + b"tail"
    found = mirror.find_embedded_zips(blob)
    assert found == {hashlib.sha256(one).hexdigest(): one, hashlib.sha256(two).hexdigest(): two}
    assert mirror.find_embedded_zips(one[:-30] + b"...") == {}  # a cut-off zip is not a zip


def test_sdist_wheel_bytes_depend_on_the_sources_alone(monkeypatch, folder):
    data = json.loads(LOCK.read_text(encoding="utf-8"))
    entry = next(e for e in data["files"] if e.get("package") == "markupsafe")
    sdist = mirror.CACHE / "sdist" / entry["from"]["sdist"]
    if not sdist.is_file():
        pytest.skip(f"{sdist} not cached (assemble the folder first)")
    first = mirror.sdist_wheel(sdist.read_bytes(), entry["from"], entry["file"])
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert mirror.sdist_wheel(sdist.read_bytes(), entry["from"], entry["file"]) == first
    assert hashlib.sha256(first).hexdigest() == entry["sha256"]


# ---------------------------------------------------------------------------- what the browser may lack

_PROBE = r'''
import importlib.machinery, json, sys
block = set(sys.argv[1].split(",")) - {""}
_find = importlib.machinery.PathFinder.find_spec
def find_spec(name, path=None, target=None):  # as if not installed
    return None if name.partition(".")[0] in block else _find(name, path, target)
importlib.machinery.PathFinder.find_spec = staticmethod(find_spec)

from bokeh.document import Document
from lab.ui.app import LabApp
from lab.ui.pages import get_catalog, page_extension
page_extension()  # what lab_page() and hub_page() do first, in the browser too
catalog = get_catalog()
done = []
for m in catalog.missions + [catalog.sandbox]:
    app = LabApp(catalog, "mission=" + m.id)
    doc = Document()
    app.view.server_doc(doc)
    app._run_now(); app._finish_now(); app._update_plots()
    if "layout" in m.controls:
        other = "disaggregated" if app.state.settings.get("layout") != "disaggregated" else "colocated"
        assert app.state.change("layout", other), app.state.error
        app._run_now(); app._finish_now(); app._update_plots()
    if app.state.can_sweep() and len(done) < 2:
        app.state.run_sweep(points=3)
        app.plots.update()
    json.dumps(doc.to_json(), default=str)
    done.append(m.id)
from panel.util import HTML_SANITIZER
print(json.dumps({"missions": done, "loaded": sorted(n for n in block if n in sys.modules),
                  "cleaned": HTML_SANITIZER.clean("<b onclick=x()>14px</b>")}))
'''


def _probe(block):
    proc = subprocess.run([sys.executable, "-c", _PROBE, ",".join(block)], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=dict(os.environ, PYTHONPATH=str(REPO)))
    return proc


def _import_names(dists):
    """Top-level module names of distributions (pillow -> PIL)."""
    names = set()
    for dist in dists:
        try:
            top = importlib.metadata.distribution(dist).read_text("top_level.txt")
        except importlib.metadata.PackageNotFoundError:
            top = None
        names |= set((top or dist.replace("-", "_")).split())
    return names


def test_the_lab_runs_without_any_package_the_browser_lacks():
    """build.py's UNUSED_DEPENDENCIES (site_build/dependencies.py) never reach the browser: the lab must
    not import them. nh3 is one: the lab's FlexBox layouts render through lab.ui.browser.panel_shims
    instead, which escapes what nh3 would have cleaned (stricter: no markup survives). One run with
    every one of them missing, as in the browser (every mission's page built, run, switched, swept)."""
    block = sorted(_import_names(dependencies.UNUSED_DEPENDENCIES))
    assert {"PIL", "pandas", "nh3"} <= set(block)
    proc = _probe(block)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(result["missions"]) >= 2 and result["loaded"] == []
    assert result["cleaned"] == "&lt;b onclick=x()&gt;14px&lt;/b&gt;"
