#!/usr/bin/env bash
# Idempotent setup for a fresh Debian machine. Run from anywhere; works in the repo root.
#   - .venv (python3) with the project installed editable, test extra included
#   - node_modules via `npm ci` (npm `pyodide` and `axe-core`, pinned in package.json/package-lock.json)
#   - Debian's chromium for the browser tests (only when root and it is missing)
# Every step says what it does; any failure stops the script with a message.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$(pwd)"

say()  { printf '[setup] %s\n' "$*"; }
fail() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
trap 'rc=$?; [ $rc -ne 0 ] && printf "[setup] FAILED (exit %s) at line %s: %s\n" "$rc" "$LINENO" "$BASH_COMMAND" >&2' ERR

# ---- prerequisites -----------------------------------------------------------
command -v python3 >/dev/null 2>&1 || fail "python3 not found (Debian: apt-get install -y python3 python3-venv)"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || fail "python3 >= 3.11 required, found $(python3 --version 2>&1)"
command -v node >/dev/null 2>&1 || fail "node not found (Debian: apt-get install -y nodejs npm; node >= 18 needed for Pyodide)"
command -v npm  >/dev/null 2>&1 || fail "npm not found (Debian: apt-get install -y npm)"
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' \
  || fail "node >= 18 required for Pyodide, found $(node --version)"
say "python3 $(python3 -c 'import platform; print(platform.python_version())'), node $(node --version), npm $(npm --version)"

# ---- Python: .venv + editable install ----------------------------------------
VENV="$ROOT/.venv"
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  python3 -m venv "$VENV" \
    || fail "python3 -m venv failed (Debian: apt-get install -y python3-venv), then remove $VENV and rerun"
else
  say "$VENV exists"
fi

# Reinstall only when pyproject.toml changed since the last successful install.
STAMP="$VENV/.setup-stamp"
WANT="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] \
   && "$VENV/bin/python" -c 'import importlib.metadata as m, pytest; m.version("split-the-fleet")' >/dev/null 2>&1; then
  say "python deps up to date (pyproject.toml unchanged)"
else
  say "pip install -e '.[test]'"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -e '.[test]' \
    || fail "pip install -e '.[test]' failed"
  echo "$WANT" > "$STAMP"
fi

# ---- Node: npm ci -----------------------------------------------------------
[ -f package-lock.json ] || fail "package-lock.json missing: run 'npm install' once and commit it"
# Every package the lock names (pyodide; axe-core for the browser tests' accessibility checks) at its locked version.
STALE="$(node -e '
const lock = require("./package-lock.json").packages || {};
const names = Object.keys(lock).filter((k) => k.startsWith("node_modules/")).map((k) => k.slice(13));
if (!names.includes("pyodide")) { process.stdout.write("LOCK"); process.exit(0); }
const stale = names.filter((n) => {
  try { return require("./node_modules/" + n + "/package.json").version !== lock["node_modules/" + n].version; }
  catch (e) { return true; }
});
process.stdout.write(stale.join(" "));
')"
[ "$STALE" != "LOCK" ] || fail "package-lock.json does not lock pyodide"
if [ -z "$STALE" ] && [ -f node_modules/pyodide/pyodide.asm.wasm ] && [ -f node_modules/axe-core/axe.min.js ]; then
  say "node_modules match the lock"
else
  say "npm ci (missing or not at the locked version: ${STALE:-files})"
  npm ci --no-audit --no-fund || fail "npm ci failed"
fi

# ---- a local Pyodide folder (the offline in-browser tests and a self-hosted site) ----
# Pyodide's own package CDN is not needed: scripts/pyodide_mirror.py assembles the packages from
# npm and PyPI and checks every file against scripts/pyodide_mirror.lock.json (fast when present).
say "local Pyodide folder: .cache/pyodide-0.29.3"
"$VENV/bin/python" scripts/pyodide_mirror.py --out .cache/pyodide-0.29.3 >/tmp/stf-pyodide-mirror.log 2>&1 \
  || { tail -n 20 /tmp/stf-pyodide-mirror.log >&2; fail "could not assemble .cache/pyodide-0.29.3 (the lines above name the file and its source)"; }
say "$(tail -n 1 /tmp/stf-pyodide-mirror.log)"

# ---- Chromium (browser tests) -------------------------------------------------
if [ -x /usr/bin/chromium ]; then
  say "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
elif [ "$(id -u)" -eq 0 ]; then
  command -v apt-get >/dev/null 2>&1 || fail "/usr/bin/chromium missing and apt-get not available"
  say "apt-get install chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed"
  apt-get install -y -qq chromium >/dev/null || fail "apt-get install -y chromium failed"
  [ -x /usr/bin/chromium ] || fail "chromium installed but /usr/bin/chromium is missing"
  say "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"
else
  say "WARNING: /usr/bin/chromium missing and not root: browser tests will skip (as root: apt-get install -y chromium)"
fi

say "done"
