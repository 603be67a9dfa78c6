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
    ours = {"_device_module", "_composable", "_cpu_plugin"}  # DE-Venus's own or torch's
    assert private_verl_members_used() - listed - ours == set()
