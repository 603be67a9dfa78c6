"""Skipping prompts before rollout from their reward history (GRESO's rule, arXiv 2506.02177), verl-free.

A prompt whose last visits all gave a zero-variance group of the same kind (all rollouts right: *easy*;
all wrong: *hard*) is likely to give one again, and GRPO learns nothing from it. GRESO skips such a prompt
with a probability that grows with the streak but always keeps exploring, and adapts the exploration
probabilities so the step's share of zero-variance groups tracks a target (docs/sampling/skipping.md):

    streak(x)  = consecutive most recent visits of x with a zero-variance group of one kind c(x)
    P(skip x)  = 1 - max(p_c ** streak(x), min_explore)          (0 without a streak)
    after each step with skip candidates, for c in {easy, hard}:
    p_c       <- clip(p_c - step_size, min_p, max_p)  if share_c >= target_c  else  clip(p_c + step_size, ...)
    target_easy = target_zero_variance * easy_target_share,  target_hard = target_zero_variance - target_easy

Source: Infini-AI-Lab/GRESO ``verl/trainer/ttis/presampling_selector.py`` (``easy_probabilistic_skip``,
``hard_probabilistic_skip``: ``1 - max(p ** count, 0.01)``) and ``verl/trainer/ppo/ray_trainer.py``
(targets ``target_zero_variance / 3`` and ``* 2 / 3``, steps of 0.01 within [0.05, 0.95], defaults
``p_easy = p_hard = 0.5``, ``target_zero_variance = 0.25`` in ``train-scripts/*_greso.sh``).

Differences from GRESO, each for DE-Venus's setting: draws are hashed from (seed, step, key) instead of
``torch.rand`` (no RNG state; a resumed run decides the same); easy/hard come from the group's mean score
(>= 0.5: easy) because rewards here are 0/1 verified, pseudo-label or confidence scores, not GRESO's
0.1-for-wrong; the probabilities adapt after a step that had skip candidates (GRESO: from the second epoch
on, the first step a prompt can have a history; here earlier rounds give histories at step 0); a call
generates a non-zero multiple of the adapter's granule (verl splits every generate call evenly over its
agent-loop workers), the skipped prompts least likely to be skipped generated back first (a step is never
empty; GRESO's large sampling batch needs neither). GRESO's check of the rule's precision is built in: a
seeded share ``audit_rate`` of the prompts drawn to be skipped is generated anyway, and the share of those
groups with zero variance is logged (``devenus/skip/precision``).

The rule never sees verl: the adapter calls :meth:`SkipRule.decide` before generating, generates only the
prompts it returned False for, and calls :meth:`SkipRule.observe` with each generated group's final scores.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from devenus.config import ConfigError, option
from devenus.online.config import OverlayConfig

#: the evidence kind of this rule's rows (values.event: "skipped" or "generated")
SKIP_KIND = "skip"
#: evidence kinds :meth:`SkipRule.seed_history` reads (others are ignored)
HISTORY_KINDS = (SKIP_KIND, "visit", "probe")
EASY, HARD = "easy", "hard"
_STATE_VERSION = 1


class SkipConfigError(ConfigError):
    """A ``devenus.skip`` setting that cannot run."""


@dataclass(frozen=True)
class SkipConfig(OverlayConfig):
    key_path: ClassVar[str] = "devenus.skip"
    error: ClassVar[type[ConfigError]] = SkipConfigError

    enabled: bool = option(False, "skip prompts whose zero-variance streak predicts another zero-variance group")
    p_easy: float = option(0.5, "initial exploration probability per visit of an all-correct streak "
                                "(P(skip) = 1 - p_easy ** streak)", gt=0.0, lt=1.0)
    p_hard: float = option(0.5, "initial exploration probability per visit of an all-wrong streak", gt=0.0, lt=1.0)
    target_zero_variance: float = option(0.25, "share of zero-variance groups per step the adaptation aims at",
                                         ge=0.0, le=1.0)
    easy_target_share: float = option(1 / 3, "part of the target given to easy groups (GRESO: 1/3; hard ones "
                                             "get the rest: they change more as the policy improves)", ge=0.0, le=1.0)
    step_size: float = option(0.01, "change of p_easy / p_hard after each step (0: no adaptation)", ge=0.0, le=0.5)
    min_p: float = option(0.05, "lowest exploration probability the adaptation reaches", gt=0.0, lt=1.0)
    max_p: float = option(0.95, "highest exploration probability the adaptation reaches", gt=0.0, lt=1.0)
    min_explore: float = option(0.01, "floor of P(generate) of any streak: P(skip) <= 1 - min_explore", gt=0.0, le=1.0)
    seed: int = option(0, "seed of the skip draws (mixed with the run's seed)", ge=0)
    audit_rate: float = option(0.05, "share of the prompts drawn to be skipped that are generated anyway, to "
                                     "measure the rule's precision (devenus/skip/precision; 0: off)", ge=0.0, le=1.0)
    history_dirs: list[str] = option([], "evidence folders of earlier rounds whose visits seed the streaks "
                                         "(read once, before the first step)")

    def check(self) -> None:
        if self.min_p > self.max_p:
            raise self.error(f"{self.key('min_p')} ({self.min_p}) must be <= {self.key('max_p')} ({self.max_p}) "
                             f"(set them with {self.override('min_p')} / {self.override('max_p')})")
        for name in ("p_easy", "p_hard"):
            v = getattr(self, name)
            if not self.min_p <= v <= self.max_p:
                raise self.error(f"{self.key(name)} must lie in [{self.key('min_p')}, {self.key('max_p')}] = "
                                 f"[{self.min_p}, {self.max_p}], got {v} (set it with {self.override(name)})")

    @property
    def targets(self) -> dict[str, float]:
        easy = self.target_zero_variance * self.easy_target_share
        return {EASY: easy, HARD: self.target_zero_variance - easy}


def _draw(seed: tuple[int, int], step: int, key: str) -> float:
    """A uniform draw in [0, 1) fixed by (seeds, step, key): the same on every run and after a resume."""
    h = hashlib.blake2b(f"{seed[0]}\x1f{seed[1]}\x1f{step}\x1f{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2.0 ** 64


class SkipRule:
    """GRESO's skip rule over per-key zero-variance streaks; state is plain Python (:meth:`state_dict`).

    Memory: one ``[kind, streak]`` per key whose last visit had zero variance (a visit with variance
    forgets the key). A skip adds nothing to the history (GRESO: only generated groups are observed), so
    a skipped prompt keeps its streak and is tried again with probability at least ``min_explore``.
    """

    def __init__(self, config: SkipConfig, seed: int = 0):
        self.config = config
        self.seed = (int(config.seed), int(seed))
        self.p = {EASY: float(config.p_easy), HARD: float(config.p_hard)}
        self.history: dict[str, list] = {}  # key -> [kind, streak]
        self._pending = self._fresh_pending(None)  # the step whose groups feed the next adaptation
        self._counts = self._fresh_counts()  # metrics since the last pop_metrics
        self._evidence: list[dict[str, Any]] = []
        self._audited: dict[str, int] = {}  # key -> step: drawn to be skipped, generated for the audit

    # ------------------------------------------------------------------ the rule
    def skip_probability(self, key: str) -> float:
        h = self.history.get(key)
        if not h:
            return 0.0
        kind, streak = h
        return 1.0 - max(self.p[kind] ** streak, self.config.min_explore)

    def decide(self, keys: Sequence[str], step: int, granule: int = 1) -> np.ndarray:
        """One bool per prompt, True = skip (never generated). Deterministic in (seed, step, key, state).

        The generated prompts are a non-zero multiple of ``granule`` (the agent-loop workers split every
        generate call evenly): skipped prompts are generated back, lowest P(skip) first (first on a tie),
        until they are; with ``granule`` 1 that only keeps a call from being empty. A call with no multiple
        between its kept count and its prompt count (only when the prompt count is not a multiple itself)
        generates every prompt: the call is the one the caller made, as without the rule. A share
        ``audit_rate`` of the prompts drawn to be skipped is generated anyway (the audit: its groups'
        variance is ``devenus/skip/precision``); they count as kept for the granule."""
        if int(granule) < 1:
            raise ValueError(f"SkipRule.decide: granule must be >= 1, got {granule}")
        self._advance(step)
        call = self._pending["calls"]  # 0: the step's own prompts; 1, 2, ...: its refill rounds
        self._pending["calls"] = call + 1
        keys = [str(k) for k in keys]
        probs = np.array([self.skip_probability(k) for k in keys], dtype=np.float64)
        draws = np.array([_draw(self.seed, step, k) for k in keys], dtype=np.float64)
        skip = draws < probs
        # GRESO's check: a sample of the skips is generated anyway; its groups' variance measures the rule's
        # precision. Drawn apart from the skip draw (same seeds), before the granule: audited prompts count as kept.
        audit = skip & (np.array([_draw(self.seed, step, f"audit\x1f{k}") for k in keys]) < self.config.audit_rate)
        skip &= ~audit
        self._audited = {k: s for k, s in self._audited.items() if s == int(step)}
        self._audited.update((keys[i], int(step)) for i in np.flatnonzero(audit))
        kept_back = self._round_up(skip, probs, int(granule))
        candidates = probs > 0
        self._pending["candidates"] += int(candidates.sum())
        c = self._counts
        c["decided"] += len(keys)
        c["candidates"] += int(candidates.sum())
        c["kept_for_granule"] += kept_back
        for i in np.flatnonzero(skip):
            kind, streak = self.history[keys[i]]
            c[f"skipped_{kind}"] += 1
            self._evidence.append({"key": keys[i], "step": int(step), "kind": SKIP_KIND, "values": {
                "event": "skipped", "call": int(call), "class": kind, "streak": int(streak),
                "p_skip": float(probs[i]), "draw": float(draws[i])}})
        return skip

    @staticmethod
    def _round_up(skip: np.ndarray, probs: np.ndarray, granule: int) -> int:
        """Un-skip (in place) the fewest skipped prompts, least likely first, that make the generated count
        a non-zero multiple of ``granule``, or all of them when the call has no such multiple; returns how many."""
        n, kept = len(skip), int((~skip).sum())
        if n == 0:
            return 0
        want = min(-(-max(kept, 1) // granule) * granule, n)
        back = np.flatnonzero(skip)[np.argsort(probs[skip], kind="stable")][:want - kept]
        skip[back] = False
        return len(back)

    def observe(self, keys: Sequence[str], zero_variance: np.ndarray, mean_score: np.ndarray, step: int) -> None:
        """One entry per generated group of ``step`` (its final scores): extends or ends the key's streak,
        and counts the group toward the step's zero-variance shares."""
        keys = [str(k) for k in keys]
        zv = np.asarray(zero_variance, dtype=bool).reshape(-1)
        mean = np.asarray(mean_score, dtype=np.float64).reshape(-1)
        if not len(keys) == len(zv) == len(mean):
            raise ValueError(f"SkipRule.observe: {len(keys)} keys, {len(zv)} zero_variance and {len(mean)} "
                             f"mean_score entries: expected one of each per generated group")
        if not np.isfinite(mean).all():
            bad = keys[int(np.flatnonzero(~np.isfinite(mean))[0])]
            raise ValueError(f"SkipRule.observe: mean_score of key {bad!r} is not a finite number")
        self._advance(step)
        for k, z, m in zip(keys, zv, mean):
            audited = self._audited.pop(k, None) == int(step)
            self._counts["audited"] += audited
            self._counts["audited_zero_variance"] += audited and bool(z)
            kind = self._update(k, bool(z), float(m))
            self._pending["observed"] += 1
            self._counts["observed"] += 1
            if kind is not None:
                self._pending[kind] += 1
                self._counts[f"zero_variance_{kind}"] += 1
            self._evidence.append({"key": k, "step": int(step), "kind": SKIP_KIND, "values": {
                "event": "generated", "zero_variance": bool(z), "mean_score": float(m),
                "class": kind, "streak": int(self.history[k][1]) if k in self.history else 0,
                "audited": audited}})

    def _update(self, key: str, zero_variance: bool, mean_score: float) -> str | None:
        if not zero_variance:
            self.history.pop(key, None)
            return None
        kind = EASY if mean_score >= 0.5 else HARD
        h = self.history.get(key)
        if h and h[0] == kind:
            h[1] += 1
        else:
            self.history[key] = [kind, 1]
        return kind

    def _advance(self, step: int) -> None:
        """Adapt p_easy / p_hard once per step, from every group observed with that step number, when the
        first call of a later step arrives (so refill rounds of one step count together)."""
        step = int(step)
        pend = self._pending
        if pend["step"] is None or step <= pend["step"]:
            if pend["step"] is None:
                pend["step"] = step
            return
        cfg = self.config
        if pend["candidates"] and pend["observed"] and cfg.step_size > 0:
            for kind, target in cfg.targets.items():
                share = pend[kind] / pend["observed"]
                # too many zero-variance groups of this kind: explore them less (skip more), and back
                p = self.p[kind] - cfg.step_size if share >= target else self.p[kind] + cfg.step_size
                self.p[kind] = min(max(p, cfg.min_p), cfg.max_p)
        self._pending = self._fresh_pending(step)

    @staticmethod
    def _fresh_pending(step: int | None) -> dict[str, Any]:
        return {"step": step, "observed": 0, EASY: 0, HARD: 0, "candidates": 0, "calls": 0}

    @staticmethod
    def _fresh_counts() -> dict[str, int]:
        return {"decided": 0, "candidates": 0, "skipped_easy": 0, "skipped_hard": 0, "kept_for_granule": 0,
                "observed": 0, "zero_variance_easy": 0, "zero_variance_hard": 0, "audited": 0,
                "audited_zero_variance": 0}

    # ------------------------------------------------------------------ history from earlier rounds
    def seed_history(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Streaks from earlier evidence rows (call before the first step); returns the visits applied.

        Rows are taken in (round, step) order, per key and step one training visit then one probe:
        ``skip`` rows with ``values.event = "generated"`` (this rule's own record, exact; preferred over a
        method's ``visit`` row of the same step), ``visit`` / ``probe`` rows via :func:`visit_outcome`.
        ``skipped`` rows and other kinds add nothing (a skip is not a visit).
        """
        visits: dict[tuple[int, int, int, str], tuple[int, bool, float]] = {}
        for r in rows:
            outcome = visit_outcome(r)
            if outcome is None:
                continue
            kind = r["kind"]
            # (round, step, training visit before probe, key): the order the visits happened in
            slot = (int(r.get("round", 0) or 0), int(r["step"]), 1 if kind == "probe" else 0, str(r["key"]))
            rank = 0 if kind == SKIP_KIND else 1
            if slot not in visits or rank <= visits[slot][0]:
                visits[slot] = (rank, *outcome)
        for (_, _, _, key), (_, zv, mean) in sorted(visits.items()):
            self._update(key, zv, mean)
        return len(visits)

    def seed_from_dirs(self, folders: Iterable[str | os.PathLike[str]]) -> int:
        """:meth:`seed_history` from every folder's rows at once (``devenus.skip.history_dirs``: rounds sort
        across folders); a missing folder is one :class:`devenus.records.evidence.EvidenceError` naming it."""
        return self.seed_history([r for f in folders for r in history_from_evidence(f)])

    # ------------------------------------------------------------------ what the adapter takes
    def pop_evidence(self) -> list[dict[str, Any]]:
        """Rows for :class:`devenus.records.evidence.EvidenceWriter` (``kind = "skip"``): one per skipped
        prompt (event, class, streak, p_skip, draw) and one per generated group (event, zero_variance,
        mean_score, class, streak after it)."""
        out, self._evidence = self._evidence, []
        return out

    def pop_metrics(self) -> dict[str, float]:
        """``devenus/skip/...`` since the last call; p_easy / p_hard are the values in effect this step."""
        c, self._counts = self._counts, self._fresh_counts()
        skipped = c["skipped_easy"] + c["skipped_hard"]
        m = {f"devenus/skip/{k}": float(v) for k, v in c.items()}
        m["devenus/skip/skipped"] = float(skipped)
        m["devenus/skip/skip_rate"] = skipped / c["decided"] if c["decided"] else 0.0
        for kind in (EASY, HARD):
            m[f"devenus/skip/zero_variance_{kind}_share"] = (c[f"zero_variance_{kind}"] / c["observed"]
                                                              if c["observed"] else 0.0)
            m[f"devenus/skip/p_{kind}"] = self.p[kind]
        m["devenus/skip/tracked"] = float(len(self.history))
        if c["audited"]:  # a ratio with no audited group is not logged
            m["devenus/skip/precision"] = c["audited_zero_variance"] / c["audited"]
        return m

    def state_dict(self) -> dict[str, Any]:
        return {"version": _STATE_VERSION, "p": dict(self.p),
                "history": {k: [v[0], int(v[1])] for k, v in self.history.items()},
                "pending": dict(self._pending), "counts": dict(self._counts), "audited": dict(self._audited)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("version") != _STATE_VERSION:
            raise ValueError(f"skip state: version {state.get('version')!r}, this code reads {_STATE_VERSION}")
        self.p = {EASY: float(state["p"][EASY]), HARD: float(state["p"][HARD])}
        self.history = {str(k): [str(v[0]), int(v[1])] for k, v in state["history"].items()}
        self._pending = {**self._fresh_pending(None), **state["pending"]}
        self._counts = {**self._fresh_counts(), **state["counts"]}
        self._audited = {str(k): int(v) for k, v in state.get("audited", {}).items()}
        self._evidence = []


# ------------------------------------------------------------------ evidence -> visits
def visit_outcome(row: Mapping[str, Any]) -> tuple[bool, float] | None:
    """(zero_variance, mean_score) of one evidence row, or None if the row is not a visit or cannot tell.

    - ``skip`` / ``generated``: the rule's own record (the step's final scores, whatever the reward).
    - ``visit`` / ``probe`` with ``target_pass_rate`` (share of rollouts the verifier passed against the
      row's target): zero variance iff it is 0 or 1 (binary verified reward); mean = the rate.
    - ``visit`` / ``probe`` without a target (unlabeled): zero variance (easy) iff ``majority_pass_rate``
      is 1 (a unanimous group: a majority-vote pseudo-label rewards every rollout 1); any other rate is
      a group with variance (0 means a tie or no answer, which is not evidence of an easy prompt).
    """
    kind = row.get("kind")
    if kind == SKIP_KIND:
        v = row.get("values") or {}
        if v.get("event") != "generated":
            return None
        return bool(v["zero_variance"]), float(v["mean_score"])
    if kind not in HISTORY_KINDS:
        return None
    tp, mp = row.get("target_pass_rate"), row.get("majority_pass_rate")
    if tp is not None and math.isfinite(tp):
        return (tp <= 0.0 or tp >= 1.0), float(tp)
    if mp is not None and math.isfinite(mp):
        return mp >= 1.0, float(mp)
    return None


def history_from_evidence(source: str | os.PathLike[str] | Iterable[Mapping[str, Any]], *,
                          rounds: int | Iterable[int] | None = None,
                          before_round: int | None = None) -> list[dict[str, Any]]:
    """The evidence rows :meth:`SkipRule.seed_history` uses, from an evidence folder
    (:func:`devenus.records.evidence.read_evidence`, kinds ``skip``, ``visit``, ``probe``) or from rows
    already read; ``rounds`` keeps those rounds, ``before_round`` only rounds below it (earlier rounds)."""
    if isinstance(source, (str, os.PathLike)):
        from devenus.records.evidence import read_evidence

        rows = read_evidence(source, kind=HISTORY_KINDS, round=rounds)
    else:
        keep = None if rounds is None else ({rounds} if isinstance(rounds, int) else set(rounds))
        rows = [dict(r) for r in source if r.get("kind") in HISTORY_KINDS
                and (keep is None or int(r.get("round", 0) or 0) in keep)]
    if before_round is not None:
        rows = [r for r in rows if int(r.get("round", 0) or 0) < before_round]
    return rows
