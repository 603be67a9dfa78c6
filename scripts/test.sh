#!/usr/bin/env bash
# The test suite. Sets everything up on first run.
#   bash scripts/test.sh             the whole suite, in two phases (below)
#   bash scripts/test.sh ARGS...     pytest ARGS, in one process (e.g. one file, or -m "not slow")
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
if [ "$#" -gt 0 ]; then
  exec python -m pytest "$@"
fi
# Phase 1: unit and integration tests, two at a time (one per core), then the few that bound
# wall-clock latencies (marker `timing`) one at a time: a neighbour would distort them. Phase 2: the
# end-to-end runs (marker `slow`), two at a time: a verl run spends most of its start-up on one
# process at a time (each imports torch and verl in turn), so two runs share two cores with little loss.
# DEVENUS_UNIT_WORKERS / DEVENUS_E2E_WORKERS=1 run a phase one test at a time.
status=0
python -m pytest -m "not slow and not timing" -n "${DEVENUS_UNIT_WORKERS:-2}" --dist worksteal || status=$?
python -m pytest -m "timing and not slow" || status=$((status ? status : $?))
python -m pytest -m slow -n "${DEVENUS_E2E_WORKERS:-2}" --dist worksteal || status=$((status ? status : $?))
exit "$status"
