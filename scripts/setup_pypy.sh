#!/usr/bin/env bash
# Idempotent setup of the core's second interpreter: Debian's pypy3 (installed when root and
# missing) and .venv-pypy with scripts/pypy-requirements.txt. The lab itself is not installed
# there (pypy3 is Python 3.9, the package asks for 3.11): PyPy runs the checkout's lab/core,
# as `pypy3 -m lab run ...` does (docs/scale.md, "PyPy for big runs").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say()  { printf '[setup-pypy] %s\n' "$*"; }
fail() { printf '[setup-pypy] ERROR: %s\n' "$*" >&2; exit 1; }

if ! command -v pypy3 >/dev/null 2>&1 || ! pypy3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || fail "pypy3 (with venv) missing and not root: apt-get install -y pypy3 pypy3-venv"
  command -v apt-get >/dev/null 2>&1 || fail "pypy3 missing and apt-get not available"
  say "apt-get install pypy3 pypy3-venv"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed"
  apt-get install -y -qq pypy3 pypy3-venv >/dev/null || fail "apt-get install -y pypy3 pypy3-venv failed"
fi
say "$(pypy3 -c 'import sys, platform; print("PyPy", ".".join(map(str, sys.pypy_version_info[:3])), "(Python", platform.python_version() + ")")')"

VENV=.venv-pypy
STAMP="$VENV/.setup-stamp"
WANT="$(sha256sum scripts/pypy-requirements.txt | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$VENV/bin/python" -c 'import pytest' >/dev/null 2>&1; then
  say "$VENV up to date"
else
  say "creating $VENV (pip install -r scripts/pypy-requirements.txt)"
  rm -rf "$VENV"
  pypy3 -m venv "$VENV" || fail "pypy3 -m venv failed (Debian: apt-get install -y pypy3-venv)"
  "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r scripts/pypy-requirements.txt \
    || fail "pip install -r scripts/pypy-requirements.txt failed under PyPy"
  echo "$WANT" > "$STAMP"
fi
