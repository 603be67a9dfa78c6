"""Supervision diagnostics for verl's step metrics (pure functions over row-aligned arrays).

Simulation truth (hidden answers) enters here and only here: methods never receive it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from devenus.online.rollouts import RolloutBatch


def hidden_answers(simulation: Sequence | None) -> np.ndarray | None:
    """Hidden true answers per row from verl's ``simulation`` column, or None when the data has none."""
    if simulation is None:
        return None
    out = np.array([(s or {}).get("hidden_answer") if isinstance(s, dict) else None for s in simulation], dtype=object)
    return None if all(a is None for a in out) else out


def target_metrics(batch: RolloutBatch, constructed: np.ndarray, hidden: np.ndarray | None) -> dict[str, float]:
    """How many groups got a constructed target, and (with simulation truth) how often it is right."""
    m: dict[str, float] = {}
    groups = batch.groups()
    unl = [rows for rows in groups if not batch.labeled[rows].all()]
    m["devenus/groups/total"] = len(groups)
    m["devenus/groups/unlabeled"] = len(unl)
    if not unl:
        return m
    has = [rows for rows in unl if constructed[rows[0]] is not None]
    m["devenus/target/constructed_share"] = len(has) / len(unl)
    if hidden is not None and has:
        from devenus.online.mechanism import pseudo_target_counts

        c = pseudo_target_counts(batch, constructed, hidden)  # accuracy = the mechanism's pseudo-target precision
        if c["given"]:
            m["devenus/target/accuracy"] = c["right"] / c["given"]
    return m


def reward_truth_metrics(batch: RolloutBatch, hidden: np.ndarray | None) -> dict[str, float]:
    """Reward accuracy: how often the reward a row got agrees with its correctness under the hidden truth."""
    if hidden is None:
        return {}
    from devenus.verify import get_default_verifier

    v = get_default_verifier()
    ok = [(batch.score[i] > 0.5) == (batch.pred[i] is not None and v.equivalent(batch.pred[i], str(hidden[i])))
          for i in range(len(batch)) if hidden[i] is not None]
    return {"devenus/reward/accuracy_vs_truth": float(np.mean(ok))} if ok else {}


def by_label_state(prefix: str, values: np.ndarray, labeled: np.ndarray, valid: np.ndarray | None = None) -> dict[str, float]:
    """Mean and std of a per-row quantity, split by label state (rows where ``valid`` is False are skipped)."""
    valid = np.ones(len(values), bool) if valid is None else np.asarray(valid, bool)
    out = {}
    for name, sel in (("labeled", labeled & valid), ("unlabeled", ~labeled & valid)):
        if sel.any():
            out[f"{prefix}/{name}/mean"] = float(np.mean(values[sel]))
            out[f"{prefix}/{name}/std"] = float(np.std(values[sel]))
            out[f"{prefix}/{name}/rows"] = int(sel.sum())
    return out
