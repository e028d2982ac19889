#!/usr/bin/env bash
# Set up (idempotent), then run the test suite. Arguments go to pytest.
#   --quick   the subset a developer runs often (under 3 minutes on two cores): the core's engine,
#             spec, metrics and workload, the shipped missions, the page's state, and one browser
#             smoke test (a student changes the fleet, earns a star, finds it on the hub).
# Exits non-zero on any failure, including pytest's exit 5 (no tests collected).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

QUICK=(tests/test_engine.py tests/test_spec.py tests/test_metrics.py tests/test_workload.py tests/test_missions.py
       tests/test_stars.py tests/ui/test_state.py
       "tests/ui/test_browser.py::test_mission_one_change_fleet_earn_star_and_find_it_on_the_hub")
if [ "${1:-}" = "--quick" ]; then
  shift
  set -- "${QUICK[@]}" "$@"
fi

bash scripts/setup.sh

echo "[test] .venv/bin/python -m pytest --durations=30 $*"
set +e
.venv/bin/python -m pytest --durations=30 "$@"  # (the slowest tests listed at the end: where the time goes)
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "[test] ERROR: pytest collected no tests (exit 5): treating as a failure" >&2
  exit 5
fi
exit "$rc"
