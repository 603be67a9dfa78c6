"""What a launch decides on its own host and must hold on every node of a Ray cluster: the backend (gpu
refused where nothing can run it), the environment every Ray process must share, the attention
implementation (flash-attn imported, not just found; sdpa's remove-padding cost said), and paths that
another node would resolve against its own working directory."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("verl")

from hydra import compose, initialize_config_module  # noqa: E402

from devenus.adapters.verl.cluster_rules import (  # noqa: E402
    ATTN_KEY,
    absolute_path_overrides,
    attention_line,
    choose_attention,
    flash_attn_problem,
    relative_path_errors,
)
from devenus.adapters.verl.cpu import launch  # noqa: E402
from devenus.adapters.verl.task_runner import runtime_env_vars  # noqa: E402

TWO_NODES = ["trainer.n_gpus_per_node=8", "trainer.nnodes=2"]


def _config(*overrides):
    with initialize_config_module(config_module="devenus.configs", version_base=None):
        return compose("devenus_trainer", overrides=list(overrides))


def _clean_env(**extra) -> dict:
    """This process's environment without what would choose a backend or a cluster for the launch."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEVENUS_VERL_CPU", "RAY_ADDRESS", "VERL_PLATFORM")}
    return {**env, **extra}


# ----------------------------------------------------------------------------------------- the backend
@pytest.mark.parametrize("argv, env", [
    (["devenus.backend=gpu"], {}),
    ([], {"DEVENUS_VERL_CPU": "0"}),  # auto, forced by the plugin's switch
    (["trainer.device=cuda"], {}),  # auto, from the device named
])
def test_the_gpu_backend_is_refused_where_no_accelerator_is_visible_and_no_cluster_given(argv, env):
    with pytest.raises(launch.BackendError) as e:
        launch.choose_backend(argv, env, accelerator=False)
    msg = str(e.value)
    assert msg.startswith("backend gpu (") and "torch sees no accelerator on this host" in msg and "\n" not in msg
    assert "devenus.backend=cpu" in msg  # says what would run here


@pytest.mark.parametrize("argv, env, accelerator", [
    (["devenus.backend=gpu"], {}, True),  # a GPU host
    (["devenus.backend=gpu"], {"RAY_ADDRESS": "10.0.0.1:6379"}, False),  # a GPU-less head node: the cluster decides
    (["devenus.backend=gpu", "+ray_kwargs.ray_init.address=auto"], {}, False),
    (["devenus.backend=gpu", "trainer.nnodes=2"], {}, False),
])
def test_the_gpu_backend_is_accepted_with_an_accelerator_or_a_cluster(argv, env, accelerator):
    assert launch.choose_backend(argv, env, accelerator=accelerator).backend == "gpu"


@pytest.mark.skipif(launch.has_accelerator(), reason="the refusal needs a host without an accelerator")
def test_train_refuses_the_gpu_backend_on_this_host_before_ray_starts():
    r = subprocess.run([sys.executable, "-m", "devenus.train", "devenus.backend=gpu"], capture_output=True, text=True,
                       timeout=300, env=_clean_env())
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("devenus.train: error:")]
    assert errors == [errors[0]] and "backend gpu (devenus.backend=gpu), but torch sees no accelerator" in errors[0]
    assert "Traceback" not in r.stderr and "ray" not in r.stdout.lower()


# --------------------------------------------------------------------- the environment every node shares
def test_the_gpu_backend_carries_the_workers_environment_in_the_ray_runtime_env(monkeypatch):
    env = _clean_env(VERL_USE_EXTERNAL_MODULES="my.plugin,other.plugin", DEVENUS_VERIFY_TIMEOUT_S="7.5")
    monkeypatch.setattr(os, "environ", env)  # a copy: setup_backend writes to it
    monkeypatch.setattr(launch, "has_accelerator", lambda: True)
    argv, choice = launch.setup_backend(["devenus.backend=gpu", "trainer.logger=[console]"])
    assert choice.backend == "gpu" and argv[-2:] == ["devenus.backend=gpu", "trainer.logger=[console]"]
    config = _config(*argv)
    carried = config.ray_kwargs.ray_init.runtime_env.env_vars
    # strings, as Ray requires (an unquoted 0 would compose as an int); a list-like value stays one string
    assert carried.DEVENUS_VERL_CPU == "0" and isinstance(carried.DEVENUS_VERL_CPU, str)
    assert carried.VERL_USE_EXTERNAL_MODULES == "my.plugin,other.plugin" and carried.DEVENUS_VERIFY_TIMEOUT_S == "7.5"
    assert set(carried) == {"DEVENUS_VERL_CPU", "VERL_USE_EXTERNAL_MODULES", "DEVENUS_VERIFY_TIMEOUT_S"}  # only what is set
    # what run_ppo's ray.init hands every actor and task of the job (verl's defaults merged in)
    job = runtime_env_vars(config)
    assert job["DEVENUS_VERL_CPU"] == "0" and job["VERL_USE_EXTERNAL_MODULES"] == "my.plugin,other.plugin"
    # a user's own runtime-env override of the same variable comes later and wins
    argv, _ = launch.setup_backend(["devenus.backend=gpu", "++ray_kwargs.ray_init.runtime_env.env_vars.DEVENUS_VERIFY_TIMEOUT_S='9'"])
    assert _config(*argv).ray_kwargs.ray_init.runtime_env.env_vars.DEVENUS_VERIFY_TIMEOUT_S == "9"


def test_runtime_env_values_survive_hydra_verbatim():
    values = {"A": "0", "B": "a,b", "C": "C:\\dir\\", "D": "it's", "E": "/x y/[z]", "F": "ignore::UserWarning:verl.x"}
    config = _config(*(launch.runtime_env_override(k, v) for k, v in values.items()))
    assert dict(config.ray_kwargs.ray_init.runtime_env.env_vars) == values


# ------------------------------------------------------------------------------------------- attention
def _fake_flash_attn(root, body: str):
    pkg = root / "flash_attn"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(body)
    (pkg / "flash_attn_interface.py").write_text("")
    return root


def _on_path(monkeypatch, root):
    monkeypatch.syspath_prepend(str(root))  # find_spec here
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))  # the probe


def test_a_flash_attn_that_fails_to_import_falls_back_to_sdpa_and_says_why(tmp_path, monkeypatch):
    # what a wheel built for another torch does: found by find_spec, fails when its extension loads
    root = _fake_flash_attn(tmp_path, "raise OSError('flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDevice')\n")
    _on_path(monkeypatch, root)
    problem = flash_attn_problem()
    assert problem.startswith("flash_attn is installed but fails to import (OSError: ") and "undefined symbol" in problem
    argv, why = choose_attention(["x=1"])
    assert argv == ["x=1", f"+{ATTN_KEY}=sdpa"] and why == problem


def test_a_flash_attn_that_imports_is_chosen(tmp_path, monkeypatch):
    _on_path(monkeypatch, _fake_flash_attn(tmp_path, "__version__ = '2.8.3'\n"))
    assert flash_attn_problem() is None
    argv, why = choose_attention([])
    assert argv == [f"+{ATTN_KEY}=flash_attention_2"] and why == "flash_attn imports"


def test_no_flash_attn_and_the_command_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    assert choose_attention([]) == ([f"+{ATTN_KEY}=sdpa"], "flash_attn is not installed")
    mine = ["x=1", f"+{ATTN_KEY}=eager"]
    assert choose_attention(mine) == (mine, "from the command line")


PACKED = ["actor_rollout_ref.model.use_remove_padding=True", "actor_rollout_ref.actor.use_dynamic_bsz=True",
          "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True", "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
          "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=24576",
          "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=24576",
          "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=16384"]


def test_sdpa_with_remove_padding_states_its_cost_in_the_attention_line():
    line = attention_line(_config(*PACKED, f"+{ATTN_KEY}=sdpa"), "flash_attn is not installed")
    assert line.startswith("devenus: attention: sdpa (flash_attn is not installed; decided on this launch host")
    assert "up to 24,576 tokens" in line and "0.6 GiB mask at L = 24,576" in line and "O(L^2)" in line
    assert "use_remove_padding=False" in line and "\n" not in line
    # Ulysses sequence parallelism gathers the sequence: the pack is the budget times its size
    assert "up to 49,152 tokens" in attention_line(_config(*PACKED, f"+{ATTN_KEY}=sdpa",
                                                           "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"), "x")
    # static micro-batches: rows x (prompt + response) tokens
    static = _config(f"+{ATTN_KEY}=sdpa", "actor_rollout_ref.model.use_remove_padding=True",
                     "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
                     "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
                     "data.max_prompt_length=1024", "data.max_response_length=3072")
    assert "up to 16,384 tokens" in attention_line(static, "x")


@pytest.mark.parametrize("overrides", [
    [*PACKED, f"+{ATTN_KEY}=flash_attention_2"],  # flash-attn's varlen kernel attends per row
    [*PACKED, f"+{ATTN_KEY}=sdpa", "actor_rollout_ref.model.use_remove_padding=False"],  # padded rows
])
def test_no_cost_is_stated_where_there_is_none(overrides):
    line = attention_line(_config(*overrides), "why")
    assert "decided on this launch host" in line and "mask" not in line


# ----------------------------------------------------------------------------------------------- paths
def test_relative_paths_are_an_error_only_on_a_ray_cluster(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "m").mkdir(parents=True)
    rel = ["data.train_files=data/train.parquet", "data.val_files=[/abs/val.parquet,data/val2.parquet]",
           "trainer.default_local_dir=outputs/ckpt", "trainer.validation_data_dir=/abs/validation",
           "actor_rollout_ref.model.path=models/m"]
    errors = relative_path_errors(_config(*TWO_NODES, *rel), env={})
    assert len(errors) == 1 and "\n" not in errors[0]
    assert errors[0].startswith("relative path(s) on a Ray cluster (trainer.nnodes=2): data.train_files=data/train.parquet, "
                                "data.val_files=data/val2.parquet, trainer.default_local_dir=outputs/ckpt, "
                                "actor_rollout_ref.model.path=models/m; ")
    assert relative_path_errors(_config(*rel), env={}) == []  # one host: every process shares the launch directory
    assert relative_path_errors(_config(*rel), env={"RAY_ADDRESS": "head:6379"})[0].startswith(
        "relative path(s) on a Ray cluster (RAY_ADDRESS=head:6379)")
    assert relative_path_errors(_config(*rel, "+ray_kwargs.ray_init.address=10.0.0.1:6379"), env={})
    assert relative_path_errors(_config(*rel, "+ray_kwargs.ray_init.address=local"), env={}) == []
    # verl's own default checkpoint folder is relative too; a hub name, ~ and pkg:// are not paths to resolve
    fine = ["data.train_files=/d/t.parquet", "data.val_files='~/v.parquet'", "trainer.default_local_dir=/o/ckpt",
            "actor_rollout_ref.model.path=Qwen/Qwen3-4B-Base"]
    assert relative_path_errors(_config(*TWO_NODES, *fine), env={}) == []
    assert "trainer.default_local_dir=checkpoints/" in relative_path_errors(
        _config(*TWO_NODES, *fine[:2], fine[3]), env={})[0]


def test_the_launch_host_makes_relative_paths_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "m").mkdir(parents=True)
    got = absolute_path_overrides([
        "data.train_files=data/t.parquet", "++data.val_files=[a.parquet, /b.parquet,'c.parquet']",
        "actor_rollout_ref.model.path=models/m", "actor_rollout_ref.model.path=Qwen/Qwen3-4B-Base",
        "+devenus.evidence_dir=ev", "trainer.default_local_dir=~/ckpt", "data.train_batch_size=8",
        "reward.custom_reward_function.path=pkg://devenus.verify.reward"])
    assert got == [f"data.train_files={tmp_path}/data/t.parquet",
                   f"++data.val_files=[{tmp_path}/a.parquet,/b.parquet,{tmp_path}/c.parquet]",
                   f"actor_rollout_ref.model.path={tmp_path}/models/m", "actor_rollout_ref.model.path=Qwen/Qwen3-4B-Base",
                   f"+devenus.evidence_dir={tmp_path}/ev", "trainer.default_local_dir=~/ckpt", "data.train_batch_size=8",
                   "reward.custom_reward_function.path=pkg://devenus.verify.reward"]
