"""Launch ``python -m devenus.train`` as a supervised subprocess and collect what verl wrote.

A run is one output folder::

    <out>/train.log            the command line and everything it printed, every launch appended
    <out>/metrics/<n>.jsonl    verl's ``file`` tracker, one file per launch (verl truncates its file on open,
                               so a resumed run would otherwise lose the steps before its checkpoint)
    <out>/validation/<s>.jsonl verl's validation dumps, when the overrides set trainer.validation_data_dir

The run gets its own process group (Ray's head, raylet and workers included) and a watchdog that kills
that group if this process dies, even by SIGKILL; a timeout or a stop request kills the group too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from devenus.commands import RunFailed
from devenus.config.overrides import hydra_value, last_value, set_value
from devenus.runs.logs import read_metrics, validation_dumps


_ERROR = re.compile(r"(Error|Exception|error:|Traceback)")

#: where a launch's metrics go; ``trainer.validation_data_dir`` is the caller's (the recipe's) choice
METRICS_DIR = "metrics"


@dataclass
class RunResult:
    returncode: int
    wall_s: float
    out_dir: Path
    log: Path
    metrics: list[dict]  # one dict per step from verl's file tracker, every launch into this folder (read_metrics)
    launch_metrics: list[dict] = field(default_factory=list)  # the steps this launch logged
    validation: dict[int, Path] = field(default_factory=dict)  # step -> validation dump
    timed_out: bool = False
    stopped: bool = False
    first_metrics_s: float | None = None  # launch -> first metrics line (start-up, plus step 1 or the step-0 validation)
    log_offset: int = 0  # where this launch's output starts in the (appended) log

    def output(self) -> str:
        """What this launch printed (the log holds every launch into the folder)."""
        with open(self.log, "rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not (self.timed_out or self.stopped)

    def step(self, n: int) -> dict | None:
        return next((m for m in self.metrics if m["step"] == n), None)

    def tail(self, lines: int = 30) -> str:
        """The end of the log, for an error message that shows why a run failed."""
        text = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return "\n".join(text[-lines:])

    def error_line(self) -> str:
        """The last line of the log that reads like the error the run ended with (else its last line)."""
        lines = [ln.strip() for ln in self.tail(400).splitlines() if ln.strip()]
        return next((ln for ln in reversed(lines) if _ERROR.search(ln)), lines[-1] if lines else "(empty log)")

    def check(self, what: str = "devenus.train") -> "RunResult":
        """This result, or :class:`RunFailed` naming why the run ended and where its log is."""
        if self.ok:
            return self
        how = ("timed out" if self.timed_out else "was stopped" if self.stopped
               else f"exited with {self.returncode}")
        raise RunFailed(f"{what} {how}: {self.error_line()} (log: {self.log})")


def with_file_logger(overrides: Sequence[str]) -> list[str]:
    """``overrides`` with verl's ``file`` tracker in ``trainer.logger`` (added to the last value given, or
    ``[console,file]`` when none is): the run component reads metrics from it, never from the console."""
    names = last_value(overrides, "trainer.logger")
    if names is None:
        return [*overrides, "trainer.logger=[console,file]"]
    names = list(names) if isinstance(names, (list, tuple)) else [names]
    return list(overrides) if "file" in names else set_value(overrides, "trainer.logger", [*names, "file"])


#: where verl's ``run_ppo`` takes the job's environment variables from (merged over its own defaults into the
#: ``runtime_env`` of its ``ray.init``: every actor and task of the job gets them, on every node)
RUNTIME_ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"


def runtime_env_override(key: str, value: str) -> str:
    """The Hydra override that sets environment variable ``key`` for every Ray process of the run. The value
    is quoted where Hydra would read it as anything but that string: ``0`` as an int (Ray refuses non-string
    env vars), ``a,b`` as a list."""
    return f"++{RUNTIME_ENV_VARS}.{key}={hydra_value(str(value))}"


def metrics_files(out_dir: Path) -> list[Path]:
    """The per-launch files of verl's ``file`` tracker under ``out_dir``, in launch order (read them together
    with :func:`devenus.runs.logs.read_metrics`)."""
    return sorted((Path(out_dir) / METRICS_DIR).glob("*.jsonl"), key=lambda p: int(p.stem) if p.stem.isdigit() else -1)


def file_logger(overrides: Sequence[str], out_dir: Path) -> tuple[list[str], Path]:
    """``overrides`` with verl's ``file`` tracker writing this launch's own file, ``<out_dir>/metrics/<n>.jsonl``
    (one past the last launch's), and that file. verl opens the file ``"wb"``: a resumed run writing to the
    previous launch's file would truncate the steps before its checkpoint. The path travels in the job's Ray
    runtime env, so it reaches the task runner wherever it runs (its own actor, on any node, or the driver);
    ``out_dir`` should be absolute, and the ``metrics`` folder exist before the run starts."""
    stems = [int(p.stem) for p in metrics_files(out_dir) if p.stem.isdigit()]
    path = Path(out_dir) / METRICS_DIR / f"{max(stems, default=-1) + 1}.jsonl"
    return [*with_file_logger(overrides), runtime_env_override("VERL_FILE_LOGGER_PATH", str(path))], path


def launch(overrides: Sequence[str], out_dir: str | Path, *, timeout_s: float | None = None,
           env: Mapping[str, str] | None = None, on_step: Callable[[dict], None] | None = None,
           stop: threading.Event | None = None, poll_s: float = 0.5,
           entry: Sequence[str] = ("-m", "devenus.train")) -> RunResult:
    """Run ``python -m devenus.train <overrides>`` with its output in ``out_dir`` (see the module docstring).

    ``env`` adds to this process's environment; ``on_step`` is called with each new step's metrics as verl
    writes them (a progress bar); ``stop`` (set from another thread) ends the run early. A run killed by
    its timeout or a stop has ``timed_out`` / ``stopped`` set and a negative return code."""
    out = Path(os.path.abspath(out_dir))  # not realpath: a symlinked mount point is what other nodes mount too
    (out / METRICS_DIR).mkdir(parents=True, exist_ok=True)
    ov, metrics_path = file_logger(overrides, out)
    cmd = [sys.executable, *entry, *ov]
    run_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {}), "VERL_FILE_LOGGER_PATH": str(metrics_path)}
    log = out / "train.log"
    t0 = time.perf_counter()
    timed_out = stopped = False
    first = None
    delivered = 0
    offset = log.stat().st_size if log.exists() else 0
    with open(log, "a") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=run_env,
                                start_new_session=True)
        guard = guard_group(proc.pid)
        try:
            while proc.poll() is None:
                time.sleep(poll_s)
                if first is None and metrics_path.exists() and metrics_path.stat().st_size > 0:
                    first = time.perf_counter() - t0
                if on_step is not None and first is not None:
                    delivered = _deliver(metrics_path, delivered, on_step)
                if stop is not None and stop.is_set():
                    stopped = True
                    break
                if timeout_s is not None and time.perf_counter() - t0 > timeout_s:
                    timed_out = True
                    break
        finally:
            if proc.poll() is None:
                kill_group(proc.pid)
            rc = proc.wait()
            guard.kill()
    if first is None and metrics_path.exists() and metrics_path.stat().st_size > 0:
        first = time.perf_counter() - t0  # the run wrote its metrics and ended between two polls
    if on_step is not None:
        _deliver(metrics_path, delivered, on_step)
    val_dir = last_value(ov, "trainer.validation_data_dir")
    return RunResult(rc, time.perf_counter() - t0, out, log, read_metrics(metrics_files(out)), read_metrics(metrics_path),
                     validation_dumps(Path(val_dir)) if val_dir is not None else {}, timed_out, stopped, first, offset)


def _deliver(path: Path, delivered: int, on_step: Callable[[dict], None]) -> int:
    """Hand the steps logged since the last call to ``on_step``."""
    rows = read_metrics(path)
    for m in rows[delivered:]:
        on_step(m)
    return len(rows)


_GUARD = """
import os, signal, sys, time
parent, group = int(sys.argv[1]), int(sys.argv[2])
while True:
    time.sleep(1)
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        break  # the group ended on its own
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        os.killpg(group, signal.SIGKILL)  # the launcher is gone (even by SIGKILL): take its run with it
        break
"""


def guard_group(pgid: int) -> subprocess.Popen:
    """A watchdog that kills process group ``pgid`` once this process is gone (a run is started in its
    own session so it can be killed as a group; without this, a launcher killed with SIGKILL would leave
    the run and its Ray processes behind on a shared machine)."""
    return subprocess.Popen([sys.executable, "-c", _GUARD, str(os.getpid()), str(pgid)], start_new_session=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_group(pgid: int) -> None:
    """SIGKILL a run's whole process group (Ray's processes included) and nothing else."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
