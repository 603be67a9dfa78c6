"""The online method interface: four optional surfaces, identity when not implemented.

Surfaces (architecture.md, "The online step"):

- ``construct_targets`` (S_y): a new target per row, or None to keep it. Rows whose target changes are
  re-scored by the verifier against the new target.
- ``admit`` (S_b): a keep mask per row, constant within a group (whole groups are admitted or dropped).
- ``construct_rewards`` (S_r): a sequence score per row, or NaN to keep verl's reward; placed at the
  last valid response token. Methods listing ``token_stats`` in ``needs`` get per-token log-probs and
  entropy from the actor's existing forward pass.
- ``advantage_weights`` (S_a): a per-row weight in [0, 1] that scales GRPO advantages.

``needs`` is read from the method *instance* (by the adapter and by the setup check before Ray starts).
The class attribute is the default; a method whose requirements depend on its config overrides
:meth:`OnlineMethod.needs_from_config` (e.g. self-certainty only when its reward weight is non-zero).

Labeled rows keep their verified reward and target unless the method sets ``may_change_labeled``
(label refinement methods such as OLR do): the adapter enforces this, not the method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np

from devenus.online.rollouts import RolloutBatch

#: what a method may require of the data or the step; checked before training starts
NEEDS = frozenset({"labels", "unlabeled", "token_stats", "self_certainty", "responses", "paraphrases", "teacher",
                   "self_verification"})


@dataclass
class MethodConfig:
    """Base config: every method's config dataclass derives from it (keys live under ``devenus.<name>``)."""


class OnlineMethod:
    name: ClassVar[str] = ""
    config_class: ClassVar[type[MethodConfig]] = MethodConfig
    needs: frozenset[str] = frozenset()  # the class default; each instance holds its own (needs_from_config)
    may_change_labeled: ClassVar[bool] = False

    def __init__(self, config: MethodConfig | None = None):
        self.config = config if config is not None else self.config_class()
        self._metrics: dict[str, float] = {}
        needs = frozenset(self.needs_from_config())
        if needs - NEEDS:
            raise ValueError(f"{type(self).__name__} declares unknown needs {sorted(needs - NEEDS)}; known: {sorted(NEEDS)}")
        self.needs = needs

    def needs_from_config(self) -> frozenset[str]:
        """What this instance needs, given ``self.config`` (default: the class's ``needs``)."""
        return type(self).needs

    # ---- surfaces (None = identity) -------------------------------------------------------------
    def construct_targets(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def admit(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def construct_rewards(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    def advantage_weights(self, batch: RolloutBatch) -> np.ndarray | None:
        return None

    # ---- generation-only rollouts (e.g. TTRL's vote-on-N / train-on-M) ----------------------------
    def extra_rollouts(self, n: int) -> Sequence[float | None]:
        """Extra rollouts per prompt, beyond the ``n`` that train: one entry per extra rollout, its
        sampling temperature (None = the rollout's own). They are generated in the same call as the
        training rollouts, seen only by ``construct_targets`` (``batch.fields["vote_only"]`` marks
        them) and dropped, as one aligned selection, before the log-prob passes. Raise ValueError for
        a config that cannot work with ``n`` (it is checked before training starts)."""
        return ()

    # ---- which surfaces this method implements (the adapter skips the others entirely) -----------
    @classmethod
    def implements(cls, surface: str) -> bool:
        return getattr(cls, surface) is not getattr(OnlineMethod, surface)

    # ---- state that later steps depend on: saved beside verl's checkpoint ------------------------
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state but was given {sorted(state)}")

    # ---- metrics: logged under devenus/<name>/... in verl's step metrics --------------------------
    def log(self, **values: float) -> None:
        self._metrics.update({k: float(v) for k, v in values.items()})

    def pop_metrics(self) -> dict[str, float]:
        out, self._metrics = self._metrics, {}
        return out
