"""Every config DE-Venus ships loads, and every registered method builds from its defaults."""

from importlib import import_module
from importlib.resources import files

import pytest
from omegaconf import OmegaConf

from devenus.online import WeakTrainerInterface
from devenus.online.cli import method_yaml
from devenus.online.config import describe
from devenus.online.method import DATA_NEEDS, STEP_NEEDS
from e2e import compose

SHIPPED = sorted(p.name for p in files("devenus.configs").iterdir() if p.name.endswith(".yaml"))
METHOD_FILES = sorted(p.name for p in (files("devenus.configs") / "method").iterdir() if p.name.endswith(".yaml"))


def test_shipped_configs_are_the_ones_tested_here():
    assert SHIPPED == ["agent_loops.yaml", "devenus_trainer.yaml"]
    assert METHOD_FILES == [f"{n}.yaml" for n in WeakTrainerInterface.names()]  # one config file per method


def test_trainer_config_composes_on_verl_ppo_trainer():
    cfg = compose()
    assert cfg.devenus.method == "grpo" and cfg.trainer.use_v1 is False
    assert cfg.reward.custom_reward_function.path == "pkg://devenus.verify.reward"
    assert "actor_rollout_ref" in cfg and "algorithm" in cfg  # verl's own tree underneath
    fn = getattr(import_module("devenus.verify.reward"), cfg.reward.custom_reward_function.name)
    assert fn("x", "so \\boxed{4}", "4")["score"] == 1.0


def test_agent_loop_entries_point_at_importable_classes():
    entries = OmegaConf.to_container(OmegaConf.load(str(files("devenus.configs") / "agent_loops.yaml")))
    assert entries
    for e in entries:
        module, _, name = e["_target_"].rpartition(".")
        assert isinstance(getattr(import_module(module), name), type)


@pytest.mark.parametrize("name", WeakTrainerInterface.names())
def test_every_registered_method_builds_from_defaults_and_composes(name):
    method = WeakTrainerInterface.get(name).build({})
    assert method.name == name and method.data_needs <= DATA_NEEDS and method.step_needs <= STEP_NEEDS
    assert compose(f"devenus.method={name}").devenus.method == name


@pytest.mark.parametrize("name", WeakTrainerInterface.names())
def test_every_method_config_file_loads_and_matches_its_config_class(name):
    text = (files("devenus.configs") / "method" / f"{name}.yaml").read_text()
    assert text == method_yaml(name), f"configs/method/{name}.yaml is stale: regenerate with `devenus methods {name} --yaml`"
    cfg = compose(f"+method={name}")  # the file is a Hydra config group of the trainer config
    assert cfg.devenus.method == name
    loaded = OmegaConf.to_container(cfg.devenus.method_config, resolve=True)
    assert loaded == {k.key: k.default for k in describe(WeakTrainerInterface.get(name).method_cls.config_class)}
    assert WeakTrainerInterface.get(name).build(loaded).config == WeakTrainerInterface.get(name).build({}).config


def test_a_method_file_key_is_overridden_without_a_plus():
    cfg = compose("+method=ttrl", "devenus.method_config.min_agreement=0.5")
    assert WeakTrainerInterface.get("ttrl").build(OmegaConf.to_container(cfg.devenus.method_config)).config.min_agreement == 0.5
