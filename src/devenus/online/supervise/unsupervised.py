"""The unsupervised trainer: one reward for unlabeled rows, combined from several label-free signals.

Each signal is a per-response score, "higher = better" (NaN = no value for that row):

- ``self_certainty``: mean self-certainty over valid response tokens (Intuitor, Zhao et al. 2025);
- ``neg_entropy``: ``-mean_t H(p_t)`` (EMRL token-level, Agarwal et al. 2025);
- ``seq_logprob``: the sequence log-probability ``sum_t log p(y_t)`` (EMRL sequence-level), or its
  per-token mean with ``seq_prob=mean`` (EMRL trajectory-level);
- ``agreement``: 1 if the response's extracted answer lies in the unique majority cluster of its group
  (:func:`devenus.verify.majority_vote`, as in TTRL, Zuo et al. 2025), else 0 (abstentions, ties and
  groups without a majority: 0);
- ``self_verification``: the policy's own verdict on the response's answer, ``P(yes)`` with the
  question and the answer in ``verification_template``, read off the actor by the adapter
  (:mod:`devenus.adapters.verl.self_verification`) once per distinct (question, answer); rows
  without an answer have no value.

Per prompt group every signal is normalised (``zscore`` / ``center`` / ``rank`` via
:func:`confidence.group_normalize`, or ``none``) and the reward is ``sum_k w_k * norm_k``. A row whose
signal has no value (no valid response token) gets its group's mean normalised value for that signal
(neutral). Only signals with a non-zero weight are computed, and ``needs`` follows the weights:
``token_stats`` only for a confidence signal, ``self_certainty`` only when ``w_self_certainty != 0``.
Labeled rows get NaN: the adapter keeps their verified reward. See docs/methods/unsupervised.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from devenus.online.method import OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.confidence import (
    DEFAULT_CHUNK_SIZE,
    CollapseMonitor,
    ConfidenceConfig,
    ConfidenceMethod,
    MonitoredState,
    auroc,
    group_normalize,
    mean_log_prob,
    mean_self_certainty,
    negative_mean_entropy,
    sum_log_prob,
)
from devenus.online.supervise.ttrl import VoteStats

#: weight key -> signal name (the metric prefix); the order is the order of computation and of metrics
SIGNALS = {
    "w_self_certainty": "self_certainty",
    "w_entropy": "neg_entropy",
    "w_seq_prob": "seq_logprob",
    "w_agreement": "agreement",
    "w_self_verification": "self_verification",
}
CONFIDENCE_SIGNALS = ("self_certainty", "neg_entropy", "seq_logprob")  # from the actor's log-prob pass
NORMALIZE = ("zscore", "center", "rank", "none")
SEQ_PROB = ("sum", "mean")

DEFAULT_VERIFICATION_TEMPLATE = (
    "Question: {question}\nProposed answer: {answer}\nIs the proposed answer correct? Reply yes or no."
)


@dataclass
class UnsupervisedConfig(ConfidenceConfig):
    w_self_certainty: float = 0.0  # weight of mean self-certainty (needs the engine extension)
    w_entropy: float = 1.0  # weight of the negative mean token entropy
    w_seq_prob: float = 0.0  # weight of the sequence log-probability
    w_agreement: float = 1.0  # weight of majority-vote agreement
    w_self_verification: float = 0.0  # weight of the policy's P(yes) verdict on its own answer
    verification_template: str = DEFAULT_VERIFICATION_TEMPLATE  # user turn; {question} and {answer} filled in
    verdicts: list = field(default_factory=lambda: ["yes", "no"])  # the [correct, incorrect] verdict replies
    normalize: str = "zscore"  # per-group normalisation of each signal before weighting: one of NORMALIZE
    seq_prob: str = "sum"  # seq_logprob = sum (sequence log-probability) or mean (per token) of log p(y_t)
    chunk_size: int = DEFAULT_CHUNK_SIZE  # tokens per chunk when the engine computes self-certainty

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name.startswith("w_"):
                w = getattr(self, f.name)
                if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w):
                    raise ValueError(f"+devenus.method_config.{f.name} (unsupervised) must be a finite number, got {w!r}")
                setattr(self, f.name, float(w))
        for slot in ("{question}", "{answer}"):
            if slot not in self.verification_template:
                raise ValueError(f"+devenus.method_config.verification_template (unsupervised) must contain {slot}")
        v = self.verdicts
        if (not isinstance(v, (list, tuple)) or len(v) != 2 or not all(isinstance(x, str) and x.strip() for x in v)
                or v[0] == v[1]):
            raise ValueError(f"+devenus.method_config.verdicts (unsupervised) must be two different non-empty "
                             f"strings [correct, incorrect], got {v!r}")
        self.verdicts = [str(x) for x in v]
        if not any(getattr(self, k) != 0.0 for k in SIGNALS):
            raise ValueError(f"unsupervised: every signal weight is 0; set at least one of {list(SIGNALS)}")
        if self.normalize not in NORMALIZE:
            raise ValueError(f"+devenus.method_config.normalize (unsupervised) must be one of {list(NORMALIZE)}, "
                             f"got {self.normalize!r}")
        if self.seq_prob not in SEQ_PROB:
            raise ValueError(f"+devenus.method_config.seq_prob (unsupervised) must be one of {list(SEQ_PROB)}, "
                             f"got {self.seq_prob!r}")
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(f"+devenus.method_config.chunk_size (unsupervised) must be an integer >= 1, got {self.chunk_size!r}")

    @property
    def weights(self) -> dict[str, float]:
        """Signal name -> weight, for the signals with a non-zero weight (the ones computed)."""
        return {name: getattr(self, k) for k, name in SIGNALS.items() if getattr(self, k) != 0.0}


def verdict_probability(lp_yes, lp_no) -> np.ndarray:
    """``P(yes)`` from the two verdicts' log-probabilities, renormalised against each other."""
    d = np.asarray(lp_no, dtype=np.float64) - np.asarray(lp_yes, dtype=np.float64)
    return 1.0 / (1.0 + np.exp(np.clip(d, -700, 700)))


def distinct_candidates(questions, preds) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The distinct (question, answer) pairs to verify, and per row its pair's index (-1: no answer)."""
    pairs: dict[tuple[str, str], int] = {}
    idx = np.full(len(preds), -1, dtype=np.int64)
    for i, (q, a) in enumerate(zip(questions, preds)):
        if a is not None:
            idx[i] = pairs.setdefault((str(q), str(a)), len(pairs))
    return list(pairs), idx


def _fill_missing(values: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """NaN rows take their group's mean over valid rows (0 when the group has none): a neutral value."""
    out = values.copy()
    missing = np.isnan(out)
    if not missing.any():
        return out
    for g in np.unique(group_ids[missing]):
        rows = group_ids == g
        valid = rows & ~missing
        out[rows & missing] = values[valid].mean() if valid.any() else 0.0
    return out


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation over rows where both are finite; NaN when either is constant or < 2 rows."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return float("nan")
    x, y = a[ok] - a[ok].mean(), b[ok] - b[ok].mean()
    den = math.sqrt(float((x * x).sum()) * float((y * y).sum()))
    return float((x * y).sum() / den) if den > 1e-12 else float("nan")


@WeakTrainerInterface.register
class Unsupervised(MonitoredState, OnlineMethod):
    """S_r = a weighted sum of per-group-normalised label-free signals, for unlabeled rows."""

    name = "unsupervised"
    config_class = UnsupervisedConfig
    needs = frozenset({"unlabeled", "token_stats", "self_certainty"})  # the most it may need; see needs_from_config

    def __init__(self, config: UnsupervisedConfig | None = None):
        super().__init__(config)
        self.monitor = CollapseMonitor(self.config.collapse_baseline_steps, self.config.collapse_length_ratio)

    def needs_from_config(self) -> frozenset[str]:
        w = self.config.weights
        needs = {"unlabeled"}
        if any(s in w for s in CONFIDENCE_SIGNALS):
            needs.add("token_stats")
        if "self_certainty" in w:
            needs.add("self_certainty")
        if "self_verification" in w:
            needs.add("self_verification")
        return frozenset(needs)

    # ---------------------------------------------------------------------------------- signals
    def signals(self, batch: RolloutBatch, votes: VoteStats | None = None) -> dict[str, np.ndarray]:
        """Raw per-row values of the signals with a non-zero weight (NaN = no value)."""
        out: dict[str, np.ndarray] = {}
        w = self.config.weights
        ts = ConfidenceMethod.token_stat
        if any(s in w for s in CONFIDENCE_SIGNALS):
            mask = ts(batch, "response_mask")
            if "self_certainty" in w:
                out["self_certainty"] = mean_self_certainty(ts(batch, "self_certainty"), mask)
            if "neg_entropy" in w:
                out["neg_entropy"] = negative_mean_entropy(ts(batch, "entropy"), mask)
            if "seq_logprob" in w:
                f = sum_log_prob if self.config.seq_prob == "sum" else mean_log_prob
                out["seq_logprob"] = f(ts(batch, "log_probs"), mask)
        if "agreement" in w:
            out["agreement"] = self.agreement(batch, votes)
        if "self_verification" in w:
            sv = batch.fields.get("self_verification")
            if sv is None:
                raise ValueError("w_self_verification needs fields['self_verification'] (P(yes) per row), which the "
                                 "adapter adds when the method's needs hold 'self_verification'")
            out["self_verification"] = sv
        return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}

    @staticmethod
    def agreement(batch: RolloutBatch, votes: VoteStats | None = None) -> np.ndarray:
        """1.0 for a row whose answer is in its group's unique majority cluster, else 0.0."""
        from devenus.verify import majority_vote

        out = np.zeros(len(batch), dtype=np.float64)
        for rows in batch.groups():
            vote = majority_vote([batch.pred[i] for i in rows])
            out[rows] = np.asarray(vote.agrees, dtype=np.float64)
            if votes is not None and not batch.labeled[rows].all():
                votes.add(vote)
        return out

    def normalized(self, values: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
        """Per-group normalisation (``config.normalize``), then neutral values for missing rows."""
        v = np.asarray(values, dtype=np.float64)
        if self.config.normalize != "none":
            v = group_normalize(v, group_ids, self.config.normalize)
        return _fill_missing(v, np.asarray(group_ids))

    # ---------------------------------------------------------------------------------- S_r
    def construct_rewards(self, batch: RolloutBatch) -> np.ndarray:
        gid = batch.group_ids()
        votes = VoteStats()
        raw = self.signals(batch, votes)
        norm = {k: self.normalized(v, gid) for k, v in raw.items()}
        weights = self.config.weights
        reward = np.zeros(len(batch), dtype=np.float64)
        for k, v in norm.items():
            reward += weights[k] * v
        unl = ~np.asarray(batch.labeled, bool)
        self.log(**self._metrics_for(batch, raw, norm, reward, unl, votes))
        return np.where(unl, reward, np.nan)

    def _metrics_for(self, batch, raw, norm, reward, unl, votes: VoteStats) -> dict[str, float]:
        m: dict[str, float] = {}
        lab = ~unl
        correct = np.asarray(batch.score, dtype=np.float64) > 0.5
        for k, v in raw.items():
            ok = unl & ~np.isnan(v)
            if ok.any():
                m[f"{k}/mean"], m[f"{k}/std"] = float(v[ok].mean()), float(v[ok].std())
            if (unl & np.isnan(v)).any():
                m[f"{k}/missing_rows"] = int((unl & np.isnan(v)).sum())
            if lab.any():  # signal != correctness: how well does it rank verified-correct labeled answers?
                a = auroc(v[lab], correct[lab])
                if not np.isnan(a):
                    m[f"{k}/labeled_auroc"] = a
        names = list(norm)
        for i, a in enumerate(names):  # within-group agreement of the signals (after normalisation)
            for b in names[i + 1:]:
                c = _corr(norm[a][unl], norm[b][unl])
                if not np.isnan(c):
                    m[f"corr/{a}__{b}"] = c
        if "agreement" in raw:
            m.update({f"agreement/{k}": v for k, v in votes.metrics().items()})
        if unl.any():
            r = reward[unl]
            m.update({"reward/mean": r.mean(), "reward/std": r.std(), "reward/min": r.min(), "reward/max": r.max(),
                      "scored_rows": int(unl.sum())})
            length = float(np.asarray(batch.response_length, dtype=np.float64)[unl].mean())
            m["response_length/mean"] = length
            conf = self._monitored_signal()
            if conf is not None and (unl & ~np.isnan(raw[conf])).any():
                m.update(self.monitor.update(length, float(np.nanmean(raw[conf][unl]))))
        return m

    def _monitored_signal(self) -> str | None:
        """The collapse monitor follows the confidence signal with the largest |weight| (None: none active)."""
        w = self.config.weights
        conf = [s for s in CONFIDENCE_SIGNALS if s in w]
        return max(conf, key=lambda s: abs(w[s])) if conf else None  # max keeps the first of equal weights
