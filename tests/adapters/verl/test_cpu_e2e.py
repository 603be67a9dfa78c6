"""End to end: verl 0.9.1's legacy PPO trainer (GRPO) on this CPU through the DE-Venus CPU plugin.

Run 1 trains 2 steps (validation before training and at step 2, checkpoint at step 2); run 2 resumes
from that checkpoint and trains step 3. Asserts on verl's file-tracker metrics and on the hf rollout
server's weight-sync log lines. Each run takes about a minute on a 2-core box.
"""

import json
import math
import os

import pytest

pytest.importorskip("verl")

import verl_cpu_fixtures as fxmod  # noqa: E402

from devenus.adapters.verl.cpu.launch import cpu_launch_env  # noqa: E402

# extended: every devenus.train end-to-end run goes through the same CPU backend and verl trainer
pytestmark = [pytest.mark.slow, pytest.mark.extended, pytest.mark.verl]

RUN_TIMEOUT_S = float(os.environ.get("DEVENUS_E2E_TIMEOUT_S", "900"))


def _run(fx, workdir, ckpt, steps, name):
    cmd, env, metrics = fxmod.metrics_logger(fxmod.ppo_command(fx, ckpt, steps), workdir)
    res = fxmod.run_monitored(
        cmd,
        env={**cpu_launch_env(), **env},
        cwd=workdir,
        log_path=workdir / f"{name}.log",
        timeout=RUN_TIMEOUT_S,
    )
    assert not res["timed_out"], f"{name} timed out after {RUN_TIMEOUT_S}s; log: {workdir / f'{name}.log'}"
    assert res["returncode"] == 0, res["output"][-6000:]
    res["metrics"] = fxmod.read_step_metrics(metrics)
    res["syncs"] = fxmod.parse_weight_syncs(res["output"])
    return res


def _summary(res, train_steps):
    step_times = [res["metrics"][s]["timing_s/step"] for s in train_steps]
    return {
        "wall_s": round(res["wall_s"], 1),
        "step_s": [round(t, 2) for t in step_times],
        "peak_rss_tree_mb": round(res["peak_rss_tree_mb"]),
        "peak_rss_process_mb": round(res["peak_rss_process_mb"]),
        "peak_pss_tree_mb": round(res["peak_pss_tree_mb"]),
    }


def test_main_ppo_grpo_end_to_end_with_resume(verl_cpu_fx, tmp_path, record_property):
    ckpt = tmp_path / "ckpt"

    # ---- run 1: steps 1-2, validation at 0 and 2, checkpoint at 2
    r1 = _run(verl_cpu_fx, tmp_path, ckpt, 2, "run1")
    m = r1["metrics"]
    assert {0, 1, 2} <= set(m), sorted(m)
    assert "val-core/devenus/add/acc/mean@1" in m[0]  # validation before training
    assert "val-core/devenus/add/acc/mean@1" in m[2]  # validation at test_freq
    for s in (1, 2):
        step = m[s]
        assert step["actor/grad_norm"] > 0 and math.isfinite(step["actor/grad_norm"])
        assert step["training/global_step"] == s
        for key in ("critic/score/mean", "critic/advantages/max", "timing_s/old_log_prob", "timing_s/ref",
                    "timing_s/update_actor", "timing_s/update_weights", "actor/kl_loss", "actor/entropy"):
            assert key in step, key
        assert step["critic/advantages/max"] > 0  # GRPO saw reward variance inside a group
        assert step["response_length/mean"] > 0
        # the hf rollout's per-token log-probs agree with the FSDP actor's recomputation
        assert step["training/rollout_actor_probs_pearson_corr"] > 0.99
        assert step["training/rollout_probs_diff_max"] < 0.05
    assert (ckpt / "global_step_2" / "actor").is_dir()
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"

    # ---- weight sync: the rollout server's weights change after each update
    syncs = r1["syncs"]
    assert [s["global_steps"] for s in syncs] == [0, 1, 2], syncs
    assert [s["version"] for s in syncs] == [1, 2, 3]
    assert syncs[0]["checksum"] != syncs[1]["checksum"] != syncs[2]["checksum"]

    # ---- run 2: resume from global_step_2, train step 3
    r2 = _run(verl_cpu_fx, tmp_path, ckpt, 3, "run2")
    assert f"Load from checkpoint folder: {ckpt / 'global_step_2'}" in r2["output"]
    m2 = r2["metrics"]
    assert 1 not in m2 and 3 in m2
    assert m2[3]["actor/grad_norm"] > 0 and m2[3]["training/global_step"] == 3
    syncs2 = r2["syncs"]
    assert [s["global_steps"] for s in syncs2] == [2, 3], syncs2
    # the restored actor weights reach the rollout: same fingerprint as after step 2 of run 1
    assert math.isclose(syncs2[0]["checksum"], syncs[-1]["checksum"], rel_tol=1e-9)
    assert syncs2[1]["checksum"] != syncs2[0]["checksum"]

    report = {"run1_train_2_steps": _summary(r1, (1, 2)), "run2_resume_1_step": _summary(r2, (3,))}
    record_property("cpu_e2e", json.dumps(report))
    print("\nCPU_E2E_REPORT " + json.dumps(report))
