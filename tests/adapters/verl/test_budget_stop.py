"""The rollout budget's trainer hook on a bare trainer (no Ray): it counts ``devenus/rollouts/generated``,
logs the count, stops at the first validation step at or after the budget through the shared stop (the next
training generation raises, validation passes, fit() returns), and keeps its count across a resume.
The run through verl is test_budget_e2e.py's."""

import json

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402

from devenus.adapters.verl import budget as B  # noqa: E402
from devenus.adapters.verl.stop import RunStop  # noqa: E402
from devenus.online.sampling.dynamic_sampling import ROLLOUTS_GENERATED  # noqa: E402


class Base:
    """verl's side of what the mixin touches: a fit() that validates then starts the next training step."""

    def init_workers(self):
        pass

    def fit(self):
        val = DataProto.from_dict(tensors={"x": zeros()}, meta_info={"validate": True})
        self.async_rollout_manager.generate_sequences(val)  # validation still runs
        self.async_rollout_manager.generate_sequences(DataProto.from_dict(tensors={"x": zeros()}))
        return "ran to the end"



class T(B.RolloutBudgetMixin, Base):
    pass


def zeros():
    import torch

    return torch.zeros(2, 1)


def trainer(tmp_path, budget, test_freq=2, total=20):
    from types import SimpleNamespace

    t = T()
    t.config = OmegaConf.create({"trainer": {"test_freq": test_freq, "default_local_dir": str(tmp_path)}})
    from devenus.adapters.verl.overlay import DevenusConfig
    from devenus.config import config_from_dict

    t.overlay = config_from_dict(DevenusConfig, {"budget": {"rollouts": budget}})
    t.total_training_steps = total
    t.calls = []
    t.async_rollout_manager = SimpleNamespace(generate_sequences=lambda p: t.calls.append(p) or p)
    return t


def steps(t, per_step, upto, first=1):
    """Steps first..upto of ``per_step`` rollouts each through the hook; each step's metrics."""
    logged = {}
    for s in range(first, upto + 1):
        t.global_steps = s
        m = {ROLLOUTS_GENERATED: per_step}
        t.budget_step(m)
        logged[s] = m
    return logged


def test_the_hook_counts_and_stops_at_the_first_validation_step_after_the_budget(tmp_path, capsys):
    t = trainer(tmp_path, budget=20, test_freq=2)
    logged = steps(t, 8, 4)  # 8, 16, 24 (reached at step 3, not a validation step), 32
    assert [logged[s]["devenus/budget/rollouts"] for s in (1, 2, 3, 4)] == [8, 16, 24, 32]
    assert all("devenus/budget/stop_step" not in logged[s] for s in (1, 2, 3))
    assert logged[4]["devenus/budget/stop_step"] == 4 and logged[4]["devenus/budget/stop_rollouts"] == 32
    assert t._run_stop.result["stopped_for"] == "the rollout budget" and t._run_stop.result["step"] == 4
    t.init_workers()
    assert t.fit() is None and len(t.calls) == 1 and t.calls[0].meta_info["validate"]
    assert "stopped for the rollout budget at step 4" in capsys.readouterr().out


def test_off_or_unreached_the_run_goes_on(tmp_path):
    t = trainer(tmp_path, budget=0)
    logged = steps(t, 8, 4)
    assert all(m == {ROLLOUTS_GENERATED: 8} for m in logged.values()) and t._run_stop is None
    t = trainer(tmp_path, budget=1000)
    steps(t, 8, 4)
    t.init_workers()
    assert t._run_stop is None and t.fit() == "ran to the end" and len(t.calls) == 2


def test_a_stop_at_the_last_step_raises_nothing(tmp_path):
    t = trainer(tmp_path, budget=16, test_freq=2, total=2)
    steps(t, 8, 2)
    assert t._run_stop is not None  # requested, but fit() ends on its own after its last step
    assert "the last step" in t._run_stop.result["message"]


def test_the_count_survives_a_resume_and_a_resume_without_it_is_refused(tmp_path):
    t = trainer(tmp_path, budget=20)
    steps(t, 8, 2)
    folder = tmp_path / "global_step_2"
    folder.mkdir()
    t.save_step_state(str(folder))  # DeVenusTrainer._save_checkpoint's chain, before verl's save
    saved = folder / B.STATE_FILE
    assert json.loads(saved.read_text()) == {"step": 2, "rollouts": 16.0}
    r = trainer(tmp_path, budget=20)
    r.global_steps = 2
    r.load_step_state(str(folder))  # DeVenusTrainer._load_checkpoint's chain, after verl's load
    assert r._budget_rollouts == 16.0
    logged = steps(r, 8, 4, first=3)
    assert logged[3]["devenus/budget/rollouts"] == 24 and logged[4]["devenus/budget/stop_step"] == 4
    saved.unlink()
    r = trainer(tmp_path, budget=20)
    r.global_steps = 2
    with pytest.raises(FileNotFoundError, match="devenus_budget.json"):
        r.load_step_state(str(folder))


def test_the_first_stop_requested_is_the_one_raised(tmp_path):
    t = trainer(tmp_path, budget=8, test_freq=1)
    t.request_stop({"stopped_for": "collapse", "step": 1, "message": "collapse"})
    steps(t, 8, 1)
    assert t._run_stop.result["stopped_for"] == "collapse"
    t.init_workers()
    with pytest.raises(RunStop):
        t.async_rollout_manager.generate_sequences(DataProto.from_dict(tensors={"x": zeros()}))
