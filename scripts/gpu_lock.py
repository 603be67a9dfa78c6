"""Regenerate requirements/gpu-lock.txt and its test fixture from pip's own resolution, or check the lock.

    python scripts/gpu_lock.py --python /path/to/python3.11 --python /path/to/python3.10 \\
        --python /path/to/python3.12
    python scripts/gpu_lock.py --check

Run it in the project's environment (Python 3.11 or later, devenus importable, pip 26 or later).

For each interpreter (the first one first) regeneration runs, with the pip running this script:

    pip --python PY install --dry-run --ignore-installed --report R.json --index-url https://pypi.org/simple \\
        -c CONSTRAINTS -e '.[vllm,test,plot,smollm2]'

which reads package metadata only (nothing is installed, no CUDA wheel is unpacked) and resolves
DE-Venus, verl 0.9.1 and vLLM 0.24.0 together as pip does on a Linux x86_64 GPU host. CONSTRAINTS are
GPU_PINS (verl 0.9.1's `vllm` extra) plus, as preferences, requirements/lock.txt's pins (the versions
the CPU suite runs) except the CPU torch, transformers and RELEASED, whose lock.txt pins conflict with
vLLM; for the later interpreters, less the pins whose release (read in the first resolution) does not
support that Python. Everything else is pip's choice for each Python. pip's configuration files and
PIP_* settings other than PIP_CERT and PIP_DEFAULT_TIMEOUT are ignored, so a local mirror or a
machine-wide constraint cannot leak into the lock.

It writes requirements/gpu-lock.txt (one `name==version` per package, with a python_version marker where
the interpreters resolved differently) and tests/recipes/gpu_lock_metadata.json: each resolved
package's name, version, Requires-Python and Requires-Dist as pip read them from PyPI, less the lines of
extras the install does not use. `check` (run by --check and tests/recipes/test_gpu_lock.py, no
network) walks the install from pyproject.toml for each supported Python and reports every requirement
whose marker holds and whose pinned version it rejects; regeneration refuses a resolution it rejects.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from datetime import date
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements" / "gpu-lock.txt"
CPU_LOCK = ROOT / "requirements" / "lock.txt"
FIXTURE = ROOT / "tests" / "recipes" / "gpu_lock_metadata.json"
EXTRAS = ("vllm", "test", "plot", "smollm2")  # every DE-Venus extra, so one lock serves each of them
PYTHONS = ("3.10", "3.11", "3.12")  # pyproject's requires-python
# the GPU host the lock is for (pip's marker environment there, less the Python)
LINUX = {"os_name": "posix", "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
         "platform_python_implementation": "CPython", "implementation_name": "cpython"}
# verl 0.9.1's `vllm` extra (its METADATA); torch 2.11.0 on PyPI is the CUDA 13.0 build
GPU_PINS = {"torch": "2.11.0", "torchvision": "0.26.0", "torchaudio": "2.11.0", "transformers": "5.9.0",
            "vllm": "0.24.0"}
# lock.txt pins left to the resolver, and why
RELEASED = {
    "fastapi": "vLLM 0.24.0 requires fastapi[standard]>=0.133,<0.137",
    "numpy": 'mistral-common[image] (through vLLM) requires numpy<2.4 where python_version <= "3.12"',
}
# pinned beside the resolution: an sdist built against the installed CUDA torch (verl's
# `flash-attn-cu130torch211` extra); pip cannot read its metadata without torch
OUTSIDE = {"flash-attn": "2.8.3"}
_KEPT_ENV = {"PIP_CERT", "PIP_DEFAULT_TIMEOUT"}


def read_pins(text: str) -> list[Requirement]:
    """The `name==version [; marker]` lines of a constraints file, as requirements."""
    reqs = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            spec = list(req.specifier)
            if len(spec) != 1 or spec[0].operator != "==":
                raise ValueError(f"{line!r} is not an exact pin")
            reqs.append(req)
    return reqs


def pin_version(req: Requirement) -> str:
    return next(iter(req.specifier)).version


def environment(python: str) -> dict[str, str]:
    return {**LINUX, "python_version": python, "python_full_version": python + ".0"}


def pins_for(text: str, python: str) -> tuple[dict[str, str], list[str]]:
    """The lock's pin per package where `python` runs it, and a problem line per package pinned twice."""
    pins: dict[str, str] = {}
    problems = []
    for req in read_pins(text):
        if req.marker is None or req.marker.evaluate(environment(python)):
            name = canonicalize_name(req.name)
            if name in pins:
                problems.append(f"Python {python}: {name} pinned twice ({pins[name]}, {pin_version(req)})")
            pins[name] = pin_version(req)
    return pins, problems


def root_requirements(pyproject_text: str) -> list[str]:
    """DE-Venus's own requirements with EXTRAS, as pyproject.toml declares them."""
    project = tomllib.loads(pyproject_text)["project"]
    return list(project["dependencies"]) + [r for e in EXTRAS for r in project["optional-dependencies"][e]]


def _supports(metadata: dict, python: str) -> bool:
    return SpecifierSet(metadata.get("requires_python") or "").contains(python + ".0", prereleases=True)


def walk(pins: dict[str, str], packages: list[dict], root: list[str], python: str):
    """Follow the install from `root` as pip would on `python`: every requirement whose marker holds (for
    the extras it is reached with) must be pinned, at a version it accepts, of a release that supports
    `python`. Returns the extras used per package ("" for the package itself) and the problems found."""
    env = environment(python)
    meta = {(canonicalize_name(p["name"]), p["version"]): p for p in packages}
    used: dict[str, set[str]] = {}
    problems = []
    todo = [(f"devenus[{','.join(EXTRAS)}]", line, "") for line in root]
    while todo:
        who, line, extra = todo.pop()
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        if extra and (req.marker is None or req.marker.evaluate({**env, "extra": ""})):
            continue  # the package's own requirement, walked without the extra
        name = canonicalize_name(req.name)
        version = pins.get(name)
        if version is None:
            problems.append(f"Python {python}: {who} requires {line!r}; {name} is not pinned")
            continue
        if not req.specifier.contains(version, prereleases=True):
            problems.append(f"Python {python}: {who} requires {line!r}; the lock pins {name}=={version}")
        new = ({""} | {canonicalize_name(e) for e in req.extras}) - used.setdefault(name, set())
        if not new:
            continue
        used[name] |= new
        m = meta.get((name, version))
        if m is None:
            if OUTSIDE.get(name) != version:
                problems.append(f"Python {python}: no metadata for {name}=={version} (scripts/gpu_lock.py)")
            continue
        if "" in new and not _supports(m, python):
            problems.append(f"Python {python}: {name}=={version} requires Python {m['requires_python']}")
        for e in sorted(new):
            by = f"{m['name']} {version}" + (f"[{e}]" if e else "")
            todo += [(by, dep, e) for dep in m.get("requires_dist") or []]
    return used, list(dict.fromkeys(problems))


def check(lock_text: str, packages: list[dict], pyproject_text: str) -> list[str]:
    """Every problem of the lock against the declared requirements, for each supported Python."""
    problems = []
    for python in PYTHONS:
        pins, twice = pins_for(lock_text, python)
        problems += twice + walk(pins, packages, root_requirements(pyproject_text), python)[1]
    return problems


def _resolve(python: str, constraints: dict[str, str], index_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in _KEPT_ENV}
    env["PIP_CONFIG_FILE"] = os.devnull
    with tempfile.TemporaryDirectory() as tmp:
        cfile, report = Path(tmp, "constraints.txt"), Path(tmp, "report.json")
        cfile.write_text("".join(f"{n}=={v}\n" for n, v in sorted(constraints.items())))
        cmd = [sys.executable, "-m", "pip", "--python", python, "install", "--dry-run", "--ignore-installed",
               "--report", str(report), "--index-url", index_url, "-c", str(cfile),
               "-e", f"{ROOT}[{','.join(EXTRAS)}]"]
        print("+", " ".join(cmd), file=sys.stderr, flush=True)
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode:
            raise SystemExit(f"{run.stdout[-4000:]}{run.stderr[-4000:]}\ngpu_lock: pip found no resolution "
                             f"for {python}")
        return json.loads(report.read_text())


def _strip(meta: dict, used: set[str]) -> dict:
    keep = []
    for line in meta.get("requires_dist") or []:
        named = re.findall(r'extra\s*==\s*"([^"]+)"', str(Requirement(line).marker or ""))
        if not named or any(canonicalize_name(e) in used for e in named):
            keep.append(line)
    return {"name": meta["name"], "version": meta["version"],
            "requires_python": meta.get("requires_python") or "", "requires_dist": keep}


def _lock_lines(by_python: dict[str, dict[str, dict]]) -> list[str]:
    pythons = sorted(by_python)
    lines = []
    for name in sorted({n for r in by_python.values() for n in r}):
        versions: dict[str, list[str]] = {}
        for py in pythons:
            if name in by_python[py]:
                versions.setdefault(by_python[py][name]["version"], []).append(py)
        shown = next(by_python[py][name]["name"] for py in pythons if name in by_python[py])
        for version, pys in sorted(versions.items(), key=lambda kv: kv[1]):
            marker = " or ".join(f'python_version == "{p}"' for p in pys)
            lines.append(f"{shown}=={version}" + ("" if pys == pythons else f" ; {marker}"))
    return lines + [f"{n}=={v}" for n, v in sorted(OUTSIDE.items())]


def regenerate(pythons: list[str], index_url: str) -> None:
    cpu = {canonicalize_name(r.name): pin_version(r) for r in read_pins(CPU_LOCK.read_text())}
    prefs = {n: v for n, v in cpu.items() if n not in {"torch", "transformers", *RELEASED}}
    root = root_requirements((ROOT / "pyproject.toml").read_text())
    by_python: dict[str, dict[str, dict]] = {}
    used: dict[str, set[str]] = {}
    for python in pythons:
        ver = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             check=True, capture_output=True, text=True).stdout.strip()
        if ver not in PYTHONS or ver in by_python:
            raise SystemExit(f"gpu_lock: {python} is Python {ver}; give one interpreter each of {PYTHONS}")
        first = next(iter(by_python.values()), {})
        kept = {n: v for n, v in prefs.items() if n not in first or _supports(first[n], ver)}
        report = _resolve(python, {**kept, **GPU_PINS}, index_url)
        pip_version = report["pip_version"]
        res = {canonicalize_name(i["metadata"]["name"]): i["metadata"] for i in report["install"]}
        res.pop("devenus")
        walked, problems = walk({n: m["version"] for n, m in res.items()}, list(res.values()), root, ver)
        if problems:  # pip accepted what the check would reject: the check is wrong, not the lock
            raise SystemExit("gpu_lock: the check rejects pip's resolution:\n" + "\n".join(problems))
        for name, extras in walked.items():
            used.setdefault(name, set()).update(extras)
        by_python[ver] = res
    if sorted(by_python) != list(PYTHONS):
        raise SystemExit(f"gpu_lock: give one interpreter each of {PYTHONS}")

    from devenus.atomic import AtomicFiles  # the tree's one atomic writer

    lines = _lock_lines(by_python)
    released = "".join(f"#   {n}: {why}\n" for n, why in RELEASED.items())
    lock_text = (
        "# GPU constraints for `pip install -c requirements/gpu-lock.txt -e '.[vllm]'` (docs/gpu.md, section 1).\n"
        "# Generated by scripts/gpu_lock.py from pip's dry-run resolution on PyPI of DE-Venus"
        f" [{','.join(EXTRAS)}],\n# verl 0.9.1 and vLLM 0.24.0 for Linux x86_64, Python {', '.join(PYTHONS)}"
        f" (pip {pip_version}, {date.today().isoformat()}).\n"
        "# Pinned into the resolution (verl 0.9.1's `vllm` extra; PyPI's torch 2.11.0 is the CUDA 13.0 build):\n#   "
        + ", ".join(f"{n}=={v}" for n, v in GPU_PINS.items())
        + ".\n# Preferred: requirements/lock.txt's other pins, except\n" + released
        + "# Beside the resolution: " + ", ".join(f"{n}=={v}" for n, v in OUTSIDE.items())
        + " (verl's `flash-attn-cu130torch211` extra; an sdist built against torch).\n"
        "# Never combine with requirements/lock.txt (CPU torch 2.13.0). tests/recipes/test_gpu_lock.py checks\n"
        "# every pin against the declared requirements in tests/recipes/gpu_lock_metadata.json.\n"
        + "\n".join(lines) + "\n")
    packages = {(n, m["version"]): _strip(m, used.get(n, set())) for r in by_python.values() for n, m in r.items()}
    fixture_text = json.dumps({
        "source": "pip install --dry-run --report on PyPI (scripts/gpu_lock.py): each resolved package's "
                  "Requires-Python and Requires-Dist, less the lines of extras the install does not use",
        "generated": date.today().isoformat(), "pip": pip_version, "pythons": list(PYTHONS),
        "packages": [packages[k] for k in sorted(packages)],
    }, indent=1) + "\n"
    with AtomicFiles([FIXTURE, LOCK]) as (fixture_tmp, lock_tmp):
        fixture_tmp.write_text(fixture_text, encoding="utf-8")
        lock_tmp.write_text(lock_text, encoding="utf-8")
    print(f"gpu_lock: {len(lines)} pins -> {LOCK.relative_to(ROOT)}; {len(packages)} packages -> "
          f"{FIXTURE.relative_to(ROOT)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", action="append", default=[],
                    help="an interpreter of each supported Python (3.10, 3.11, 3.12); the first is the primary")
    ap.add_argument("--index-url", default="https://pypi.org/simple")
    ap.add_argument("--check", action="store_true", help="check the lock against the fixture; no network")
    args = ap.parse_args(argv)
    if args.check:
        problems = check(LOCK.read_text(), json.loads(FIXTURE.read_text())["packages"],
                         (ROOT / "pyproject.toml").read_text())
        print("\n".join(problems) or f"gpu_lock: {LOCK.relative_to(ROOT)} satisfies every declared requirement")
        return 1 if problems else 0
    if not args.python:
        ap.error("give --python for each supported Python, or --check")
    regenerate(args.python, args.index_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
