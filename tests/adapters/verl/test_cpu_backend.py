"""Fast tests of the verl CPU backend: platform, shims, plugin loading, launch helpers, fixtures."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl.cpu import launch  # noqa: E402
from devenus.adapters.verl.cpu.shims import collapse_backend  # noqa: E402

pytestmark = pytest.mark.verl

PLUGIN = "devenus.adapters.verl.cpu.plugin"

PROBE = textwrap.dedent(
    """
    import json, os
    import torch
    import verl
    from verl.utils.device import get_device_name, get_nccl_backend, get_resource_name, get_device_id
    from verl.utils.device import get_torch_device
    from verl.plugin.platform import PlatformRegistry
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry
    from torch.distributed.fsdp import CPUOffloadPolicy
    out = {"registered": "cpu" in PlatformRegistry.registered_names(),
           "hf_replica": "hf" in RolloutReplicaRegistry._registry,
           "hf_adapter": rollout_base._ROLLOUT_REGISTRY.get(("hf", "async")),
           "threads": torch.get_num_threads(),
           "pin_memory": CPUOffloadPolicy(pin_memory=True).pin_memory,
           "engine_device": os.environ.get("VERL_ENGINE_DEVICE")}
    if out["registered"]:
        out.update(device=get_device_name(), backend=get_nccl_backend(), resource=get_resource_name(),
                   device_id=get_device_id(), device_available=get_torch_device().is_available())
        from verl.workers.engine.base import EngineRegistry
        import verl.workers.engine.fsdp.transformer_impl  # registers the FSDP engines
        out["engine"] = EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__
        # MASTER_PORT names a port another socket holds: one rank must not need it (EADDRINUSE in CI)
        import socket
        held = socket.socket(); held.bind(("127.0.0.1", 0)); held.listen(1)
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(held.getsockname()[1]), WORLD_SIZE="1", RANK="0")
        from verl.utils.distributed import initialize_global_process_group_ray
        initialize_global_process_group_ray()  # asks torch for "cpu:gloo,cpu:gloo"
        held.close()
        out["pg_backend"] = str(torch.distributed.get_backend())
        torch.distributed.destroy_process_group()
    print("PROBE" + json.dumps(out))
    """
)


def _probe(env_extra: dict, pythonpath: str | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VERL_", "DEVENUS_VERL"))}
    env.update(OMP_NUM_THREADS="4", PROBE_PORT=str(29600 + os.getpid() % 300))
    env.update(env_extra)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    line = [l for l in res.stdout.splitlines() if l.startswith("PROBE")][-1]
    return json.loads(line[len("PROBE"):])


def test_single_rank_rendezvous_needs_no_port(monkeypatch):
    from devenus.adapters.verl.cpu.shims import single_rank_rendezvous

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    assert single_rank_rendezvous({"world_size": 1, "rank": 0})
    assert single_rank_rendezvous({"world_size": 1, "rank": 0, "init_method": "env://"})
    assert not single_rank_rendezvous({"world_size": 2, "rank": 0})
    assert not single_rank_rendezvous({"world_size": 1, "rank": 0, "init_method": "tcp://h:1"})
    assert not single_rank_rendezvous({"world_size": 1, "rank": 0, "store": object()})
    assert not single_rank_rendezvous({})  # no world size anywhere: leave it to torch
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert single_rank_rendezvous({})
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not single_rank_rendezvous({"rank": 1})


def test_collapse_backend():
    assert collapse_backend("cpu:gloo,cpu:gloo") == "gloo"
    assert collapse_backend("cpu:gloo") == "gloo"
    assert collapse_backend("cpu:gloo,cuda:nccl") == "cpu:gloo,cuda:nccl"
    assert collapse_backend("gloo") == "gloo"
    assert collapse_backend("nccl") == "nccl"
    assert collapse_backend(None) is None


def test_plugin_loads_through_env_var():
    """VERL_USE_EXTERNAL_MODULES makes `import verl` install the whole backend."""
    out = _probe({"VERL_USE_EXTERNAL_MODULES": PLUGIN, "VERL_PLATFORM": "cpu"})
    assert out["registered"] and out["hf_replica"]
    assert out["hf_adapter"] == "devenus.adapters.verl.cpu.hf_rollout.HFServerAdapter"
    assert out["device"] == "cpu" and out["device_id"] == "cpu"
    assert out["backend"] == "gloo" and out["resource"] == "GPU"
    assert out["device_available"] is False
    assert out["threads"] == 1  # one torch thread even though OMP_NUM_THREADS=4
    assert out["pin_memory"] is False
    assert out["engine_device"] == "cuda" and out["engine"] in ("FSDPEngineWithLMHead", "TokenStatsFSDPEngine")
    assert out["pg_backend"] == "gloo"


def test_plugin_autodetects_platform_without_verl_platform():
    """Without VERL_PLATFORM, the plugin sets it (no accelerator here)."""
    out = _probe({"VERL_USE_EXTERNAL_MODULES": PLUGIN})
    assert out["registered"] and out["device"] == "cpu"


def test_plugin_switch_off():
    out = _probe({"VERL_USE_EXTERNAL_MODULES": PLUGIN, "DEVENUS_VERL_CPU": "0"})
    assert not out["registered"] and not out["hf_replica"] and out["pin_memory"] is True


def test_plugin_loads_through_entry_point(tmp_path):
    """A `verl.plugins` entry point (what pyproject would declare) loads the same module."""
    dist = tmp_path / "devenus_cpu_probe-0.0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: devenus-cpu-probe\nVersion: 0.0.0\n")
    (dist / "entry_points.txt").write_text(f"[verl.plugins]\ndevenus_cpu = {PLUGIN}\n")
    out = _probe({}, pythonpath=str(tmp_path))
    assert out["registered"] and out["hf_replica"] and out["device"] == "cpu"


def test_platform_and_device_module():
    import torch

    from devenus.adapters.verl.cpu.platform import CPUDeviceModule, PlatformCPU

    p = PlatformCPU()
    assert p.device_name == "cpu" and p.current_device() == "cpu"
    assert p.communication_backend_name() == "gloo" and p.ray_resource_name() == "GPU"
    assert p.ray_resource_options(1) == {"num_gpus": 1}
    assert p.get_device_capability() == (None, None)
    assert p.is_platform_available(use_smi_check=True) == (not torch.cuda.is_available())
    with p.nvtx_range("x"):
        pass
    m = p.device_module
    assert isinstance(m, CPUDeviceModule) and m is PlatformCPU().device_module
    assert m.is_available() is False and m.device_count() == 1 and m.current_device() == "cpu"
    m.empty_cache(), m.synchronize(), m.set_device(0), m.ipc_collect(), m.set_per_process_memory_fraction(0.9)
    assert m.max_memory_allocated() > 0 and m.memory_allocated() > 0
    free, total = m.mem_get_info()
    assert 0 < free <= total
    state = m.get_rng_state()
    a = torch.rand(3)
    m.set_rng_state(state)
    assert torch.equal(a, torch.rand(3))
    assert m.get_device_name() == "cpu"
    assert m.some_future_cuda_call(1, x=2) is None  # tolerant fallback
    with m.stream(m.current_stream()):
        pass


def test_launch_helpers():
    ov = launch.cpu_overrides()
    for needed in (
        "actor_rollout_ref.rollout.name=hf",
        "++ray_kwargs.ray_init.num_gpus=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "reward.num_workers=1",
        "+actor_rollout_ref.model.override_config.attn_implementation=eager",
        "actor_rollout_ref.actor.strategy=fsdp2",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "data.dataloader_num_workers=0",
        "actor_rollout_ref.model.use_remove_padding=False",
        "trainer.use_v1=False",
    ):
        assert needed in ov
    assert any(o.startswith("ray_kwargs.ray_init.num_cpus=") for o in ov)
    assert len({o.split("=")[0] for o in ov}) == len(ov)
    ov2 = launch.cpu_overrides(num_cpus=8, n_ranks=2)
    assert "trainer.n_gpus_per_node=2" in ov2 and "++ray_kwargs.ray_init.num_gpus=2" in ov2
    assert "ray_kwargs.ray_init.num_cpus=8" in ov2
    env = launch.cpu_env({"VERL_USE_EXTERNAL_MODULES": "other.mod"})
    assert env["VERL_USE_EXTERNAL_MODULES"] == f"other.mod,{PLUGIN}"
    assert env["VERL_PLATFORM"] == "cpu" and env["OMP_NUM_THREADS"] == "1" and env["VERL_ENGINE_DEVICE"] == "cuda"
    assert launch.cpu_env(env)["VERL_USE_EXTERNAL_MODULES"] == env["VERL_USE_EXTERNAL_MODULES"]
    import torch

    assert launch.has_accelerator() == torch.cuda.is_available()


def test_fixture_tokenizer_matches_how_verl_loads_it(verl_cpu_fx):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(verl_cpu_fx["model"])
    assert type(tok).__name__ == "Qwen2Tokenizer"
    assert len(tok.encode("\n", add_special_tokens=False)) == 1  # verl's prompt builder needs this
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    text = tok.apply_chat_template([{"role": "user", "content": "What is 3+4?"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text == "<|im_start|>user\nWhat is 3+4?<|im_end|>\n<|im_start|>assistant\n"
    s = "12+34=46\n\\boxed{46}  two  spaces"
    assert tok.decode(tok.encode(s, add_special_tokens=False)) == s


# --------------------------------------------------------------------- devenus.backend=auto|cpu|gpu
@pytest.mark.parametrize(
    "argv, env, accelerator, backend, reason",
    [
        ([], {}, False, "cpu", "no accelerator visible to torch"),
        ([], {}, True, "gpu", "torch sees an accelerator"),
        (["devenus.backend=auto"], {"RAY_ADDRESS": "ray://head:10001"}, False, "gpu", "RAY_ADDRESS=ray://head:10001"),
        (["+ray_kwargs.ray_init.address=10.0.0.1:6379"], {}, False, "gpu", "ray_kwargs.ray_init.address"),
        (["trainer.nnodes=4"], {}, False, "gpu", "trainer.nnodes=4"),
        (["trainer.device=cuda"], {}, True, "gpu", "trainer.device=cuda"),
        (["devenus.backend=cpu"], {}, True, "cpu", "as asked"),
        (["devenus.backend=gpu"], {}, True, "gpu", "as asked"),
        (["devenus.backend=gpu", "trainer.nnodes=2"], {}, False, "gpu", "as asked"),  # a cluster: its nodes decide
        (["devenus.backend=gpu", "devenus.backend=cpu"], {}, False, "cpu", "as asked"),  # last one wins
        ([], {"DEVENUS_VERL_CPU": "1"}, True, "cpu", "DEVENUS_VERL_CPU=1"),
        ([], {"DEVENUS_VERL_CPU": "0"}, True, "gpu", "DEVENUS_VERL_CPU=0"),
    ],
)
def test_backend_choice_and_its_reason(argv, env, accelerator, backend, reason):
    choice = launch.choose_backend(argv, env, accelerator=accelerator)
    assert choice.backend == backend and reason in choice.reason
    msg = choice.message()
    assert msg.startswith(f"devenus.train: backend {backend} (") and reason in msg
    assert ("gpu" if backend == "cpu" else "cpu") in msg.split(";")[-1]  # says how to get the other one


@pytest.mark.parametrize(
    "argv, env, message",
    [
        (["devenus.backend=tpu"], {}, "devenus.backend must be one of auto, cpu, gpu; got 'tpu'"),
        (["devenus.backend=gpu"], {"DEVENUS_VERL_CPU": "1"}, "contradicts DEVENUS_VERL_CPU=1"),
        (["devenus.backend=cpu"], {"DEVENUS_VERL_CPU": "off"}, "contradicts DEVENUS_VERL_CPU=off"),
    ],
)
def test_backend_contradictions_are_errors(argv, env, message):
    with pytest.raises(launch.BackendError, match=message.replace("(", r"\(")):
        launch.choose_backend(argv, env, accelerator=False)


def test_cpu_env_never_replaces_what_the_user_set():
    user = {"WANDB_MODE": "online", "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "0", "RAY_DEDUP_LOGS": "1"}
    env = launch.cpu_env(user)
    for k, v in user.items():
        assert env[k] == v
    assert env["VERL_PLATFORM"] == "cpu" and env["DEVENUS_VERL_CPU"] == "1"  # what was unset is filled
    assert launch.cpu_env({})["WANDB_MODE"] == "disabled"
    with pytest.raises(launch.BackendError, match="VERL_PLATFORM=nvidia"):
        launch.cpu_env({"VERL_PLATFORM": "nvidia"})


def test_setup_backend_applies_cpu_defaults_only(monkeypatch):
    env = {k: v for k, v in os.environ.items() if k not in ("DEVENUS_VERL_CPU", "RAY_ADDRESS")}
    monkeypatch.setattr(os, "environ", {**env, "WANDB_MODE": "offline"})  # a copy: nothing leaks out
    monkeypatch.setattr(launch, "has_accelerator", lambda: False)
    argv, choice = launch.setup_backend(["trainer.logger=console"])
    assert choice.backend == "cpu" and argv[-1] == "trainer.logger=console"  # the user's override comes last
    assert argv[: len(launch.cpu_overrides())] == launch.cpu_overrides()
    assert os.environ["WANDB_MODE"] == "offline" and os.environ["DEVENUS_VERL_CPU"] == "1"


def test_setup_backend_gives_ray_one_fake_gpu_per_requested_rank(monkeypatch):
    """A user's ``trainer.n_gpus_per_node=2`` on the CPU backend: Ray must advertise 2 fake GPUs, or verl
    refuses the 2-GPU resource pool after Ray has started (docs/gpu.md, "GPU-shaped run on the CPU")."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEVENUS_VERL_CPU", "RAY_ADDRESS")}
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(launch, "has_accelerator", lambda: False)
    argv, _ = launch.setup_backend(["trainer.n_gpus_per_node=1", "trainer.n_gpus_per_node=2"])  # the last wins
    assert "++ray_kwargs.ray_init.num_gpus=2" in argv and "++ray_kwargs.ray_init.num_gpus=1" not in argv
    argv, _ = launch.setup_backend([])
    assert "++ray_kwargs.ray_init.num_gpus=1" in argv
    with pytest.raises(launch.BackendError, match="trainer.n_gpus_per_node must be a positive integer"):
        launch.setup_backend(["trainer.n_gpus_per_node=0"])


def test_train_entry_refuses_a_bad_backend_before_anything_starts():
    r = subprocess.run([sys.executable, "-m", "devenus.train", "devenus.backend=tpu"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert "devenus.train: error: devenus.backend must be one of auto, cpu, gpu; got 'tpu'" in r.stderr
    assert "Traceback" not in r.stderr


def test_engine_warnings_are_silenced_in_processes_started_after_setup():
    """verl warns once per process about each optional engine it cannot import (60 lines in a CPU run);
    the filter the backend puts in PYTHONWARNINGS silences exactly those, and keeps a user's entries."""
    from devenus.adapters.verl.cpu.launch import ENGINE_WARNINGS_FILTER, quiet_engine_warnings

    env = quiet_engine_warnings({"PYTHONWARNINGS": "error::DeprecationWarning:foo"})
    assert env["PYTHONWARNINGS"] == f"error::DeprecationWarning:foo,{ENGINE_WARNINGS_FILTER}"
    assert quiet_engine_warnings(dict(env)) == env  # applied once

    code = "import warnings, verl.workers.engine; warnings.warn('still shown', UserWarning)"

    def stderr(extra):
        base = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
        return subprocess.run([sys.executable, "-c", code], env={**base, **extra}, capture_output=True,
                              text=True, check=True).stderr
    loud, quiet = stderr({}), stderr(quiet_engine_warnings({}))
    assert "engine is not available" in loud  # the wall exists without the filter (no test that cannot fail)
    assert "engine is not available" not in quiet and "still shown" in quiet
