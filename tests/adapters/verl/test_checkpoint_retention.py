"""Checkpoint hygiene on hand-made checkpoint trees (no Ray, no model): DE-Venus's per-step state is pruned
with the actor folders verl's own retention code removes, the resume pointer's step never is, and the
collapse guard's rollback names a checkpoint that still exists when retention keeps two."""

import json
import os
from types import SimpleNamespace

import pytest

pytest.importorskip("verl")
from omegaconf import OmegaConf  # noqa: E402
from verl.utils.checkpoint.checkpoint_manager import BaseCheckpointManager  # noqa: E402

from devenus.adapters.verl import checkpoint as C  # noqa: E402
from devenus.adapters.verl.collapse import RESULT_FILE, STATE_FILE  # noqa: E402
from devenus.adapters.verl.teacher import TEACHER_DIR  # noqa: E402
from devenus.adapters.verl.trainer import METHOD_STATE_FILE, SAMPLING_STATE_FILE  # noqa: E402

DEVENUS_STATE = (METHOD_STATE_FILE, SAMPLING_STATE_FILE, STATE_FILE)


def make_step(root, step, actor=True, state=True, teacher=True, data=True):
    folder = root / f"global_step_{step}"
    folder.mkdir(parents=True)
    if actor:
        (folder / "actor").mkdir()
        (folder / "actor" / "model_world_size_1_rank_0.pt").write_bytes(b"w")
    if data:
        (folder / "data.pt").write_bytes(b"d")
    if state:
        for name in DEVENUS_STATE:
            (folder / name).write_bytes(b"s")
    if teacher:
        (folder / TEACHER_DIR).mkdir()
        (folder / TEACHER_DIR / "rank_0.pt").write_bytes(b"t")
    return folder


def tree(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


def test_complete_steps_need_the_actor_and_verls_dataloader_state(tmp_path):
    make_step(tmp_path, 2)
    make_step(tmp_path, 4, data=False)  # verl's save stopped before data.pt (and the pointer)
    make_step(tmp_path, 6, actor=False)  # retention removed the actor
    make_step(tmp_path, 10)
    (tmp_path / "global_step_x").mkdir()
    (tmp_path / "evidence").mkdir()
    assert C.complete_steps(tmp_path) == [2, 10]
    assert C.complete_steps(tmp_path / "missing") == []
    assert C.pointer_step(tmp_path) is None
    (tmp_path / C.TRACKER_FILE).write_text("10\n")
    assert C.pointer_step(tmp_path) == 10


def test_prune_removes_devenus_state_only_where_verl_removed_the_actor(tmp_path):
    make_step(tmp_path, 1, actor=False)  # pruned by verl: DE-Venus's state and the husk go
    (tmp_path / "global_step_1" / f".{METHOD_STATE_FILE}.stale.tmp").write_bytes(b"x")  # an interrupted write
    make_step(tmp_path, 2, actor=False)  # the resume pointer names it: untouched
    make_step(tmp_path, 3, actor=False)
    (tmp_path / "global_step_3" / "critic").mkdir()  # verl keeps more critics than actors: only our state goes
    make_step(tmp_path, 4)  # complete: untouched
    make_step(tmp_path, 5, actor=False, data=False)  # the step being saved: untouched
    make_step(tmp_path, 6, actor=False, state=False, teacher=False)  # verl's data.pt alone: the husk goes
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "part.parquet").write_bytes(b"e")
    (tmp_path / C.TRACKER_FILE).write_text("2")
    before = tree(tmp_path)

    assert C.prune_step_state(tmp_path, current=5) == [1, 3, 6]
    after = tree(tmp_path)
    assert not any(p.startswith(("global_step_1", "global_step_6")) for p in after)
    assert {p for p in after if p.startswith("global_step_3")} == {"global_step_3", "global_step_3/critic",
                                                                   "global_step_3/data.pt"}
    for kept in ("global_step_2", "global_step_4", "global_step_5", "evidence"):
        assert {p for p in before if p.startswith(kept)} == {p for p in after if p.startswith(kept)}, kept
    assert C.prune_step_state(tmp_path, current=5) == []  # nothing left to do: a second call is a no-op


def test_prune_follows_verls_own_retention(tmp_path):
    """Saves 1..5 with verl's checkpoint manager's retention (max_ckpt_to_keep=2, its real code), DE-Venus's
    state written first and pruned after each save: what is left is exactly verl's two checkpoints, whole."""
    manager = BaseCheckpointManager.__new__(BaseCheckpointManager)  # its retention needs no process group
    manager.previous_saved_paths = []
    for step in range(1, 6):
        folder = tmp_path / f"global_step_{step}"
        folder.mkdir()
        for name in DEVENUS_STATE:
            (folder / name).write_bytes(b"s")
        manager.ensure_checkpoint_capacity(2)  # as FSDPCheckpointManager.save_checkpoint: before ...
        make_step(tmp_path / "tmp", step)  # ... the actor and data.pt are written ...
        (tmp_path / "tmp" / f"global_step_{step}" / "actor").rename(folder / "actor")
        (tmp_path / "tmp" / f"global_step_{step}" / "data.pt").rename(folder / "data.pt")
        manager.register_checkpoint(str(folder / "actor"), 2)  # ... and after
        (tmp_path / C.TRACKER_FILE).write_text(str(step))
        C.prune_step_state(tmp_path, step)
        assert C.complete_steps(tmp_path) == list(range(max(1, step - 1), step + 1))
    steps = {p.name for p in tmp_path.glob("global_step_*")}
    assert steps == {"global_step_4", "global_step_5"}
    for s in (4, 5):
        assert {p.name for p in (tmp_path / f"global_step_{s}").iterdir()} == {"actor", "data.pt", *DEVENUS_STATE}


def test_retention_held_unsets_verls_keys_for_one_save_and_restores_them():
    cfg = OmegaConf.create({"max_actor_ckpt_to_keep": 2, "max_critic_ckpt_to_keep": 3})
    OmegaConf.set_struct(cfg, True)  # as verl's trainer config
    with C.retention_held(cfg):
        assert cfg.get("max_actor_ckpt_to_keep", None) is None and cfg.get("max_critic_ckpt_to_keep", None) is None
        assert not cfg.get("remove_previous_ckpt_in_save", False)
    assert cfg.max_actor_ckpt_to_keep == 2 and cfg.max_critic_ckpt_to_keep == 3
    with pytest.raises(RuntimeError):
        with C.retention_held(cfg):
            raise RuntimeError("the save failed")
    assert cfg.max_actor_ckpt_to_keep == 2  # restored on an exception too
    with C.retention_held(cfg, hold=False):
        assert cfg.max_actor_ckpt_to_keep == 2


# ------------------------------------------------------------------------------ through the trainer
class RetainingWorkers:
    """The actor worker group's ``save_checkpoint`` as verl's FSDP checkpoint manager does retention (its own
    code: capacity before the save, registration after); the weights are one small file."""

    def __init__(self):
        self.manager = BaseCheckpointManager.__new__(BaseCheckpointManager)
        self.manager.previous_saved_paths = []

    def save_checkpoint(self, local_path, hdfs_path, global_step, max_ckpt_to_keep=None):
        self.manager.ensure_checkpoint_capacity(max_ckpt_to_keep)
        os.makedirs(local_path, exist_ok=True)
        with open(os.path.join(local_path, "model_world_size_1_rank_0.pt"), "w") as f:
            f.write(str(global_step))
        self.manager.register_checkpoint(local_path, max_ckpt_to_keep)


def _trainer(tmp_path, action: str):
    from test_surfaces import bare_trainer

    from devenus.online.registry import WeakTrainerInterface

    t = bare_trainer(WeakTrainerInterface.get("ttrl").build({}))
    t.config = OmegaConf.create({
        "devenus": {"collapse_guard": {"enabled": True, "action": action, "patience": 2}},
        "trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto", "default_hdfs_dir": None,
                    "max_actor_ckpt_to_keep": 2, "max_critic_ckpt_to_keep": 2},
        "actor_rollout_ref": {"actor": {"checkpoint": {"async_save": False}}}})
    OmegaConf.set_struct(t.config, True)
    t.total_training_steps = 30
    t.use_critic = False
    t.actor_rollout_wg = RetainingWorkers()
    t.train_dataloader = SimpleNamespace(state_dict=lambda: {})
    return t


@pytest.mark.parametrize("action", ["rollback", "stop"])
def test_rollback_step_survives_the_acting_steps_save(tmp_path, action):
    """The measured collapse (tests/adapters/verl/test_collapse_e2e.py): checkpoints every 2 steps, verl keeps 2,
    onset at step 9, the guard acts at 10 and fit() saves step 10. Unheld, that save's retention removes
    global_step_6, the only good checkpoint (8 generated step 9's rollouts). rollback holds retention
    while the streak runs: 6 survives and the pointer names it; stop lets verl prune as usual."""
    from test_surfaces import make_batch

    t = _trainer(tmp_path, action)
    for step, length in enumerate([12] * 8 + [3, 3], start=1):
        t.global_steps = step
        t.collapse_guard_step(make_batch([length] * 4, [False] * 4, [""] * 4, ["1234567"] * 4, ["a", "a", "b", "b"]), {})
        if step % 2 == 0:
            t._save_checkpoint()  # DeVenusTrainer -> CollapseGuardMixin -> RayPPOTrainer, as fit() calls it
    result = json.loads((tmp_path / RESULT_FILE).read_text())
    assert (result["step"], result["onset"]) == (10, 9)
    assert C.pointer_step(tmp_path) == 10  # verl's save of the acting step
    t._collapse_finish(result)  # what fit() does once it has ended
    steps = sorted(int(p.name[12:]) for p in tmp_path.glob("global_step_*"))
    if action == "rollback":
        assert steps == C.complete_steps(tmp_path) == [6, 8, 10]  # 2 and 4 pruned whole; 6 held
        assert C.pointer_step(tmp_path) == 6 == json.loads((tmp_path / RESULT_FILE).read_text())["rollback_to"]
        assert {p.name for p in (tmp_path / "global_step_6").iterdir()} == {"actor", "data.pt", METHOD_STATE_FILE,
                                                                          STATE_FILE}
    else:
        assert steps == C.complete_steps(tmp_path) == [8, 10]  # 6 pruned by the acting step's save
        assert C.pointer_step(tmp_path) == 10
    assert t.config.trainer.max_actor_ckpt_to_keep == 2  # the hold was lifted after the save
    pointer = C.pointer_step(tmp_path)
    assert pointer in C.complete_steps(tmp_path), "the resume pointer names a complete checkpoint"


def test_every_layers_state_is_saved_and_restored_through_the_trainers_chain(tmp_path):
    """DeVenusTrainer._save_checkpoint runs the save_step_state chain (method, collapse guard) before verl's
    save; load_step_state, which DeVenusTrainer._load_checkpoint calls after verl's load, restores each layer."""
    from test_surfaces import make_batch

    t = _trainer(tmp_path, "rollback")
    for step, length in enumerate([12] * 4, start=1):
        t.global_steps = step
        t.collapse_guard_step(make_batch([length] * 4, [False] * 4, [""] * 4, ["1234567"] * 4, ["a", "a", "b", "b"]), {})
    t._save_checkpoint()
    folder = tmp_path / "global_step_4"
    saved = json.loads((folder / STATE_FILE).read_text())
    assert saved == json.loads(json.dumps(t.collapse_guard().state_dict()))
    r = _trainer(tmp_path, "rollback")
    r.global_steps = 4
    assert r.collapse_guard().state_dict() != t.collapse_guard().state_dict()  # a fresh guard before the load
    r.load_step_state(str(folder))
    assert json.loads(json.dumps(r.collapse_guard().state_dict())) == saved
