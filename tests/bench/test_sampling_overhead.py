"""bench/sampling_overhead.py: its arithmetic on hand-built metrics, the absent tree from ``git archive``, and
(slow) the whole bench at toy size with both trees the same commit."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "sampling_overhead.py"


@pytest.fixture()
def bench(monkeypatch):
    spec = importlib.util.spec_from_file_location("sampling_overhead", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "sampling_overhead", mod)
    spec.loader.exec_module(mod)
    return mod


def steps(times, lengths=None):
    return [{"step": i + 1, "timing_s/step": t, "response_length/mean": (lengths or [10] * len(times))[i]}
            for i, t in enumerate(times)]


def test_pair_ratio_leaves_out_the_warm_up_and_pairs_common_steps(bench):
    absent = steps([9.0, 2.0, 2.0, 2.0])
    present = steps([1.0, 2.0, 2.1, 2.1, 5.0])  # a step the absent run never logged does not count
    assert bench.pair_ratio(present, absent, skip=1) == pytest.approx(6.2 / 6.0)
    assert bench.step_times(absent, 2) == {3: 2.0, 4: 2.0}
    with pytest.raises(ValueError, match="first 4"):
        bench.pair_ratio(present, absent, skip=4)


def test_same_samples_compares_every_steps_response_length(bench):
    assert bench.same_samples(steps([1, 1], [10, 12]), steps([2, 2], [10, 12]))
    assert not bench.same_samples(steps([1, 1], [10, 12]), steps([2, 2], [10, 13]))
    assert not bench.same_samples([], [])


def test_summary_takes_the_median_of_the_pairs(bench):
    s = bench.summary([1.01, 1.05, 0.99], 1.02)
    assert s["median"] == pytest.approx(1.01) and s["within"]
    assert not bench.summary([1.03, 1.04], 1.02)["within"]
    assert not s["shown"]  # 0.99-1.05 over three pairs: the interval reaches past 1.02
    tight = bench.summary([1.001, 1.002, 1.003], 1.02)
    assert tight["shown"] and tight["mean"] == pytest.approx(1.002)
    assert not bench.summary([1.0], 1.02)["shown"]  # one pair: no interval, nothing shown


def test_the_absent_tree_is_src_of_the_ref(bench, tmp_path):
    src = bench.extract_tree("HEAD", tmp_path / "t")
    assert (src / "devenus" / "runs" / "launch.py").read_bytes() == subprocess.run(
        ["git", "-C", str(ROOT), "show", "HEAD:src/devenus/runs/launch.py"], capture_output=True).stdout
    with pytest.raises(SystemExit, match="no-such-ref"):
        bench.extract_tree("no-such-ref", tmp_path / "u")


def test_steps_must_exceed_the_warm_up(bench):
    with pytest.raises(SystemExit):
        bench.main(["--absent", "HEAD", "--steps", "2", "--skip", "2"])


@pytest.mark.slow
@pytest.mark.extended  # two verl launches to check a bench's plumbing: not a capability of the default tier
def test_the_bench_at_toy_size_with_one_commit_on_both_sides(tmp_path):
    """Two 3-step GRPO runs through verl, the same commit as absent and present: same samples, and a ratio;
    then the profiled mode's one run."""
    out = tmp_path / "s.json"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--absent", "HEAD", "--pairs", "1", "--steps", "3",
                          "--skip", "1", "--limit", "10", "--work", str(tmp_path / "w"), "--out", str(out)],
                         capture_output=True, text=True, env=env, timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    s = json.loads(out.read_text())
    assert s["pairs"] == 1 and s["same_samples"] == [True] and 0.5 < s["median"] < 2.0
    assert set(s["phases"][0]) >= {"timing_s/gen", "timing_s/update_actor", "timing_s/step"}
    # the profiled mode: one run, the driver under cProfile, each per-step seam called once a step
    run = subprocess.run([sys.executable, str(SCRIPT), "--profile", "--steps", "3", "--skip", "1", "--limit", "10",
                          "--work", str(tmp_path / "p"), "--out", str(out)], capture_output=True, text=True, env=env,
                         timeout=1200)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    s = json.loads(out.read_text())
    per_step = {c["seam"]: c["calls"] for c in s["costs"] if c["when"] == "step"}
    assert per_step and all(n == 3 for n in per_step.values()), per_step
    assert s["steps"] == 3 and 1.0 <= s["ratio"] < 1.01


def _stats(entries):
    """A pstats-shaped dict from {(file, name): (ct, {(caller_file, caller_name): ct})}."""
    key = {fn: (fn[0], i + 1, fn[1]) for i, fn in enumerate(entries)}
    return {key[fn]: (1, calls, 0.0, ct, {key[c]: (1, calls, 0.0, cct) for c, cct in callers.items()})
            for fn, (ct, callers, calls) in entries.items()}


def test_seam_costs_subtract_the_wrapped_calls_and_every_call_into_verl(bench):
    T, C = "/x/src/devenus/adapters/verl/trainer.py", "/x/src/devenus/adapters/verl/collapse.py"
    V = "/venv/site-packages/verl/utils/ray_utils.py"
    stats = _stats({
        (T, "_compute_old_log_prob"): (10.0005, {}, 12),
        (T, "_log_prob_pass"): (10.0, {(T, "_compute_old_log_prob"): 10.0}, 12),  # named: wrapped
        (T, "composes_steps"): (0.0002, {(T, "_compute_old_log_prob"): 0.0002}, 24),  # the seam's own
        (C, "generate_unless_stopped"): (30.001, {}, 12),
        (V, "wrapper"): (30.0, {(C, "generate_unless_stopped"): 30.0}, 12),  # verl: wrapped
        (C, "collapse_guard_step"): (0.0007, {}, 12),
        (C, "collapse_guard"): (0.0004, {(C, "collapse_guard_step"): 0.0004}, 12),  # devenus/adapters/verl: own
    })
    costs = {c["seam"]: c for c in bench.seam_costs(stats)}
    assert costs["trainer.py:_compute_old_log_prob"]["own_s"] == pytest.approx(0.0005)
    assert costs["collapse.py:generate_unless_stopped"]["own_s"] == pytest.approx(0.001)
    assert costs["collapse.py:collapse_guard_step"]["own_s"] == pytest.approx(0.0007)
    assert costs["collapse.py:collapse_guard_step"]["calls"] == 12
    assert costs["collapse.py:fit"] == {"seam": "collapse.py:fit", "when": "run", "calls": 0, "own_s": 0.0}
    s = bench.profile_summary(list(costs.values()), steps=10, mean_step_s=2.0, limit=1.02)
    assert s["seams_s_per_step"] == pytest.approx(0.00022) and s["ratio"] == pytest.approx(1.00011) and s["within"]
    assert not bench.profile_summary(list(costs.values()), steps=1, mean_step_s=1e-4, limit=1.02)["within"]


def test_phase_ratios_per_verl_timer(bench):
    a = [{"step": i, "timing_s/gen": 2.0, "timing_s/update_actor": 1.0, "timing_s/step": 4.0} for i in (1, 2, 3)]
    p = [{"step": i, "timing_s/gen": 2.2, "timing_s/update_actor": 1.0, "timing_s/step": 4.4} for i in (1, 2, 3)]
    r = bench.phase_ratios(p, a, skip=1)
    assert r == pytest.approx({"timing_s/gen": 1.1, "timing_s/update_actor": 1.0, "timing_s/step": 1.1})
