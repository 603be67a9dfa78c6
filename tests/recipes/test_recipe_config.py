"""A GPU recipe is a typed config: its variables are filled structurally and every mistake in a recipe file is
one line naming the recipe and the key (no verl needed: nothing here composes)."""

import pytest

pytest.importorskip("hydra")

from devenus.recipes.gpu.launch import (Recipe, RecipeError, Variables, load_common, load_recipe,  # noqa: E402
                                        recipe_names, recipe_overrides)

GOOD = """description: d
method: grpo
train: t.parquet
reference: r
overrides:
  - data.train_batch_size=8
variables:
  trainer.validation_data_dir: out_dir/val
"""


def _recipe(tmp_path, text, name="mine"):
    (tmp_path / f"{name}.yaml").write_text(text)
    return load_recipe(name, tmp_path)


def test_every_shipped_recipe_loads_typed():
    common = load_common()
    assert set(common.variables.values()) >= {"model", "nodes", "gpus"}
    assert not any("${" in o for o in common.overrides)  # no text substitution left
    for name in recipe_names():
        rec = load_recipe(name)
        assert isinstance(rec, Recipe) and rec.name == name and rec.method and rec.train.endswith(".parquet")


def test_a_recipe_of_ones_own_and_its_variables(tmp_path):
    rec = _recipe(tmp_path, GOOD)
    assert rec.overrides == ("data.train_batch_size=8",) and rec.variables == {"trainer.validation_data_dir": "out_dir/val"}
    ov = recipe_overrides(rec, model="/m", data_dir="/d", out_dir="/o x", nodes=2, gpus=4)
    assert "trainer.nnodes=2" in ov and "trainer.n_gpus_per_node=4" in ov and "actor_rollout_ref.model.path=/m" in ov
    # a path with a space is one Hydra value, quoted (text substitution would have split it)
    assert "trainer.default_local_dir='/o x/checkpoints'" in ov and ov[-1] == "trainer.validation_data_dir='/o x/val'"
    assert "data.train_files=/d/t.parquet" in ov and "devenus.method=grpo" in ov


@pytest.mark.parametrize("text,message", [
    (GOOD.replace("out_dir/val", "outdir/val"),
     "recipe mine ({path}): variables.trainer.validation_data_dir: no variable 'outdir' (did you mean out_dir?); "
     "the variables: model, data_dir, out_dir, nodes, gpus"),
    (GOOD.replace("out_dir/val", "nodes/val"),
     "recipe mine ({path}): variables.trainer.validation_data_dir: nodes is not a folder"),
    (GOOD.replace("data.train_batch_size=8", "actor_rollout_ref.model.path=${model}"),
     "recipe mine ({path}): overrides[0]: 'actor_rollout_ref.model.path=${{model}}' names a variable as text; set "
     "actor_rollout_ref.model.path under `variables:`"),
    (GOOD.replace("data.train_batch_size=8", "data.train_batch_size=[8"),
     "recipe mine ({path}): overrides[0]: override 'data.train_batch_size=[8' is not one Hydra reads"),
    (GOOD.replace("method: grpo\n", ""), "recipe mine ({path}): method is required"),
    (GOOD + "epochs: 3\n", "recipe mine ({path}): unknown key epochs"),
    (GOOD.replace("train: t.parquet", "trian: t.parquet"), "recipe mine ({path}): unknown key trian (did you mean train?)"),
    (GOOD + "name: other\n", "recipe mine ({path}): name is the file's, not a key"),
    ("- a\n", "{path}: expected a mapping of config keys, got list"),
])
def test_a_bad_recipe_is_one_line_naming_the_recipe_and_key(tmp_path, text, message):
    with pytest.raises(RecipeError) as e:
        _recipe(tmp_path, text)
    assert str(e.value).startswith(message.format(path=tmp_path / "mine.yaml")), str(e.value)
    assert "\n" not in str(e.value)


def test_a_missing_recipe_names_the_ones_there_are():
    with pytest.raises(RecipeError, match=r"no GPU recipe 'nope'; recipes: corewarding, "):
        load_recipe("nope")


@pytest.mark.parametrize("kw,message", [({"nodes": 0}, "nodes must be an integer >= 1, got 0 (set it with --nodes"),
                                        ({"gpus": "8"}, "gpus must be an integer >= 1, got '8'")])
def test_the_launch_variables_are_bounded(kw, message):
    with pytest.raises(RecipeError) as e:
        recipe_overrides(load_recipe("grpo"), model="/m", data_dir="/d", out_dir="/o", **kw)
    assert str(e.value).startswith(f"recipe grpo: {message}")
    with pytest.raises(RecipeError):
        Variables(**kw)


def test_the_cli_bounds_its_numbers(capsys):
    from devenus.recipes.gpu.launch import main

    for flag in (["--nodes", "0"], ["--gpus", "-1"], ["--timeout-s", "nan"]):
        with pytest.raises(SystemExit):
            main(["run", "grpo", "--data-dir", "/d", "--dry-run", *flag])
        err = capsys.readouterr().err
        assert f"argument {flag[0]}: must be" in err, err
