"""Probe passes: generation-only passes over the unlabeled pool (or a seeded sample of it) every k steps.

What a probe is (docs/trainer.md, "Probe passes"): after the actor update of every ``every_k_steps``-th
step, the trainer generates ``n`` rollouts per probed question through verl's own rollout (the same
``async_rollout_manager.generate_sequences`` and agent-loop reward as training rollouts) and no actor
update follows. Each probed question is one visit: it goes to the method exactly like a training visit
(its ``observe`` hook sees it; the refinement methods record it as they record a training visit), and its evidence rows are tagged
``kind = probe`` (proposals keep ``kind = proposal``, with ``values.source = "probe"``). Methods that
keep no evidence get one generic row per question (majority answer, its pass rate, the target's).

This module holds the verl-free parts (config, the probe set, the evidence rows), unit-tested without
verl; :class:`devenus.adapters.verl.trainer.DeVenusTrainer` runs the pass itself.

Config (``+devenus.probe.<key>=<value>``; off unless ``every_k_steps`` > 0):

- ``every_k_steps``: probe after steps k, 2k, ... (0: never);
- ``pool``: ``unlabeled`` (default), ``labeled`` or ``all`` training rows;
- ``sample_size``: questions per probe, a seeded sample of the pool drawn once, so the same questions
  are probed every time and build a trajectory (0: the whole pool);
- ``seed``: the sample's seed;
- ``n``: rollouts per probed question (0: ``actor_rollout_ref.rollout.n``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from devenus.config import ConfigError, option
from devenus.online.config import OverlayConfig

POOLS = ("unlabeled", "labeled", "all")
PROBE_KIND = "probe"


class ProbeConfigError(ConfigError):
    """A ``devenus.probe`` setting that cannot run."""


@dataclass(frozen=True)
class ProbeConfig(OverlayConfig):
    key_path: ClassVar[str] = "devenus.probe"
    error: ClassVar[type[ConfigError]] = ProbeConfigError

    every_k_steps: int = option(0, "probe after steps k, 2k, ... (0: never)", ge=0)
    pool: str = option("unlabeled", "the training rows probed", choices=POOLS)
    sample_size: int = option(0, "questions per probe, a seeded sample drawn once (0: the whole pool)", ge=0)
    seed: int = option(0, "the sample's seed", ge=0)
    n: int = option(0, "rollouts per probed question (0: actor_rollout_ref.rollout.n)", ge=0)

    @property
    def enabled(self) -> bool:
        return self.every_k_steps > 0

    def due(self, step: int) -> bool:
        """Whether a probe runs after trainer step ``step`` (steps count from 1)."""
        return self.enabled and step >= 1 and step % self.every_k_steps == 0

    def rollouts(self, rollout_n: int) -> int:
        return self.n or int(rollout_n)


def probe_set(labeled: Sequence[bool], config: ProbeConfig) -> np.ndarray:
    """Dataset indices to probe, ascending: the pool's rows, or ``sample_size`` of them drawn with
    ``seed`` (the same draw on every probe and after a resume: no state to save)."""
    lab = np.asarray(labeled, dtype=bool)
    pool = {"unlabeled": np.flatnonzero(~lab), "labeled": np.flatnonzero(lab), "all": np.arange(len(lab))}[config.pool]
    if config.sample_size and config.sample_size < len(pool):
        rng = np.random.default_rng(config.seed)
        pool = np.sort(rng.choice(pool, size=config.sample_size, replace=False))
    return pool.astype(np.int64)


def chunks(indices: np.ndarray, size: int) -> list[np.ndarray]:
    """``indices`` in consecutive pieces of at most ``size`` (one generate call each)."""
    size = max(1, int(size))
    return [indices[i:i + size] for i in range(0, len(indices), size)]


def probe_evidence(method, view) -> list[dict[str, Any]]:
    """The evidence rows of one probe's rollouts (``view``: a :class:`devenus.online.rollouts.RolloutBatch`
    whose ``step`` is the step the probe ran after).

    A method that observes probes sees the probe as a visit (its ``observe`` hook: nothing trains on a
    probe) and its evidence rows are re-tagged: ``visit`` -> ``probe``,
    other kinds (proposals) keep their kind and carry ``values.source = "probe"``. Rows the method held
    from before the probe are returned untouched first (the trainer writes them at the update, so
    normally there are none). Any other method gets one generic row per probed question.
    """
    from devenus.online.noise import redraw_noisy_targets
    from devenus.online.step import StepRules, _default_grade

    view = StepRules.without_truncated_answers(view)  # a truncated response abstains, as in training
    redraw_noisy_targets(view, _default_grade)  # simulated active noise: a probe is a visit, its label redrawn too
    if method.implements("observe"):
        before = method.pop_evidence()
        method.observe(view)
        return list(before) + [{**r, "kind": PROBE_KIND} if r.get("kind") == "visit"
                               else {**r, "values": {**(r.get("values") or {}), "source": PROBE_KIND}}
                               for r in method.pop_evidence()]
    from devenus.online.rollouts import observe_groups

    return [{"key": str(view.key[rows_[0]]), "step": visit.step, "kind": PROBE_KIND, "majority_answer": visit.majority,
             "majority_pass_rate": visit.majority_pass_rate, "target_pass_rate": visit.target_pass_rate,
             "values": {"labeled": visit.labeled, "rollouts": int(len(rows_))}}
            for rows_, visit in observe_groups(view)]


def majority_accuracy(rows: list[dict[str, Any]], hidden: Mapping[str, str | None]) -> float | None:
    """Share of probed questions (``kind = probe`` rows) whose majority answer is the hidden answer
    (simulation truth); None without truth."""
    from devenus.signals.votes import equivalent

    judged = [(r["majority_answer"], hidden[r["key"]]) for r in rows
              if r.get("kind") == PROBE_KIND and hidden.get(r["key"]) is not None]
    if not judged:
        return None
    return float(np.mean([equivalent(m, h) for m, h in judged]))
