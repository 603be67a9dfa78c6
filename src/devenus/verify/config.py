"""The :class:`~devenus.verify.equivalence.Verifier`'s configuration, and the environment variables that set
the default verifier's."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

__all__ = ["VERIFY_ENV", "VerifierConfig", "default_config"]


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


def default_config() -> VerifierConfig:
    cfg = VerifierConfig()
    for var, (field, kind) in VERIFY_ENV.items():
        raw = os.environ.get(var)
        if raw:
            try:
                cfg = replace(cfg, **{field: kind(raw)})
            except ValueError as e:
                raise ValueError(f"environment variable {var}={raw!r}: {e}") from None
    return cfg

