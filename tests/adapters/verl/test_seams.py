"""verl's private surface is listed in one module and checked at import (a verl upgrade fails in one place)."""

import ast
from pathlib import Path

import pytest

pytest.importorskip("verl")

from devenus.adapters.verl import seams  # noqa: E402

ADAPTER = Path(seams.__file__).parent


def test_the_pinned_verl_holds_every_seam():
    assert [(s.member, seams.problem(s)) for s in seams.SEAMS if seams.problem(s)] == []
    seams.check()


def test_a_missing_member_names_itself_its_user_and_the_pinned_version():
    fake = (seams.Seam("verl.trainer.ppo.ray_trainer:RayPPOTrainer", "_no_such_member", "member", "a test"),
            seams.Seam("verl.trainer.main_ppo_v0:TaskRunner", "run", "source", "a mirror", fingerprint="0" * 16))
    with pytest.raises(seams.VerlSeamError) as e:
        seams.check(fake)
    msg = str(e.value)
    assert "RayPPOTrainer._no_such_member is missing; used by a test" in msg
    assert "TaskRunner.run changed" in msg and f"verl=={seams.PINNED}" in msg


def private_verl_members_used() -> set[str]:
    """Names ``_x`` the adapter reads off verl objects: super()._x, Class._x, module._x (not self._x)."""
    out = set()
    for p in ADAPTER.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                if isinstance(base, ast.Name) and base.id[:1].islower() and base.id not in (
                        "rollout_base", "platform_manager", "EngineRegistry"):
                    continue  # our own objects (e.g. trainer._x in helpers)
                out.add(node.attr)
    return out


def test_every_private_verl_member_the_adapter_reads_is_listed():
    listed = {s.member for s in seams.SEAMS}
    ours = {"_device_module", "_composable", "_cpu_plugin", "_INSTALL_WHEN_READY"}  # DE-Venus's own or torch's
    assert private_verl_members_used() - listed - ours == set()


def test_the_gpu_paths_members_and_keys_are_listed_and_checked():
    listed = {(s.owner.rsplit(":", 1)[-1], s.member) for s in seams.SEAMS}
    for owner, member in [("ActorRolloutRefWorker", "actor"), ("TrainingWorker", "engine"), ("FSDPEngine", "module"),
                          ("RayPPOTrainer", "async_rollout_manager"),
                          ("WorkerGroup", "setattr(self, method_name, func)"),
                          *[("FSDPEngineWithLMHead", f'"{k}"') for k in
                            ("temperature_is_one", "temperature_rmpad", "pad_size", "temperature")],
                          *[("FSDPEngineWithLMHead", f'key="{k}"') for k in ("use_remove_padding", "use_fused_kernels")]]:
        assert (owner, member) in listed, (owner, member)
    # every output_args key token_stats reads is one of them
    src = (ADAPTER / "token_stats.py").read_text()
    import re
    read = set(re.findall(r'output_args(?:\.get\(|\[)"(\w+)"', src))
    assert read and read <= {"temperature_is_one", "temperature_rmpad", "pad_size", "temperature"}


def test_a_text_seam_fails_when_the_literal_is_gone():
    gone = seams.Seam("verl.workers.engine.fsdp.transformer_impl:FSDPEngineWithLMHead", '"no_such_key"', "text",
                      "a test", within="prepare_model_inputs")
    assert seams.problem(gone) == ('verl.workers.engine.fsdp.transformer_impl:FSDPEngineWithLMHead.prepare_model_inputs'
                                   ' no longer contains "no_such_key"')
