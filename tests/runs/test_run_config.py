"""runs.testbed.RunConfig on the config mechanism: types and bounds, each refusal one line naming the key."""

from pathlib import Path

import pytest

from devenus.runs.testbed import RunConfig, RunConfigError


def test_the_defaults_and_paths_given_as_paths():
    cfg = RunConfig(train_file=Path("/t.parquet"), val_files=[Path("/a.parquet"), "/b.parquet"], extra_overrides=["x=1"])
    assert cfg.train_file == "/t.parquet" and cfg.val_files == ("/a.parquet", "/b.parquet")
    assert cfg.extra_overrides == ("x=1",) and RunConfig().steps == 30 and RunConfig().lr == 2e-4


@pytest.mark.parametrize("kw,message", [
    ({"steps": 0}, "run.steps must be an integer >= 1, got 0 (set it with RunConfig(steps=...))"),
    ({"prompts_per_step": 2.0}, "run.prompts_per_step must be an integer >= 1, got 2.0"),
    ({"rollouts_per_prompt": True}, "run.rollouts_per_prompt must be an integer >= 1, got True"),
    ({"lr": 0.0}, "run.lr must be a number > 0.0, got 0.0"),
    ({"lr": float("nan")}, "run.lr must be a finite number > 0.0, got nan"),
    ({"kl_coef": -0.1}, "run.kl_coef must be a number >= 0.0, got -0.1"),
    ({"val_n": 0}, "run.val_n must be an integer >= 1"),
    ({"seed": -1}, "run.seed must be an integer >= 0"),
    ({"micro_batch": -4}, "run.micro_batch must be an integer >= 0"),
    ({"save_freq": 0}, "run.save_freq must be -1 (never) or >= 1, got 0"),
    ({"save_freq": -2}, "run.save_freq must be an integer >= -1"),
    ({"ckpt_to_keep": 0}, "run.ckpt_to_keep must be an integer >= 1"),
    ({"method": ""}, "run.method is empty"),
    ({"val_only": "yes"}, "run.val_only must be a bool"),
    ({"extra_overrides": "a=1"}, "run.extra_overrides must be a list of strings, got 'a=1'"),
    ({"train_file": 3}, "run.train_file must be a string or null, got 3"),
])
def test_a_bad_value_is_one_line_naming_the_key(kw, message):
    with pytest.raises(RunConfigError) as e:
        RunConfig(**kw)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_an_unknown_key_is_refused():
    with pytest.raises(TypeError):
        RunConfig(stepz=3)
