"""Hand-built RolloutBatches shared by the online-method tests (imported as a sibling module)."""

from __future__ import annotations

import numpy as np
import torch

from devenus.online.rollouts import RolloutBatch


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
    return RolloutBatch(
        uid=np.array([f"g{i // group_size}" for i in range(n)], dtype=object),
        key=np.array([f"k{i // group_size}" for i in range(n)], dtype=object),
        labeled=np.asarray(labeled, bool),
        target=np.array(["1" if lab else "" for lab in labeled], dtype=object),
        pred=list(preds),
        score=np.asarray(score if score is not None else [0.0] * n, dtype=np.float64),
        response_length=np.asarray(lengths, dtype=np.int64),
        truncated=np.zeros(n, bool),
        step=1,
        token_stats=stats,
    )


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
    n = len(uid)
    fields = {"extra_info": np.array(info, dtype=object)}
    if vote_only is not None:
        fields["vote_only"] = np.asarray(vote_only, bool)
    return RolloutBatch(uid=np.array(uid, object), key=np.array(key, object), labeled=np.array(lab, bool),
                        target=np.array(tgt, object), pred=pred, score=np.zeros(n), response_length=np.full(n, 5),
                        truncated=np.zeros(n, bool), fields=fields)
