"""The worker processes that run math-verify: a warm template process (the zygote) and the workers forked
from it, each a handle the parent can bound in time and kill.

Why worker processes: math-verify bounds its own work with ``signal.alarm``, which only works on the
main thread of the main interpreter; verl calls reward functions from a thread pool and inside Ray
actors, where it raises. A sympy computation cannot be interrupted from another thread either, so the
only reliable bound is a separate process that the parent kills (SIGKILL) when it overruns.

Why a template process: workers are forked from a warm zygote (``_worker.py``) that has imported
math-verify once, so replacing a killed worker costs milliseconds instead of a fresh interpreter
and a sympy import (~0.7 s of CPU), and the replacement happens outside every lock a check waits on.
The zygote is a fresh interpreter started with ``subprocess`` (exec, i.e. spawn semantics: safe to
start from any thread and from forked children, and it never re-imports the caller's ``__main__``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import VerifierConfig

__all__ = ["Worker", "WorkerDied", "WorkerTimeout", "Zygote"]

_WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))


class WorkerTimeout(Exception):
    pass


class WorkerDied(Exception):
    pass


def _child_env() -> dict[str, str]:
    # The zygote must import math_verify exactly as this process does: hand it our sys.path.
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _wait_fd(fd: int, event: int, deadline: float) -> None:
    # poll(), not select(): file descriptors above 1024 are common in Ray workers.
    poller = select.poll()
    poller.register(fd, event | select.POLLERR | select.POLLHUP)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WorkerTimeout
        if poller.poll(remaining * 1000.0):
            return


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process from /proc (None where there is no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


class Worker:
    """The parent's handle on one forked worker: its stream socket and a way to kill it.

    ``call`` is used by one thread at a time (the pool hands a worker to one call); ``kill`` and
    ``retire`` may race with it from ``close``, hence the small lock.
    """

    def __init__(self, pid: int, fd: int, zygote: "Zygote") -> None:
        self.pid = pid
        self.fd = fd
        self.zygote = zygote
        os.set_inheritable(fd, False)
        os.set_blocking(fd, False)
        # The zygote has not reaped the worker (it waits for our "reap"), so the pid is still
        # ours; a pidfd keeps it so even if the zygote dies and init reaps the worker.
        self.pidfd: int | None = None
        if hasattr(os, "pidfd_open"):
            try:
                self.pidfd = os.pidfd_open(pid)
            except OSError:
                self.pidfd = None
        self._buf = bytearray()
        self._next_id = 0
        self._lock = threading.Lock()
        self._gone = False
        self.demoted = False

    def idle_and_alive(self) -> bool:
        """An idle worker has nothing to say: anything readable means EOF (it died)."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return not poller.poll(0)

    def _read_line(self, deadline: float) -> dict[str, Any]:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 1]
                return json.loads(line)
            _wait_fd(self.fd, select.POLLIN, deadline)
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            except OSError as e:
                raise WorkerDied(f"worker socket broken: {e}") from e
            if not chunk:
                raise WorkerDied("worker closed its socket")
            self._buf += chunk

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            _wait_fd(self.fd, select.POLLOUT, deadline)
            try:
                n = os.write(self.fd, view)
            except BlockingIOError:
                continue
            except OSError as e:
                raise WorkerDied(f"worker socket broken: {e}") from e
            view = view[n:]

    def call(
        self,
        op: str,
        a: str,
        b: str,
        timeout_s: float,
        demote_after_s: float | None = None,
        on_demote: Callable[["Worker"], None] | None = None,
    ) -> dict[str, Any]:
        """One request under ``timeout_s`` (wall clock).

        Once the check has used ``demote_after_s`` of CPU time (and twice, three times that) the
        worker's niceness steps up (6, 12, 19): the more CPU a check has eaten, the likelier it is
        a runaway, so younger checks outrank it. CPU time, not wall time: on a host that is busy
        anyway an ordinary check waits long for the CPU without using much, and demoting it
        would only starve it. ``on_demote`` runs at the first step.
        """
        start = time.monotonic()
        deadline = start + timeout_s
        steps: list[tuple[float, int]] = []
        cpu0 = _cpu_seconds(self.pid) if demote_after_s is not None and demote_after_s > 0 else None
        if cpu0 is not None:
            assert demote_after_s is not None
            steps = [(k * demote_after_s, nice) for k, nice in ((1, 6), (2, 12), (3, 19))]
            tick = min(0.05, demote_after_s / 4)
        self._next_id += 1
        rid = self._next_id
        self._write(json.dumps({"id": rid, "op": op, "a": a, "b": b}).encode() + b"\n", deadline)
        while True:
            until = min(deadline, time.monotonic() + tick) if steps else deadline
            try:
                msg = self._read_line(until)
            except WorkerTimeout:
                if until >= deadline:
                    raise
                used = (_cpu_seconds(self.pid) or 0.0) - (cpu0 or 0.0)
                while steps and used >= steps[0][0]:
                    first = not self.demoted
                    self.demote(steps.pop(0)[1])
                    if first and on_demote is not None:
                        on_demote(self)
                continue
            if msg.get("id") == rid:
                return msg

    def demote(self, nice: int = 19) -> None:
        """Lower the worker's CPU priority. Irreversible without privileges, so a demoted worker
        is retired after its check."""
        self.demoted = True
        try:
            os.setpriority(os.PRIO_PROCESS, self.pid, nice)  # unreaped, so certainly our worker
        except OSError:
            pass

    def _finish(self, sig: bool) -> None:
        with self._lock:
            if self._gone:
                return
            self._gone = True
            if sig:
                try:
                    if self.pidfd is not None:
                        signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
                    else:
                        os.kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
            self._close_fds()
        self.zygote.reap(self.pid)  # only now may the zygote collect it (and the pid be reused)

    def kill(self) -> None:
        """SIGKILL now; never waits (the zygote collects the worker)."""
        self._finish(sig=True)

    def retire(self) -> None:
        """EOF on its socket: an idle worker exits by itself."""
        self._finish(sig=False)

    def forget(self) -> None:
        """After fork: the worker belongs to the parent. Drop our copies of its fds, never signal."""
        with self._lock:
            self._gone = True
            self._close_fds()

    def _close_fds(self) -> None:
        for fd in (self.fd, self.pidfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass


class Zygote:
    """The template process and its control socket (SOCK_SEQPACKET: one message per record)."""

    def __init__(self, cfg: VerifierConfig) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        opts = {
            "ctl_fd": theirs.fileno(),
            "float_rounding": cfg.float_rounding,
            "numeric_precision": cfg.numeric_precision,
            "strict": cfg.strict,
            "memory_limit_mb": cfg.memory_limit_mb,
        }
        exe = cfg.python_executable or sys.executable
        try:
            self.proc = subprocess.Popen(
                [exe, "-u", _WORKER_SCRIPT, json.dumps(opts)],
                stdin=subprocess.DEVNULL,
                env=_child_env(),
                close_fds=True,
                pass_fds=(theirs.fileno(),),
            )
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.sock = mine
        self._fork_lock = threading.Lock()
        self._next_id = 0
        self._dead = False

    def _recv(self, deadline: float) -> tuple[dict[str, Any], list[int]]:
        _wait_fd(self.sock.fileno(), select.POLLIN, deadline)
        try:
            data, fds, _flags, _addr = socket.recv_fds(self.sock, 65536, 1)
        except OSError as e:
            raise WorkerDied(f"zygote socket broken: {e}") from e
        if not data:
            raise WorkerDied("zygote exited")
        return json.loads(data), list(fds)

    def wait_ready(self, timeout_s: float) -> None:
        msg, _ = self._recv(time.monotonic() + timeout_s)
        if not msg.get("ready"):
            raise WorkerDied(f"worker failed to start: {msg.get('error')}")

    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    def fork(self, deadline: float) -> Worker:
        """A fresh warm worker (milliseconds). Raises WorkerTimeout past ``deadline``."""
        if not self._fork_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise WorkerTimeout
        try:
            self._next_id += 1
            rid = self._next_id
            try:
                self.sock.send(json.dumps({"op": "fork", "id": rid}).encode())
            except OSError as e:
                self._dead = True
                raise WorkerDied(f"zygote socket broken: {e}") from e
            while True:
                try:
                    msg, fds = self._recv(deadline)
                except WorkerDied:
                    self._dead = True
                    raise
                if msg.get("id") == rid and fds:
                    return Worker(int(msg["pid"]), fds[0], self)
                if msg.get("id") == rid and "error" in msg:
                    raise WorkerDied(str(msg["error"]))
                # A late reply to a fork whose caller gave up: that worker is nobody's.
                for fd in fds:
                    os.close(fd)
                if "pid" in msg:
                    self.reap(int(msg["pid"]))
        finally:
            self._fork_lock.release()

    def reap(self, pid: int) -> None:
        # One record per send on SOCK_SEQPACKET: safe without the fork lock; never blocks.
        try:
            self.sock.send(json.dumps({"op": "reap", "pid": pid}).encode(), socket.MSG_DONTWAIT)
        except OSError:
            pass  # zygote gone or backlogged: its exit collects every worker anyway

    def _drop_socket(self) -> None:
        self._dead = True
        try:
            self.sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """EOF on the control socket: the zygote kills its workers and exits; kill it if not."""
        self._drop_socket()
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    def forget(self) -> None:
        """After fork: the zygote is the parent's. Drop our copy of the socket, never kill."""
        self._drop_socket()
        self.proc.returncode = 0  # stop Popen.__del__ from trying to reap a stranger

