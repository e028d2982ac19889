#!/usr/bin/env bash
# Set up (idempotent), then run the test suite. Arguments go to pytest.
# Exits non-zero on any failure, including pytest's exit 5 (no tests collected).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh

echo "[test] .venv/bin/python -m pytest $*"
set +e
.venv/bin/python -m pytest "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "[test] ERROR: pytest collected no tests (exit 5): treating as a failure" >&2
  exit 5
fi
exit "$rc"
