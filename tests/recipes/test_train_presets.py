"""``devenus train``'s sizings: each composes its full Hydra config and passes every pre-flight check of
devenus.train (no Ray), takes its numbers from the sizing it reuses, saves a checkpoint at the last step,
logs to verl's file tracker only, and lets the user's overrides win."""

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl.train import SetupError, preflight  # noqa: E402
from devenus.cli import build_parser, main  # noqa: E402
from devenus.records import hide_labels, read_records, write_records  # noqa: E402
from devenus.config.overrides import last_value  # noqa: E402
from devenus.recipes.train import checkpoint_of, preflight_overrides, train_overrides  # noqa: E402


@pytest.fixture(scope="module")
def files(base_testbed, tmp_path_factory):
    d = tmp_path_factory.mktemp("own")
    train = base_testbed.split("train")
    unlabeled = write_records(hide_labels(read_records(train)[:64], labeled_fraction=0.0), d / "unlabeled.parquet")
    return {"train": str(train), "unlabeled": str(unlabeled),
            "val": [str(base_testbed.split("test_id")), str(base_testbed.split("test_ood"))],
            "model": str(base_testbed.model_dir)}


def compose(files, tmp_path, size, model="testbed", method="grpo", train=None, **kw):
    ov = train_overrides(model=model, model_path=files["model"], train=train or files["train"], val=files["val"],
                         method=method, size=size, out_dir=tmp_path / "run", **kw)
    return ov, preflight(preflight_overrides(ov, size))


def test_cpu_testbed_sizing_is_the_testbed_runs_with_a_checkpoint_at_the_end(files, tmp_path):
    from devenus.runs.testbed import RunConfig

    ov, config = compose(files, tmp_path, "cpu", steps=3)
    ref = RunConfig()
    assert config.actor_rollout_ref.actor.optim.lr == ref.lr and config.data.train_batch_size == ref.prompts_per_step
    assert config.actor_rollout_ref.rollout.n == ref.rollouts_per_prompt
    assert config.trainer.total_training_steps == 3 and config.trainer.save_freq == 3  # the last step is saved
    assert list(config.trainer.logger) == ["file"]
    assert config.data.val_files == files["val"] and config.devenus.backend == "cpu"
    assert config.trainer.default_local_dir == str((tmp_path / "run" / "checkpoints").resolve())


def test_cpu_sizing_of_another_model_is_the_chat_models(files, tmp_path):
    from devenus.smollm2 import PROMPT_LENGTH, run_config

    ov, config = compose(files, tmp_path, "cpu", model="my-model", seed=3)
    # the chat model's sizing, on the testbed's weights: the reference needs no SmolLM2 install
    ref = run_config("grpo", files["train"], files["val"][0], model=files["model"])
    assert config.actor_rollout_ref.actor.optim.lr == ref.lr and config.data.max_prompt_length == PROMPT_LENGTH
    assert config.trainer.total_training_steps == ref.steps and config.trainer.save_freq == ref.steps
    assert config.actor_rollout_ref.model.path == files["model"] and config.data.seed == 3
    assert config.data.val_files == files["val"]


@pytest.mark.parametrize("method,recipe,data", [("grpo", None, "train"), ("ttrl", None, "unlabeled"),
                                                ("grpo", "semi_supervised", "train")])
def test_gpu_sizing_is_the_methods_recipe_on_the_users_files(files, tmp_path, method, recipe, data):
    from devenus.recipes.gpu.launch import load_recipe

    ov, config = compose(files, tmp_path, "gpu", method=method, train=files[data], recipe=recipe, steps=5)
    rec = load_recipe(recipe or method)
    assert config.data.train_batch_size == int(last_value(rec.overrides, "data.train_batch_size"))
    assert config.data.train_files == files[data] and config.data.val_files == files["val"]
    assert config.actor_rollout_ref.rollout.name == "vllm" and config.devenus.backend == "gpu"
    assert config.trainer.save_freq > 0 and config.trainer.total_training_steps == 5
    assert list(config.trainer.logger) == ["file"]


def test_the_users_overrides_win(files, tmp_path):
    ov, config = compose(files, tmp_path, "cpu", steps=4, extra=("trainer.save_freq=2", "actor_rollout_ref.actor.optim.lr=0.001",
                                                                 "trainer.logger=[console]"))
    assert config.trainer.save_freq == 2 and config.actor_rollout_ref.actor.optim.lr == 0.001
    assert list(config.trainer.logger) == ["console"]  # the launch adds the file tracker back (with_file_logger)


def test_a_method_without_the_data_it_needs_fails_the_preflight(files, tmp_path):
    with pytest.raises(SetupError, match="every training row is labeled"):
        compose(files, tmp_path, "cpu", method="ttrl")


def test_bad_input_is_one_line_naming_the_flag(files, tmp_path, capsys):
    assert main(["train", "--model", "testbed", "--train", str(tmp_path / "nope.parquet"), "--val", *files["val"],
                 "--out", str(tmp_path / "run")]) == 1
    assert capsys.readouterr().err.strip() == f"error: --train {tmp_path / 'nope.parquet'}: no such file"
    with pytest.raises(ValueError, match="no GPU recipe named 'nosuch'"):
        compose(files, tmp_path, "gpu", method="nosuch")
    with pytest.raises(ValueError, match="trains method 'ttrl', not --method 'grpo'"):
        compose(files, tmp_path, "gpu", recipe="ttrl")


def test_overrides_after_the_double_dash_reach_the_command():
    args = build_parser().parse_args(["train", "--model", "testbed", "--train", "a", "--val", "b", "c", "--out", "o",
                                      "--", "trainer.save_freq=2", "+x.y=1"])
    assert args.val == ["b", "c"] and [o for o in args.overrides if o != "--"] == ["trainer.save_freq=2", "+x.y=1"]


def test_the_dry_run_passes_the_preflight(files, tmp_path, capsys):
    assert main(["train", "--model", "testbed", "--train", files["train"], "--val", *files["val"], "--steps", "2",
                 "--out", str(tmp_path / "run"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pre-flight checks passed: grpo on" in out and "2 steps" in out
    assert not (tmp_path / "run").exists()  # a dry run starts nothing and writes nothing


def test_the_checkpoint_is_the_step_verls_pointer_names(tmp_path):
    root = tmp_path / "checkpoints"
    ov = [f"trainer.default_local_dir={tmp_path / 'old'}", f"trainer.default_local_dir={root}"]
    assert checkpoint_of(ov) is None
    (root / "global_step_3").mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text("3")
    assert checkpoint_of(ov) == root / "global_step_3"
