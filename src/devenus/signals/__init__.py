"""Signals: verl-free math shared by all three modules (offline selection scorers, online weak
supervision, training-time refinement). One implementation each; methods and adapters import from
here, never from one another.

- :mod:`.tokens`    per-token statistics from logits (self-certainty, entropy), chunked
- :mod:`.sequence`  per-response scores from per-token values (mean self-certainty, -mean entropy, log-probs)
- :mod:`.group`     per-group normalisation, AUROC (by rank sums, O(n log n)), correlation, neutral filling
- :mod:`.votes`     vote statistics, majority agreement, the unique mode of a history, answer equivalence
                    (the vote itself: ``devenus.verify.majority_vote``)
- :mod:`.trajectory` least-squares slope, z-normalisation and cosine of a series over visits
- :mod:`.vmf`       von Mises-Fisher fits, log-Bessel, held-out AUROC of a vMF LLR (import it from
                    ``devenus.signals.vmf``: it loads scipy.special, which nothing else here needs)
- :mod:`.mixture`   the seeded two-component 1-D Gaussian mixture, log-sigmoid
- :mod:`.verdict`   a model's P(yes) verdict on a candidate answer
- :mod:`.ema`       EMA weight updates and their schedule
- :mod:`.collapse`  the confidence-collapse warning
- :mod:`.head`      entropy / self-certainty from hidden states and the head, chunked over tokens and vocabulary
- :mod:`.hidden`    layer pooling over response tokens, CoE, CoT-Kinetics (layer by layer, never [L, T, d])
- :mod:`.attention` far-back attention mass from Q/K in query chunks, PivotTrace pivots and their density
"""

from devenus.signals.collapse import CollapseMonitor
from devenus.signals.ema import cosine_alpha, ema_update_, tensor_checksum
from devenus.signals.group import NORMALIZATIONS, auroc, auroc_interval, fill_missing, group_normalize, pearson
from devenus.signals.head import token_stats_from_hidden
from devenus.signals.sequence import (
    masked_mean,
    masked_sum,
    mean_log_prob,
    mean_self_certainty,
    negative_mean_entropy,
    sum_log_prob,
)
from devenus.signals.tokens import (
    DEFAULT_BUDGET_BYTES,
    DEFAULT_CHUNK_SIZE,
    chunk_rows,
    entropy_from_logits,
    self_certainty_from_logits,
    token_stats_from_logits,
)
from devenus.signals.trajectory import ls_slope
from devenus.signals.verdict import distinct_candidates, verdict_probability
from devenus.signals.votes import VoteStats, majority_agreement, unique_mode

__all__ = [
    "CollapseMonitor", "DEFAULT_BUDGET_BYTES", "DEFAULT_CHUNK_SIZE", "chunk_rows", "NORMALIZATIONS", "VoteStats",
    "auroc", "auroc_interval", "cosine_alpha", "distinct_candidates", "ema_update_", "entropy_from_logits",
    "fill_missing", "group_normalize", "majority_agreement", "masked_mean", "masked_sum", "mean_log_prob",
    "mean_self_certainty", "negative_mean_entropy", "pearson", "self_certainty_from_logits", "sum_log_prob",
    "tensor_checksum", "token_stats_from_hidden", "token_stats_from_logits", "verdict_probability",
    # refinement's statistics
    "ls_slope", "unique_mode",
]
