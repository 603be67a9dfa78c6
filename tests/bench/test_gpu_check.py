"""bench/gpu_check.py at toy shapes on the CPU: every section runs, without verl, Ray or vLLM in the process."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_gpu_check_toy_runs_every_section_on_the_cpu(tmp_path):
    out = tmp_path / "gpu_check.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    # a fresh process: the import check must see only what devenus itself pulls in
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--toy", "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    doc = json.loads(out.read_text())
    secs = doc["sections"]
    assert set(secs) == {"imports", "build_model", "kernels", "score", "generate", "generate_plain", "geomin_pool"}
    assert all(s["status"] == "ok" for s in secs.values()), {k: s.get("error") for k, s in secs.items()}
    kern = [r for r in secs["kernels"]["result"] if "T" in r]
    assert {r["T"] for r in kern} == {16, 48} and all(r["online_max_diff"] < 1e-3 for r in kern)
    assert all(v == secs["score"]["result"]["responses"] for v in secs["score"]["result"]["finite_values"].values())
    assert secs["geomin_pool"]["result"]["pooled_shape"] == [3, 5, 64]  # rows, layers + 1, d
    assert "[kernels] ok" in run.stdout


def test_gpu_check_skips_sections_once_its_time_budget_is_spent(tmp_path):
    out = tmp_path / "gpu_check.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--toy", "--out", str(out),
                          "--budget-s", "0"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    secs = json.loads(out.read_text())["sections"]
    assert secs["imports"]["status"] == "skipped"  # the budget, spent at once, skips every section in turn
