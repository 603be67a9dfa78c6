"""The collapse guard: a stop rule for label-free rewards, verl-free.

Anchor: URLVR ("How Far Can Unsupervised RLVR Scale LLM Training?", He et al., 2026; code in
PRIME-RL/TTRL, branch ``urlvr-dev``): every intrinsic reward sharpens the model's own distribution, so
training rises then falls, and the *model-collapse step* is the first step at which the reward accuracy
(the share of rollouts whose label-free reward agrees with the ground-truth reward) falls below 1%.
That needs the truth; a label-free run has it only in simulation (``devenus/reward/accuracy_vs_truth``).
So the guard also watches what the collapse looks like without labels, all from the training batch:
responses shrinking (the confidence rewards' classic failure, :class:`devenus.signals.CollapseMonitor`),
token repetition (Intuitor issue #23: repeated tokens game self-certainty) and, optionally, the
sharpening itself (per-token NLL of the sampled tokens near 0, every rollout of a group identical).

A step is *flagged* when any armed criterion holds; the guard acts after ``patience`` flagged steps in a
row (after ``warmup_steps`` that set the baselines). The onset is the first step of that streak: a
checkpoint is good when the rollouts it generated (the next step's) were not flagged. While a streak runs
(and after acting) :attr:`CollapseGuard.holds_checkpoints` asks that no checkpoint be pruned, so the good
one survives until the rollback. See docs/sampling/collapse_guard.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterable, Mapping

import numpy as np

from devenus.config import option
from devenus.online.config import OverlayConfig

__all__ = ["ACTIONS", "CollapseDecision", "CollapseGuard", "CollapseGuardConfig", "batch_observations",
           "repetition_share"]

ACTIONS = ("stop", "rollback")
#: the metric holding URLVR's reward accuracy when the run has simulation truth (devenus.online.diagnostics)
REWARD_ACCURACY_METRIC = "devenus/reward/accuracy_vs_truth"
PREFIX = "devenus/collapse"


@dataclass(frozen=True)
class CollapseGuardConfig(OverlayConfig):
    key_path: ClassVar[str] = "devenus.collapse_guard"

    enabled: bool = option(False, "watch label-free rewards for collapse and act on it")
    action: str = option("stop", "stop: end the run; rollback: also point verl's resume pointer at the last "
                         "checkpoint saved before the collapse", choices=ACTIONS)
    warmup_steps: int = option(3, "first steps that set the baselines (never flagged)", ge=1)
    patience: int = option(2, "flagged steps in a row before the guard acts", ge=1)
    min_reward_accuracy: float = option(0.01, "URLVR's collapse step: reward accuracy vs the truth below this "
                                        "(only where the run has simulation truth; 0 = off)", ge=0.0, le=1.0)
    length_ratio: float = option(0.5, "mean response length below this x its baseline (0 = off)", ge=0.0, lt=1.0)
    max_repetition: float = option(0.5, "share of repeated token n-grams in a response above this, and above "
                                   "its baseline + repetition_margin (1 = off)", ge=0.0, le=1.0)
    repetition_margin: float = option(0.2, "how far repetition must rise above its baseline", ge=0.0, le=1.0)
    ngram: int = option(4, "n of the token n-grams repetition counts", ge=1)
    nll_ratio: float = option(0.0, "per-token NLL of the sampled tokens below this x its baseline (0 = off: "
                              "a correct short answer is one sharp string too)", ge=0.0, lt=1.0)
    max_duplicate_share: float = option(1.0, "share of rollouts identical to another of their group above this "
                                        "(1 = off)", ge=0.0, le=1.0)

    def check(self) -> None:
        from devenus.config import ConfigError

        if self.enabled and not (self.min_reward_accuracy > 0 or self.length_ratio > 0 or self.max_repetition < 1
                                 or self.nll_ratio > 0 or self.max_duplicate_share < 1):
            raise ConfigError(f"{self.key('enabled')}=true with every criterion off: arm at least one "
                              f"(e.g. {self.override('length_ratio', '0.5')})")


# ------------------------------------------------------------------------------ observations of one step
def repetition_share(tokens: np.ndarray, n: int) -> float:
    """1 - distinct n-grams / n-grams of one response (0 for a response shorter than n + 1 tokens)."""
    k = len(tokens) - n + 1
    if k <= 1:
        return 0.0
    grams = np.lib.stride_tricks.sliding_window_view(np.asarray(tokens), n)
    return 1.0 - len({g.tobytes() for g in grams}) / k


def batch_observations(responses: np.ndarray, mask: np.ndarray, uid: np.ndarray, rows: np.ndarray | None = None,
                       log_probs: np.ndarray | None = None, ngram: int = 4) -> dict[str, float]:
    """Label-free observations of one step's training rollouts (``rows``: the rows the label-free reward
    acts on, default all): mean response length, repetition share, duplicate share within groups and,
    with the sampled tokens' log-probs, the mean per-token NLL."""
    responses, mask = np.asarray(responses), np.asarray(mask, bool)
    rows = np.ones(len(responses), bool) if rows is None else np.asarray(rows, bool)
    if not rows.any():
        return {}
    idx = np.flatnonzero(rows)
    seqs = [responses[i][mask[i]] for i in idx]
    out = {"response_length": float(np.mean([len(s) for s in seqs])),
           "repetition": float(np.mean([repetition_share(s, ngram) for s in seqs]))}
    groups: dict[Any, list[bytes]] = {}
    for i, s in zip(idx, seqs):
        groups.setdefault(uid[i], []).append(s.tobytes())
    dup = sum(sum(g.count(x) for x in set(g) if g.count(x) > 1) for g in groups.values())
    out["duplicate_share"] = dup / len(idx)
    if log_probs is not None:
        lp = np.asarray(log_probs, dtype=np.float64)[idx]
        m = mask[idx]
        out["token_nll"] = float(-(lp * m).sum() / max(1, m.sum()))
    return out


# ------------------------------------------------------------------------------ the rule
@dataclass
class CollapseDecision:
    step: int
    flags: tuple[str, ...]  # criteria that held at this step
    streak: int  # flagged steps in a row, this one included
    act: bool  # the guard acts now (once per run)
    onset: int | None  # first step of the streak that made it act (or is running)
    metrics: dict[str, float] = field(default_factory=dict)


class CollapseGuard:
    """Per step, :meth:`observe` takes the step's observations (:func:`batch_observations`, plus
    ``reward_accuracy`` where there is truth) and returns a :class:`CollapseDecision`."""

    RELATIVE = ("response_length", "repetition", "token_nll")

    def __init__(self, config: CollapseGuardConfig):
        self.config = config
        self.warmup: dict[str, list[float]] = {}
        self.seen = 0
        self.streak = 0
        self.onset: int | None = None
        self.fired_at: int | None = None  # the step the guard acted at
        self.fired_onset: int | None = None

    def baseline(self, name: str) -> float | None:
        v = self.warmup.get(name)
        return float(np.mean(v)) if v else None

    def flags(self, obs: Mapping[str, float]) -> list[str]:
        c, out = self.config, []
        acc = obs.get("reward_accuracy")
        if c.min_reward_accuracy > 0 and acc is not None and acc < c.min_reward_accuracy:
            out.append("reward_accuracy")
        base = self.baseline("response_length")
        if c.length_ratio > 0 and base and "response_length" in obs and obs["response_length"] < c.length_ratio * base:
            out.append("length")
        base = self.baseline("repetition")
        if c.max_repetition < 1 and base is not None and "repetition" in obs and \
                obs["repetition"] > max(c.max_repetition, base + c.repetition_margin):
            out.append("repetition")
        base = self.baseline("token_nll")
        if c.nll_ratio > 0 and base and "token_nll" in obs and obs["token_nll"] < c.nll_ratio * base:
            out.append("sharpness")
        if c.max_duplicate_share < 1 and obs.get("duplicate_share", 0.0) > c.max_duplicate_share:
            out.append("duplicates")
        return out

    def observe(self, step: int, obs: Mapping[str, float]) -> CollapseDecision:
        obs = {k: float(v) for k, v in obs.items() if v is not None and np.isfinite(v)}
        m = {f"{PREFIX}/{k}": v for k, v in obs.items()}
        self.seen += 1
        if self.seen <= self.config.warmup_steps:
            for k in self.RELATIVE:
                if k in obs:
                    self.warmup.setdefault(k, []).append(obs[k])
            flags: list[str] = []
        else:
            flags = self.flags(obs)
        for k in self.RELATIVE:
            base = self.baseline(k)
            if base and k in obs and self.seen > self.config.warmup_steps:
                m[f"{PREFIX}/{k}_vs_baseline"] = obs[k] / base
        if flags:
            self.streak += 1
            if self.onset is None:
                self.onset = step
        else:
            self.streak, self.onset = 0, None
        act = self.fired_at is None and self.streak >= self.config.patience
        if act:
            self.fired_at, self.fired_onset = step, self.onset
        m[f"{PREFIX}/flagged"] = float(bool(flags))
        for name in ("reward_accuracy", "length", "repetition", "sharpness", "duplicates"):
            m[f"{PREFIX}/flag/{name}"] = float(name in flags)
        m[f"{PREFIX}/streak"] = float(self.streak)
        m[f"{PREFIX}/fired"] = float(act)
        return CollapseDecision(step, tuple(flags), self.streak, act, self.onset, m)

    @property
    def holds_checkpoints(self) -> bool:
        """Whether a checkpoint saved now must not be pruned: with ``rollback``, while a streak runs or once
        the guard acted, the checkpoints from before the onset are what it would roll back to (the adapter
        holds verl's retention for such saves)."""
        return self.config.action == "rollback" and (self.onset is not None or self.fired_at is not None)

    def good_checkpoint(self, saved: Iterable[int]) -> int | None:
        """The latest saved step whose weights generated only unflagged rollouts: checkpoint s made step
        s + 1's rollouts, so s + 1 < onset. None: no such checkpoint (resume from the base model)."""
        onset = self.fired_onset if self.fired_onset is not None else self.onset
        if onset is None:
            return max(saved, default=None)
        good = [s for s in saved if s + 1 < onset]
        return max(good) if good else None

    def state_dict(self) -> dict[str, Any]:
        return {"warmup": {k: list(v) for k, v in self.warmup.items()}, "seen": self.seen, "streak": self.streak,
                "onset": self.onset, "fired_at": self.fired_at, "fired_onset": self.fired_onset}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        unknown = set(state) - set(self.state_dict())
        if unknown:
            raise ValueError(f"collapse guard state: unknown keys {sorted(unknown)}")
        self.warmup = {k: [float(x) for x in v] for k, v in state.get("warmup", {}).items()}
        self.seen, self.streak = int(state.get("seen", 0)), int(state.get("streak", 0))
        self.onset, self.fired_at = state.get("onset"), state.get("fired_at")
        self.fired_onset = state.get("fired_onset")
