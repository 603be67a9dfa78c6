"""One Ray head that several runs attach to, so no run starts its own GCS and raylet.

    with RayHead(num_gpus=2, env=cpu_launch_env(), log=out / "ray_head.log") as head:
        launch(overrides + head.overrides(), run_dir, env=head.env({}))

The head is ``ray start --head --block`` in its own process group, started with ``env`` (the CPU
backend's environment: the workers inherit it), stopped by killing that group (never ``ray stop``: it
stops every Ray on the machine).

It gets a private ``--temp-dir``: ``ray start`` records its address in ``<temp dir>/ray_current_cluster``,
and any plain ``ray.init()`` on the machine (every other ``devenus.train`` run, every test) connects to
the cluster named in ``/tmp/ray/ray_current_cluster`` instead of starting its own, and fails when that
head is gone. A private temp dir keeps this head invisible to everyone who does not pass its address.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping

from devenus.runs.launch import guard_group

__all__ = ["RayHead"]


class RayHead:
    """A Ray head for ``num_gpus`` runs side by side (``num_cpus`` each), its output in ``log``."""

    def __init__(self, num_gpus: int, env: Mapping[str, str], num_cpus: int = 16, log: Path | None = None) -> None:
        self.num_gpus, self.num_cpus, self.log = num_gpus, num_cpus, log
        self.base_env = dict(env)
        self.proc: subprocess.Popen | None = None
        self.temp_dir = ""
        self.address = ""
        self.start_s = float("nan")

    def __enter__(self) -> "RayHead":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.temp_dir = tempfile.mkdtemp(prefix="dvray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        cmd = [_ray(), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
               f"--temp-dir={self.temp_dir}",
               f"--num-cpus={self.num_cpus * self.num_gpus}", f"--num-gpus={self.num_gpus}",
               "--include-dashboard=false", "--disable-usage-stats"]
        out = open(self.log, "w") if self.log else subprocess.DEVNULL
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env(self.base_env),
                                     start_new_session=True)
        guard_group(self.proc.pid)
        self.address = f"127.0.0.1:{port}"
        try:
            self._wait_ready(t0)
        except BaseException:
            self.__exit__()
            raise
        self.start_s = time.perf_counter() - t0
        return self

    def _wait_ready(self, t0: float, timeout: float = 300) -> None:
        while time.perf_counter() - t0 < timeout:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.proc.returncode} (log: {self.log})")
            r = subprocess.run([_ray(), "status", f"--address={self.address}"], capture_output=True, text=True,
                               env=self.env(dict(os.environ)))
            if r.returncode == 0 and "GPU" in r.stdout:
                return
            time.sleep(2)
        raise TimeoutError(f"the Ray head at {self.address} did not come up in {timeout:.0f} s")

    @staticmethod
    def env(base: Mapping[str, str]) -> dict:
        """``base`` for a process that talks to the head. Ray 2.60's ``ray start`` turns on token
        authentication, which the runs (plain ``ray.init`` clients) cannot pass; the head listens on
        127.0.0.1 only, so it runs without (unless set)."""
        return {**base, "RAY_AUTH_MODE": base.get("RAY_AUTH_MODE", "disabled")}

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):  # the group: head, GCS, raylet, workers
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def overrides(self) -> list[str]:
        """A run's overrides to attach to this head."""
        return ["devenus.backend=cpu",  # auto would keep off the CPU backend for a cluster job
                f"++ray_kwargs.ray_init.address={self.address}",
                "ray_kwargs.ray_init.num_cpus=null", "ray_kwargs.ray_init.num_gpus=null"]


def _ray() -> str:
    return str(Path(sys.executable).with_name("ray"))
