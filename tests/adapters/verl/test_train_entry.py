"""``python -m devenus.train``: clear errors before Ray starts, and end-to-end runs on the CPU testbed."""

import os
import subprocess
import time

import pytest

from devenus.runs.testbed import RunConfig
from e2e import PLUGINS, kill_tree, run_train, setup_error, train, train_cmd, train_steps


@pytest.mark.parametrize(
    "extra, message",
    [
        (["devenus.method=no_such_method"], "unknown DE-Venus method 'no_such_method'; the DE-Venus methods: "),
        (["devenus.method=ttrl", "+devenus.method_config.min_agree=0.5"], "unknown config key(s) for method 'ttrl': +devenus.method_config.min_agree=<value> "
         "(did you mean +devenus.method_config.min_agreement=<value>?)"),
        (["devenus.method=ttrl"], "every training row is labeled"),
        # without the full contract check the label states are still counted: TTRL never runs on nothing
        (["devenus.method=ttrl", "devenus.validate_data=false"], "every training row is labeled"),
        (["+devenus.probe.every_k_step=2"], "unknown key devenus.probe.every_k_step (did you mean devenus.probe.every_k_steps?)"),
        # docs/methods/intuitor.md, "Differences from the reference" 6: the reference can take SC from fused kernels
        (["devenus.method=intuitor", "actor_rollout_ref.model.use_fused_kernels=True"],
         "method 'intuitor' takes self-certainty from the full logits, which fused kernels never materialise"),
        # a rollout budget stops only at a validation step (docs/trainer.md, "Rollout budget")
        (["+devenus.budget.rollouts=4096", "trainer.test_freq=-1"], "trainer.test_freq > 0"),
    ],
)
def test_clear_errors_before_ray(base_testbed, tmp_path, extra, message):
    assert message in setup_error(base_testbed, tmp_path, RunConfig(steps=1), *extra)


def test_the_real_entry_point_stops_with_one_line_and_exit_code_2(base_testbed, tmp_path):
    r = run_train(train_cmd(base_testbed, tmp_path, RunConfig(steps=1), "devenus.method=no_such_method"), timeout=300)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "devenus.train: error: unknown DE-Venus method 'no_such_method'" in r.stderr
    assert "Traceback" not in r.stderr  # a message, not a stack trace from deep inside Ray


def test_dataset_breaking_the_contract_is_named(base_testbed, tmp_path):
    import pandas as pd

    df = pd.read_parquet(base_testbed.split("train")).head(8)
    infos = list(df["extra_info"])
    infos[3] = dict(infos[2])  # duplicate sample key
    df["extra_info"] = infos
    bad = tmp_path / "bad.parquet"
    df.to_parquet(bad)
    err = setup_error(base_testbed, tmp_path, RunConfig(steps=1, train_file=str(bad)))
    assert "breaks the record contract" in err and "duplicate" in err.lower()
    assert df.loc[2, "extra_info"]["index"] in err


def test_a_row_without_its_stable_key_is_refused_before_training(base_testbed, tmp_path):
    """Even with devenus.validate_data=false: histories are joined on extra_info.index, never on position."""
    import pandas as pd

    df = pd.read_parquet(base_testbed.split("train")).head(8)
    infos = [dict(e) for e in df["extra_info"]]
    del infos[5]["index"]
    df["extra_info"] = infos
    bad = tmp_path / "nokey.parquet"
    df.to_parquet(bad)
    err = setup_error(base_testbed, tmp_path, RunConfig(steps=1, train_file=str(bad)), "devenus.validate_data=false")
    assert f"data.train_files: {bad}: row 5 has no extra_info.index" in err
    assert "devenus import" in err


def _small(cfg_kwargs=None):
    base = dict(method="test_visit_counter", steps=4, prompts_per_step=4, rollouts_per_prompt=4, save_freq=2,
                extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    base.update(cfg_kwargs or {})
    return RunConfig(**base)


@pytest.mark.slow
@pytest.mark.extended  # the default suite resumes a method's state in test_refine_e2e.py[trapo]
def test_kill_and_resume_restores_method_state(base_testbed, tmp_path):
    """Uninterrupted run vs. a run killed after its step-2 checkpoint and resumed: same decisions at steps 3-4."""
    plugin = ["devenus.plugins=[visit_counter]"]
    full = train(base_testbed, tmp_path / "full", _small(), *plugin, timeout=900)
    assert full.ok, full.tail(60)
    want = train_steps(full)
    assert set(want) == {1, 2, 3, 4}
    assert all(want[s]["actor/grad_norm"] >= 0 for s in want if "actor/grad_norm" in want[s])

    # Start the same run, kill it once step 2's checkpoint (with the method's state) is on disk.
    out = tmp_path / "killed"
    cmd = train_cmd(base_testbed, out, _small(), *plugin)
    env = {**os.environ, "PYTHONPATH": f"{PLUGINS}:{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    state = out / "checkpoints" / "global_step_2" / "devenus_method.pt"
    deadline = time.time() + 600
    while not state.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert state.exists(), "no step-2 checkpoint appeared"
    kill_tree(proc.pid)  # the driver and every Ray process it started, as a crash would leave them

    resumed = train(base_testbed, out, _small(), *plugin)  # the same overrides as the killed run
    assert resumed.ok, resumed.tail(60)
    assert "restored test_visit_counter state" in resumed.output()
    got = train_steps(resumed)
    assert set(got) == {3, 4}
    for s in (3, 4):
        key = "devenus/test_visit_counter/decision_digest"
        assert got[s][key] == want[s][key], f"step {s} decided differently after resume"
        assert got[s]["devenus/test_visit_counter/total_visits"] == want[s]["devenus/test_visit_counter/total_visits"]
