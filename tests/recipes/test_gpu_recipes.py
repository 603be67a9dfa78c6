"""Every GPU recipe composes its full Hydra config and passes every pre-flight check of devenus.train,
without a GPU and without Ray, on data prepared by the recipes' own `prepare` from benchmark-shaped files."""

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("verl")

from devenus.recipes.gpu.launch import load_recipe, main, recipe_names, recipe_overrides  # noqa: E402

METHOD_RECIPES = {"grpo", "semi_supervised", "ttrl", "ttrl_semi", "corewarding", "corewarding2", "intuitor", "emrl",
                  "unsupervised", "trapo", "trapo2", "geomin", "olr", "nl_olr2"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    raw = tmp_path_factory.mktemp("raw")
    out = tmp_path_factory.mktemp("data")
    n = 24
    pd.DataFrame({  # DAPO-Math-17k's own (verl) layout
        "data_source": ["math_dapo"] * n,
        "prompt": [[{"role": "user", "content": f"What is {i} + 1?"}] for i in range(n)],
        "ability": ["MATH"] * n,
        "reward_model": [{"style": "rule", "ground_truth": str(i + 1)} for i in range(n)],
        "extra_info": [{"index": i} for i in range(n)],
    }).to_parquet(raw / "dapo.parquet")
    (raw / "math.jsonl").write_text("".join(json.dumps({"problem": f"Compute {i} * 2.", "solution": f"So \\boxed{{{2 * i}}}."})
                                            + "\n" for i in range(n)))
    (raw / "math500.jsonl").write_text("".join(json.dumps({"problem": f"Compute {i} - 1.", "answer": str(i - 1),
                                                           "unique_id": f"test/{i}.json"}) + "\n" for i in range(n)))
    assert main(["prepare", "--data-dir", str(out), "--dapo", str(raw / "dapo.parquet"), "--math", str(raw / "math.jsonl"),
                 "--math500", str(raw / "math500.jsonl")]) == 0
    # Co-rewarding I's paired views: every original beside a rewrite sharing its pair_key
    full = pd.read_parquet(out / "dapo_math17k.parquet")
    rows = []
    for r in full.to_dict("records"):
        key = r["extra_info"]["index"]
        orig = {**r, "extra_info": {**r["extra_info"], "pair_key": key, "view": "original"}}
        rew = {**r, "extra_info": {**r["extra_info"], "index": f"{key}:rewrite", "pair_key": key, "view": "rewrite"},
               "prompt": [{"role": "user", "content": "Rewritten: " + r["prompt"][0]["content"]}]}
        rows += [orig, rew]
    pd.DataFrame(rows).to_parquet(raw / "paired.parquet")
    assert main(["prepare", "--data-dir", str(out), "--dapo-paired", str(raw / "paired.parquet")]) == 0
    return out


def test_there_is_a_recipe_per_method_and_setting():
    assert set(recipe_names()) == METHOD_RECIPES
    for name in recipe_names():
        rec = load_recipe(name)
        assert rec.reference and rec.description


@pytest.mark.parametrize("name", sorted(METHOD_RECIPES))
def test_every_recipe_dry_run_passes_its_preflight(name, data_dir, tmp_path, capsys):
    assert main(["run", name, "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run"]) == 0, \
        capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"recipe {name}" in out and "pre-flight checks passed" in out and "rollout vllm" in out


def test_a_dry_run_fails_on_what_would_fail_on_the_cluster(data_dir, tmp_path, capsys):
    # with the recipes' dynamic batching verl skips its batch check, yet 3 prompts x 31 rollouts cannot be
    # balanced over 8 GPUs once Ray starts: the cluster rules say so before
    assert main(["run", "ttrl", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run",
                 "data.train_batch_size=3", "actor_rollout_ref.actor.ppo_mini_batch_size=3",
                 "actor_rollout_ref.rollout.n=31"]) == 1
    assert "3 * 31 = 93 rows do not divide into the 8 data-parallel ranks" in capsys.readouterr().err
    # the same at 2 nodes: 8 x 5 = 40 rows fit 8 GPUs, not 16
    assert main(["run", "grpo", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run", "--nodes", "2",
                 "data.train_batch_size=8", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
                 "actor_rollout_ref.rollout.n=5"]) == 1
    assert "40 rows do not divide into the 16 data-parallel ranks of 2 node(s)" in capsys.readouterr().err
    # the actor's static batching beside the rollout's dynamic one: verl's worker asserts after Ray starts
    assert main(["run", "ttrl", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run",
                 "actor_rollout_ref.actor.use_dynamic_bsz=False", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1"]) == 1
    assert "use_dynamic_bsz=False but actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True" in capsys.readouterr().err
    # DE-Venus's own: TTRL votes on N = 64 >= the trained M
    assert main(["run", "ttrl", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run",
                 "actor_rollout_ref.rollout.n=128"]) == 1
    assert "votes=64 must be >= actor_rollout_ref.rollout.n=128" in capsys.readouterr().err
    assert main(["run", "ttrl", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run",
                 "actor_rollout_ref.rollout.nn=8"]) == 1
    assert "do not compose" in capsys.readouterr().err
    assert main(["run", "ttrl", "--data-dir", str(tmp_path / "nowhere"), "--out", str(tmp_path), "--dry-run"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_overrides_put_the_command_line_last():
    ov = recipe_overrides(load_recipe("ttrl"), model="/m", data_dir="/d/", out_dir="/o", extra=("trainer.nnodes=2",))
    assert "actor_rollout_ref.model.path=/m" in ov and "data.train_files=/d/dapo_math17k_unlabeled.parquet" in ov
    assert ov[-1] == "trainer.nnodes=2" and ov.index("devenus.method=ttrl") < ov.index("+devenus.method_config.votes=64")


def test_a_dry_run_shows_the_evaluation_that_follows_training(data_dir, tmp_path, capsys):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    assert main(["run", "grpo", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run",
                 "--eval-data-dir", str(bench)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    then = next(line for line in out.splitlines() if line.strip().startswith("then:"))
    assert "-m devenus eval" in then and f"{tmp_path}/grpo/checkpoints" in then
    assert "--protocol paper" in then and "--max-new-tokens 3072" in then and "--backend vllm" in then
    # the evaluation command parses as `devenus eval` takes it
    import argparse
    import shlex

    from devenus.evaluate.cli import add_parser

    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers())
    args = p.parse_args(shlex.split(then.split("-m devenus ", 1)[1]))
    assert args.max_new_tokens == 3072 and args.backend == "vllm" and args.data_dir == str(bench)
    assert main(["run", "grpo", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run",
                 "--eval-data-dir", str(tmp_path / "nowhere")]) == 1
    assert "is not a folder" in capsys.readouterr().err


def test_the_selection_recipe_loads_and_validates():
    """The GPU selection config (vLLM generator, the report's ratios, PivotTrace) is a valid select config."""
    from importlib.resources import files

    from devenus.select.config import load_config

    path = files("devenus.recipes.gpu") / "select" / "dapo_unlabeled.yaml"
    cfg = load_config(str(path))
    assert cfg.generate.generator == "vllm" and cfg.generate.max_new_tokens == 3072 and cfg.generate.samples == 8
    assert (cfg.route.selector, cfg.route.signal, cfg.route.rho_annotate, cfg.route.rho_discard) == \
        ("ratio", "pivot_trace", 0.293, 0.421)
    assert "pivot_trace" in cfg.score.signals


@pytest.mark.parametrize("name", sorted(METHOD_RECIPES))
def test_every_recipe_keeps_a_bounded_number_of_checkpoints(name):
    ov = recipe_overrides(load_recipe(name), model="/m", data_dir="/d", out_dir="/o")
    last = {o.split("=", 1)[0]: o.split("=", 1)[1] for o in ov}
    assert int(last["trainer.save_freq"]) > 0
    for key in ("trainer.max_actor_ckpt_to_keep", "trainer.max_critic_ckpt_to_keep"):
        assert 1 <= int(last[key]) <= 3, (name, key, last.get(key))


def test_the_testbed_recipe_keeps_a_bounded_number_of_checkpoints():
    from devenus.runs.testbed import RunConfig, overrides

    class _Tb:  # overrides() reads only the paths of the model and the splits
        model_dir = "/tb/model"

        def split(self, name):
            return f"/tb/{name}.parquet"

    ov = overrides(_Tb(), Path("/o"), RunConfig(method="grpo", save_freq=10))
    assert "trainer.max_actor_ckpt_to_keep=2" in ov and "trainer.max_critic_ckpt_to_keep=2" in ov


@pytest.mark.parametrize("name,differences", [
    ("ttrl", ["mini-batch 1 there (8 optimizer steps per step)", "prompt length 512"]),
    ("corewarding", ["MATH there", "128 originals + 128 rewrites", "64 pairs", "3 epochs"]),
    ("intuitor", ["mini-batch 128 there"]),
    ("emrl", ["response length 7168", "KL off"]),
    ("unsupervised", ["response length 7168", "KL off"]),
])
def test_reference_lines_state_the_differences_from_the_anchor_script(name, differences):
    ref = load_recipe(name).reference
    for d in differences:
        assert d in ref, (name, d)


def test_prepare_writes_the_olr_references_noise_on_dapo(data_dir, capsys):
    from devenus.records import read_records
    from devenus.verify import UNMATCHABLE

    for regime in ("sentinel", "redraw"):
        assert main(["prepare", "--data-dir", str(data_dir), "--noise-rho", "0.5", "--noise-regime", regime,
                     "--noise-seed", "1"]) == 0
        rows = read_records(data_dir / f"dapo_math17k_{regime}0.5_s1.parquet")
        noisy = [r for r in rows if (r["simulation"] or {}).get("noise") == regime]
        assert len(noisy) == 12 and {r["reward_model"]["ground_truth"] for r in noisy} == {UNMATCHABLE}
        assert all(r["simulation"]["hidden_answer"] not in ("", UNMATCHABLE) for r in noisy)
    # a regime that needs the testbed's base model is refused in one line, before anything is written
    with pytest.raises(SystemExit):
        main(["prepare", "--data-dir", str(data_dir), "--noise-rho", "0.5", "--noise-regime", "active"])
    assert "invalid choice: 'active'" in capsys.readouterr().err


# ------------------------------------------------------------------------------- cluster-safe launches
def test_every_recipe_asks_for_the_gpu_backend_with_absolute_paths(tmp_path, monkeypatch):
    from devenus.adapters.verl.cluster_rules import PATH_KEYS, cwd_relative

    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "qwen").mkdir(parents=True)
    for name in recipe_names():
        ov = recipe_overrides(load_recipe(name), model="models/qwen", data_dir="data/", out_dir=f"out/{name}",
                              extra=("data.val_files=[bench/a.parquet,bench/b.parquet]",))
        last = {o.split("=", 1)[0].lstrip("+"): o.split("=", 1)[1] for o in ov}
        assert last["devenus.backend"] == "gpu", name
        paths = {k: v for k, v in last.items() if k in PATH_KEYS}
        assert {"data.train_files", "data.val_files", "trainer.default_local_dir", "trainer.validation_data_dir",
                "actor_rollout_ref.model.path"} <= set(paths), name
        for k, v in paths.items():
            assert not any(cwd_relative(k, p) for p in v.strip("[]").split(",")), (name, k, v)
        assert last["actor_rollout_ref.model.path"] == f"{tmp_path}/models/qwen"
        assert last["trainer.default_local_dir"] == f"{tmp_path}/out/{name}/checkpoints"
        assert last["data.val_files"] == f"[{tmp_path}/bench/a.parquet,{tmp_path}/bench/b.parquet]"


def test_the_composed_recipe_runs_on_gpus_and_logs_under_out_one_file_per_launch(data_dir, tmp_path, capsys):
    from devenus.adapters.verl.train import preflight
    from devenus.runs.launch import file_logger

    out = tmp_path / "grpo"
    ov, metrics = file_logger(recipe_overrides(load_recipe("grpo"), model="/m", data_dir=str(data_dir),
                                               out_dir=str(out)), out)
    config = preflight(ov)
    assert config.devenus.backend == "gpu" and metrics == out / "metrics" / "0.jsonl"
    # the tracker's file reaches verl's task runner on whichever node it runs: the job's runtime env
    assert config.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH == str(metrics)
    assert "file" in config.trainer.logger
    # a resumed launch writes the next file (verl opens its file "wb"): the earlier steps stay
    metrics.parent.mkdir(parents=True)
    metrics.write_text('{"step": 1, "data": {}}\n')
    assert main(["run", "grpo", "--data-dir", str(data_dir), "--out", str(tmp_path), "--dry-run"]) == 0
    assert f"metrics: {out}/metrics/1.jsonl" in capsys.readouterr().out


def test_a_relative_path_on_two_nodes_is_resolved_by_the_recipe_and_refused_by_the_preflight(data_dir, tmp_path,
                                                                                             monkeypatch, capsys):
    from devenus.adapters.verl.train import SetupError, preflight

    monkeypatch.chdir(tmp_path)
    # the recipe makes the user's relative override absolute on the launch host: the dry run passes at 2 nodes
    assert main(["run", "grpo", "--data-dir", str(data_dir), "--out", "out", "--dry-run", "--nodes", "2",
                 "trainer.validation_data_dir=val"]) == 0, capsys.readouterr().err
    # the same config handed to devenus.train as given is refused before Ray starts, in one line
    ov = recipe_overrides(load_recipe("grpo"), model="/m", data_dir=str(data_dir), out_dir=str(tmp_path), nodes=2)
    with pytest.raises(SetupError) as e:
        preflight([*ov, "trainer.validation_data_dir=val"])
    assert str(e.value).startswith("relative path(s) on a Ray cluster (trainer.nnodes=2): trainer.validation_data_dir=val;")
    assert "\n" not in str(e.value)
    preflight(ov)  # and passes with the recipe's own (absolute) paths


def test_a_recipe_launched_on_a_host_without_a_gpu_is_refused_before_ray_starts(data_dir, tmp_path, monkeypatch,
                                                                                capfd):
    from devenus.adapters.verl.cpu.launch import has_accelerator

    if has_accelerator():
        pytest.skip("the refusal needs a host without an accelerator")
    for var in ("DEVENUS_VERL_CPU", "RAY_ADDRESS", "VERL_PLATFORM"):
        monkeypatch.delenv(var, raising=False)
    assert main(["run", "grpo", "--data-dir", str(data_dir), "--out", str(tmp_path)]) == 2
    err = capfd.readouterr().err
    assert "devenus.train: error: backend gpu (devenus.backend=gpu), but torch sees no accelerator" in err
    assert "Traceback" not in err
