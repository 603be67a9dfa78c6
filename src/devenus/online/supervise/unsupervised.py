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
:func:`devenus.signals.group_normalize`, or ``none``) and the reward is ``sum_k w_k * norm_k``. A row whose
signal has no value (no valid response token) gets its group's mean normalised value for that signal
(neutral). Only signals with a non-zero weight are computed, and ``step_needs`` follows the weights:
``token_stats`` only for a confidence signal, ``self_certainty`` only when ``w_self_certainty != 0``.
Labeled rows get NaN: the adapter keeps their verified reward. See docs/methods/unsupervised.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.online.config import ConfigError, option
from devenus.online.method import OnlineMethod
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.confidence_reward import ConfidenceConfig, MonitoredState, confidence_score
from devenus.signals import (
    DEFAULT_CHUNK_SIZE,
    NORMALIZATIONS,
    VoteStats,
    auroc,
    fill_missing,
    group_normalize,
    majority_agreement,
    pearson,
)

#: weight key -> signal name (the metric prefix); the order is the order of computation and of metrics
SIGNALS = {
    "w_self_certainty": "self_certainty",
    "w_entropy": "neg_entropy",
    "w_seq_prob": "seq_logprob",
    "w_agreement": "agreement",
    "w_self_verification": "self_verification",
}
CONFIDENCE_SIGNALS = ("self_certainty", "neg_entropy", "seq_logprob")  # from the actor's log-prob pass
NORMALIZE = NORMALIZATIONS + ("none",)
SEQ_PROB = ("sum", "mean")

DEFAULT_VERIFICATION_TEMPLATE = (
    "Question: {question}\nProposed answer: {answer}\nIs the proposed answer correct? Reply yes or no."
)


@dataclass
class UnsupervisedConfig(ConfidenceConfig):
    w_self_certainty: float = option(0.0, "weight of mean self-certainty (needs the engine extension)")
    w_entropy: float = option(1.0, "weight of the negative mean token entropy")
    w_seq_prob: float = option(0.0, "weight of the sequence log-probability")
    w_agreement: float = option(1.0, "weight of majority-vote agreement")
    w_self_verification: float = option(0.0, "weight of the policy's P(yes) verdict on its own answer")
    verification_template: str = option(DEFAULT_VERIFICATION_TEMPLATE,
                                        "user turn of the verdict pass; {question} and {answer} are filled in")
    verdicts: list[str] = option(["yes", "no"], "the [correct, incorrect] verdict replies", length=2)
    normalize: str = option("zscore", "per-group normalisation of each signal before weighting", choices=NORMALIZE)
    seq_prob: str = option("sum", "seq_logprob = sum (sequence log-probability) or mean (per token) of log p(y_t)",
                           choices=SEQ_PROB)
    chunk_size: int = option(DEFAULT_CHUNK_SIZE, "most tokens per chunk when the engine computes self-certainty (a 128 MiB budget may lower it)", ge=1)

    def check(self) -> None:
        for slot in ("{question}", "{answer}"):
            if slot not in self.verification_template:
                raise ConfigError(f"devenus.method_config.verification_template must contain {slot}")
        v = self.verdicts
        if not all(x.strip() for x in v) or v[0] == v[1]:
            raise ConfigError(f"devenus.method_config.verdicts must be two different non-empty strings "
                              f"[correct, incorrect], got {v!r}")
        if not any(getattr(self, k) != 0.0 for k in SIGNALS):
            raise ConfigError(f"every signal weight is 0; set at least one of "
                              f"{', '.join('devenus.method_config.' + k for k in SIGNALS)}")

    @property
    def weights(self) -> dict[str, float]:
        """Signal name -> weight, for the signals with a non-zero weight (the ones computed)."""
        return {name: getattr(self, k) for k, name in SIGNALS.items() if getattr(self, k) != 0.0}


@WeakTrainerInterface.register
class Unsupervised(MonitoredState, OnlineMethod):
    """S_r = a weighted sum of per-group-normalised label-free signals, for unlabeled rows."""

    name = "unsupervised"
    mechanism_metrics = frozenset({"reward_auroc"})
    config_class = UnsupervisedConfig
    data_needs = frozenset({"unlabeled"})
    step_needs = frozenset({"token_stats", "self_certainty", "self_verification"})  # the most; see step_needs_from_config

    def step_needs_from_config(self) -> frozenset[str]:
        w = self.config.weights
        needs = {"token_stats"} if any(s in w for s in CONFIDENCE_SIGNALS) else set()
        return frozenset(needs | ({"self_certainty", "self_verification"} & set(w)))

    def verification_prompt(self) -> tuple[str, tuple[str, str]]:
        return self.config.verification_template, tuple(self.config.verdicts)

    def logits_chunk_size(self) -> int:
        return self.config.chunk_size

    # ---------------------------------------------------------------------------------- signals
    def signals(self, batch: RolloutBatch, votes: VoteStats | None = None) -> dict[str, np.ndarray]:
        """Raw per-row values of the signals with a non-zero weight (NaN = no value)."""
        out: dict[str, np.ndarray] = {}
        w = self.config.weights
        seq = "sum_logp" if self.config.seq_prob == "sum" else "mean_logp"
        for name, score in (("self_certainty", "self_certainty"), ("neg_entropy", "neg_entropy"), ("seq_logprob", seq)):
            if name in w:
                out[name] = confidence_score(batch, score)
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
        """1.0 for a row whose answer is in its group's unique majority cluster, else 0.0 (the votes of
        groups with an unlabeled row go into ``votes``)."""
        groups = batch.groups()
        return majority_agreement(batch.pred, groups, votes, [not batch.labeled[rows].all() for rows in groups])

    def normalized(self, values: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
        """Per-group normalisation (``config.normalize``), then neutral values for missing rows."""
        v = np.asarray(values, dtype=np.float64)
        if self.config.normalize != "none":
            v = group_normalize(v, group_ids, self.config.normalize)
        return fill_missing(v, group_ids)

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
                c = pearson(norm[a][unl], norm[b][unl])
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
