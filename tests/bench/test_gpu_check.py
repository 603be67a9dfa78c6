"""bench/gpu_check.py at toy shapes on the CPU: every section runs without verl, Ray or vLLM importable,
``--strict`` passes, and a broken bound, a spent budget or an out-of-memory score batch makes it fail."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gpu_check.py"
# verl, Ray and vLLM made unimportable (None in sys.modules), as on the device machine
BLOCKED = ("import runpy, sys; sys.modules.update(verl=None, ray=None, vllm=None); "
           f"sys.argv = [{str(SCRIPT)!r}] + sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
SECTIONS = {"imports", "packed", "coe", "build_model", "kernels", "score", "generate", "generate_plain", "geomin_pool"}


def run_check(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, "-c", BLOCKED, "--toy", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def failed_bounds(doc: dict) -> set[str]:
    return {c["bound_name"] for sec in doc["sections"].values() if isinstance(sec.get("result"), dict)
            for c in sec["result"].get("checks", {}).values() if not c["pass"]}


def layer_pool_rounds_to_bf16() -> bool:
    """Whether LayerPool sums bf16 states in bf16 (issue 32, item 5): then the coe bounds must fail."""
    from devenus.signals.hidden import LayerPool

    h = (1000.0 + torch.linspace(0, 60, 64)).reshape(1, 64, 1).expand(1, 64, 4).bfloat16()
    pool = LayerPool(torch.ones(1, 64))
    pool.add(0, h)
    return float((pool.means()[0, 0] - h.double().mean(dim=1)[0]).abs().max()) > 1e-6


def test_toy_strict_passes_without_verl_ray_or_vllm(tmp_path):
    out = tmp_path / "gpu_check.json"
    run = run_check("--strict", "--out", str(out))
    doc = json.loads(out.read_text())
    secs = doc["sections"]
    assert set(secs) == SECTIONS
    assert all(s["status"] == "ok" for s in secs.values()), {k: s.get("error") for k, s in secs.items()}
    assert doc["env"]["devenus"] == str(ROOT / "src" / "devenus")  # from the source tree, not an install
    kern = secs["kernels"]["result"]
    assert {(c["dtype"], c["temperature"]) for c in kern["cases"]} == {(d, t) for d in ("fp32", "bf16") for t in (1.0, 0.7)}
    # the CPU meter sees the chunk's [73, 151936] float32 buffers (44 MB each), well under the whole logits' 58 MB x 4
    assert all(10 < c["online_mb"] < 256 and c["naive_mb"] > 200 for c in kern["cases"])
    assert {c["batch"] for c in secs["score"]["result"]["cases"]} == {2, 4}
    assert secs["geomin_pool"]["result"]["pooled_shape"] == [3, 5, 64]  # rows, layers + 1, d
    assert secs["coe"]["result"]["massive_pooled_abs_max"] > 900
    if layer_pool_rounds_to_bf16():
        assert run.returncode == 1 and failed_bounds(doc) == {"coe_pool_error_rel", "coe_bf16_vs_fp32_rel"}, run.stdout
        pytest.xfail("LayerPool pools bf16 states in bf16: the coe bounds fail, as they should, until it pools in fp32")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert doc["failures"] == [] and "passed" in run.stdout


def test_a_broken_bound_makes_strict_exit_nonzero(tmp_path):
    out = tmp_path / "gpu_check.json"
    run = run_check("--strict", "--only", "kernels", "--bound-override", "online_kernel_mb=0.0001", "--out", str(out))
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["bounds"]["online_kernel_mb"] == 0.0001 and failed_bounds(doc) == {"online_kernel_mb"}
    assert all(c["value"] > 0.0001 for c in doc["sections"]["kernels"]["result"]["checks"].values()
               if c["bound_name"] == "online_kernel_mb")
    assert "kernels: online_mb fp32 T=96 temp=1.0" in run.stdout


def test_a_spent_budget_fails_only_under_strict(tmp_path):
    out = tmp_path / "gpu_check.json"
    loose = run_check("--budget-s", "0", "--only", "imports", "--out", str(out))  # on the CPU strict is off by default
    assert loose.returncode == 0, loose.stderr[-2000:]
    assert json.loads(out.read_text())["sections"]["imports"]["status"] == "skipped"
    strict = run_check("--strict", "--budget-s", "0", "--only", "imports", "--out", str(out))
    assert strict.returncode == 1 and "imports: skipped: time budget spent" in strict.stdout


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_an_out_of_memory_score_batch_is_a_result_and_the_next_batch_runs(gpu_check, monkeypatch):
    import devenus.select.score as score_mod

    real = score_mod.forward_signals

    def forward_signals(model, *a, batch_size, **kw):  # the CPU cannot run out of CUDA memory: B = 4 does here
        if batch_size == 4:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(model, *a, batch_size=batch_size, **kw)

    monkeypatch.setattr(score_mod, "forward_signals", forward_signals)
    model = gpu_check.build_model(gpu_check.TOY, torch.device("cpu"), torch.bfloat16)
    res = gpu_check.score(model, torch.device("cpu"), gpu_check.BOUNDS, prompt=8, response=24, batches=[4, 2])
    assert res["cases"][0]["oom"].startswith("CUDA out of memory") and "seconds" not in res["cases"][0]
    assert res["checks"]["oom B=4 T=32"] == {"value": 1, "bound": 0, "bound_name": "oom", "pass": False}
    assert res["checks"]["oom B=2 T=32"]["pass"] and res["checks"]["nonfinite B=2 T=32"]["pass"]


def test_out_defaults_to_dollar_out_else_the_temp_dir_and_overrides_are_checked(gpu_check, monkeypatch, tmp_path):
    monkeypatch.setenv("OUT", str(tmp_path))
    assert gpu_check.default_out(False) == tmp_path / "gpu_check.json"
    monkeypatch.delenv("OUT")
    assert not str(gpu_check.default_out(False)).startswith(str(ROOT))
    assert gpu_check.parse_bounds(["scorer_mb=1.5"])["scorer_mb"] == 1.5
    for bad in ("no_such_bound=1", "scorer_mb", "scorer_mb=lots"):
        with pytest.raises(SystemExit, match="--bound-override"):
            gpu_check.parse_bounds([bad])
