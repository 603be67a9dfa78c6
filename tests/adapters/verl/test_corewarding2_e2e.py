"""Co-rewarding II through ``python -m devenus.train``: the EMA teacher lives in the actor workers, its
votes are generated with its own weights (seen in the rollout server's weight checksums), it is saved
with verl's checkpoint and a resumed run continues with the saved teacher, not a fresh copy."""

import re

import pytest
import torch

pytest.importorskip("verl")

from devenus.adapters.verl.train import SetupError, check_setup  # noqa: E402
from devenus.signals import tensor_checksum  # noqa: E402
from devenus.runs.testbed import RunConfig  # noqa: E402
from devenus.records import hide_labels, read_records, write_records  # noqa: E402
from e2e import compose, train, train_steps # noqa: E402

SYNC_RE = re.compile(r"update_weights replica=0 version=\d+ global_steps=(\d+) tensors=\d+ checksum=([-0-9.e+]+)")


@pytest.fixture(scope="module")
def hidden_train(base_testbed, tmp_path_factory):
    path = tmp_path_factory.mktemp("cw2_data") / "train_hidden10.parquet"
    write_records(hide_labels(read_records(base_testbed.split("train")), 0.1, seed=0), path)
    return path


def test_teacher_votes_must_split_over_agent_workers(hidden_train):
    cfg = compose("devenus.method=corewarding2", f"data.train_files={hidden_train}", f"data.val_files={hidden_train}",
                  "data.train_batch_size=4", "actor_rollout_ref.rollout.n=4", "+devenus.method_config.teacher_votes=3",
                  "actor_rollout_ref.rollout.agent.num_workers=8")
    with pytest.raises(SetupError, match="4 prompts x 3 teacher votes = 12 rollouts cannot be split evenly"):
        check_setup(cfg)


def syncs(log: str) -> dict[int, list[float]]:
    """Weight checksums the rollout server received, by global step, in order."""
    out: dict[int, list[float]] = {}
    for step, c in SYNC_RE.findall(log):
        out.setdefault(int(step), []).append(float(c))
    return out


@pytest.mark.slow
@pytest.mark.extended
def test_ema_teacher_votes_checkpoint_and_resume(base_testbed, hidden_train, tmp_path):
    # verl keeps one checkpoint: step 2's save prunes step 1's actor, and DE-Venus its teacher shards
    cfg = RunConfig(method="corewarding2", steps=2, prompts_per_step=4, rollouts_per_prompt=4, save_freq=1,
                    ckpt_to_keep=1, train_file=str(hidden_train),
                    extra_overrides=("trainer.val_before_train=False", "trainer.test_freq=-1"))
    r = train(base_testbed, tmp_path, cfg)
    rc, log = r.returncode, r.output()
    assert rc == 0, log[-6000:]
    steps = train_steps(r)
    assert set(steps) == {1, 2}
    for s, m in steps.items():
        assert m["devenus/corewarding2/teacher_updates"] == s
        assert m["devenus/votes/extra_rows"] == 16  # 4 prompts x 4 teacher votes, dropped before the update
        for key in ("devenus/corewarding2/majority_ratio", "devenus/corewarding2/teacher_distance",
                    "devenus/target/constructed_share", "devenus/timing_s/vote_rollouts", "actor/grad_norm"):
            assert key in m, key
    assert steps[1]["devenus/corewarding2/teacher_alpha"] == pytest.approx(0.01)
    assert steps[2]["devenus/corewarding2/teacher_alpha"] == pytest.approx(1e-5)  # annealed over the 2 steps

    # per step the server gets: the teacher, the actor back, the updated actor
    w = syncs(log)
    base = w[0][0]
    assert [len(w[s]) for s in (1, 2)] == [3, 3]
    assert w[1][0] == base and w[1][1] == base  # step 1: teacher = base model = actor before any update
    teacher2, actor1 = w[2][0], w[1][2]
    assert w[2][1] == actor1  # the actor is restored exactly after the teacher's votes
    assert teacher2 != base and abs(teacher2 - base) < 0.05 * abs(actor1 - base)  # 1% of the way to the actor

    root = tmp_path / "checkpoints"
    assert not (root / "global_step_1").exists(), "step 1's teacher shards outlived its pruned actor"
    assert "pruned DE-Venus's state of global_step_1" in log
    ckpt = root / "global_step_2"
    assert (ckpt / "actor").is_dir() and (ckpt / "devenus_method.pt").is_file()
    saved = torch.load(ckpt / "devenus_teacher" / "rank_0.pt", weights_only=True)
    # resume to step 3: the restored teacher is the saved one, and it is not the actor
    cfg.steps = 3
    r3 = train(base_testbed, tmp_path, cfg)
    rc, log3 = r3.returncode, r3.output()
    assert rc == 0, log3[-6000:]
    restored = re.search(r"restored the EMA teacher from \S+ \(checksum ([-0-9.e+]+), 2 updates\)", log3)
    assert restored, log3[-4000:]
    assert float(restored.group(1)) == pytest.approx(tensor_checksum(saved.values()), rel=1e-6)
    w3 = syncs(log3)
    assert w3[2][0] == w[2][2]  # resumed actor = the step-2 actor
    assert w3[3][0] != w3[2][0] and abs(w3[3][0] - teacher2) < abs(w3[3][0] - w3[2][0])  # teacher, not actor
    step3 = train_steps(r3)[3]
    assert step3["devenus/corewarding2/teacher_updates"] == 3
