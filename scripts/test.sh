#!/usr/bin/env bash
# The test suite. Sets everything up on first run.
#   bash scripts/test.sh             the default suite (what CI runs): phases 1 and 2 below
#   bash scripts/test.sh --all       the same plus every extended end-to-end run (marker `extended`)
#   bash scripts/test.sh ARGS...     pytest ARGS, in one process (e.g. one file, or -m "not slow")
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
e2e="slow and not extended"
if [ "${1:-}" = "--all" ]; then
  [ "$#" -eq 1 ] || { echo "scripts/test.sh: --all takes no further arguments (pytest's go without it)" >&2; exit 2; }
  e2e="slow"
  shift
fi
if [ "$#" -gt 0 ]; then
  exec python -m pytest "$@"
fi
# Phase 1: unit and integration tests, two at a time (one per core), then the few that bound
# wall-clock latencies (marker `timing`) one at a time: a neighbour would distort them.
# Phase 2: end-to-end runs (marker `slow`), two at a time: a verl run spends most of its start-up on one
# process at a time (each imports torch and verl in turn), so two runs share two cores with little loss.
# The default suite runs one end-to-end run through verl per capability (tests/test_suite_tiers.py lists
# them); its other end-to-end tests check their runs' overrides and data with devenus.train's preflight
# instead of launching verl again. `--all` adds the `extended` runs (every other method, the resumes the
# default suite covers once, the seeded-runs and kill-and-resume tests: README, "Quick start").
# DEVENUS_UNIT_WORKERS / DEVENUS_E2E_WORKERS=1 run a phase one test at a time.
status=0
# each phase's time, and how many verl trainers the suite started (devenus.train appends a line per launch)
export DEVENUS_LAUNCH_LOG="$(mktemp -t devenus-launches.XXXXXX)"
times=()
phase() {  # phase NAME pytest-args...
  local name="$1" t0=$SECONDS rc=0
  shift
  python -m pytest "$@" || rc=$?
  times+=("$name $((SECONDS - t0)) s")
  [ "$status" -ne 0 ] || status=$rc
}
phase unit -m "not slow and not timing" -n "${DEVENUS_UNIT_WORKERS:-2}" --dist worksteal
# (only tests/verify has timing tests, tests/test_suite_tiers.py checks it: collecting just that folder saves ~13 s)
phase timing -m "timing and not slow" tests/verify
# --dist loadscope: a module's tests stay on one worker, so a module-scoped run (the selection pipeline's) is made once
phase e2e -m "$e2e" -n "${DEVENUS_E2E_WORKERS:-2}" --dist loadscope
echo "[devenus] phases: ${times[*]}; verl trainer launches: $(wc -l < "$DEVENUS_LAUNCH_LOG")"
rm -f "$DEVENUS_LAUNCH_LOG"
exit "$status"
