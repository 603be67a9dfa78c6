"""Label-state transforms for experiments: hide labels to simulate an unlabeled or semi-supervised pool."""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Sequence

from .schema import UNLABELED_SOURCE


def _rank(seed: int, key: str) -> str:
    return hashlib.sha1(f"{seed}:{key}".encode()).hexdigest()


def hide_labels(rows: Sequence[dict[str, Any]], labeled_fraction: float, seed: int = 0) -> list[dict[str, Any]]:
    """Copy of ``rows`` where only ``round(labeled_fraction * n_labeled)`` labeled rows keep their target.

    Which rows stay labeled depends only on (seed, sample key), not on row order, so the same key keeps
    its label state when the file is re-ordered or extended. A hidden target moves to
    ``simulation.hidden_answer`` (diagnostics only); the row becomes ``labeled=False``,
    ``label_source="none"``, ``ground_truth=""``.
    """
    if not 0.0 <= labeled_fraction <= 1.0:
        raise ValueError(f"labeled_fraction must lie in [0, 1], got {labeled_fraction}")
    out = [copy.deepcopy(r) for r in rows]
    labeled = [r for r in out if r["extra_info"]["labeled"]]
    keep = round(labeled_fraction * len(labeled))
    ranked = sorted(labeled, key=lambda r: _rank(seed, r["extra_info"]["index"]))
    for r in ranked[keep:]:
        target = r["reward_model"]["ground_truth"]
        sim = dict(r.get("simulation") or {"noise": "none"})
        sim.setdefault("hidden_answer", target)
        if sim.get("hidden_answer") is None:
            sim["hidden_answer"] = target
        r["simulation"] = sim
        r["reward_model"]["ground_truth"] = ""
        r["extra_info"]["labeled"] = False
        r["extra_info"]["label_source"] = UNLABELED_SOURCE
    return out
