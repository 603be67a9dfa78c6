"""Hand-built visits for the refinement tests: one RolloutBatch per step, verifier scores recomputed by
plain string equality (the tests use integer answers written one way only)."""

from __future__ import annotations

import numpy as np

from batches import rollouts
from devenus.online.rollouts import RolloutBatch


def step_batch(groups, step: int = 1) -> RolloutBatch:
    """``groups``: (key, labeled, target, answers) per prompt; answers None = no answer."""
    uid, key, lab, tgt, pred, score = [], [], [], [], [], []
    for g, (k, labeled, target, answers) in enumerate(groups):
        for a in answers:
            uid.append(f"s{step}u{g}")
            key.append(k)
            lab.append(labeled)
            tgt.append(target)
            pred.append(a)
            score.append(1.0 if (a is not None and target and a == target) else 0.0)
    return rollouts(pred, uid, key=key, labeled=lab, target=tgt, score=score, step=step,
                    response=[str(a) for a in pred],
                    fields={"extra_info": np.array([{"index": k} for k in key], dtype=object)})


def answers(major: str, k: int, g: int = 8) -> list[str]:
    """``k`` of ``g`` rollouts answer ``major``, the others each a different answer (1000, 1001, ...): a
    unique majority for k >= 2, a tie (no majority) for k <= 1."""
    return [major] * k + [str(1000 + i) for i in range(g - k)]


def exact_grade(response: str, target: str, truncated: bool) -> float:
    return 0.0 if truncated else float(response == target)


#: GeoMin hand-built hidden states: layers, width
L, D = 3, 12


def geomin_features(batch, unreliable_keys=(), seed=0):
    """Hidden states for a step: at layer 1, rollouts scored correct (labeled) point along e0, incorrect
    along e1; unlabeled majority rollouts follow e0 unless their key is in ``unreliable_keys`` (then e1);
    minority rollouts point along e1. Other layers: noise."""
    rng = np.random.default_rng(seed)
    h = rng.normal(size=(len(batch), L, D))
    for i in range(len(batch)):
        if batch.labeled[i]:
            good = batch.score[i] > 0.5
        else:
            good = batch.score[i] > 0.5 and batch.key[i] not in unreliable_keys
        h[i, 1] = rng.normal(scale=0.3, size=D)
        h[i, 1, 0 if good else 1] += 3.0
    return h.astype(np.float32)


def geomin_batch(step=1):
    groups = [(f"L{i}", True, "7", ["7"] * 4 + ["9"] * 4) for i in range(3)]  # 12 correct, 12 incorrect labeled
    groups += [(f"U{i}", False, "", answers("5", 6)) for i in range(10)]
    groups += [("Utie", False, "", answers("5", 1))]  # no majority: nothing to train against
    return step_batch(groups, step=step)
