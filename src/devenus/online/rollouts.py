"""The verl-free view of one training step's grouped rollouts.

Row-aligned arrays, one row per rollout; rows of one prompt share a ``uid`` and are contiguous in
generation order. Simulation truth is deliberately absent: methods never see it (diagnostics get it
separately, see :mod:`devenus.online.diagnostics`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class RolloutBatch:
    uid: np.ndarray  # object[str]: the prompt's group id within this step
    key: np.ndarray  # object[str]: extra_info.index, the stable sample key
    labeled: np.ndarray  # bool: is the row's target trusted
    target: np.ndarray  # object[str]: current target ("" when none)
    pred: list[str | None]  # extracted final answer per response (None: no answer)
    score: np.ndarray  # float: verifier reward against ``target`` (what verl computed)
    response_length: np.ndarray  # int: valid response tokens
    truncated: np.ndarray  # bool: hit the length limit without EOS
    step: int = 0
    response: list[str] | None = None  # decoded responses, when a method asks for them
    fields: dict[str, np.ndarray] = field(default_factory=dict)  # other per-row metadata (data_source, pair_key, ...)
    # token-level statistics from the actor's log-prob pass ([rows, response_len] tensors + mask), when available
    token_stats: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.uid)
        for name in ("key", "labeled", "target", "pred", "score", "response_length", "truncated"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"RolloutBatch.{name} has {len(getattr(self, name))} rows, uid has {n}")

    def __len__(self) -> int:
        return len(self.uid)

    def select(self, idx) -> "RolloutBatch":
        """The rows ``idx`` (in that order) of every per-row field; the vote marker and token stats are dropped."""
        idx = np.asarray(idx, dtype=np.int64)
        return dataclasses.replace(
            self,
            uid=self.uid[idx],
            key=self.key[idx],
            labeled=self.labeled[idx],
            target=self.target[idx].copy(),
            pred=[self.pred[i] for i in idx],
            score=self.score[idx].copy(),
            response_length=self.response_length[idx],
            truncated=self.truncated[idx],
            response=None if self.response is None else [self.response[i] for i in idx],
            fields={k: np.asarray(v)[idx] for k, v in self.fields.items() if k != "vote_only"},
            token_stats={},
        )

    def groups(self) -> list[np.ndarray]:
        """Row indices of each prompt group, in order of first appearance."""
        order: dict[str, list[int]] = {}
        for i, u in enumerate(self.uid):
            order.setdefault(u, []).append(i)
        return [np.asarray(v, dtype=np.int64) for v in order.values()]

    def group_ids(self) -> np.ndarray:
        """Per row, the position of its group in :meth:`groups`."""
        out = np.empty(len(self), dtype=np.int64)
        for g, rows in enumerate(self.groups()):
            out[rows] = g
        return out
