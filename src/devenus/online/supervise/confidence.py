"""Confidence statistics for weak supervision: pure torch/numpy, verl-free.

Token level (from logits ``z_t`` of width V, the logits dimension, not the tokenizer size):

- self-certainty ``SC_t = KL(U || p_t) = logsumexp(z_t) - mean_j z_t,j - log V`` (>= 0; 0 for a
  uniform distribution, up to ``log V`` for a one-hot one);
- entropy ``H(p_t) = logsumexp(z_t) - sum_j p_t,j z_t,j`` (full vocabulary).

Both are computed in chunks of ``chunk_size`` tokens, so at most ``[chunk_size, V]`` float32 values
exist beyond the logits themselves: never ``[tokens, V]`` for a whole long response.

Sequence level (over valid response tokens, ``mask`` = response mask): mean SC, ``-mean H``, mean and
sum of the sampled tokens' log-probabilities. A row without a valid token scores NaN ("no score").

Group level: :func:`group_normalize` (z-score, centring, ranks) for combining signals per prompt.
:class:`CollapseMonitor` flags the classic failure of confidence rewards: responses shrink while the
confidence keeps rising.

:class:`ConfidenceMethod` is the shared base of the confidence-reward methods (Intuitor, EMRL): they
implement :meth:`ConfidenceMethod.sequence_score` only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from devenus.online.method import MethodConfig, OnlineMethod
from devenus.online.rollouts import RolloutBatch

DEFAULT_CHUNK_SIZE = 1024


# ------------------------------------------------------------------------------------ token level
def _per_token(temperature, lead_shape: torch.Size, device) -> torch.Tensor | None:
    """Temperature as one value per token (flattened), or None for temperature 1."""
    if temperature is None:
        return None
    if not isinstance(temperature, torch.Tensor):
        t = float(temperature)
        if t == 1.0:
            return None
        if t <= 0:
            raise ValueError(f"temperature must be positive, got {t}")
        return torch.full((math.prod(lead_shape),), t, device=device, dtype=torch.float32)
    return torch.broadcast_to(temperature.to(device=device, dtype=torch.float32), lead_shape).reshape(-1)


def token_stats_from_logits(
    logits: torch.Tensor,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    temperature: float | torch.Tensor | None = None,
    which: Sequence[str] = ("self_certainty", "entropy"),
) -> dict[str, torch.Tensor]:
    """Per-token statistics of ``logits`` ``[..., V]``, chunked over the tokens (leading dims).

    Args:
        logits: raw logits; any float dtype (each chunk is computed in float32).
        chunk_size: tokens per chunk.
        temperature: divides the logits first (a scalar, or a tensor broadcastable to ``logits.shape[:-1]``).
        which: any of ``"self_certainty"``, ``"entropy"``.

    Returns:
        ``{name: float32 tensor of shape logits.shape[:-1]}``.
    """
    unknown = set(which) - {"self_certainty", "entropy"}
    if unknown:
        raise ValueError(f"unknown token statistics {sorted(unknown)}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    lead, vocab = logits.shape[:-1], logits.shape[-1]
    flat = logits.reshape(-1, vocab)  # a view for contiguous logits (what a model returns)
    temp = _per_token(temperature, lead, logits.device)
    n = flat.shape[0]
    out = {k: torch.empty(n, dtype=torch.float32, device=logits.device) for k in which}
    log_v = math.log(vocab)
    for start in range(0, n, chunk_size):
        stop = min(start + chunk_size, n)
        z = flat[start:stop].float()
        if temp is not None:
            z = z / temp[start:stop, None].clamp(min=1e-8)
        lse = torch.logsumexp(z, dim=-1)
        if "self_certainty" in out:
            out["self_certainty"][start:stop] = lse - z.mean(dim=-1) - log_v
        if "entropy" in out:
            out["entropy"][start:stop] = lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    return {k: v.reshape(lead) for k, v in out.items()}


def self_certainty_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                               temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """``SC_t = logsumexp(z_t) - mean_j z_t,j - log V`` per token, chunked over tokens."""
    return token_stats_from_logits(logits, chunk_size, temperature, which=("self_certainty",))["self_certainty"]


def entropy_from_logits(logits: torch.Tensor, chunk_size: int = DEFAULT_CHUNK_SIZE,
                        temperature: float | torch.Tensor | None = None) -> torch.Tensor:
    """Full-vocabulary entropy ``H(p_t)`` per token, chunked over tokens."""
    return token_stats_from_logits(logits, chunk_size, temperature, which=("entropy",))["entropy"]


# ---------------------------------------------------------------------------------- sequence level
def _as_float64(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def masked_sum(values, mask) -> np.ndarray:
    """Per row, the sum over valid tokens (NaN for a row without one). ``values``/``mask``: ``[rows, T]``."""
    v, m = _as_float64(values), _as_float64(mask) > 0
    if v.shape != m.shape:
        raise ValueError(f"values {v.shape} and mask {m.shape} differ in shape")
    out = np.where(m, v, 0.0).sum(axis=1)
    out[~m.any(axis=1)] = np.nan
    return out


def masked_mean(values, mask) -> np.ndarray:
    """Per row, the mean over valid tokens (NaN for a row without one)."""
    m = _as_float64(mask) > 0
    count = m.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return masked_sum(values, m) / np.where(count > 0, count, np.nan)


def mean_self_certainty(self_certainty, mask) -> np.ndarray:
    """Intuitor's response score: mean SC_t over valid response tokens."""
    return masked_mean(self_certainty, mask)


def negative_mean_entropy(entropy, mask) -> np.ndarray:
    """EMRL token-level score: ``-mean_t H(p_t)``."""
    return -masked_mean(entropy, mask)


def mean_log_prob(log_probs, mask) -> np.ndarray:
    """EMRL trajectory-level score: mean log-probability of the sampled tokens."""
    return masked_mean(log_probs, mask)


def sum_log_prob(log_probs, mask) -> np.ndarray:
    """Sequence log-probability: sum of the sampled tokens' log-probabilities."""
    return masked_sum(log_probs, mask)


# -------------------------------------------------------------------------------------- group level
def group_normalize(values, group_ids, mode: str = "zscore", eps: float = 1e-6) -> np.ndarray:
    """Normalise ``values`` within each group (rows sharing a ``group_ids`` value); NaN rows stay NaN.

    Modes: ``zscore`` ((v - mean) / (std + eps); a constant group becomes 0), ``center`` (v - mean),
    ``rank`` (ranks scaled to [0, 1], ties averaged; a single row gets 0.5).
    """
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(group_ids)
    if v.shape != g.shape or v.ndim != 1:
        raise ValueError(f"values {v.shape} and group_ids {g.shape} must be equal 1-D shapes")
    if mode not in ("zscore", "center", "rank"):
        raise ValueError(f"unknown normalisation mode {mode!r}")
    out = np.full_like(v, np.nan)
    for key in dict.fromkeys(g.tolist()):
        rows = np.flatnonzero((g == key) & ~np.isnan(v))
        if not len(rows):
            continue
        x = v[rows]
        if mode == "center":
            out[rows] = x - x.mean()
        elif mode == "zscore":
            out[rows] = (x - x.mean()) / (x.std() + eps)
        else:
            order = np.argsort(x, kind="stable")
            ranks = np.empty(len(x))
            ranks[order] = np.arange(len(x), dtype=np.float64)
            for u in np.unique(x):  # average ties
                ranks[x == u] = ranks[x == u].mean()
            out[rows] = ranks / (len(x) - 1) if len(x) > 1 else 0.5
    return out


def auroc(scores, positive) -> float:
    """Area under the ROC curve of ``scores`` for predicting ``positive`` (ties count half); NaN if one class."""
    s, p = np.asarray(scores, dtype=np.float64), np.asarray(positive, dtype=bool)
    keep = ~np.isnan(s)
    s, p = s[keep], p[keep]
    n_pos, n_neg = int(p.sum()), int((~p).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    diff = s[p][:, None] - s[~p][None, :]
    return float(((diff > 0).sum() + 0.5 * (diff == 0).sum()) / (n_pos * n_neg))


# ------------------------------------------------------------------------------------- diagnostics
class CollapseMonitor:
    """A warning for the collapse of confidence rewards (short, over-confident responses).

    Per training step it receives the mean response length and the mean confidence score of the scored
    rows. The first ``baseline_steps`` steps set the baseline length. Afterwards ``warning`` is 1 when
    the mean length is below ``length_ratio`` x the baseline AND the confidence rose since the previous
    step; else 0. It is a diagnostic only: it never changes rewards.
    """

    def __init__(self, baseline_steps: int = 3, length_ratio: float = 0.5):
        self.baseline_steps = int(baseline_steps)
        self.length_ratio = float(length_ratio)
        self.lengths: list[float] = []  # the baseline steps' mean lengths
        self.last_confidence: float | None = None

    def update(self, mean_length: float, mean_confidence: float) -> dict[str, float]:
        out: dict[str, float] = {}
        rising = self.last_confidence is not None and mean_confidence > self.last_confidence
        self.last_confidence = float(mean_confidence)
        if len(self.lengths) < self.baseline_steps:
            self.lengths.append(float(mean_length))
            out["collapse_warning"] = 0.0
            return out
        base = float(np.mean(self.lengths))
        out["length_vs_baseline"] = mean_length / base if base > 0 else float("nan")
        out["collapse_warning"] = float(bool(base > 0 and mean_length < self.length_ratio * base and rising))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "last_confidence": self.last_confidence}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lengths = [float(x) for x in state.get("lengths", [])]
        lc = state.get("last_confidence")
        self.last_confidence = None if lc is None else float(lc)


# ------------------------------------------------------------------------------------ method base
class MonitoredState:
    """Method state of a method with a ``self.monitor`` (:class:`CollapseMonitor`): saved with checkpoints."""

    def state_dict(self) -> dict[str, Any]:
        st = self.monitor.state_dict()
        return {"collapse_monitor": st} if st["lengths"] else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        unknown = set(state) - {"collapse_monitor"}
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown state keys {sorted(unknown)}")
        self.monitor.load_state_dict(state.get("collapse_monitor", {}))


@dataclass
class ConfidenceConfig(MethodConfig):
    collapse_baseline_steps: int = 3  # steps whose mean response length is the collapse baseline
    collapse_length_ratio: float = 0.5  # warn below this fraction of the baseline length (while confidence rises)


class ConfidenceMethod(MonitoredState, OnlineMethod):
    """S_r = a per-response confidence score from the actor's log-prob pass, for unlabeled rows.

    Labeled rows get NaN (the adapter keeps their verified reward anyway). GRPO normalises rewards per
    prompt group, and a group is wholly labeled or wholly unlabeled, so the two reward scales never mix
    within a group. Subclasses implement :meth:`sequence_score`.
    """

    config_class = ConfidenceConfig
    needs = frozenset({"token_stats", "unlabeled"})
    score_name = "confidence"

    def __init__(self, config: ConfidenceConfig | None = None):
        super().__init__(config)
        self.monitor = CollapseMonitor(self.config.collapse_baseline_steps, self.config.collapse_length_ratio)

    def sequence_score(self, batch: RolloutBatch) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def token_stat(batch: RolloutBatch, name: str):
        if name not in batch.token_stats:
            raise KeyError(f"token statistic {name!r} missing from the batch (have {sorted(batch.token_stats)}); "
                           f"the method must list what it needs in `needs`")
        return batch.token_stats[name]

    def construct_rewards(self, batch: RolloutBatch) -> np.ndarray:
        score = np.asarray(self.sequence_score(batch), dtype=np.float64)
        if score.shape != (len(batch),):
            raise ValueError(f"{self.name}: {score.shape} scores for {len(batch)} rows")
        unl = ~np.asarray(batch.labeled, bool)
        valid = unl & ~np.isnan(score)
        metrics: dict[str, float] = {}
        if valid.any():
            s = score[valid]
            metrics.update({f"{self.score_name}/mean": s.mean(), f"{self.score_name}/std": s.std(),
                            f"{self.score_name}/min": s.min(), f"{self.score_name}/max": s.max(),
                            "scored_rows": int(valid.sum())})
            length = float(np.mean(np.asarray(batch.response_length)[valid]))
            metrics["response_length/mean"] = length
            metrics.update(self.monitor.update(length, float(s.mean())))
        lab = ~unl & ~np.isnan(score)
        if lab.any():  # confidence != correctness: how well does the score rank verified-correct answers?
            metrics[f"{self.score_name}/labeled_mean"] = float(score[lab].mean())
            a = auroc(score[lab], np.asarray(batch.score)[lab] > 0.5)
            if not np.isnan(a):
                metrics[f"{self.score_name}/labeled_auroc"] = a
        self.log(**metrics)
        return np.where(unl, score, np.nan)

