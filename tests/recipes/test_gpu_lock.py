"""requirements/gpu-lock.txt resolves: for each supported Python, every pin satisfies every requirement
that names it in the install `pip install -c requirements/gpu-lock.txt -e '.[vllm]'` walks (pyproject.toml,
verl 0.9.1's installed metadata, and vLLM 0.24.0's and every other resolved package's Requires-Dist kept in
gpu_lock_metadata.json by scripts/gpu_lock.py), so a pin that breaks the resolution fails without a GPU."""

import importlib.util
import json
import re
from importlib.metadata import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
LOCK_TEXT = (ROOT / "requirements" / "gpu-lock.txt").read_text()
PYPROJECT = (ROOT / "pyproject.toml").read_text()
FIXTURE = json.loads((Path(__file__).parent / "gpu_lock_metadata.json").read_text())

_spec = importlib.util.spec_from_file_location("gpu_lock", ROOT / "scripts" / "gpu_lock.py")
gpu_lock = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_lock)


def _installed_verl() -> dict:
    meta = metadata("verl")
    return {"name": "verl", "version": meta["Version"], "requires_python": meta["Requires-Python"],
            "requires_dist": meta.get_all("Requires-Dist")}


def _packages() -> list[dict]:
    """The fixture, with verl's entry read from the installed verl instead."""
    return [_installed_verl() if canonicalize_name(p["name"]) == "verl" else p for p in FIXTURE["packages"]]


def _check(lock_text: str) -> list[str]:
    return gpu_lock.check(lock_text, _packages(), PYPROJECT)


def _repin(lock_text: str, name: str, version: str | None) -> str:
    """The lock with every line of `name` (whatever its marker) replaced by one plain pin, or removed."""
    kept = [ln for ln in lock_text.splitlines()
            if ln.startswith("#") or not ln.strip()
            or canonicalize_name(Requirement(ln.split("#", 1)[0]).name) != canonicalize_name(name)]
    assert len(kept) < len(lock_text.splitlines()), f"{name} is not in the lock"
    return "\n".join(kept + ([f"{name}=={version}"] if version else [])) + "\n"


def test_gpu_lock_satisfies_every_declared_requirement_on_each_python():
    assert FIXTURE["pythons"] == list(gpu_lock.PYTHONS) == ["3.10", "3.11", "3.12"]
    assert _check(LOCK_TEXT) == []


@pytest.mark.parametrize("name, version, needs", [
    ("fastapi", "0.165.0", "vllm 0.24.0 requires 'fastapi[standard]<0.137.0,>=0.133.0'"),
    ("numpy", "2.4.6", "requires 'numpy<2.4,>=1.25; python_version <= \"3.12\"'"),  # mistral_common[image]
    ("torch", "2.13.0", "vllm 0.24.0 requires 'torch==2.11.0'"),  # the CPU lock's torch
    ("transformers", "5.11.0", "verl 0.9.1 requires 'transformers!=5.6.0,<5.11,>=5.5.3'"),
])
def test_a_pin_that_breaks_the_resolution_fails_the_check(name, version, needs):
    problems = _check(_repin(LOCK_TEXT, name, version))
    for python in gpu_lock.PYTHONS:
        assert any(p.startswith(f"Python {python}: ") and needs in p and f"{name}=={version}" in p
                   for p in problems), (python, problems)


def test_the_check_reports_an_unpinned_dependency_and_a_python_the_release_drops():
    problems = _check(_repin(LOCK_TEXT, "pyyaml", None))
    assert any("vllm 0.24.0 requires 'pyyaml'; pyyaml is not pinned" in p for p in problems), problems
    # pandas 3.1.1 declares Requires-Python >=3.11: pinned for 3.10 too, only 3.10 breaks
    problems = _check(_repin(LOCK_TEXT, "pandas", "3.1.1"))
    assert [p for p in problems if "pandas==3.1.1 requires Python" in p] == \
        ["Python 3.10: pandas==3.1.1 requires Python >=3.11"]


def test_fixture_is_the_resolution_of_the_lock():
    """Every pin (for some Python) has its declared metadata in the fixture, and verl's entry is the
    installed verl's own."""
    have = {(canonicalize_name(p["name"]), p["version"]) for p in FIXTURE["packages"]}
    for req in gpu_lock.read_pins(LOCK_TEXT):
        name = canonicalize_name(req.name)
        assert (name, gpu_lock.pin_version(req)) in have or gpu_lock.OUTSIDE.get(name) == gpu_lock.pin_version(req), req
    verl = next(p for p in FIXTURE["packages"] if p["name"] == "verl")
    assert verl["version"] == metadata("verl")["Version"] == "0.9.1"
    assert set(verl["requires_dist"]) <= set(_installed_verl()["requires_dist"])
    vllm = next(p for p in FIXTURE["packages"] if p["name"] == "vllm")
    assert vllm["version"] == "0.24.0" and "fastapi[standard]<0.137.0,>=0.133.0" in vllm["requires_dist"]
    assert "scripts/gpu_lock.py" in FIXTURE["source"]


def _verl_extra(extra: str) -> dict[str, str]:
    out = {}
    for req in metadata("verl").get_all("Requires-Dist"):
        m = re.fullmatch(rf'([A-Za-z0-9_.\-]+)==([^;\s]+)\s*;\s*extra\s*==\s*"{extra}"', req.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_gpu_lock_pins_verls_vllm_release_set_and_not_the_cpu_torch():
    for python in gpu_lock.PYTHONS:
        pins, twice = gpu_lock.pins_for(LOCK_TEXT, python)
        assert twice == []
        vllm_extra = _verl_extra("vllm")
        for name in ("torch", "torchvision", "torchaudio", "vllm", "transformers"):
            assert pins[name] == vllm_extra[name] == gpu_lock.GPU_PINS[name], (python, name)
        assert pins["flash-attn"] == _verl_extra("flash-attn-cu130torch211")["flash-attn"]


def test_vllm_extra_is_bounded_to_verls_release():
    assert re.search(r'^vllm = \["vllm==0\.24\.0"\]$', PYPROJECT, re.M)


def test_gpu_docs_install_with_the_gpu_lock_and_never_the_cpu_lock():
    doc = (ROOT / "docs" / "gpu.md").read_text()
    install = doc.split("## 1. Install", 1)[1].split("\n## ", 1)[0]
    commands = [ln.strip() for ln in install.split("```bash", 1)[1].split("```", 1)[0].splitlines()
                if ln.strip().startswith("pip ")]
    assert commands, "docs/gpu.md: no pip command in the install section"
    assert commands[0].startswith("pip install -c requirements/gpu-lock.txt -e '.[vllm]'")
    assert all("-c requirements/gpu-lock.txt" in c and "requirements/lock.txt" not in c for c in commands)
