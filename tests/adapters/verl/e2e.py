"""Helpers for end-to-end tests through ``python -m devenus.train`` (imported by the e2e test modules)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devenus.runs import RunResult, launch
from devenus.runs.testbed import RunConfig, overrides

PLUGINS = Path(__file__).parent / "plugins"
TIMEOUT_S = float(os.environ.get("DEVENUS_E2E_TIMEOUT_S", "900"))


def train(tb, out, cfg: RunConfig, *extra: str, timeout: float = TIMEOUT_S, env_extra: dict | None = None) -> RunResult:
    """Train through the run component (the test plugins on PYTHONPATH): metrics from verl's file tracker,
    the output in ``out/train.log``. A run that times out fails the test with the end of its log."""
    out = Path(out).resolve()
    env = {"PYTHONPATH": f"{PLUGINS}:{os.environ.get('PYTHONPATH', '')}", **(env_extra or {})}
    r = launch([*overrides(tb, out, cfg), *extra], out, timeout_s=timeout, env=env)
    if r.timed_out:
        pytest.fail(f"devenus.train timed out after {timeout}s:\n{r.tail(60)}")
    return r


def train_steps(r: RunResult) -> dict[int, dict]:
    """Training steps (step > 0) this launch logged, by step."""
    return {m["step"]: m for m in r.launch_metrics if m["step"] > 0}


def train_cmd(tb, out, cfg: RunConfig, *extra: str) -> list[str]:
    return [sys.executable, "-m", "devenus.train", *overrides(tb, Path(out), cfg), *extra]


def run_train(cmd: list[str], timeout: float = TIMEOUT_S, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """Run in its own process group (test plugins on PYTHONPATH); on timeout the whole group, Ray included, is killed."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": f"{PLUGINS}:{os.environ.get('PYTHONPATH', '')}",
           **(env_extra or {})}
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


def setup_error(tb, out, cfg: RunConfig, *extra: str) -> str:
    """The message ``devenus.train`` would stop with before Ray starts (exit 2), found in this process by
    the same checks (:func:`~devenus.adapters.verl.train.preflight`: check_setup, then verl's own) on the
    CPU backend's overrides plus the run's: no interpreter importing verl per case. One test per entry
    point still runs the real command (exit code, one line, no traceback)."""
    from devenus.adapters.verl.cpu.launch import cpu_overrides
    from devenus.adapters.verl.train import SetupError, preflight

    with pytest.raises(SetupError) as ei:
        preflight([*cpu_overrides(), *overrides(tb, Path(out), cfg), *extra])
    return str(ei.value)


def compose(*extra: str):
    """The composed DE-Venus training config (verl's ppo_trainer + overlay), without starting anything."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="devenus.configs", version_base=None):
        return hydra_compose("devenus_trainer", overrides=list(extra))
