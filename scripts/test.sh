#!/usr/bin/env bash
# The test suite. Sets everything up on first run; extra arguments go to pytest.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec python -m pytest "$@"
