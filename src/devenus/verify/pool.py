"""The pool of math-verify workers behind a per-call deadline: who gets a worker, who may fork one, and
what happens to a check that overruns.

Why a pool behind a deadline: with one worker behind one lock, an ordinary check queues behind
every pathological one ahead of it (each costs a full bound, then a restart), so latency under
concurrency had no bound at all. Here each call gets a deadline when it enters (``deadline_s``,
default 1.75 ``timeout_s``) that covers waiting for a worker as well as the check; up to
``max_workers`` workers run checks side by side, a freed worker goes to the longest-waiting call,
and a call still without a worker at its deadline gives up (undecided) instead of queueing on.
A check that has burnt ``demote_after`` of its bound in CPU time is probably a runaway: its worker
drops in CPU priority and gives its slot to the next call, so fresh checks neither queue nor
compete for the CPU behind it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable

from .config import VerifierConfig
from .workers import Worker, WorkerDied, WorkerTimeout, Zygote

__all__ = ["WorkerPool"]

logger = logging.getLogger("devenus.verify")


class _Waiter:
    __slots__ = ("worker", "slot")

    def __init__(self) -> None:
        self.worker: Worker | None = None
        self.slot = False  # allowed to fork a worker of its own


class WorkerPool:
    """Workers for one-op checks under a deadline, for one process (see the module docstring).

    ``count(field)`` adds one to a :class:`~devenus.verify.equivalence.VerifierStats` counter (the pool's
    owner keeps the counters). After a fork the pool belongs to the parent: the owner calls
    ``after_fork`` before using it (``pid`` says which process the pool is for).
    """

    def __init__(self, config: VerifierConfig, count: Callable[[str], None]) -> None:
        self.config = config
        self._count = count
        self.pid = os.getpid()
        self._init_pool()

    def _init_pool(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[Worker] = []
        self._busy: set[Worker] = set()
        self._forking = 0
        self._demoted = 0  # busy workers past demote_after: they hold no slot
        self._waiters: deque[_Waiter] = deque()
        self._replace_debt = 0  # discarded workers not yet replaced (for worker_restarts)
        self._zygote: Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._zygote_failures = 0
        self._startup_done_s = 0.0  # time spent in finished zygote starts
        self._startup_began: float | None = None  # a zygote start in progress since

    def after_fork(self) -> None:
        """In a forked child: a fresh empty pool. The zygote and workers are the parent's: drop our copies
        of their fds, never signal them (locks may have been held by another thread at fork time)."""
        old = (list(self._idle), list(self._busy), self._zygote)
        self._init_pool()
        self.pid = os.getpid()
        for w in old[0] + old[1]:
            w.forget()
        if old[2] is not None:
            old[2].forget()

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """Pids of this process's live workers (idle and busy)."""
        if self.pid != os.getpid():
            return ()
        with self._cond:
            return tuple(sorted(w.pid for w in [*self._idle, *self._busy]))

    @property
    def zygote_pid(self) -> int | None:
        z = self._zygote
        return z.proc.pid if z is not None and self.pid == os.getpid() and z.alive() else None

    def startup_s(self) -> float:
        """Seconds spent starting zygotes so far: deadlines move on by what elapses of it while
        a call waits (the one-off start is bounded by startup_timeout_s, not the deadline)."""
        began = self._startup_began
        return self._startup_done_s + (time.monotonic() - began if began is not None else 0.0)

    def _get_zygote(self) -> Zygote | None:
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

    def _start_zygote(self) -> Zygote | None:
        """Start a zygote and wait until it is ready (caller holds ``_zygote_lock``)."""
        try:
            z = Zygote(self.config)
        except OSError as e:
            self._zygote_failures += 1
            logger.warning("devenus.verify: cannot start the math-verify worker: %s", e)
            return None
        self._count("zygote_starts")
        try:
            z.wait_ready(self.config.startup_timeout_s)
        except (WorkerTimeout, WorkerDied, ValueError, OSError) as e:
            self._zygote_failures += 1
            logger.warning("devenus.verify: math-verify worker failed to start: %s", e or type(e).__name__)
            z.close()
            return None
        self._zygote = z
        return z

    def _fork_worker(self, deadline: float, startup0: float) -> tuple[Worker | None, str, float]:
        """Fork a worker for a call that owns a fork slot; on failure hand the slot on.

        Returns the worker (or None and why) and the deadline, moved on by the zygote start time
        that elapsed since ``startup0`` (see ``startup_s``)."""
        w: Worker | None = None
        reason = ""
        try:
            z = self._get_zygote()
            deadline += self.startup_s() - startup0
            startup0 = self.startup_s()
            if z is None:
                reason = "worker start failed"
            else:
                try:
                    w = z.fork(deadline)
                except WorkerTimeout:
                    reason = "no worker before the deadline"
                except (WorkerDied, OSError, ValueError) as e:
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

    def _on_demote(self, w: Worker) -> None:
        with self._cond:
            if w in self._busy:
                self._demoted += 1
                self._hand_on_slot()

    def _leave_busy(self, w: Worker) -> bool:
        """Take ``w`` out of the busy set (caller holds ``_cond``); False if it was not there."""
        if w not in self._busy:
            return False
        self._busy.discard(w)
        if w.demoted:
            self._demoted -= 1
        return True

    def _acquire(self, deadline: float) -> tuple[Worker | None, str, float]:
        """A worker for this call (or None and why), and the call's possibly moved deadline."""
        startup0 = self.startup_s()
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
                        remaining = deadline + self.startup_s() - startup0 - time.monotonic()
                        if remaining <= 0:
                            self._waiters.remove(waiter)
                            return None, "no worker before the deadline", deadline
                        self._cond.wait(remaining)
                    w = waiter.worker
                    fork = waiter.slot
            deadline += self.startup_s() - startup0
            startup0 = self.startup_s()
            if fork:
                return self._fork_worker(deadline, startup0)
            assert w is not None
            if w.idle_and_alive():
                return w, "", deadline
            self._discard(w)  # died while idle (OOM killer, external kill): replace it

    def _release(self, w: Worker) -> None:
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

    def _discard(self, w: Worker) -> None:
        w.kill()
        with self._cond:
            if self._leave_busy(w):
                self._replace_debt += 1
            self._hand_on_slot()

    def start(self) -> bool:
        """Start the zygote and one idle worker now (otherwise the first symbolic check does).
        True when a worker is ready."""
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
        if self.pid != os.getpid():
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

    def check(self, op: str, a: str, b: str, deadline: float) -> tuple[bool | None, str]:
        """Run one op in a worker before ``deadline``: (result, "") or (None, why undecided)."""
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
        except WorkerTimeout:
            self._count("timeouts")
            self._discard(w)
            return None, f"timeout after {bound:.2f} s"
        except (WorkerDied, ValueError, OSError) as e:
            self._count("errors")
            self._discard(w)
            return None, f"worker died ({e})"
        self._release(w)
        if not msg.get("ok"):
            self._count("errors")
            return None, f"worker error ({msg.get('error')})"
        return bool(msg.get("result")), ""

