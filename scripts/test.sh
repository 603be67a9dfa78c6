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
# Phase 1: unit and integration tests in one process: some of them bound latencies, which a
# neighbouring verl run would distort. Phase 2: the end-to-end runs (marker `slow`), two at a time:
# a verl run spends most of its start-up on one process at a time (each imports torch and verl in
# turn), so two runs share two cores with little loss. DEVENUS_E2E_WORKERS=1 runs them one by one.
status=0
python -m pytest -m "not slow" || status=$?
python -m pytest -m slow -n "${DEVENUS_E2E_WORKERS:-2}" --dist worksteal || status=$((status ? status : $?))
exit "$status"
