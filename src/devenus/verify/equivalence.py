"""Answer equivalence with a hard wall-clock bound on every call, queueing included.

``Verifier.equivalent(a, b)`` tries, in order: the option letter when the reference ``b`` is a
multiple-choice letter (:mod:`.choice`), identical normalised strings, a bounded pair cache, the exact
numeric fast path, the safe point evaluation, the exact structural comparison (:mod:`.structure`:
sets, intervals, matrices, polynomial equations of plain numbers), and finally math-verify (``parse`` + ``verify``) in a
worker process.

Why worker processes: math-verify bounds its own work with ``signal.alarm``, which only works on the
main thread of the main interpreter; verl calls reward functions from a thread pool and inside Ray
actors, where it raises. A sympy computation cannot be interrupted from another thread either, so the
only reliable bound is a separate process that the parent kills (SIGKILL) when it overruns.

Why a pool behind a deadline: with one worker behind one lock, an ordinary check queues behind
every pathological one ahead of it (each costs a full bound, then a restart), so latency under
concurrency had no bound at all. Here each call gets a deadline when it enters (``deadline_s``,
default 1.75 ``timeout_s``) that covers waiting for a worker as well as the check; up to
``max_workers`` workers run checks side by side, a freed worker goes to the longest-waiting call,
and a call still without a worker at its deadline gives up (undecided) instead of queueing on.
A check that has burnt ``demote_after`` of its bound in CPU time is probably a runaway: its worker
drops in CPU priority and gives its slot to the next call, so fresh checks neither queue nor
compete for the CPU behind it.

Why a template process: workers are forked from a warm zygote (``_worker.py``) that has imported
math-verify once, so replacing a killed worker costs milliseconds instead of a fresh interpreter
and a sympy import (~0.7 s of CPU), and the replacement happens outside every lock a check waits on.
The zygote is a fresh interpreter started with ``subprocess`` (exec, i.e. spawn semantics: safe to
start from any thread and from forked children, and it never re-imports the caller's ``__main__``).

Undecided results (timeout, worker error, no worker before the deadline) count as "not equivalent"
for that call only: they are never cached, counted in ``stats.undecided`` and logged.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .choice import choice_letter, target_letter
from .normalize import assigned_variable, drop_percent, is_list, normalize, numbers_equal, parse_number
from .numeval import decide
from .structure import decide_structure

__all__ = ["UNMATCHABLE", "Verifier", "VerifierConfig", "VerifierStats", "get_default_verifier", "numbers_equal"]

#: A target no answer is ever equivalent to: the OLR reference's inactive-noise label (ShenzhiYang2000/OLR
#: writes it as the noisy rows' ground truth). Refused before any normalisation, so a response that happens
#: to write it (``\boxed{__NoCorrectAnswer__}``) still scores 0.
UNMATCHABLE = "__NoCorrectAnswer__"

_WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))
logger = logging.getLogger("devenus.verify")


@dataclass(frozen=True)
class VerifierConfig:
    """Configuration of a :class:`Verifier`.

    Attributes:
        timeout_s: wall-clock bound of one math-verify check in a worker (parse of both sides +
            verify); the worker is killed when it overruns.
        deadline_s: bound on one ``equivalent`` call from entry to answer, waiting for a free worker
            included; ``None`` means ``1.75 * timeout_s``: the last quarter of the second bound
            is left for the kill and for the waiting thread to get the CPU back on a busy host,
            so that a call returns within twice the bound. A check that gets
            its worker late runs for ``min(timeout_s, time left)``. Starting the zygote (first
            symbolic check of a process, or after the zygote died) is not counted: it is bounded
            by ``startup_timeout_s``.
        max_workers: checks that may run at full CPU priority at the same time, each in its own
            worker process (forked on demand, kept while idle); ``None``: the number of CPUs,
            clamped to 2..8. More than the CPUs only makes every check slower.
        max_demoted: checks past ``demote_after`` (demoted, likely runaways) that may run beside
            them: they no longer hold one of the ``max_workers`` slots, so a fresh check never
            waits behind a runaway for longer than the runaway takes to burn ``demote_after`` of
            a bound in CPU time.
        startup_timeout_s: bound on starting the zygote (interpreter + sympy import + warm-up).
        cache_size: entries of the (normalised pair) -> result LRU cache. Only decided results
            are cached.
        max_input_chars: longer inputs are "not equivalent" without a symbolic check.
        numeric_eval: before math-verify, evaluate both sides at a fixed point with the safe
            evaluator of :mod:`.numeval`: clearly different values decide "not equivalent",
            equal values of moderate constant expressions decide "equivalent".
        float_rounding: a decimal equals a value it can only approximate (``0.333333`` ~ 1/3, or a
            constant expression such as ``\\sqrt{2}``) within a *relative* ``10 ** -float_rounding``;
            two values with finite decimal expansions are compared exactly on every path
            (``0.0000149 != 0.000015``). Also passed to ``math_verify.verify``.
        strict: ``False`` matches variables by position (``x + 1`` ~ ``y + 1``, ``x = 3`` ~ ``y = 3``)
            and lets sets compare with tuples, as in ``math_verify.verify``; the fast paths then
            leave every comparison with variables to math-verify.
        numeric_precision: passed to ``math_verify.verify``.
        memory_limit_mb: address-space limit of each worker (0 = none); stops a runaway
            ``10^{10^{10}}`` from eating the host's memory before the timeout fires.
        python_executable: interpreter for the zygote (default ``sys.executable``).
        demote_after: a check that has used this fraction of its bound in CPU time gives up its
            slot and its worker's niceness steps up (6, then 12 and 19 at twice and three times
            that CPU time; ``None``: never), so runaway checks yield the queue and the CPU to
            younger ones; such a worker is replaced after the check. CPU time, not wall time: a
            check that merely waits for a busy CPU is not a runaway.
        log_interval_s: at most one log line about undecided checks per this many seconds
            (the first one is always logged; the line carries the running count).
    """

    timeout_s: float = 2.0
    deadline_s: float | None = None
    max_workers: int | None = None
    max_demoted: int = 16
    startup_timeout_s: float = 60.0
    cache_size: int = 100_000
    max_input_chars: int = 10_000
    numeric_eval: bool = True
    float_rounding: int = 6
    numeric_precision: int = 15
    strict: bool = True
    memory_limit_mb: int = 4096
    python_executable: str | None = None
    log_interval_s: float = 10.0
    demote_after: float | None = 0.25

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"VerifierConfig.timeout_s must be > 0, got {self.timeout_s!r}")
        if self.deadline_s is not None and not self.deadline_s > 0:
            raise ValueError(f"VerifierConfig.deadline_s must be > 0 or None, got {self.deadline_s!r}")
        if self.demote_after is not None and not 0 < self.demote_after <= 1:
            raise ValueError(f"VerifierConfig.demote_after must be in (0, 1] or None, got {self.demote_after!r}")
        if self.max_workers is not None and self.max_workers < 1:
            raise ValueError(f"VerifierConfig.max_workers must be >= 1 or None, got {self.max_workers!r}")
        if self.max_demoted < 0:
            raise ValueError(f"VerifierConfig.max_demoted must be >= 0, got {self.max_demoted!r}")
        if isinstance(self.float_rounding, bool) or not isinstance(self.float_rounding, int) or not 1 <= self.float_rounding <= 15:
            raise ValueError(f"VerifierConfig.float_rounding must be an integer in 1..15, got {self.float_rounding!r}")

    @property
    def workers(self) -> int:
        """``max_workers``, resolved."""
        if self.max_workers is not None:
            return self.max_workers
        try:
            cpus = len(os.sched_getaffinity(0))  # what this process may use, not the host's count
        except (AttributeError, OSError):
            cpus = os.cpu_count() or 2
        return min(8, max(2, cpus))

    @property
    def call_deadline_s(self) -> float:
        return 1.75 * self.timeout_s if self.deadline_s is None else self.deadline_s


@dataclass
class VerifierStats:
    """Counters of a :class:`Verifier` (a snapshot is returned by ``Verifier.stats``).

    ``checks``: calls of ``equivalent``; ``choice_hits``: decided by option letter (the reference
    is a multiple-choice letter A-J, see :mod:`.choice`); ``exact_hits``: decided by identical normalised strings;
    ``numeric_hits``: decided by the numeric fast path (equal, or unequal exact numbers);
    ``eval_hits``: decided by the safe point evaluation (:mod:`.numeval`); ``structure_hits``: decided
    by the exact comparison of sets, intervals, matrices or polynomial equations (:mod:`.structure`);
    ``cache_hits``: answered from the pair cache; ``mathverify_calls``: symbolic checks needed
    (``shared_hits`` of them joined an identical check already in flight on another thread);
    ``undecided``: calls answered "not equivalent" without a decision, i.e. the sum of
    ``timeouts`` (worker killed for overrunning), ``errors`` (worker-side exception, crash, failed
    start) and ``queue_timeouts`` (no worker free before the call's deadline), plus shared checks
    whose leader was undecided; ``worker_starts``: workers forked; ``worker_restarts``: those
    that replaced a killed or dead worker; ``zygote_starts``: template processes started;
    ``oversize``: inputs over ``max_input_chars``.
    """

    checks: int = 0
    choice_hits: int = 0
    exact_hits: int = 0
    numeric_hits: int = 0
    eval_hits: int = 0
    structure_hits: int = 0
    cache_hits: int = 0
    mathverify_calls: int = 0
    shared_hits: int = 0
    undecided: int = 0
    timeouts: int = 0
    errors: int = 0
    queue_timeouts: int = 0
    worker_starts: int = 0
    worker_restarts: int = 0
    zygote_starts: int = 0
    oversize: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


_BOOLEANS = frozenset({"true", "false"})


def _var_key(var: str) -> str:
    # a_{1} is a_1; single-letter case is folded as math-verify folds it
    return var.replace("{", "").replace("}", "").lower()


class _WorkerTimeout(Exception):
    pass


class _WorkerDied(Exception):
    pass


class _LRU:
    """Small thread-safe LRU map."""

    def __init__(self, maxsize: int) -> None:
        self._d: OrderedDict[Any, Any] = OrderedDict()
        self._max = maxsize
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            if key in self._d:
                self._d.move_to_end(key)
                return self._d[key]
        return None

    def put(self, key: Any, value: Any) -> None:
        if self._max <= 0:
            return
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self._max:
                self._d.popitem(last=False)

    def reset_lock(self) -> None:
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._d)


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
            raise _WorkerTimeout
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


class _Worker:
    """The parent's handle on one forked worker: its stream socket and a way to kill it.

    ``call`` is used by one thread at a time (the pool hands a worker to one call); ``kill`` and
    ``retire`` may race with it from ``close``, hence the small lock.
    """

    def __init__(self, pid: int, fd: int, zygote: "_Zygote") -> None:
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
                raise _WorkerDied(f"worker socket broken: {e}") from e
            if not chunk:
                raise _WorkerDied("worker closed its socket")
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
                raise _WorkerDied(f"worker socket broken: {e}") from e
            view = view[n:]

    def call(
        self,
        op: str,
        a: str,
        b: str,
        timeout_s: float,
        demote_after_s: float | None = None,
        on_demote: Callable[["_Worker"], None] | None = None,
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
            except _WorkerTimeout:
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
            for fd in (self.fd, self.pidfd):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
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
            for fd in (self.fd, self.pidfd):
                if fd is not None:
                    try:
                        os.close(fd)
                    except OSError:
                        pass


class _Zygote:
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
            raise _WorkerDied(f"zygote socket broken: {e}") from e
        if not data:
            raise _WorkerDied("zygote exited")
        return json.loads(data), list(fds)

    def wait_ready(self, timeout_s: float) -> None:
        msg, _ = self._recv(time.monotonic() + timeout_s)
        if not msg.get("ready"):
            raise _WorkerDied(f"worker failed to start: {msg.get('error')}")

    def alive(self) -> bool:
        return not self._dead and self.proc.poll() is None

    def fork(self, deadline: float) -> _Worker:
        """A fresh warm worker (milliseconds). Raises _WorkerTimeout past ``deadline``."""
        if not self._fork_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise _WorkerTimeout
        try:
            self._next_id += 1
            rid = self._next_id
            try:
                self.sock.send(json.dumps({"op": "fork", "id": rid}).encode())
            except OSError as e:
                self._dead = True
                raise _WorkerDied(f"zygote socket broken: {e}") from e
            while True:
                try:
                    msg, fds = self._recv(deadline)
                except _WorkerDied:
                    self._dead = True
                    raise
                if msg.get("id") == rid and fds:
                    return _Worker(int(msg["pid"]), fds[0], self)
                if msg.get("id") == rid and "error" in msg:
                    raise _WorkerDied(str(msg["error"]))
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

    def close(self) -> None:
        """EOF on the control socket: the zygote kills its workers and exits; kill it if not."""
        self._dead = True
        try:
            self.sock.close()
        except OSError:
            pass
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
        self._dead = True
        try:
            self.sock.close()
        except OSError:
            pass
        self.proc.returncode = 0  # stop Popen.__del__ from trying to reap a stranger


class _Waiter:
    __slots__ = ("worker", "slot")

    def __init__(self) -> None:
        self.worker: _Worker | None = None
        self.slot = False  # allowed to fork a worker of its own


_LIVE: "weakref.WeakSet[Verifier]" = weakref.WeakSet()


class Verifier:
    """Thread-safe, time-bounded answer equivalence (see the module docstring).

    ``equivalent(a, b)`` treats ``b`` as the reference (math-verify's *gold*, which matters only
    for assignments and equations) and ``a`` as the prediction. Safe to call from any thread and
    from forked children (each process gets its own workers). Every call returns within
    ``config.call_deadline_s`` of entering, waiting for a worker included (plus the one-off
    zygote start).
    """

    def __init__(self, config: VerifierConfig | None = None, **overrides: Any) -> None:
        cfg = config or VerifierConfig()
        self.config: VerifierConfig = replace(cfg, **overrides) if overrides else cfg
        self._stats = VerifierStats()
        self._stats_lock = threading.Lock()
        self._cache = _LRU(self.config.cache_size)
        self._rel_tol = 10.0 ** -self.config.float_rounding
        self._pid = os.getpid()
        self._init_pool()
        self._last_log = -float("inf")
        _LIVE.add(self)

    def _init_pool(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[_Worker] = []
        self._busy: set[_Worker] = set()
        self._forking = 0
        self._demoted = 0  # busy workers past demote_after: they hold no slot
        self._waiters: deque[_Waiter] = deque()
        self._replace_debt = 0  # discarded workers not yet replaced (for worker_restarts)
        self._zygote: _Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._zygote_failures = 0
        self._startup_done_s = 0.0  # time spent in finished zygote starts
        self._startup_began: float | None = None  # a zygote start in progress since
        self._inflight: dict[tuple[str, str], _Flight] = {}
        self._inflight_lock = threading.Lock()

    # -- bookkeeping ----------------------------------------------------------------------
    @property
    def stats(self) -> VerifierStats:
        """A snapshot of the counters."""
        with self._stats_lock:
            return replace(self._stats)

    def _count(self, field: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self._stats, field, getattr(self._stats, field) + n)

    def _after_fork(self) -> None:
        # Locks may have been held by another thread at fork time; zygote and workers are the
        # parent's: drop our copies of their fds, never signal them.
        old = (list(self._idle), list(self._busy), self._zygote)
        self._stats_lock = threading.Lock()
        self._cache.reset_lock()
        self._init_pool()
        self._pid = os.getpid()
        for w in old[0] + old[1]:
            w.forget()
        if old[2] is not None:
            old[2].forget()

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            self._after_fork()

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """Pids of this process's live workers (idle and busy)."""
        if self._pid != os.getpid():
            return ()
        with self._cond:
            return tuple(sorted(w.pid for w in [*self._idle, *self._busy]))

    @property
    def zygote_pid(self) -> int | None:
        z = self._zygote
        return z.proc.pid if z is not None and self._pid == os.getpid() and z.alive() else None

    # -- the pool -------------------------------------------------------------------------
    def _startup_s(self) -> float:
        """Seconds spent starting zygotes so far: deadlines move on by what elapses of it while
        a call waits (the one-off start is bounded by startup_timeout_s, not the deadline)."""
        began = self._startup_began
        return self._startup_done_s + (time.monotonic() - began if began is not None else 0.0)

    def _get_zygote(self) -> _Zygote | None:
        """The live zygote, started if needed (bounded by startup_timeout_s, not the deadline)."""
        z = self._zygote
        if z is not None and z.alive():
            return z
        failures_seen = self._zygote_failures
        with self._zygote_lock:
            z = self._zygote
            if z is not None and z.alive():
                return z
            if self._zygote_failures != failures_seen:
                return None  # a start failed while we waited: do not stack another on top
            if z is not None:
                z.close()
                self._zygote = None
            self._startup_began = began = time.monotonic()
            try:
                return self._start_zygote()
            finally:
                self._startup_done_s += time.monotonic() - began
                self._startup_began = None

    def _start_zygote(self) -> _Zygote | None:
        """Start a zygote and wait until it is ready (caller holds ``_zygote_lock``)."""
        try:
            z = _Zygote(self.config)
        except OSError as e:
            self._zygote_failures += 1
            logger.warning("devenus.verify: cannot start the math-verify worker: %s", e)
            return None
        self._count("zygote_starts")
        try:
            z.wait_ready(self.config.startup_timeout_s)
        except (_WorkerTimeout, _WorkerDied, ValueError, OSError) as e:
            self._zygote_failures += 1
            logger.warning("devenus.verify: math-verify worker failed to start: %s", e or type(e).__name__)
            z.close()
            return None
        self._zygote = z
        return z

    def _fork_worker(self, deadline: float, startup0: float) -> tuple[_Worker | None, str, float]:
        """Fork a worker for a call that owns a fork slot; on failure hand the slot on.

        Returns the worker (or None and why) and the deadline, moved on by the zygote start time
        that elapsed since ``startup0`` (see ``_startup_s``)."""
        w: _Worker | None = None
        reason = ""
        try:
            z = self._get_zygote()
            deadline += self._startup_s() - startup0
            startup0 = self._startup_s()
            if z is None:
                reason = "worker start failed"
            else:
                try:
                    w = z.fork(deadline)
                except _WorkerTimeout:
                    reason = "no worker before the deadline"
                except (_WorkerDied, OSError, ValueError) as e:
                    reason = f"worker start failed ({e})"
        finally:
            with self._cond:
                self._forking -= 1
                if w is not None:
                    self._busy.add(w)
                    if self._replace_debt > 0:
                        self._replace_debt -= 1
                        self._count("worker_restarts")
                else:
                    self._hand_on_slot()
        if w is not None:
            self._count("worker_starts")
        return w, reason, deadline

    def _has_slot(self) -> bool:
        """May one more check start (caller holds ``_cond``)? Demoted checks hold no slot."""
        live = len(self._busy) + self._forking
        return live - self._demoted < self.config.workers and live < self.config.workers + self.config.max_demoted

    def _hand_on_slot(self) -> None:
        """A worker slot became free (caller holds ``_cond``): the oldest waiters may fork."""
        handed = False
        while self._waiters and self._has_slot():
            waiter = self._waiters.popleft()
            waiter.slot = True
            self._forking += 1
            handed = True
        if handed:
            self._cond.notify_all()

    def _on_demote(self, w: _Worker) -> None:
        with self._cond:
            if w in self._busy:
                self._demoted += 1
                self._hand_on_slot()

    def _leave_busy(self, w: _Worker) -> bool:
        """Take ``w`` out of the busy set (caller holds ``_cond``); False if it was not there."""
        if w not in self._busy:
            return False
        self._busy.discard(w)
        if w.demoted:
            self._demoted -= 1
        return True

    def _acquire(self, deadline: float) -> tuple[_Worker | None, str, float]:
        """A worker for this call (or None and why), and the call's possibly moved deadline."""
        startup0 = self._startup_s()
        while True:
            fork = False
            with self._cond:
                if self._idle:
                    w = self._idle.pop()
                    self._busy.add(w)
                elif self._has_slot():
                    self._forking += 1
                    fork = True
                    w = None
                else:
                    waiter = _Waiter()
                    self._waiters.append(waiter)  # FIFO: a freed worker goes to the oldest call
                    while waiter.worker is None and not waiter.slot:
                        remaining = deadline + self._startup_s() - startup0 - time.monotonic()
                        if remaining <= 0:
                            self._waiters.remove(waiter)
                            return None, "no worker before the deadline", deadline
                        self._cond.wait(remaining)
                    w = waiter.worker
                    fork = waiter.slot
            deadline += self._startup_s() - startup0
            startup0 = self._startup_s()
            if fork:
                return self._fork_worker(deadline, startup0)
            assert w is not None
            if w.idle_and_alive():
                return w, "", deadline
            self._discard(w)  # died while idle (OOM killer, external kill): replace it

    def _release(self, w: _Worker) -> None:
        if w.demoted:  # its priority cannot be raised again: swap it for a fresh fork
            w.retire()
            with self._cond:
                self._leave_busy(w)
                self._hand_on_slot()
            return
        with self._cond:
            if self._waiters:
                self._waiters.popleft().worker = w  # stays busy: handed straight on
                self._cond.notify_all()
            else:
                self._leave_busy(w)
                self._idle.append(w)

    def _discard(self, w: _Worker) -> None:
        w.kill()
        with self._cond:
            if self._leave_busy(w):
                self._replace_debt += 1
            self._hand_on_slot()

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> bool:
        """Start the zygote and one idle worker now (otherwise the first symbolic check does).
        True when a worker is ready."""
        self._check_pid()
        w, _, _ = self._acquire(time.monotonic() + max(self.config.call_deadline_s, 5.0))
        if w is None:
            self._count("errors")
            return False
        self._release(w)
        return True

    def close(self, wait_s: float | None = None) -> None:
        """Stop the workers and the zygote (they restart lazily if the verifier is used again).

        ``wait_s`` bounds the wait for checks in flight on other threads; past it their workers
        are killed under them (those checks return undecided). ``None`` waits for them.
        """
        if self._pid != os.getpid():
            return  # a forked child must not touch its parent's workers
        end = None if wait_s is None else time.monotonic() + wait_s
        with self._cond:
            idle, self._idle = self._idle, []
        for w in idle:
            w.retire()
        with self._cond:
            while self._busy or self._forking:
                remaining = None if end is None else end - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._cond.wait(remaining)
            busy = list(self._busy)
            idle, self._idle = self._idle, []
        for w in busy:
            w.kill()
        for w in idle:
            w.retire()
        with self._zygote_lock:
            z, self._zygote = self._zygote, None
        if z is not None:
            z.close()

    # -- one symbolic check ---------------------------------------------------------------
    def _check(self, op: str, a: str, b: str, deadline: float) -> tuple[bool | None, str]:
        """Run one op in a worker before ``deadline``: (result, "") or (None, why undecided)."""
        self._check_pid()
        w, reason, deadline = self._acquire(deadline)
        if w is None:
            self._count("errors" if reason.startswith("worker start failed") else "queue_timeouts")
            return None, reason
        bound = min(self.config.timeout_s, deadline - time.monotonic())
        if bound <= 0:  # the deadline passed before the check could start: keep the worker
            self._release(w)
            self._count("queue_timeouts")
            return None, "no worker before the deadline"
        frac = self.config.demote_after
        try:
            msg = w.call(op, a, b, bound, None if frac is None else frac * self.config.timeout_s, self._on_demote)
        except _WorkerTimeout:
            self._count("timeouts")
            self._discard(w)
            return None, f"timeout after {bound:.2f} s"
        except (_WorkerDied, ValueError, OSError) as e:
            self._count("errors")
            self._discard(w)
            return None, f"worker died ({e})"
        self._release(w)
        if not msg.get("ok"):
            self._count("errors")
            return None, f"worker error ({msg.get('error')})"
        return bool(msg.get("result")), ""

    def _worker_call(self, op: str, a: str, b: str) -> bool | None:
        """One op in a worker under the call deadline: the boolean, or None when undecided."""
        return self._check(op, a, b, time.monotonic() + self.config.call_deadline_s)[0]

    def _undecided(self, a: str, b: str, reason: str) -> None:
        self._count("undecided")
        now = time.monotonic()
        with self._stats_lock:
            due = now - self._last_log >= self.config.log_interval_s
            if due:
                self._last_log = now
            n = self._stats.undecided
        if due:
            logger.warning(
                "devenus.verify: undecided check, %s: pred %r vs target %r scored not equivalent and "
                "not cached (%d undecided so far in this process; see Verifier.stats)",
                reason,
                a[:80],
                b[:80],
                n,
            )

    # -- the check --------------------------------------------------------------------------
    def equivalent(self, a: str | None, b: str | None) -> bool:
        """Is answer ``a`` equivalent to reference answer ``b``? Never raises for string inputs;
        an undecided symbolic check (timeout, error, no worker before the deadline) counts as
        "not equivalent" for this call only: it is not cached, and is counted and logged."""
        deadline = time.monotonic() + self.config.call_deadline_s
        self._count("checks")
        if a is None or b is None:
            return False
        forms = self._screen(str(a), str(b))  # str: tolerate numeric ground truths
        if isinstance(forms, bool):
            return forms
        na, nb = forms
        decided = self._decide_cheaply(na, nb)
        if decided is not None:
            return decided
        self._count("mathverify_calls")
        result, reason = self._shared_check(forms, deadline)
        if result is None:
            self._undecided(na, nb, reason)
            return False
        self._cache.put(forms, result)
        return result

    def _screen(self, a: str, b: str) -> bool | tuple[str, str]:
        """The decision of the checks on the raw strings (an unmatchable or oversize input, a multiple-choice
        target, an empty form, different variables under ``strict``) when one decides; else the two
        normalised forms."""
        if a.strip() == UNMATCHABLE or b.strip() == UNMATCHABLE:
            return False
        limit = self.config.max_input_chars
        if len(a) > limit or len(b) > limit:
            self._count("oversize")
            return False
        letter = target_letter(b)
        if letter is not None:
            # A multiple-choice target: "(C)", "\\text{C}", "option C" and "c" all name C.
            self._count("choice_hits")
            return choice_letter(a) == letter
        # A percent sign is a unit, as math-verify reads "28\\%": 28% ~ 28, never 0.28.
        na, nb = drop_percent(normalize(a)), drop_percent(normalize(b))
        if not na or not nb:
            return False
        if self.config.strict:
            va, vb = assigned_variable(a), assigned_variable(b)
            if va is not None and vb is not None and _var_key(va) != _var_key(vb):
                self._count("exact_hits")
                return False  # x = 3 is not y = 3 (strict=False matches variables by position)
        return na, nb

    def _decide_cheaply(self, na: str, nb: str) -> bool | None:
        """The checks on the normalised forms, cheapest first: equal strings, booleans, the cache, two
        numbers, numeric evaluation, structure. None: only the symbolic check in a worker decides."""
        cfg = self.config
        if na == nb:
            self._count("exact_hits")
            return True
        if na in _BOOLEANS or nb in _BOOLEANS:
            self._count("exact_hits")
            return False  # true is neither false nor 1
        cached = self._cache.get((na, nb))
        if cached is not None:
            self._count("cache_hits")
            return bool(cached)
        xa, xb = parse_number(na), parse_number(nb)
        if xa is not None and xb is not None:
            self._count("numeric_hits")
            return numbers_equal(xa, xb, cfg.float_rounding)
        if (xa is not None and is_list(nb)) or (xb is not None and is_list(na)):
            self._count("numeric_hits")
            return False  # a list never equals a single number ("32, 349" vs 32349)
        if cfg.numeric_eval:
            decided = decide(na, nb, rel_tol=self._rel_tol, strict=cfg.strict)
            if decided is not None:
                self._count("eval_hits")
                return decided
        decided = decide_structure(na, nb, cfg.float_rounding, cfg.strict)
        if decided is not None:
            self._count("structure_hits")
        return decided

    def _shared_check(self, key: tuple[str, str], deadline: float) -> tuple[bool | None, str]:
        """One worker check per pair at a time: identical concurrent checks wait for the first."""
        self._check_pid()
        with self._inflight_lock:
            flight = self._inflight.get(key)
            leader = flight is None
            if leader:
                flight = self._inflight[key] = _Flight()
        assert flight is not None
        if not leader:
            self._count("shared_hits")
            startup0 = self._startup_s()
            while True:  # the leader's deadline moves on while a zygote starts; so does ours
                remaining = deadline + self._startup_s() - startup0 - time.monotonic()
                if flight.done.wait(max(0.0, remaining)):
                    return flight.result
                if deadline + self._startup_s() - startup0 - time.monotonic() <= 0:
                    return None, "no answer before the deadline from an identical check in flight"
        try:
            flight.result = self._check("verify", key[0], key[1], deadline)
        finally:
            with self._inflight_lock:
                self._inflight.pop(key, None)
            flight.done.set()
        return flight.result

    def __call__(self, a: str | None, b: str | None) -> bool:
        return self.equivalent(a, b)


class _Flight:
    __slots__ = ("done", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: tuple[bool | None, str] = (None, "identical check in flight failed")


def _close_all() -> None:
    # At interpreter exit: never wait for a check that a (daemon) thread left in flight.
    for v in list(_LIVE):
        try:
            v.close(wait_s=0.1)
        except Exception:  # interpreter is exiting; never block it
            pass


def _after_fork_in_child() -> None:
    global _DEFAULT_LOCK
    _DEFAULT_LOCK = threading.Lock()  # may have been held by another thread at fork time
    for v in list(_LIVE):
        v._after_fork()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_DEFAULT: Verifier | None = None
_DEFAULT_PID: int | None = None
_DEFAULT_LOCK = threading.Lock()


def _env_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected one of 1/0, true/false, yes/no, on/off, got {raw!r}")


#: the environment variables that set the default verifier's config: variable -> (field, parser). Every
#: process that grades must see the same values (a GPU run carries them to its Ray workers).
VERIFY_ENV = {
    "DEVENUS_VERIFY_TIMEOUT_S": ("timeout_s", float),
    "DEVENUS_VERIFY_DEADLINE_S": ("deadline_s", float),
    "DEVENUS_VERIFY_WORKERS": ("max_workers", int),
    "DEVENUS_VERIFY_FLOAT_ROUNDING": ("float_rounding", int),
    "DEVENUS_VERIFY_STRICT": ("strict", _env_bool),
}


def _default_config() -> VerifierConfig:
    cfg = VerifierConfig()
    for var, (field, kind) in VERIFY_ENV.items():
        raw = os.environ.get(var)
        if raw:
            try:
                cfg = replace(cfg, **{field: kind(raw)})
            except ValueError as e:
                raise ValueError(f"environment variable {var}={raw!r}: {e}") from None
    return cfg


def get_default_verifier() -> Verifier:
    """The per-process shared :class:`Verifier` (created lazily; a forked child gets its own).

    Environment: ``DEVENUS_VERIFY_TIMEOUT_S`` (check bound), ``DEVENUS_VERIFY_DEADLINE_S`` (call
    deadline, default 1.75 times the bound), ``DEVENUS_VERIFY_WORKERS`` (worker processes),
    ``DEVENUS_VERIFY_FLOAT_ROUNDING`` and ``DEVENUS_VERIFY_STRICT`` (the comparison options). Every
    reward, evaluation and vote that does not pass its own verifier uses this one, so these variables
    set the policy for training (Ray workers inherit the launching environment) and evaluation alike.
    """
    global _DEFAULT, _DEFAULT_PID
    pid = os.getpid()
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT_PID != pid:
            _DEFAULT = Verifier(_default_config())
            _DEFAULT_PID = pid
        return _DEFAULT
