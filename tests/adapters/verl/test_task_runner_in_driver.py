"""``devenus.task_runner=driver``: verl's ``run_ppo`` drives the task runner in the calling process.

The protocol verl's ``run_ppo`` uses on its ``task_runner_class`` (``.options(...)``, ``.remote()``,
``ray.get(runner.run.remote(config))``) is exercised here with a stand-in runner; training through it
end to end is every CPU e2e test's path (the CPU backend chooses it).
"""

from __future__ import annotations

import os

import pytest
from omegaconf import OmegaConf

from devenus.adapters.verl import task_runner
from devenus.adapters.verl.cpu import launch
from devenus.adapters.verl.train import SetupError, check_setup
from e2e import compose

pytestmark = pytest.mark.verl


class _Runner:
    made = 0

    def __init__(self):
        type(self).made += 1

    def run(self, config):
        return {"ran": config.trainer.total_training_steps, "env": os.environ.get("DEVENUS_TEST_IN_DRIVER")}


def test_run_ppo_protocol_runs_the_runner_here_with_the_runtime_env(monkeypatch):
    monkeypatch.setattr(task_runner.ray, "put", lambda value: ("ref", value))  # ray.get(ref) in run_ppo
    monkeypatch.setenv("DEVENUS_TEST_IN_DRIVER", "0")  # recorded, so the runner's change is undone afterwards
    config = OmegaConf.create({"trainer": {"total_training_steps": 3},
                               "ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": {"DEVENUS_TEST_IN_DRIVER": 7}}}}})
    cls = task_runner.InDriverTaskRunner(_Runner)
    _Runner.made = 0
    runner = cls.options(runtime_env={"nsight": {}}).remote()  # both call forms run_ppo uses
    assert _Runner.made == 1  # built once, in this process
    ref = runner.run.remote(config)
    assert ref == ("ref", {"ran": 3, "env": "7"})  # what the actor's runtime_env would have set, set here
    assert os.environ["DEVENUS_TEST_IN_DRIVER"] == "7"


def test_runtime_env_vars_are_verls_defaults_plus_the_configs():
    from verl.trainer.constants_ppo import get_ppo_ray_runtime_env

    config = OmegaConf.create({"ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": {"A_B": "1"}}}}})
    got = task_runner.runtime_env_vars(config)
    assert got["A_B"] == "1"
    assert {k: str(v) for k, v in get_ppo_ray_runtime_env(config)["env_vars"].items()}.items() <= got.items()
    assert task_runner.runtime_env_vars(OmegaConf.create({"ray_kwargs": {}})).get("A_B") is None


def test_the_cpu_backend_chooses_the_driver_and_the_user_can_choose_ray(monkeypatch):
    env = {k: v for k, v in os.environ.items() if k not in ("DEVENUS_VERL_CPU", "RAY_ADDRESS")}
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(launch, "has_accelerator", lambda: False)
    argv, choice = launch.setup_backend(["devenus.task_runner=ray"])
    assert choice.backend == "cpu"
    assert argv.index("devenus.task_runner=driver") < argv.index("devenus.task_runner=ray")  # the user's wins
    assert "devenus.task_runner=driver" not in launch.cpu_overrides()  # verl's main_ppo has no devenus key
    assert compose()["devenus"]["task_runner"] == "ray"  # verl's own topology unless the backend says otherwise


def test_an_unknown_task_runner_is_refused_before_ray():
    with pytest.raises(SetupError, match=r"devenus.task_runner must be one of \['ray', 'driver'\], got 'here'"):
        check_setup(compose("devenus.task_runner=here"))
