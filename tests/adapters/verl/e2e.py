"""Helpers for end-to-end tests through ``python -m devenus.train`` (imported by the e2e test modules)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devenus.recipes.testbed_train import RunConfig, overrides

PLUGINS = Path(__file__).parent / "plugins"
TIMEOUT_S = float(os.environ.get("DEVENUS_E2E_TIMEOUT_S", "900"))
SLOW_TEST_ENV = "DEVENUS_TEST_IS_SLOW"  # set by tests/conftest.py while a test marked slow runs


def train_cmd(tb, out, cfg: RunConfig, *extra: str) -> list[str]:
    return [sys.executable, "-m", "devenus.train", *overrides(tb, Path(out), cfg), *extra]


def _plugins_pythonpath() -> str:
    return f"{PLUGINS}:{os.environ.get('PYTHONPATH', '')}"


# One Ray head per test process, started on first use and shared by the runs that attach to it, as the
# experiment runner's sweeps do (devenus.experiments.runner.SharedRay): each attached run skips starting
# its own GCS, raylet and Ray's helper processes (~10-20 s here). Only the tests marked slow use it
# (tests/conftest.py says which test is running; an error raised before Ray needs no head);
# DEVENUS_E2E_SHARED_RAY=0 turns it off.
_HEAD = None


def shared_head():
    global _HEAD
    if _HEAD is None:
        import atexit
        import shutil
        import tempfile

        from devenus.experiments.runner import SharedRay

        log_dir = tempfile.mkdtemp(prefix="devenus-e2e-ray-")
        head = SharedRay(num_gpus=1, log=Path(log_dir) / "head.log", env={"PYTHONPATH": _plugins_pythonpath()})
        head.__enter__()  # a watchdog kills the head if this process dies without running atexit
        atexit.register(shutil.rmtree, log_dir, True)  # atexit runs last-in first-out: after the head stops
        atexit.register(head.__exit__, None, None, None)
        _HEAD = head
    return _HEAD


def run_train(cmd: list[str], timeout: float = TIMEOUT_S, env_extra: dict | None = None,
              own_ray: bool = False) -> subprocess.CompletedProcess:
    """Run in its own process group (test plugins on PYTHONPATH); on timeout the whole group is killed.

    The run attaches to this process's shared Ray head unless ``own_ray`` (a run that starts its own Ray,
    as a user's does) or ``env_extra`` is given: the head's workers inherit the head's environment, not
    the run's."""
    if (not own_ray and not env_extra and os.environ.get(SLOW_TEST_ENV) == "1"
            and os.environ.get("DEVENUS_E2E_SHARED_RAY", "1") != "0"):
        cmd = [*cmd, *shared_head().overrides()]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": _plugins_pythonpath(), **(env_extra or {})}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        out, err = proc.communicate()
        pytest.fail(f"devenus.train timed out after {timeout}s:\n{(out + err)[-4000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def kill_tree(pid: int) -> None:
    """SIGKILL a process and every descendant (Ray's raylet, GCS and workers included), and nothing else:
    unlike `ray stop --force`, other Ray clusters on the machine are left alone."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)


def run_devenus_train(tb, out: Path, cfg: RunConfig) -> tuple[int, str]:
    """``run_train`` for a recipe config; returns (exit code, combined output), also kept in ``out/train.log``."""
    r = run_train(train_cmd(tb, out, cfg))
    text = r.stdout + r.stderr
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "train.log").write_text(text)
    return r.returncode, text


def compose(*extra: str):
    """The composed DE-Venus training config (verl's ppo_trainer + overlay), without starting anything."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="devenus.config", version_base=None):
        return hydra_compose("devenus_trainer", overrides=list(extra))
