"""Majority vote over a group of extracted answers.

Answers are clustered by equivalence; the majority exists only if the largest cluster is unique.
A group of G answers usually holds only a few distinct strings, so the work is: group identical
normalised strings (free), then compare each *distinct* form against each cluster's representative
(a handful of checks, most decided by the exact/numeric fast paths or the cache).

Clustering is greedy: distinct forms are visited from most to least frequent and join the first
cluster whose representative they are equivalent to. Equivalence is not guaranteed transitive for
symbolic forms (float rounding), so comparing with the representative only is a deliberate,
deterministic choice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .equivalence import Verifier, get_default_verifier
from .normalize import normalize

__all__ = ["VoteResult", "majority_vote"]


@dataclass(frozen=True)
class VoteResult:
    """Outcome of :func:`majority_vote`.

    Attributes:
        target: a raw answer string of the winning cluster (its most frequent raw form), or None
            when there is no answer, a tie between the largest clusters, or the majority ratio is
            below ``min_agreement``.
        majority_ratio: size of the largest cluster / G (G counts abstentions); reported even when
            there is a tie or too little agreement, 0.0 when nobody answered.
        cluster_of: cluster id of each answer, None for abstentions.
        cluster_sizes: size of each cluster, indexed by cluster id (ids are assigned from the most
            frequent distinct form down, so id 0 holds the most frequent form).
        winner: id of the winning cluster, or None.
        tie: the largest cluster is not unique.
        n_abstain: answers that were None (or empty after normalisation).
        agrees: answer i is in the winning cluster (all False without a winner).
    """

    target: str | None
    majority_ratio: float
    cluster_of: tuple[int | None, ...]
    cluster_sizes: tuple[int, ...]
    winner: int | None
    tie: bool
    n_abstain: int
    agrees: tuple[bool, ...]

    @property
    def has_majority(self) -> bool:
        return self.target is not None


def majority_vote(
    answers: Sequence[str | None],
    verifier: Verifier | None = None,
    min_agreement: float = 0.0,
) -> VoteResult:
    """Cluster equivalent answers and pick the unique largest cluster.

    Args:
        answers: extracted answers of one group (None = no answer; it abstains but counts in G).
        verifier: equivalence checker (default: the per-process :func:`get_default_verifier`).
        min_agreement: minimum majority ratio for a target to be returned.
    """
    g = len(answers)
    norms = [(normalize(a) if a is not None else "") or None for a in answers]
    counts = Counter(n for n in norms if n is not None)  # distinct forms in first-appearance order
    cluster_of_form, sizes = _cluster_forms(counts, verifier)

    cluster_of = tuple(cluster_of_form[n] if n is not None else None for n in norms)
    largest = max(sizes, default=0)
    ratio = largest / g if g else 0.0
    tie = sizes.count(largest) > 1 if sizes else False
    winner = sizes.index(largest) if sizes and not tie and ratio >= min_agreement else None
    return VoteResult(
        target=None if winner is None else _most_frequent_raw(answers, cluster_of, winner),
        majority_ratio=ratio,
        cluster_of=cluster_of,
        cluster_sizes=tuple(sizes),
        winner=winner,
        tie=tie,
        n_abstain=sum(1 for n in norms if n is None),
        agrees=tuple(winner is not None and c == winner for c in cluster_of),
    )


def _cluster_forms(counts: dict[str, int], verifier: Verifier | None) -> tuple[dict[str, int], list[int]]:
    """Greedy clustering (module docstring): each form, most frequent first (first appearance breaks ties),
    joins the first cluster whose representative it is equivalent to. Returns the cluster id of each form
    and the size (answers, not forms) of each cluster."""
    forms = sorted(counts, key=lambda f: -counts[f])  # stable: keeps first-appearance order
    if len(forms) > 1 and verifier is None:
        verifier = get_default_verifier()
    cluster_of_form: dict[str, int] = {}
    reps: list[str] = []  # representative normalised form of each cluster
    sizes: list[int] = []
    for f in forms:
        cid = next((k for k, rep in enumerate(reps) if verifier.equivalent(f, rep)), None)
        if cid is None:
            cid = len(reps)
            reps.append(f)
            sizes.append(0)
        cluster_of_form[f] = cid
        sizes[cid] += counts[f]
    return cluster_of_form, sizes


def _most_frequent_raw(answers: Sequence[str | None], cluster_of: Sequence[int | None], winner: int) -> str:
    """The most frequent raw string of the winning cluster (first appearance breaks ties)."""
    raw_counts = Counter(a for a, c in zip(answers, cluster_of) if c == winner)
    return max(raw_counts, key=lambda r: raw_counts[r])
