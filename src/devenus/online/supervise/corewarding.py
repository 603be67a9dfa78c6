"""Co-rewarding I (Zhang et al., 2025b, data side): cross-view majority votes as pseudo targets.

Every question comes in two semantically equivalent views (the original and a rewrite) that share
``extra_info.pair_key``; the pair sampler (:mod:`devenus.adapters.verl.samplers`) puts both views in the
same step. The majority answer of one view's rollouts is the pseudo target of the *other* view's
unlabeled rows, and vice versa: a view is never rewarded for agreeing with itself, which is what makes
the signal harder to game than TTRL's self-vote. Whether the two views' majorities agree is recorded.

Voting is TTRL's (equivalence-aware clusters, abstentions, ties and ``min_agreement`` give no target,
vote on N / train on M). In a semi-supervised batch labeled rows keep their gold target, and with
``use_partner_label`` an unlabeled view whose partner is labeled takes the partner's gold target (the
views ask the same question). A view whose partner is missing from the step gets no target unless
``missing_partner="self"`` (then it falls back to its own majority, i.e. TTRL).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devenus.online.config import option
from devenus.online.registry import WeakTrainerInterface
from devenus.online.rollouts import RolloutBatch
from devenus.online.supervise.voting import VotingConfig, VotingMethod
from devenus.signals import VoteStats

MISSING_PARTNER = ("none", "self")


@dataclass
class CoRewardingConfig(VotingConfig):
    use_partner_label: bool = option(True, "an unlabeled view whose partner is labeled takes the partner's gold target")
    missing_partner: str = option("none", "partner view not in the step: none (no target) or self (own majority)",
                                  choices=MISSING_PARTNER)


def pair_keys(batch: RolloutBatch) -> np.ndarray:
    """``extra_info.pair_key`` per row (the row's own sample key when it has none)."""
    infos = batch.fields.get("extra_info")
    pks = [None if infos is None else (infos[i] or {}).get("pair_key") for i in range(len(batch))]
    return np.array([str(pk) if pk not in (None, "") else str(k) for pk, k in zip(pks, batch.key)], dtype=object)


@WeakTrainerInterface.register
class CoRewarding(VotingMethod):
    name = "corewarding"
    mechanism_metrics = frozenset({"pseudo_target"})
    config_class = CoRewardingConfig
    data_needs = frozenset({"unlabeled", "paraphrases"})

    def construct_targets(self, batch: RolloutBatch) -> np.ndarray:
        cfg: CoRewardingConfig = self.config
        groups = batch.groups()
        pk = pair_keys(batch)
        vote_only = batch.vote_only
        by_pair: dict[str, list[int]] = {}
        for g, rows in enumerate(groups):
            by_pair.setdefault(pk[rows[0]], []).append(g)
        votes = [self.vote(batch, rows) for rows in groups]  # every view votes (labeled ones too, for agreement)

        new = np.full(len(batch), None, dtype=object)
        stats = VoteStats()
        missing = partner_label = 0
        unlabeled_groups = 0
        for g, rows in enumerate(groups):
            unl = rows[~batch.labeled[rows]]
            if not len(unl):
                continue
            unlabeled_groups += 1
            partners = [h for h in by_pair[pk[rows[0]]] if h != g]
            if not partners:
                missing += 1
                if cfg.missing_partner == "self":
                    stats.add(votes[g], vote_only[rows])
                    if votes[g].target is not None:
                        new[unl] = votes[g].target
                continue
            prow = np.concatenate([groups[h] for h in partners])
            if cfg.use_partner_label and batch.labeled[prow].all() and all(batch.target[i] for i in prow):
                new[unl] = batch.target[prow[0]]
                partner_label += 1
                continue
            vote = votes[partners[0]] if len(partners) == 1 else self.vote(batch, prow)
            stats.add(vote, vote_only[prow])
            if vote.target is not None:
                new[unl] = vote.target

        metrics = stats.metrics()
        if unlabeled_groups:
            metrics["missing_partner_share"] = missing / unlabeled_groups
            metrics["partner_label_share"] = partner_label / unlabeled_groups
        metrics.update(_view_agreement(votes, by_pair))
        self.log(**metrics)
        return new


def _view_agreement(votes: list, by_pair: dict[str, list[int]]) -> dict[str, float]:
    """Do the two views of a question reach the same majority? The pairs, the share where both views have a
    majority, and the share of those whose majorities are equivalent (each only where it has a denominator)."""
    from devenus.verify import get_default_verifier

    v = get_default_verifier()
    both = agree = pairs = 0
    for gs in by_pair.values():
        if len(gs) != 2:
            continue
        pairs += 1
        a, b = votes[gs[0]].target, votes[gs[1]].target
        if a is not None and b is not None:
            both += 1
            agree += bool(v.equivalent(a, b))
    out: dict[str, float] = {}
    if pairs:
        out["pairs"] = pairs
        out["both_majority_share"] = both / pairs
    if both:
        out["view_agreement"] = agree / both
    return out
