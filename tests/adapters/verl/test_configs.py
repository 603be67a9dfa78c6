"""Every config DE-Venus ships loads, and every registered method builds from its defaults."""

from importlib import import_module
from importlib.resources import files

import pytest
from omegaconf import OmegaConf

from devenus.online import WeakTrainerInterface
from devenus.online.method import NEEDS
from e2e import compose

SHIPPED = sorted(p.name for p in files("devenus.config").iterdir() if p.name.endswith(".yaml"))


def test_shipped_configs_are_the_ones_tested_here():
    assert SHIPPED == ["agent_loops.yaml", "devenus_trainer.yaml"]


def test_trainer_config_composes_on_verl_ppo_trainer():
    cfg = compose()
    assert cfg.devenus.method == "grpo" and cfg.trainer.use_v1 is False
    assert cfg.reward.custom_reward_function.path == "pkg://devenus.verify.reward"
    assert "actor_rollout_ref" in cfg and "algorithm" in cfg  # verl's own tree underneath
    fn = getattr(import_module("devenus.verify.reward"), cfg.reward.custom_reward_function.name)
    assert fn("x", "so \\boxed{4}", "4")["score"] == 1.0


def test_agent_loop_entries_point_at_importable_classes():
    entries = OmegaConf.to_container(OmegaConf.load(str(files("devenus.config") / "agent_loops.yaml")))
    assert entries
    for e in entries:
        module, _, name = e["_target_"].rpartition(".")
        assert isinstance(getattr(import_module(module), name), type)


@pytest.mark.parametrize("name", WeakTrainerInterface.names())
def test_every_registered_method_builds_from_defaults_and_composes(name):
    method = WeakTrainerInterface.get(name).build({})
    assert method.name == name and method.needs <= NEEDS
    assert compose(f"devenus.method={name}").devenus.method == name
