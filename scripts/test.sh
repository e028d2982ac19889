#!/usr/bin/env bash
# Set up (idempotent), then run the test suite. Arguments go to pytest (one CPython process).
#   (none)    every test under CPython (those with no browser and no Pyodide two at a time, the browser
#             ones in two lanes), then the core's under PyPy (the --pypy job)
#   --pypy    the core's tests under Debian's pypy3 alone (scripts/setup_pypy.sh sets it up)
#   --quick   the subset a developer runs often (under 3 minutes on two cores): the core's engine,
#             spec, metrics (both paths) and workload, the shipped missions, the page's state, and one browser
#             smoke test (a student changes the fleet, earns a star, finds it on the hub).
# Exits non-zero on any failure, including pytest's exit 5 (no tests collected).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

QUICK=(tests/test_engine.py tests/test_spec.py tests/test_metrics.py tests/test_fast_metrics.py tests/test_workload.py tests/test_missions.py
       tests/test_stars.py tests/ui/test_state.py
       "tests/ui/test_browser.py::test_mission_one_change_fleet_earn_star_and_find_it_on_the_hub")
# The core under PyPy (scripts/setup_pypy.sh): the engine against the reference, the property
# tests (PyPy's hypothesis is another release, so it explores other examples), the metrics, big
# runs' representation, lab run/sweep/plan, and the results equal to Pyodide's.
PYPY=(tests/test_engine.py tests/test_reference.py tests/test_kv.py tests/test_properties.py tests/test_metrics.py
      tests/test_spec.py tests/test_workload.py tests/test_scale.py tests/test_cli.py tests/test_plan.py
      tests/test_pyodide_core.py::test_every_core_module_imports_in_bare_pyodide
      tests/test_pyodide_core.py::test_same_results_in_cpython_and_pyodide)

failed=0
# phase LABEL PYTHON PYTEST-ARGS...: one pytest run; a failure (or no test collected, pytest's
# exit 5) is remembered and the next phase still runs.
phase() {
  local label="$1" python="$2"
  shift 2
  echo "[test] $label: $python -m pytest $*"
  set +e
  "$python" -m pytest "$@"
  local rc=$?
  set -e
  [ "$rc" -ne 5 ] || echo "[test] ERROR: $label collected no tests (exit 5): treating as a failure" >&2
  [ "$rc" -eq 0 ] || { echo "[test] $label FAILED (exit $rc)" >&2; failed=1; }
}

# pypy_phase [PYTEST-ARGS...]: set PyPy up, then run the PYPY tests there, two at a time.
pypy_phase() {
  bash scripts/setup_pypy.sh
  phase "PyPy" .venv-pypy/bin/python -p no:cacheprovider -n 2 --dist loadscope --durations=10 "${PYPY[@]}" "$@"
}

if [ "${1:-}" = "--pypy" ]; then
  shift
  bash scripts/setup.sh  # (node_modules: the Pyodide side of the equality test)
  pypy_phase "$@"
  exit "$failed"
fi
if [ "${1:-}" = "--quick" ]; then
  shift
  set -- "${QUICK[@]}" "$@"
fi

bash scripts/setup.sh

# --durations: the slowest tests listed at the end of each phase (where the time goes).
if [ "$#" -gt 0 ]; then  # a chosen subset: under CPython, in one process
  phase "CPython" .venv/bin/python --durations=30 "$@"
  exit "$failed"
fi
# The browser and Pyodide tests. TIMED (a race between two pages on one server) alone first;
# then two lanes at once, one pytest each: everything but tests/ui (the static lab, Pyodide)
# with EVEN_UP, and `lab serve`'s pages (tests/ui). One browser test at a time leaves the cores
# idle about a quarter of the time (benchmarks/README.md, "The suite's time"). The second lane
# prints as it runs, the first when both have ended.
TIMED=(tests/ui/test_classroom_browser.py)
# A lab serve test file run in the first lane, so that both end about together (on a fresh clone
# the second lane took 900 s, the first 740 s).
EVEN_UP=(tests/ui/test_page_limits_browser.py)
browser_phase() {
  local logs lane file not_lane1=()
  # (lane 1 is the testpaths less lane 2's files, so a test anywhere else runs in it)
  for file in tests/ui/test_*.py; do
    [[ " ${EVEN_UP[*]} " == *" $file "* ]] || not_lane1+=("--ignore=$file")
  done
  phase "CPython, browser (alone: it times two pages against each other)" .venv/bin/python --durations=5 \
    -m "browser or pyodide" "${TIMED[@]}"
  logs=$(mktemp -d)
  (failed=0
   phase "CPython, browser lane 1: the static lab and Pyodide" .venv/bin/python --durations=20 \
     -m "browser or pyodide" "${not_lane1[@]}" > "$logs/lane1" 2>&1
   echo "$failed" > "$logs/lane1.failed") &
  lane=$!
  phase "CPython, browser lane 2: lab serve" .venv/bin/python --durations=20 -m "browser or pyodide" \
    tests/ui "${TIMED[@]/#/--ignore=}" "${EVEN_UP[@]/#/--ignore=}"
  wait "$lane" || true
  cat "$logs/lane1"
  [ "$(cat "$logs/lane1.failed" 2>/dev/null)" = 0 ] || { echo "[test] browser lane 1 FAILED (above)" >&2; failed=1; }
  rm -rf "$logs"
}

# Everything: the tests that drive no browser and no Pyodide two at a time (pytest-xdist; each
# is one busy core), then the browser and Pyodide ones in two lanes (above), then the core
# under PyPy.
phase "CPython, no browser" .venv/bin/python -n 2 --dist loadscope --durations=30 -m "not browser and not pyodide"
browser_phase
pypy_phase
exit "$failed"
