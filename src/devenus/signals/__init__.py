"""Signals: verl-free math shared by all three modules (offline selection scorers, online weak
supervision, training-time refinement). One implementation each; methods and adapters import from
here, never from one another.

- :mod:`.tokens`    per-token statistics from logits (self-certainty, entropy), chunked
- :mod:`.sequence`  per-response scores from per-token values (mean self-certainty, -mean entropy, log-probs)
- :mod:`.group`     per-group normalisation, AUROC, correlation, neutral filling
- :mod:`.votes`     vote statistics and majority agreement (the vote itself: ``devenus.verify.majority_vote``)
- :mod:`.verdict`   a model's P(yes) verdict on a candidate answer
- :mod:`.ema`       EMA weight updates and their schedule
- :mod:`.collapse`  the confidence-collapse warning
"""

from devenus.signals.collapse import CollapseMonitor
from devenus.signals.ema import cosine_alpha, ema_update_, tensor_checksum
from devenus.signals.group import NORMALIZATIONS, auroc, fill_missing, group_normalize, pearson
from devenus.signals.sequence import (
    masked_mean,
    masked_sum,
    mean_log_prob,
    mean_self_certainty,
    negative_mean_entropy,
    sum_log_prob,
)
from devenus.signals.tokens import (
    DEFAULT_CHUNK_SIZE,
    TOKEN_STATS,
    entropy_from_logits,
    self_certainty_from_logits,
    token_stats_from_logits,
)
from devenus.signals.verdict import distinct_candidates, verdict_probability
from devenus.signals.votes import VoteStats, majority_agreement

__all__ = [
    "CollapseMonitor", "DEFAULT_CHUNK_SIZE", "NORMALIZATIONS", "TOKEN_STATS", "VoteStats", "auroc", "cosine_alpha",
    "distinct_candidates", "ema_update_", "entropy_from_logits", "fill_missing", "group_normalize",
    "majority_agreement", "masked_mean", "masked_sum", "mean_log_prob", "mean_self_certainty",
    "negative_mean_entropy", "pearson", "self_certainty_from_logits", "sum_log_prob", "tensor_checksum",
    "token_stats_from_logits", "verdict_probability",
]
