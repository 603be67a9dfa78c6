"""requirements/gpu-lock.txt is the set verl 0.9.1 was released against, read from verl's own installed
metadata, and the GPU install never lets the CPU lock's torch replace the CUDA torch."""

import re
from importlib.metadata import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path.name}: {line!r} is not an exact pin"
            key = name.lower().replace("_", "-")
            assert key not in pins, f"{path.name}: {key} pinned twice"
            pins[key] = version
    return pins


def _verl_extra(extra: str) -> dict[str, str]:
    out = {}
    for req in metadata("verl").get_all("Requires-Dist"):
        m = re.fullmatch(rf'([A-Za-z0-9_.\-]+)==([^;\s]+)\s*;\s*extra\s*==\s*"{extra}"', req.strip())
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_gpu_lock_is_verls_vllm_release_set():
    gpu = _pins(ROOT / "requirements" / "gpu-lock.txt")
    vllm_extra = _verl_extra("vllm")
    assert metadata("verl")["Version"] == "0.9.1"
    for name in ("torch", "torchvision", "torchaudio", "vllm", "transformers"):
        assert gpu[name] == vllm_extra[name], (name, gpu[name], vllm_extra[name])
    assert gpu["flash-attn"] == _verl_extra("flash-attn-cu130torch211")["flash-attn"]
    assert (gpu["vllm"], gpu["torch"], gpu["transformers"]) == ("0.24.0", "2.11.0", "5.9.0")


def test_gpu_lock_keeps_the_cpu_locks_other_pins_but_not_its_torch():
    cpu = _pins(ROOT / "requirements" / "lock.txt")
    gpu = _pins(ROOT / "requirements" / "gpu-lock.txt")
    assert cpu["torch"] != gpu["torch"]  # the CPU lock's torch (through accelerate/peft/tensordict/torchdata)
    for name, version in cpu.items():
        if name not in {"torch", "transformers"}:
            assert gpu.get(name) == version, f"gpu-lock.txt: {name} should be lock.txt's {version}"
    assert "-c" not in (ROOT / "requirements" / "gpu-lock.txt").read_text().split()


def test_vllm_extra_is_bounded_to_verls_release():
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^vllm = \["vllm==0\.24\.0"\]$', text, re.M)


def test_gpu_docs_install_with_the_gpu_lock_and_never_the_cpu_lock():
    doc = (ROOT / "docs" / "gpu.md").read_text()
    install = doc.split("## 1. Install", 1)[1].split("\n## ", 1)[0]
    commands = [ln.strip() for ln in install.split("```bash", 1)[1].split("```", 1)[0].splitlines()
                if ln.strip().startswith("pip ")]
    assert commands, "docs/gpu.md: no pip command in the install section"
    # CUDA torch first, at the lock's version, from the CUDA index
    assert "torch==2.11.0" in commands[0] and "download.pytorch.org" in commands[0]
    assert all("requirements/lock.txt" not in c for c in commands)
    assert all("-c requirements/gpu-lock.txt" in c for c in commands[1:])
    assert not any(re.search(r"pip install [^#]*\bvllm\b(?!=)", c) and "gpu-lock" not in c for c in commands)
