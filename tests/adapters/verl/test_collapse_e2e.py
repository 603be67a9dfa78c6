"""The collapse guard on a run that collapses: label-free TTRL (no labels, 4 votes, no KL, lr 10x the
demo's) on the CPU testbed through ``python -m devenus.train``, guard armed with action=rollback. The
guard must stop the run before its last step, log ``devenus/collapse/...`` in verl's tracker, write
collapse_guard.json, and point verl's resume pointer at a checkpoint saved before the collapse. verl keeps
two checkpoints (``trainer.max_actor_ckpt_to_keep=2``, saves every step) and the onset is older than the
newest kept one: the guard holds verl's retention while the streak runs, so the good checkpoint survives
the acting step's save, and DE-Venus's state of the pruned checkpoints goes with them."""

import json
import time

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl.checkpoint import complete_steps  # noqa: E402
from devenus.runs.testbed import RunConfig, checkpoint_dir  # noqa: E402
from e2e import train, train_steps  # noqa: E402

STEPS = 30
GUARD = ["+devenus.collapse_guard.enabled=true", "+devenus.collapse_guard.action=rollback",
         "+devenus.collapse_guard.patience=2", "+devenus.collapse_guard.warmup_steps=3",
         # the sharpening itself (armed here: TTRL's collapse is every rollout giving one answer form)
         "+devenus.collapse_guard.nll_ratio=0.2", "+devenus.collapse_guard.max_duplicate_share=0.9"]


@pytest.fixture(scope="module")
def unlabeled_file(base_testbed, tmp_path_factory):
    from devenus.records import hide_labels, read_records, write_records

    rows = hide_labels(read_records(base_testbed.split("train"))[:256], labeled_fraction=0.0, seed=0)
    return str(write_records(rows, tmp_path_factory.mktemp("unl") / "unlabeled.parquet"))


def _cfg(train_file: str) -> RunConfig:
    return RunConfig(method="ttrl", steps=STEPS, prompts_per_step=8, rollouts_per_prompt=4, lr=2e-3, kl_coef=0.0,
                     train_file=train_file, save_freq=1, ckpt_to_keep=2, val_before_train=False, val_n=1)


def _guard_metrics(steps: dict[int, dict]) -> dict[int, dict]:
    return {s: {k: v for k, v in m.items() if k.startswith("devenus/collapse/")} for s, m in steps.items()}


@pytest.fixture(scope="module")
def collapsed_run(base_testbed, unlabeled_file, tmp_path_factory):
    """The run that collapses (both tests read it; one launch)."""
    out = tmp_path_factory.mktemp("collapse")
    t0 = time.perf_counter()
    r = train(base_testbed, out, _cfg(unlabeled_file), *GUARD, timeout=600)
    return out, r, time.perf_counter() - t0


@pytest.mark.slow
def test_guard_stops_a_collapsing_ttrl_run_and_rolls_back(collapsed_run):
    tmp_path, r, wall = collapsed_run
    assert r.returncode == 0, r.tail(40)
    steps = train_steps(r)
    for s in sorted(steps):
        m = steps[s]
        print(s, {k.split("/", 2)[-1]: round(v, 3) for k, v in m.items() if k.startswith("devenus/collapse/")
                  and not k.startswith("devenus/collapse/flag/")},
              "target_acc", m.get("devenus/target/accuracy"))
    fired = [s for s, m in steps.items() if m.get("devenus/collapse/fired") == 1.0]
    assert len(fired) == 1, "the guard acted once"
    n = fired[0]
    assert max(steps) == n < STEPS, "the run stopped at the step the guard acted"
    result = json.loads((checkpoint_dir(tmp_path) / "collapse_guard.json").read_text())
    assert result["stopped_for"] == "collapse" and result["step"] == n and result["action"] == "rollback"
    good = result["rollback_to"]
    # warm-up 3 and a checkpoint every step: a checkpoint before the onset's predecessor always exists
    assert good is not None and good + 1 < result["onset"]
    ckpt = checkpoint_dir(tmp_path)
    kept = complete_steps(ckpt)
    assert sorted(int(p.name[len("global_step_"):]) for p in ckpt.glob("global_step_*")) == kept, \
        "a checkpoint verl's retention pruned left DE-Venus's state (or verl's data.pt) behind"
    # retention (keep 2) pruned the saves before the streak down to its last two, and held everything since
    pre = list(range(1, result["onset"]))
    assert len(pre) > 2, f"onset {result['onset']}: too early for retention to have pruned anything"
    assert [s for s in kept if s < result["onset"]] == pre[-2:], f"max_actor_ckpt_to_keep=2 kept {kept}"
    assert result["onset"] < kept[-1], f"onset {result['onset']} is not older than the newest kept checkpoint {kept}"
    assert good in kept, f"the rollback step {good} was pruned: {kept}"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == str(good)
    assert (ckpt / f"global_step_{good}" / "devenus_collapse_guard.json").exists()
    assert f"stopped for collapse at step {n}" in r.tail(200)
    print(f"fired at step {n} (onset {result['onset']}, flags {result['flags']}), rollback to {good}, "
          f"wall {wall:.0f} s")


def test_hook_acts_then_the_next_training_generation_stops_fit(tmp_path):
    """Bare trainer (no Ray): responses shrink after the warm-up; the hook logs devenus/collapse/..., acts
    after patience, rolls verl's pointer back, and the next training generation raises; fit() returns."""
    from types import SimpleNamespace

    from omegaconf import OmegaConf
    from verl import DataProto

    from devenus.adapters.verl import collapse as C
    from devenus.online.registry import WeakTrainerInterface
    from test_surfaces import bare_trainer, make_batch

    t = bare_trainer(WeakTrainerInterface.get("ttrl").build({}))
    t.config = OmegaConf.create({"devenus": {"collapse_guard": {"enabled": True, "action": "rollback", "patience": 2}},
                                 "trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto"}})
    t.total_training_steps = 20
    for s in (2, 4, 5):
        (tmp_path / f"global_step_{s}" / "actor").mkdir(parents=True)
        (tmp_path / f"global_step_{s}" / "data.pt").write_bytes(b"")  # verl's last write before the pointer
    (tmp_path / C.TRACKER_FILE).write_text("5")
    fired = []
    for step, length in enumerate([12, 12, 12, 12, 12, 3, 3], start=1):
        t.global_steps = step
        batch = make_batch([length] * 4, [False] * 4, [""] * 4, ["1234567"] * 4, ["a", "a", "b", "b"])
        metrics = {}
        t.collapse_guard_step(batch, metrics)
        assert "devenus/collapse/response_length" in metrics
        fired.append(metrics["devenus/collapse/fired"])
    assert fired == [0, 0, 0, 0, 0, 0, 1]  # onset step 6, acts at 7
    result = json.loads((tmp_path / C.RESULT_FILE).read_text())
    assert result["step"] == 7 and result["onset"] == 6 and result["rollback_to"] == 4  # 5 generated step 6
    (tmp_path / C.TRACKER_FILE).write_text("7")  # fit()'s save of the acting step, after the hook

    calls = []
    manager = SimpleNamespace(generate_sequences=lambda p: calls.append(p) or p)
    t.async_rollout_manager = manager

    class Base:
        def init_workers(self):
            pass

        def fit(self):
            val = DataProto.from_dict(tensors={"x": torch_zeros()}, meta_info={"validate": True})
            self.async_rollout_manager.generate_sequences(val)  # validation still runs
            self.async_rollout_manager.generate_sequences(DataProto.from_dict(tensors={"x": torch_zeros()}))
            raise AssertionError("the training generation should have stopped the run")

    class T(C.CollapseGuardMixin, Base):
        pass

    u = T.__new__(T)
    u.__dict__.update(t.__dict__)
    u.init_workers()
    assert u.fit() is None and len(calls) == 1
    assert (tmp_path / C.TRACKER_FILE).read_text() == "4"  # rolled back once fit() ended
    assert "global_step_4" in json.loads((tmp_path / C.RESULT_FILE).read_text())["pointer"]


def torch_zeros():
    import torch

    return torch.zeros(2, 1)


def test_disabled_guard_adds_nothing_and_reads_its_config_once(tmp_path):
    from omegaconf import OmegaConf

    from devenus.online.registry import WeakTrainerInterface
    from test_surfaces import bare_trainer, make_batch

    t = bare_trainer(WeakTrainerInterface.get("ttrl").build({}))
    t.config = OmegaConf.create({"devenus": {}, "trainer": {"default_local_dir": str(tmp_path)}})
    metrics = {}
    t.collapse_guard_step(make_batch([3] * 2, [False] * 2, [""] * 2, ["1", "1"], ["a", "a"]), metrics)
    assert metrics == {} and t._collapse_guard is False


@pytest.mark.slow
@pytest.mark.extended  # a second launch on the same run: the default suite's proof of the rollback is the pointer
def test_a_resume_after_the_rollback_replays_from_the_good_checkpoint(base_testbed, unlabeled_file, collapsed_run):
    """``trainer.resume_mode=auto`` after the rollback: verl loads the last good checkpoint (not the newest),
    the guard's state saved beside it comes back (baselines, no streak, not acted), and the seeded run
    replays the steps after it: the same observations, the guard acts at the same step for the same onset
    and rolls back again. (A resume that should not collapse again needs a changed config.)"""
    out, first, _ = collapsed_run
    assert first.returncode == 0, first.tail(40)
    before = json.loads((checkpoint_dir(out) / "collapse_guard.json").read_text())
    good = before["rollback_to"]
    if good is None:
        pytest.skip("the collapse came before any checkpoint: nothing to resume from")
    t0 = time.perf_counter()
    r = train(base_testbed, out, _cfg(unlabeled_file), *GUARD, timeout=600)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.tail(40)
    text = r.output()
    assert f"global_step_{good}/devenus_collapse_guard.json" in text and "restored the collapse guard's state" in text
    steps, old = train_steps(r), train_steps(first)
    assert min(steps) == good + 1, f"resumed at step {min(steps)}, not after the good checkpoint {good}"
    assert max(steps) == before["step"], "the replay stops where the first run stopped"
    a, b = _guard_metrics({s: old[s] for s in steps}), _guard_metrics(steps)
    for s in sorted(steps):
        assert b[s].keys() == a[s].keys(), s
        for k in a[s]:
            assert b[s][k] == pytest.approx(a[s][k], rel=1e-6, abs=1e-9), (s, k, a[s][k], b[s][k])
    after = json.loads((checkpoint_dir(out) / "collapse_guard.json").read_text())
    assert {k: after[k] for k in ("step", "onset", "flags", "rollback_to")} == \
        {k: before[k] for k in ("step", "onset", "flags", "rollback_to")}
    assert (checkpoint_dir(out) / "latest_checkpointed_iteration.txt").read_text().strip() == str(good)
    assert good in complete_steps(checkpoint_dir(out))
    print(f"resumed from global_step_{good}: steps {min(steps)}-{max(steps)} replayed, the guard acted again at "
          f"step {after['step']} (onset {after['onset']}); wall {wall:.0f} s")
