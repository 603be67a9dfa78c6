"""Hand-built RolloutBatches for the online-method tests: :func:`rollouts` is the one builder (the tests'
own helpers describe their rows their way and call it). Imported as a sibling module: pytest puts a test's
own folder on ``sys.path`` (tests/ is not a package)."""

from __future__ import annotations

import numpy as np
import torch

from devenus.online.rollouts import RolloutBatch


def _per_row(value, n: int, dtype) -> np.ndarray:
    a = np.asarray(value, dtype=dtype)
    return np.full(n, value, dtype=dtype) if a.ndim == 0 else a.copy()


def rollouts(pred, uid, *, key=None, labeled=False, target=None, score=0.0, response_length=5, truncated=False,
             step: int = 0, response=None, fields=None, token_stats=None) -> RolloutBatch:
    """A RolloutBatch of ``len(pred)`` rows. ``labeled``, ``score``, ``response_length`` and ``truncated``
    take one value per row or one for every row; ``key`` defaults to ``k<uid>``, ``target`` to "1" for a
    labeled row and "" for the others."""
    n = len(pred)
    uid = np.array(uid, dtype=object)
    labeled = _per_row(labeled, n, bool)
    return RolloutBatch(
        uid=uid, key=np.array([f"k{u}" for u in uid] if key is None else key, dtype=object), labeled=labeled,
        target=np.array(["1" if lab else "" for lab in labeled] if target is None else target, dtype=object),
        pred=list(pred), score=_per_row(score, n, np.float64), response_length=_per_row(response_length, n, np.int64),
        truncated=_per_row(truncated, n, bool), step=step, response=response, fields=dict(fields or {}),
        token_stats=dict(token_stats or {}))


def token_stats_batch(preds, lengths, labeled=None, group_size=4, width=7, score=None, seed=0) -> RolloutBatch:
    """Rows with random per-token log-probs, entropy and self-certainty (seeded) and ragged response masks."""
    n = len(preds)
    labeled = [False] * n if labeled is None else labeled
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(n, width, dtype=torch.long)
    for i, L in enumerate(lengths):
        mask[i, :L] = 1
    stats = {
        "log_probs": -torch.rand(n, width, generator=g) * 3,
        "entropy": torch.rand(n, width, generator=g) * 2,
        "self_certainty": torch.rand(n, width, generator=g) * 5,
        "response_mask": mask,
    }
    return rollouts(preds, [f"g{i // group_size}" for i in range(n)], key=[f"k{i // group_size}" for i in range(n)],
                    labeled=labeled, score=0.0 if score is None else score, response_length=lengths, step=1,
                    token_stats=stats)


def vote_batch(groups, vote_only=None) -> RolloutBatch:
    """``groups``: (labeled, target, answers, extra_info extras) per prompt; answers None = no answer."""
    uid, key, lab, tgt, pred, info = [], [], [], [], [], []
    for g, (labeled, target, answers, extras) in enumerate(groups):
        for a in answers:
            uid.append(f"u{g}")
            key.append(f"k{g}")
            lab.append(labeled)
            tgt.append(target)
            pred.append(a)
            info.append({"index": f"k{g}", **extras})
    fields = {"extra_info": np.array(info, dtype=object)}
    if vote_only is not None:
        fields["vote_only"] = np.asarray(vote_only, bool)
    return rollouts(pred, uid, key=key, labeled=lab, target=tgt, fields=fields)
