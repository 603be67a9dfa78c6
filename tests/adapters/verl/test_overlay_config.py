"""The ``devenus`` overlay of the training config is typed (DevenusConfig on devenus.config): every key
checked before Ray starts, and verl's own config errors are one line from ``devenus.train`` too."""

from __future__ import annotations

import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from devenus.adapters.verl.train import DevenusConfig, SetupError, check_overlay
from devenus.online import WeakTrainerInterface
from devenus.online.config import config_from_dict
from devenus.recipes.gpu.launch import load_recipe, recipe_names, recipe_overrides
from e2e import compose


@pytest.mark.parametrize("override, message", [
    ("+devenus.metod=ttrl", "unknown key devenus.metod (did you mean devenus.method?)"),
    ("+devenus.probe.every_k=1", "unknown key devenus.probe.every_k (did you mean devenus.probe.every_k_steps?)"),
    ("+devenus.probe.pool=unlabelled", "devenus.probe.pool must be one of ['unlabeled', 'labeled', 'all']"),
    ("devenus.validate_data=3", "devenus.validate_data must be a bool (true/false), got 3"),
    ("+devenus.round=-1", "devenus.round must be an integer >= 0, got -1 (set it with +devenus.round=<value>)"),
    ("devenus.task_runner=here", "devenus.task_runner must be one of ['ray', 'driver'], got 'here'"),
    ("devenus.plugins=mod", "devenus.plugins must be a list of strings, got 'mod'"),
])
def test_a_misspelt_or_bad_devenus_key_is_refused_before_ray(override, message):
    """Class 4: a devenus key nobody reads (a typo) used to train the default method silently."""
    with pytest.raises(SetupError) as e:
        check_overlay(compose(override))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_shipped_overlay_is_the_declared_one():
    assert check_overlay(compose()) == DevenusConfig()
    shipped = OmegaConf.to_container(OmegaConf.load(str(files("devenus.configs") / "devenus_trainer.yaml")))["devenus"]
    declared = {k: v for k, v in DevenusConfig().__dict__.items() if k in shipped}
    assert shipped == declared  # the YAML's defaults are the config class's
    cfg = check_overlay(compose("+devenus.probe.every_k_steps=2", "+devenus.round=1", "devenus.method=ttrl"))
    assert cfg.probe.every_k_steps == 2 and cfg.round == 1 and cfg.method == "ttrl"


@pytest.mark.parametrize("name", recipe_names())
def test_every_gpu_recipe_loads_through_the_config_mechanism(name):
    """Every shipped GPU recipe's devenus keys (and its method's config) are valid declared keys."""
    cfg = compose(*recipe_overrides(load_recipe(name), model="/m", data_dir="/d", out_dir="/o"))
    overlay = check_overlay(cfg)
    config_from_dict(WeakTrainerInterface.get(overlay.method).method_cls.config_class, overlay.method_config,
                     overlay.method)


def test_verl_config_errors_are_one_line_from_devenus_train(base_testbed, tmp_path):
    """Class 3: verl's validate_config inside ``main()`` (not only in preflight) is caught: exit 2, one
    error line, no traceback, nothing started."""
    from devenus.runs.testbed import RunConfig, overrides

    cmd = [sys.executable, "-m", "devenus.train", *overrides(base_testbed, Path(tmp_path), RunConfig()),
           "actor_rollout_ref.actor.ppo_micro_batch_size=2"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    errors = [line for line in r.stderr.splitlines() if line.startswith("devenus.train: error:")]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(errors) == 1 and "verl's config check" in errors[0] and "ppo_micro_batch_size" in errors[0]
