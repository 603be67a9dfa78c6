"""The verl-free view of one training step's grouped rollouts, and the row identity rules.

Row-aligned arrays, one row per rollout; rows of one prompt share a ``uid`` and are contiguous in
generation order. Simulation truth is deliberately absent: methods never see it (diagnostics get it
separately, see :mod:`devenus.online.diagnostics`).

Every row carries its stable sample key ``extra_info.index``: histories, evidence and manifests are
joined on it across steps and rounds, so a row without one is an error, never a positional fallback
(:func:`row_identity`). The label state follows one rule (:func:`row_identity`), applied by the setup
check before training and by the step alike.

A *visit* is one step's group of rollouts for one sample (:class:`Visit`, :func:`observe_groups`); the
refinement methods keep histories of them and the adapter's probe pass summarises probes with them:

- ``majority``: the unique majority answer of the group (:func:`devenus.verify.majority_vote`: equivalent
  answers cluster, abstentions count in the group size but never win); None on a tie or no answer.
- ``majority_pass_rate``: share of the group's rollouts in that majority cluster; 0 on a tie or no answer
  (the TraPO rule: a group without a unique majority has pass rate 0).
- ``target_pass_rate``: share of the group's training rollouts whose verifier score against the row's
  current target is > 0.5; None when the row has no target.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np


class RowKeyError(ValueError):
    """A row without its stable sample key ``extra_info.index``."""


def row_identity(extra_info, reward_model, where: str = "") -> tuple[str, bool, str]:
    """(key, labeled, target) of one row from its ``extra_info`` and ``reward_model`` dicts.

    - key: ``extra_info.index`` as a string; missing or empty -> :class:`RowKeyError`.
    - target: ``reward_model.ground_truth`` as a string (``""``: none).
    - labeled: ``extra_info.labeled`` when present; a row without the flag (verl-native data) is labeled
      iff it carries a non-empty target. Methods that need unlabeled rows are refused before training
      when this leaves none (``devenus data hide-labels`` makes a semi-supervised copy).
    """
    ei = extra_info if isinstance(extra_info, dict) else {}
    key = ei.get("index")
    if key is None or (isinstance(key, str) and not key.strip()):
        raise RowKeyError(f"{where or 'a row'} has no extra_info.index, the stable sample key every join across "
                          f"steps and rounds uses (import the data with `devenus import`, or "
                          f"`devenus import --from-verl` for a verl-style Parquet)")
    gt = (reward_model if isinstance(reward_model, dict) else {}).get("ground_truth", "")
    target = "" if gt is None else str(gt)
    labeled = ei.get("labeled")
    return str(key), bool(target != "") if labeled is None else bool(labeled), target


def label_states(extra_info: Sequence, reward_model: Sequence, where: str = "row") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labeled, target, key) arrays for rows given as parallel ``extra_info`` / ``reward_model`` columns."""
    n = len(extra_info)
    labeled, target, key = np.zeros(n, bool), np.empty(n, object), np.empty(n, object)
    for i in range(n):
        key[i], labeled[i], target[i] = row_identity(extra_info[i], reward_model[i], f"{where} {i}")
    return labeled, target, key


def truncated_rows(lengths: np.ndarray, width: int, last_tokens: np.ndarray, stop_ids: Iterable[int]) -> np.ndarray:
    """A response is truncated when it fills the whole response width and its last token is not a stop
    token: one whose stop token lands in the last slot ended on its own."""
    lengths = np.asarray(lengths)
    stop = np.isin(np.asarray(last_tokens), np.fromiter(stop_ids, dtype=np.int64))
    return (lengths >= width) & ~stop


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

    @property
    def vote_only(self) -> np.ndarray:
        """Rows generated for voting only (extra or teacher rollouts): they never train."""
        v = self.fields.get("vote_only")
        return np.zeros(len(self), bool) if v is None else np.asarray(v, bool)

    @property
    def constructed(self) -> np.ndarray:
        """Rows whose target the step took from S_y this step (``target`` holds it): what S_r, S_b and S_a
        see of S_y's outcome. All False before S_y has run."""
        v = self.fields.get("constructed")
        return np.zeros(len(self), bool) if v is None else np.asarray(v, bool)

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


@dataclass(frozen=True)
class Visit:
    step: int
    majority: str | None
    majority_pass_rate: float
    target_pass_rate: float | None
    target: str  # the row's current (given) target, "" when none
    labeled: bool

    def as_list(self) -> list:
        return [self.step, self.majority, self.majority_pass_rate, self.target_pass_rate, self.target, self.labeled]

    @classmethod
    def from_list(cls, v: list) -> "Visit":
        s, m, mp, tp, t, lab = v
        return cls(int(s), m, float(mp), None if tp is None else float(tp), str(t), bool(lab))


def observe_groups(batch: RolloutBatch) -> list[tuple[np.ndarray, Visit]]:
    """One :class:`Visit` per group of ``batch`` (in :meth:`RolloutBatch.groups` order), with its rows."""
    from devenus.verify import majority_vote

    vote_only = batch.vote_only
    out = []
    for rows in batch.groups():
        vote = majority_vote([batch.pred[i] for i in rows])
        mp = vote.majority_ratio if vote.target is not None else 0.0
        first = rows[0]
        target = str(batch.target[first])
        train = rows[~vote_only[rows]]
        tp = float(np.mean(np.asarray(batch.score[train]) > 0.5)) if target and len(train) else None
        out.append((rows, Visit(int(batch.step), vote.target, float(mp), tp, target, bool(batch.labeled[first]))))
    return out
