#!/usr/bin/env bash
# The main job on the embedded default (the CPU testbed). Sets everything up on first run.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
exec python -m devenus demo "$@"
