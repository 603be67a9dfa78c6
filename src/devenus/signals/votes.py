"""Vote statistics over groups of extracted answers (the votes themselves: :func:`devenus.verify.majority_vote`),
the unique mode of a history of answers, and answer equivalence."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np


class VoteStats:
    """Per-step diagnostics of many group votes: majority ratio, why groups got no target, how often
    extra (vote-only) rollouts agree with the winner compared with training rollouts."""

    def __init__(self) -> None:
        self.ratios: list[float] = []
        self.sizes: list[int] = []
        self.no_majority = self.tie = self.low_agreement = self.no_answer = 0
        self.abstain = 0
        self.extra_agree: list[bool] = []  # vote-only rows: answer in the winning cluster
        self.train_agree: list[bool] = []

    def add(self, vote, vote_only: np.ndarray | None = None) -> None:
        self.ratios.append(vote.majority_ratio)
        self.sizes.append(len(vote.cluster_of))
        self.abstain += vote.n_abstain
        if vote.target is None:
            self.no_majority += 1
            if not vote.cluster_sizes:
                self.no_answer += 1
            elif vote.tie:
                self.tie += 1
            else:
                self.low_agreement += 1
        elif vote_only is not None and vote_only.any():
            agrees = np.asarray(vote.agrees, bool)
            self.extra_agree += agrees[vote_only].tolist()
            self.train_agree += agrees[~vote_only].tolist()

    def metrics(self) -> dict[str, float]:
        if not self.ratios:
            return {}
        g = len(self.ratios)
        out = {
            "majority_ratio": float(np.mean(self.ratios)),
            "no_majority_share": self.no_majority / g,
            "tie_share": self.tie / g,
            "low_agreement_share": self.low_agreement / g,
            "no_answer_share": self.no_answer / g,
            "abstain_share": self.abstain / max(1, sum(self.sizes)),
            "votes_per_group": float(np.mean(self.sizes)),
            "voted_groups": g,
        }
        if self.extra_agree:
            out["extra_vote_agreement"] = float(np.mean(self.extra_agree))
            out["train_vote_agreement"] = float(np.mean(self.train_agree))
        return out


def majority_agreement(preds: Sequence[str | None], groups: Sequence[np.ndarray], stats: VoteStats | None = None,
                       count: Sequence[bool] | None = None) -> np.ndarray:
    """Per row, 1.0 if its answer lies in its group's unique majority cluster, else 0.0 (abstentions,
    ties and groups without a majority: 0). ``stats`` collects the votes of groups whose ``count`` is true."""
    from devenus.verify import majority_vote

    out = np.zeros(len(preds), dtype=np.float64)
    for g, rows in enumerate(groups):
        vote = majority_vote([preds[i] for i in rows])
        out[rows] = np.asarray(vote.agrees, dtype=np.float64)
        if stats is not None and (count is None or count[g]):
            stats.add(vote)
    return out


def unique_mode(answers: Iterable[str | None]) -> str | None:
    """The unique most frequent answer among ``answers`` (equivalent answers count together; None
    entries, e.g. visits without a majority, are left out rather than counted as an answer); None on a
    tie or when no entry is an answer."""
    from devenus.verify import majority_vote

    present = [a for a in answers if a is not None]
    if not present:
        return None
    return majority_vote(present).target


def equivalent(a: str | None, b: str | None) -> bool:
    """Whether two answers are equivalent for the default verifier (None is equivalent to nothing)."""
    if a is None or b is None:
        return False
    from devenus.verify import get_default_verifier

    return get_default_verifier().equivalent(a, b)
