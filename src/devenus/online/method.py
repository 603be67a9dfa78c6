"""The online method interface: four optional surfaces, identity when not implemented.

Surfaces (architecture.md, "The online step"):

- ``construct_targets`` (S_y): a new target per row, or None to keep it. Rows whose target changes are
  re-graded against the new target (:mod:`devenus.online.step` enforces what may change).
- ``admit`` (S_b): a keep mask per row, constant within a group (whole groups are admitted or dropped).
- ``construct_rewards`` (S_r): a sequence score per row, or NaN to keep verl's reward; placed at the
  last valid response token.
- ``advantage_weights`` (S_a): a per-row weight in [0, 1] that scales GRPO advantages.

Surfaces see each other's outcome through the batch the step hands them, never through state keyed by
``uid``: S_r, S_b and S_a see S_y's as ``batch.target`` (the row's target after S_y) and
``batch.constructed`` (True where the step accepted a new target from S_y this step), in both the
early and the late (after the log-prob pass) placement.

``observe`` is the one other hook that sees rollouts: a generation-only visit (a probe pass,
docs/trainer.md) that nothing trains on. It returns nothing; the default ignores the visit.

What a method requires comes in two sets, both checked before training starts:

- ``data_needs``, what the training data must hold (:data:`DATA_NEEDS`);
- ``step_needs``, what the step must compute for it (:data:`STEP_NEEDS`), e.g. ``token_stats``
  (per-token log-probs and entropy from the actor's log-prob pass) or ``teacher`` (votes from an EMA
  teacher). The class attribute is the most a method may ask for; an instance resolves its own from
  its config in :meth:`OnlineMethod.step_needs_from_config`.

Every hook the adapter calls is declared here, typed: a method overrides only what it uses.
Labeled rows keep their verified reward and target unless the method sets ``may_change_labeled``
(label refinement, e.g. OLR): the step rules enforce this, not the method.
"""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

import numpy as np

from devenus.online.config import MethodConfig
from devenus.online.mechanism import MECHANISM_METRICS
from devenus.online.rollouts import RolloutBatch
from devenus.signals import DEFAULT_CHUNK_SIZE

#: what the training data must hold for a method
DATA_NEEDS = frozenset({
    "labels",  # at least one labeled row
    "unlabeled",  # at least one unlabeled row (the method constructs their supervision)
    "paraphrases",  # every row paired with a rewrite of its question (extra_info.pair_key)
})
#: what the step must compute for a method, beyond verl's own
STEP_NEEDS = frozenset({
    "token_stats",  # per-token log_probs / entropy (and response_mask) from the actor's log-prob pass
    "self_certainty",  # per-token self-certainty from that same forward (the engine extension)
    "responses",  # decoded response texts
    "teacher",  # vote-only rollouts from an EMA teacher (see teacher_rollouts)
    "self_verification",  # the actor's P(yes) verdict on each row's answer (see verification_prompt)
    "hidden_pooled",  # per row and layer, hidden states pooled over the response in that same forward
})
#: step needs whose values exist only after the actor's log-prob pass
AFTER_LOG_PROB = frozenset({"token_stats", "self_certainty", "self_verification", "hidden_pooled"})


class OnlineMethod:
    name: ClassVar[str] = ""
    config_class: ClassVar[type[MethodConfig]] = MethodConfig
    data_needs: ClassVar[frozenset[str]] = frozenset()
    step_needs: frozenset[str] = frozenset()  # the class's maximum; each instance holds its own
    may_change_labeled: ClassVar[bool] = False
    #: which mechanism metrics judge this method's supervision against simulation truth
    #: (:data:`devenus.online.mechanism.MECHANISM_METRICS`; logged only when the data holds the truth)
    mechanism_metrics: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, config: MethodConfig | None = None):
        self.config = config if config is not None else self.config_class()
        self._metrics: dict[str, float] = {}
        self.step_needs = frozenset(self.step_needs_from_config())
        for what, known, value in (("data_needs", DATA_NEEDS, self.data_needs), ("step_needs", STEP_NEEDS, self.step_needs),
                                   ("mechanism_metrics", MECHANISM_METRICS, self.mechanism_metrics)):
            if value - known:
                raise ValueError(f"{type(self).__name__} declares unknown {what} {sorted(value - known)}; "
                                 f"known: {sorted(known)}")

    def step_needs_from_config(self) -> frozenset[str]:
        """What the step must compute for this instance, given ``self.config`` (default: the class's)."""
        return type(self).step_needs

    # ---- surfaces (None = identity) -------------------------------------------------------------
    def construct_targets(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def admit(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def admission_judged(self, batch: RolloutBatch) -> np.ndarray | None:
        """Per row, after :meth:`admit`: whether admission judged the row's group on this visit (False: it
        dropped the group by default, unscored, as in a warm-up). The mechanism meter counts those groups
        apart from the rejected ones, so ``rejected_precision`` measures the filter. None: every group judged."""
        return None

    def construct_rewards(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def advantage_weights(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def observe(self, batch: RolloutBatch) -> None:
        """A generation-only visit (a probe pass): record what later steps need; nothing trains on it."""

    @classmethod
    def implements(cls, surface: str) -> bool:
        """Whether this class overrides a surface or hook (the adapter skips the others entirely)."""
        return getattr(cls, surface) is not getattr(OnlineMethod, surface)

    # ---- hooks the adapter calls ---------------------------------------------------------------------
    def extra_rollouts(self, n: int) -> Sequence[float | None]:
        """Vote on N, train on M = ``n``: one entry per extra, generation-only rollout per prompt, its
        sampling temperature (None = the rollout's own). They are generated in the same call as the
        training rollouts, seen only by ``construct_targets`` (``batch.vote_only`` marks them) and
        dropped, as one aligned selection, before the log-prob passes. Raise ValueError for a config
        that cannot work with ``n`` (checked before training starts)."""
        return ()

    def teacher_rollouts(self, n: int) -> int:
        """Vote-only rollouts per prompt from the EMA teacher (``step_needs`` holds ``teacher``), given
        ``n`` = rollout.n. They reach ``construct_targets`` marked ``vote_only`` like extra rollouts."""
        return 0

    def teacher_alpha(self, total_steps: int) -> float:
        """The EMA weight of the student for the teacher's next update (``teacher`` in ``step_needs``)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no EMA teacher")

    def teacher_updated(self, alpha: float, distance: float) -> None:
        """Called after each teacher update with its alpha and the teacher-student L2 distance."""

    def teacher_update_count(self) -> int:
        """How many EMA updates the teacher has had (method state; logged when a checkpoint restores it)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no EMA teacher")

    def verification_prompt(self) -> tuple[str, tuple[str, str]]:
        """(template with ``{question}`` and ``{answer}``, (correct verdict, incorrect verdict)) for the
        self-verification pass (``self_verification`` in ``step_needs``)."""
        raise NotImplementedError(f"{type(self).__name__} asks for no self-verification")

    def logits_chunk_size(self) -> int:
        """Most tokens per chunk when the engine computes statistics over the full logits width (the
        kernel's memory budget, :data:`devenus.signals.DEFAULT_BUDGET_BYTES`, may lower it)."""
        return DEFAULT_CHUNK_SIZE

    # ---- state that later steps depend on: saved beside verl's checkpoint ------------------------
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state but was given {sorted(state)}")

    # ---- evidence: what later rounds need, written by the adapter to the evidence table ------------
    def pop_evidence(self) -> list[dict[str, Any]]:
        """This step's evidence rows, handed over once (the adapter appends them to the run's evidence
        table, :class:`devenus.records.evidence.EvidenceWriter`): dicts with ``key``, ``step``, ``kind``
        and optionally ``majority_answer``, ``majority_pass_rate``, ``target_pass_rate``, ``values``."""
        return []

    # ---- metrics: logged under devenus/<name>/... in verl's step metrics --------------------------
    def log(self, **values: float) -> None:
        self._metrics.update({k: float(v) for k, v in values.items()})

    def pop_metrics(self) -> dict[str, float]:
        out, self._metrics = self._metrics, {}
        return out
