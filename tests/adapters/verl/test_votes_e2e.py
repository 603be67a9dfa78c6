"""TTRL through ``python -m devenus.train`` on hidden-label testbed data: vote on N = 2M with a second
temperature, train on M, two steps on the CPU; plus its setup errors (before Ray starts)."""

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl.train import SetupError, check_setup  # noqa: E402
from devenus.runs.testbed import RunConfig  # noqa: E402
from devenus.records import hide_labels, read_records, write_records  # noqa: E402
from e2e import compose, train, train_steps # noqa: E402


@pytest.fixture(scope="module")
def hidden_train(base_testbed, tmp_path_factory):
    path = tmp_path_factory.mktemp("ttrl_data") / "train_hidden10.parquet"
    write_records(hide_labels(read_records(base_testbed.split("train")), 0.1, seed=0), path)
    return path


@pytest.mark.parametrize("extra, message", [
    (["+devenus.method_config.votes=2"], "votes=2 must be >= actor_rollout_ref.rollout.n=4"),
    (["+devenus.method_config.vote_temperatures=[0.6]"], "needs extra votes"),
    (["+devenus.method_config.votes=9", "actor_rollout_ref.rollout.agent.num_workers=8"],
     "cannot be split evenly over actor_rollout_ref.rollout.agent.num_workers=8"),
])
def test_vote_config_errors_before_ray(hidden_train, extra, message):
    cfg = compose("devenus.method=ttrl", f"data.train_files={hidden_train}", f"data.val_files={hidden_train}",
                  "data.train_batch_size=4", "actor_rollout_ref.rollout.n=4", *extra)
    with pytest.raises(SetupError, match=message.replace("[", r"\[")):
        check_setup(cfg)


@pytest.mark.slow
def test_ttrl_vote_on_n_train_on_m_end_to_end(base_testbed, hidden_train, tmp_path):
    cfg = RunConfig(method="ttrl", steps=2, prompts_per_step=4, rollouts_per_prompt=4, train_file=str(hidden_train),
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1",
                                     "+devenus.method_config.votes=8",
                                     "+devenus.method_config.vote_temperatures=[0.6]"))
    r = train(base_testbed, tmp_path, cfg)
    rc, log = r.returncode, r.output()
    assert rc == 0, log[-6000:]
    steps = train_steps(r)
    assert set(steps) == {1, 2}
    for s in steps.values():
        assert s["devenus/votes/per_prompt"] == 8 and s["devenus/votes/extra_rows"] == 16
        assert s["devenus/ttrl/votes_per_group"] == 8  # the vote saw all N
        # verl trained on M = 4 rollouts per prompt: 16 rows, labeled or not
        assert s.get("devenus/reward/labeled/rows", 0) + s.get("devenus/reward/unlabeled/rows", 0) == 16
        for key in ("devenus/ttrl/majority_ratio", "devenus/ttrl/no_majority_share", "devenus/ttrl/tie_share",
                    "devenus/target/constructed_share", "actor/grad_norm"):
            assert key in s, key
    assert any("devenus/target/accuracy" in s for s in steps.values())  # pseudo labels vs hidden truth
    for s in steps.values():  # mechanism metrics in verl's file tracker, against simulation.hidden_answer
        cov, given = s["devenus/mechanism/pseudo_target/coverage"], s["devenus/mechanism/pseudo_target/given"]
        assert 0.0 <= cov <= 1.0 and s["devenus/mechanism/pseudo_target/seen"] > 0
        assert given == 0 or 0.0 <= s["devenus/mechanism/pseudo_target/precision"] <= 1.0
    assert "vote rollouts sampled at temperature 0.6" in log  # the extra votes reached the rollout at T=0.6
