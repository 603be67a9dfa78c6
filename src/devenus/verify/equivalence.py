"""Answer equivalence with a hard wall-clock bound on every call, queueing included.

``Verifier.equivalent(a, b)`` tries, in order: the option letter when the reference ``b`` is a
multiple-choice letter (:mod:`.choice`), identical normalised strings, a bounded pair cache, the exact
numeric fast path, the safe point evaluation, the exact structural comparison (:mod:`.structure`:
sets, intervals, matrices, polynomial equations of plain numbers), and finally math-verify (``parse`` + ``verify``) in a
worker process: :mod:`.workers` says why processes and how they start, :mod:`.pool` how a call gets one
before its deadline, :mod:`.config` what can be set.

Undecided results (timeout, worker error, no worker before the deadline) count as "not equivalent"
for that call only: they are never cached, counted in ``stats.undecided`` and logged.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from typing import Any

from .choice import choice_letter, target_letter
from .config import VerifierConfig, default_config
from .normalize import assigned_variable, drop_percent, is_list, normalize, numbers_equal, parse_number
from .numeval import decide
from .pool import WorkerPool
from .structure import decide_structure

__all__ = ["UNMATCHABLE", "Verifier", "VerifierConfig", "VerifierStats", "get_default_verifier", "numbers_equal"]

#: A target no answer is ever equivalent to: the OLR reference's inactive-noise label (ShenzhiYang2000/OLR
#: writes it as the noisy rows' ground truth). Refused before any normalisation, so a response that happens
#: to write it (``\boxed{__NoCorrectAnswer__}``) still scores 0.
UNMATCHABLE = "__NoCorrectAnswer__"

logger = logging.getLogger("devenus.verify")


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
        cfg = replace(cfg, **overrides) if overrides else cfg
        self._stats = VerifierStats()
        self._stats_lock = threading.Lock()
        self._cache = _LRU(cfg.cache_size)
        self._rel_tol = 10.0 ** -cfg.float_rounding
        self._pool = WorkerPool(cfg, self._count)
        self._inflight: dict[tuple[str, str], _Flight] = {}
        self._inflight_lock = threading.Lock()
        self._last_log = -float("inf")
        _LIVE.add(self)

    @property
    def config(self) -> VerifierConfig:
        """The configuration; the pool holds it, so one assigned here bounds the next worker check."""
        return self._pool.config

    @config.setter
    def config(self, config: VerifierConfig) -> None:
        self._pool.config = config

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
        # parent's (the pool drops its copies of their fds, never signals them).
        self._stats_lock = threading.Lock()
        self._cache.reset_lock()
        self._inflight = {}
        self._inflight_lock = threading.Lock()
        self._pool.after_fork()

    def _check_pid(self) -> None:
        if self._pool.pid != os.getpid():
            self._after_fork()

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """Pids of this process's live workers (idle and busy)."""
        return self._pool.worker_pids

    @property
    def zygote_pid(self) -> int | None:
        return self._pool.zygote_pid

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> bool:
        """Start the zygote and one idle worker now (otherwise the first symbolic check does).
        True when a worker is ready."""
        self._check_pid()
        return self._pool.start()

    def close(self, wait_s: float | None = None) -> None:
        """Stop the workers and the zygote (they restart lazily if the verifier is used again).

        ``wait_s`` bounds the wait for checks in flight on other threads; past it their workers
        are killed under them (those checks return undecided). ``None`` waits for them.
        """
        self._pool.close(wait_s)

    # -- one symbolic check ---------------------------------------------------------------
    def _check(self, op: str, a: str, b: str, deadline: float) -> tuple[bool | None, str]:
        """Run one op in a worker before ``deadline``: (result, "") or (None, why undecided)."""
        self._check_pid()
        return self._pool.check(op, a, b, deadline)

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
            startup0 = self._pool.startup_s()
            while True:  # the leader's deadline moves on while a zygote starts; so does ours
                remaining = deadline + self._pool.startup_s() - startup0 - time.monotonic()
                if flight.done.wait(max(0.0, remaining)):
                    return flight.result
                if deadline + self._pool.startup_s() - startup0 - time.monotonic() <= 0:
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
            _DEFAULT = Verifier(default_config())
            _DEFAULT_PID = pid
        return _DEFAULT
