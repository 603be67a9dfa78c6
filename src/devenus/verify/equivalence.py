"""Answer equivalence with a hard wall-clock bound on every symbolic check.

``Verifier.equivalent(a, b)`` tries, in order: identical normalised strings, the exact numeric fast
path, a bounded pair cache, and finally math-verify (``parse`` + ``verify``) in a persistent worker
process.

Why a worker process: math-verify bounds its own work with ``signal.alarm``, which only works on the
main thread of the main interpreter; verl calls reward functions from a thread pool and inside Ray
actors, where it raises. A sympy computation cannot be interrupted from another thread either, so the
only reliable bound is a separate process that the parent kills (SIGKILL) when it overruns. The
worker is a fresh interpreter started with ``subprocess`` (exec, i.e. spawn semantics: safe to start
from any thread and from forked children, and it never re-imports the caller's ``__main__``); it is
kept alive between checks so the sympy import cost is paid once, and restarted lazily after a kill.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .normalize import normalize, parse_number
from .numeval import decide

__all__ = ["Verifier", "VerifierConfig", "VerifierStats", "get_default_verifier"]

_WORKER_SCRIPT = str(Path(__file__).with_name("_worker.py"))


@dataclass(frozen=True)
class VerifierConfig:
    """Configuration of a :class:`Verifier`.

    Attributes:
        timeout_s: wall-clock bound of one math-verify check (parse of both sides + verify).
        startup_timeout_s: bound on starting the worker (interpreter + sympy import + warm-up).
        cache_size: entries of the (normalised pair) -> result LRU cache.
        cache_failures: also cache timeouts/errors as False, so a pathological pair costs one
            timeout per process instead of one per occurrence.
        max_input_chars: longer inputs are "not equivalent" without a symbolic check.
        numeric_eval: before math-verify, evaluate both sides at a fixed point with the safe
            evaluator of :mod:`.numeval`: clearly different values decide "not equivalent",
            equal values of moderate constant expressions decide "equivalent".
        float_rounding / numeric_precision / strict: passed to ``math_verify.verify``.
        memory_limit_mb: address-space limit of the worker (0 = none); stops a runaway
            ``10^{10^{10}}`` from eating the host's memory before the timeout fires.
        python_executable: interpreter for the worker (default ``sys.executable``).
    """

    timeout_s: float = 2.0
    startup_timeout_s: float = 60.0
    cache_size: int = 100_000
    cache_failures: bool = True
    max_input_chars: int = 10_000
    numeric_eval: bool = True
    float_rounding: int = 6
    numeric_precision: int = 15
    strict: bool = True
    memory_limit_mb: int = 4096
    python_executable: str | None = None


@dataclass
class VerifierStats:
    """Counters of a :class:`Verifier` (a snapshot is returned by ``Verifier.stats``).

    ``checks``: calls of ``equivalent``; ``exact_hits``: decided by identical normalised strings;
    ``numeric_hits``: decided by the numeric fast path (equal, or unequal exact numbers);
    ``eval_hits``: decided by the safe point evaluation (:mod:`.numeval`);
    ``cache_hits``: answered from the pair cache; ``mathverify_calls``: sent to the worker;
    ``timeouts``: worker killed for overrunning ``timeout_s``; ``errors``: worker-side exceptions,
    crashes, failed starts; ``worker_restarts``: workers started after the first one;
    ``oversize``: inputs over ``max_input_chars``.
    """

    checks: int = 0
    exact_hits: int = 0
    numeric_hits: int = 0
    eval_hits: int = 0
    cache_hits: int = 0
    mathverify_calls: int = 0
    timeouts: int = 0
    errors: int = 0
    worker_restarts: int = 0
    oversize: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


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
    # The worker must import math_verify exactly as this process does: hand it our sys.path.
    env = dict(os.environ)
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


class _WorkerProcess:
    """One worker interpreter and its line-based JSON pipe (not thread-safe: the Verifier locks)."""

    def __init__(self, cfg: VerifierConfig) -> None:
        opts = {
            "float_rounding": cfg.float_rounding,
            "numeric_precision": cfg.numeric_precision,
            "strict": cfg.strict,
            "memory_limit_mb": cfg.memory_limit_mb,
        }
        exe = cfg.python_executable or sys.executable
        self.proc = subprocess.Popen(
            [exe, "-u", _WORKER_SCRIPT, json.dumps(opts)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_child_env(),
            close_fds=True,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._in, False)
        self._buf = bytearray()
        self._next_id = 0
        self.ready = False

    def _wait(self, fd: int, event: int, deadline: float) -> None:
        # poll(), not select(): file descriptors above 1024 are common in Ray workers.
        poller = select.poll()
        poller.register(fd, event | select.POLLERR | select.POLLHUP)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _WorkerTimeout
            if poller.poll(remaining * 1000.0):
                return

    def _read_line(self, deadline: float) -> dict[str, Any]:
        while True:
            i = self._buf.find(b"\n")
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 1]
                return json.loads(line)
            self._wait(self._out, select.POLLIN, deadline)
            chunk = os.read(self._out, 65536)
            if not chunk:
                raise _WorkerDied("worker closed its output")
            self._buf += chunk

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            self._wait(self._in, select.POLLOUT, deadline)
            try:
                n = os.write(self._in, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError) as e:
                raise _WorkerDied(f"worker pipe broken: {e}") from e
            view = view[n:]

    def wait_ready(self, timeout_s: float) -> None:
        msg = self._read_line(time.monotonic() + timeout_s)
        if not msg.get("ready"):
            raise _WorkerDied(f"worker failed to start: {msg.get('error')}")
        self.ready = True

    def call(self, op: str, a: str, b: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        self._next_id += 1
        rid = self._next_id
        req = json.dumps({"id": rid, "op": op, "a": a, "b": b}).encode() + b"\n"
        self._write(req, deadline)
        while True:
            msg = self._read_line(deadline)
            if msg.get("id") == rid:
                return msg

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.close_pipes()

    def close(self) -> None:
        """Polite shutdown: EOF on stdin lets the worker exit; kill if it does not."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            self.kill()
        self.close_pipes()

    def close_pipes(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def forget(self) -> None:
        """After fork: the worker belongs to the parent. Drop our copy of the pipes, never kill."""
        self.close_pipes()
        self.proc.returncode = 0  # stop Popen.__del__ from trying to reap a stranger


_LIVE: "weakref.WeakSet[Verifier]" = weakref.WeakSet()


class Verifier:
    """Thread-safe, time-bounded answer equivalence (see the module docstring).

    ``equivalent(a, b)`` treats ``b`` as the reference (math-verify's *gold*, which matters only
    for assignments and equations) and ``a`` as the prediction. Safe to call from any thread and
    from forked children (each process gets its own worker). Checks through the worker are
    serialised by a lock; the bound applies from the moment a check holds the lock.
    """

    def __init__(self, config: VerifierConfig | None = None, **overrides: Any) -> None:
        cfg = config or VerifierConfig()
        self.config: VerifierConfig = replace(cfg, **overrides) if overrides else cfg
        self._stats = VerifierStats()
        self._stats_lock = threading.Lock()
        self._lock = threading.Lock()
        self._cache = _LRU(self.config.cache_size)
        self._worker: _WorkerProcess | None = None
        self._started_once = False
        self._pid = os.getpid()
        _LIVE.add(self)

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
        # Locks may have been held by another thread at fork time; the worker is the parent's.
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._cache.reset_lock()
        if self._worker is not None:
            self._worker.forget()
        self._worker = None
        self._started_once = False
        self._pid = os.getpid()

    def _check_pid(self) -> None:
        if self._pid != os.getpid():
            self._after_fork()

    # -- worker lifecycle -----------------------------------------------------------------
    def _ensure_worker(self) -> _WorkerProcess:
        """Start (or restart) the worker and wait until it is ready. Caller holds ``_lock``."""
        if self._worker is not None:
            if self._worker.proc.poll() is None:
                return self._worker
            self._worker.kill()  # died while idle (OOM killer, external kill): replace it
            self._worker = None
        if self._started_once:
            self._count("worker_restarts")
        self._started_once = True
        w = _WorkerProcess(self.config)
        try:
            w.wait_ready(self.config.startup_timeout_s)
        except (_WorkerTimeout, _WorkerDied, ValueError):
            w.kill()
            raise
        self._worker = w
        return w

    def start(self) -> bool:
        """Start the worker now (otherwise the first symbolic check does). True when ready."""
        self._check_pid()
        with self._lock:
            try:
                self._ensure_worker()
                return True
            except (_WorkerTimeout, _WorkerDied, ValueError, OSError):
                self._count("errors")
                return False

    def close(self, wait_s: float | None = None) -> None:
        """Stop the worker (it restarts lazily if the verifier is used again).

        ``wait_s`` bounds the wait for a check in flight on another thread; past it the worker
        is killed under that check (which then returns False). ``None`` waits for it.
        """
        if self._pid != os.getpid():
            return  # a forked child must not touch its parent's worker
        if not self._lock.acquire(timeout=-1 if wait_s is None else wait_s):
            w = self._worker
            if w is not None:
                w.proc.kill()
            return
        try:
            if self._worker is not None:
                self._worker.close()
                self._worker = None
        finally:
            self._lock.release()

    @property
    def worker_pid(self) -> int | None:
        w = self._worker
        return w.proc.pid if w is not None and self._pid == os.getpid() else None

    def _worker_call(self, op: str, a: str, b: str) -> bool | None:
        """Run one op in the worker under the wall-clock bound.

        Returns the worker's boolean, or ``None`` on timeout (worker killed), crash or error.
        """
        self._check_pid()
        with self._lock:
            try:
                w = self._ensure_worker()
            except (_WorkerTimeout, _WorkerDied, ValueError, OSError):
                self._count("errors")
                return None
            try:
                msg = w.call(op, a, b, self.config.timeout_s)
            except _WorkerTimeout:
                self._count("timeouts")
                w.kill()
                self._worker = None
                return None
            except (_WorkerDied, ValueError, OSError):
                self._count("errors")
                w.kill()
                self._worker = None
                return None
        if not msg.get("ok"):
            self._count("errors")
            return None
        return bool(msg.get("result"))

    # -- the check --------------------------------------------------------------------------
    def equivalent(self, a: str | None, b: str | None) -> bool:
        """Is answer ``a`` equivalent to reference answer ``b``? Never raises for string inputs;
        a timeout or error in the symbolic check counts as "not equivalent"."""
        self._count("checks")
        if a is None or b is None:
            return False
        a, b = str(a), str(b)  # tolerate numeric ground truths
        limit = self.config.max_input_chars
        if len(a) > limit or len(b) > limit:
            self._count("oversize")
            return False
        na, nb = normalize(a), normalize(b)
        if not na or not nb:
            return False
        if na == nb:
            self._count("exact_hits")
            return True
        key = (na, nb)
        cached = self._cache.get(key)
        if cached is not None:
            self._count("cache_hits")
            return bool(cached)
        xa, xb = parse_number(na), parse_number(nb)
        if xa is not None and xb is not None:
            if xa.value == xb.value:
                self._count("numeric_hits")
                return True
            if xa.exact and xb.exact:
                # Two different exact numbers: nothing symbolic can make them equal. Decimals fall
                # through, because math-verify accepts rounded answers (0.333333 ~ 1/3).
                self._count("numeric_hits")
                return False
        if self.config.numeric_eval:
            decided = decide(na, nb)
            if decided is not None:
                self._count("eval_hits")
                return decided
        self._count("mathverify_calls")
        result = self._worker_call("verify", na, nb)
        if result is not None or self.config.cache_failures:
            self._cache.put(key, bool(result))
        return bool(result)

    def __call__(self, a: str | None, b: str | None) -> bool:
        return self.equivalent(a, b)


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


def _default_config() -> VerifierConfig:
    cfg = VerifierConfig()
    env_timeout = os.environ.get("DEVENUS_VERIFY_TIMEOUT_S")
    if env_timeout:
        cfg = replace(cfg, timeout_s=float(env_timeout))
    return cfg


def get_default_verifier() -> Verifier:
    """The per-process shared :class:`Verifier` (created lazily; a forked child gets its own).

    Its timeout can be set with the ``DEVENUS_VERIFY_TIMEOUT_S`` environment variable.
    """
    global _DEFAULT, _DEFAULT_PID
    pid = os.getpid()
    with _DEFAULT_LOCK:
        if _DEFAULT is None or _DEFAULT_PID != pid:
            _DEFAULT = Verifier(_default_config())
            _DEFAULT_PID = pid
        return _DEFAULT
