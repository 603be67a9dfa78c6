"""Dynamic sampling with refill (DAPO's rule, arXiv 2503.14476), verl-free: which groups of a step teach
nothing, which slots of the step's batch are empty, which refill groups fill them, and the step's metrics.

A *slot* is one prompt's group of ``n`` training rows in the step's batch; the adapter keeps the row count
constant and replaces a slot's rows in place (docs/sampling/dynamic_sampling.md). A slot is *empty* when

- its group has zero variance: every training row's final score (verified, pseudo-label or confidence
  reward: whatever S_y / S_r left in the batch) lies within ``tolerance`` of the others, so GRPO gives it
  zero advantage; or
- it is a *placeholder*: a prompt a :class:`PreRolloutFilter` skipped before rollout, whose rows are
  copies that must never train.

Refill rounds generate further prompts (a seeded order over the training set, :class:`RefillOrder`), as
many as the empty slots need (:func:`refill_size`), and :class:`SlotComposer` fills empty slots with their
informative groups, placeholders first. A zero-variance
slot still empty after the last round keeps its own rows (GRPO gives it zero advantage anyway); a
placeholder still empty is filled from further prompts without the variance filter, so nothing trains on
a copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, Sequence

import numpy as np

from devenus.config import ConfigError, option
from devenus.online.config import OverlayConfig
from devenus.online.rollouts import RolloutBatch

#: the non-tensor column that marks a skipped prompt's placeholder rows
PLACEHOLDER_KEY = "devenus_placeholder"
#: always logged: responses generated for this training step (training + refill + vote-only rows)
ROLLOUTS_GENERATED = "devenus/rollouts/generated"
#: always logged: wall seconds of this step's training generate calls (first call, refill rounds, vote-only
#: generations; verl's timing_s/gen misses refill rounds, which run inside its old_log_prob timer)
GENERATION_S = "devenus/timing_s/generation"


class DynamicSamplingConfigError(ConfigError):
    """A ``devenus.dynamic_sampling`` setting that cannot run."""


@dataclass(frozen=True)
class DynamicSamplingConfig(OverlayConfig):
    key_path: ClassVar[str] = "devenus.dynamic_sampling"
    error: ClassVar[type[ConfigError]] = DynamicSamplingConfigError

    enabled: bool = option(False, "drop zero-variance groups and refill their slots from further prompts")
    max_refill_rounds: int = option(2, "extra generation rounds per step, at most", ge=0, le=64)
    refill_prompts: int = option(0, "prompts per refill round; 0 (auto): the slots still empty divided by the "
                                    "informative share of the prompts this step has drawn so far, at most "
                                    "data.train_batch_size (a round sized to its need, not a whole batch: rollouts "
                                    "are the cost measured; docs/sampling/dynamic_sampling.md)", ge=0)
    tolerance: float = option(1e-6, "scores of one group within this of each other count as equal", ge=0.0, le=1.0)
    seed: int = option(0, "seed of the refill order over the training set", ge=0)

    def prompts_per_round(self, train_batch_size: int) -> int:
        """The most prompts one refill round draws (auto: a whole batch, when nothing was informative)."""
        return self.refill_prompts or int(train_batch_size)


class PreRolloutFilter(Protocol):
    """A rule that skips prompts before rollout (:class:`devenus.online.sampling.skipping.SkipRule`, ``devenus.skip``).
    Skipped prompts' slots become placeholders that refill fills. Its metrics go to verl's trackers and its
    evidence rows to the run's evidence table after every step; its state is saved with each checkpoint."""

    def decide(self, keys: Sequence[str], step: int, granule: int = 1) -> np.ndarray:
        """One bool per prompt: True = skip (never generated). Deterministic given its state. The prompts
        it keeps are a non-zero multiple of ``granule`` (:func:`refill_granule`) where the call allows one
        (the adapter refuses a decision that breaks this with a one-line error)."""

    def observe(self, keys: Sequence[str], zero_variance: np.ndarray, mean_score: np.ndarray, step: int) -> None:
        """One entry per generated group of the step, on its final scores."""

    def pop_metrics(self) -> dict[str, float]:
        """The step's metrics (``devenus/<rule>/...``), handed over once."""

    def pop_evidence(self) -> list[dict]:
        """The step's evidence rows (:class:`devenus.records.evidence.EvidenceWriter` rows), handed over once."""

    def state_dict(self) -> dict:
        """What a resumed run needs to decide the same (plain Python values)."""

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`'s value."""


# ------------------------------------------------------------------------------ the group rule
@dataclass
class Groups:
    """The step's groups (training rows only), in :meth:`RolloutBatch.groups` order."""

    rows: list[np.ndarray]
    uid: np.ndarray  # object
    key: np.ndarray  # object
    labeled: np.ndarray  # bool: every row of the group is labeled (diagnostics' convention)
    zero_variance: np.ndarray  # bool
    placeholder: np.ndarray  # bool
    mean_score: np.ndarray  # float

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def empty(self) -> np.ndarray:
        return self.zero_variance | self.placeholder

    @property
    def informative(self) -> np.ndarray:
        return ~self.empty


def judge(batch: RolloutBatch, tolerance: float = 1e-6) -> Groups:
    """Zero variance of each group's final scores (vote-only rows excluded: they never train). A group of
    one row, or a placeholder, has no variance; a NaN score makes the group's spread NaN: not zero."""
    train = ~batch.vote_only
    placeholder_rows = np.asarray(batch.fields.get(PLACEHOLDER_KEY, np.zeros(len(batch), bool)), bool)
    score, labeled = np.asarray(batch.score, np.float64), np.asarray(batch.labeled)
    rows = [g for g in (g[train[g]] for g in batch.groups()) if len(g)]
    ph = np.array([placeholder_rows[g].any() for g in rows], bool)
    zero = np.array([len(g) < 2 or (np.max(score[g]) - np.min(score[g])) <= tolerance for g in rows], bool)
    first = [g[0] for g in rows]
    return Groups(rows, np.asarray(batch.uid)[first] if rows else np.empty(0, object),
                  np.asarray(batch.key)[first] if rows else np.empty(0, object),
                  np.array([labeled[g].all() for g in rows], bool), zero & ~ph, ph,
                  np.array([np.mean(score[g]) for g in rows], np.float64))


# ------------------------------------------------------------------------------ the slot composition
@dataclass
class SlotComposer:
    """Which refill group goes into which empty slot of the step's batch.

    ``placeholder`` / ``zero_variance``: per slot of the step's batch. Placeholders are filled first (they
    must be), then zero-variance slots, each in slot order; an informative slot is never touched.
    """

    placeholder: np.ndarray
    zero_variance: np.ndarray
    filled: np.ndarray = field(init=False)
    filled_unfiltered: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.placeholder = np.asarray(self.placeholder, bool)
        self.zero_variance = np.asarray(self.zero_variance, bool) & ~self.placeholder
        if self.placeholder.shape != self.zero_variance.shape:
            raise ValueError(f"{len(self.placeholder)} placeholder flags for {len(self.zero_variance)} slots")
        self.filled = np.zeros(len(self.placeholder), bool)

    def open_slots(self, variance_filter: bool = True) -> np.ndarray:
        """Empty slots not yet filled, placeholders first (zero-variance slots only with the filter on)."""
        ph = np.flatnonzero(self.placeholder & ~self.filled)
        if not variance_filter:
            return ph
        return np.concatenate([ph, np.flatnonzero(self.zero_variance & ~self.filled)])

    def done(self, variance_filter: bool = True) -> bool:
        return len(self.open_slots(variance_filter)) == 0

    def offer(self, informative: np.ndarray, variance_filter: bool = True) -> list[tuple[int, int]]:
        """(slot, candidate) pairs: this round's informative candidates (by position) into open slots. Without
        the variance filter every non-placeholder candidate counts, and only placeholder slots are open."""
        open_ = self.open_slots(variance_filter)
        cand = np.flatnonzero(np.asarray(informative, bool))
        pairs = [(int(s), int(c)) for s, c in zip(open_, cand)]
        self.filled[[s for s, _ in pairs]] = True
        if not variance_filter:
            self.filled_unfiltered += len(pairs)
        return pairs

    @property
    def unfilled(self) -> int:
        """Empty slots left (zero-variance slots keep their own rows; placeholders are never left)."""
        return int(((self.placeholder | self.zero_variance) & ~self.filled).sum())

    @property
    def placeholders_unfilled(self) -> int:
        return int((self.placeholder & ~self.filled).sum())


# ------------------------------------------------------------------------------ how many refill prompts
def refill_size(open_slots: int, drawn: int, informative: int, batch_size: int, explicit: int = 0,
                granule: int = 1, variance_filter: bool = True) -> int:
    """Prompts the next refill round draws to fill ``open_slots`` empty slots.

    ``explicit`` > 0 (``refill_prompts=N``): N. Otherwise (auto) the expected need: ``open_slots`` divided by
    the informative share ``informative / drawn`` of the prompts this step has drawn so far (its own batch,
    skipped prompts included, plus its earlier refill rounds: the freshest estimate, and no state to
    checkpoint), rounded up, at most ``batch_size`` (the share is floored at ``open_slots / batch_size``,
    so a step with no informative group yet draws one batch, as the whole-batch rule did). Without the
    variance filter (the placeholders' last resort: no skip rule, no variance rule) every drawn prompt
    fills a slot, so the need is ``open_slots``. Rounded up to ``granule`` (the fewest prompts whose
    rollouts the agent-loop workers split evenly; it divides ``batch_size``, checked before Ray starts).
    """
    if open_slots <= 0:
        return 0
    if explicit:
        return int(explicit)
    granule = max(1, int(granule))
    cap = -(-int(batch_size) // granule) * granule
    if not variance_filter:
        k = open_slots
    elif drawn <= 0 or informative <= 0:
        k = cap
    else:
        k = math.ceil(open_slots * drawn / informative)  # open / share, in integers (no float round-off)
    return min(-(-k // granule) * granule, cap)


def refill_granule(workers: int, rollouts_per_prompt: Sequence[int]) -> int:
    """The fewest prompts whose ``r`` rollouts (each ``r`` of a generate call) split evenly over ``workers``."""
    g = 1
    for r in rollouts_per_prompt:
        need = int(workers) // math.gcd(int(r), int(workers))
        g = g * need // math.gcd(g, need)
    return g


# ------------------------------------------------------------------------------ where refill prompts come from
class RefillOrder:
    """A seeded order over the training set's rows, epoch after epoch (permutation ``default_rng([seed,
    epoch])``), with a cursor: the only state, saved in the checkpoint so a resumed run refills the same
    prompts. Rows whose key is excluded (the step's own prompts, this step's earlier refills) are passed over."""

    def __init__(self, keys: Sequence[str], seed: int = 0):
        self.keys = np.asarray([str(k) for k in keys], dtype=object)
        self.seed = int(seed)
        self.epoch, self.pos = 0, 0
        self._perm = self._permutation()

    def _permutation(self) -> np.ndarray:
        return np.random.default_rng([self.seed, self.epoch]).permutation(len(self.keys))

    def take(self, k: int, exclude: set[str] = frozenset()) -> np.ndarray:
        """Up to ``k`` dataset indices, never an excluded key nor one key twice; fewer when one full pass
        over the set finds no more."""
        out: list[int] = []
        seen = set(exclude)
        for _ in range(len(self.keys)):
            if len(out) >= k:
                break
            if self.pos >= len(self._perm):
                self.epoch, self.pos = self.epoch + 1, 0
                self._perm = self._permutation()
            i = int(self._perm[self.pos])
            self.pos += 1
            if self.keys[i] not in seen:
                seen.add(self.keys[i])
                out.append(i)
        return np.asarray(out, dtype=np.int64)

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "epoch": self.epoch, "pos": self.pos, "rows": len(self.keys)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if int(state["rows"]) != len(self.keys) or int(state["seed"]) != self.seed:
            raise ValueError(f"refill cursor saved for {state['rows']} rows with seed {state['seed']}; this run has "
                             f"{len(self.keys)} rows and devenus.dynamic_sampling.seed={self.seed}")
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._perm = self._permutation()


# ------------------------------------------------------------------------------ metrics
def step_metrics(first: Groups, refills: Sequence[Groups], composer: SlotComposer, rounds: int,
                 rollouts: int, weight_syncs: int) -> dict[str, float]:
    """``devenus/sampling/...`` of one step: what was generated, what trains, what was left, and the
    weight syncs the refill rounds' wakes cost beyond the step's own."""
    generated = [first, *refills]
    m: dict[str, float] = {
        "devenus/sampling/rollouts_generated": float(rollouts),
        "devenus/sampling/refill_rounds": float(rounds),
        "devenus/sampling/extra_weight_syncs": float(weight_syncs),
        "devenus/sampling/refill_groups": float(sum(len(g) for g in refills)),
        # refill prompts drawn that fill no slot (skipped, zero-variance, or surplus): methods still see the
        # generated ones as visits; sizing rounds to their need keeps this small
        "devenus/sampling/refill_groups_unused": float(sum(len(g) for g in refills) - composer.filled.sum()),
        "devenus/sampling/groups_zero_variance": float(first.zero_variance.sum()),
        "devenus/sampling/groups_placeholder": float(first.placeholder.sum()),
        # informative slots the step trains on: those it had, plus those refill filled with informative groups
        "devenus/sampling/groups_kept": float(first.informative.sum() + composer.filled.sum()
                                              - composer.filled_unfiltered),
        "devenus/sampling/slots_unfilled": float(composer.unfilled),
        "devenus/sampling/slots_filled_unfiltered": float(composer.filled_unfiltered),
    }
    lab = np.concatenate([g.labeled[~g.placeholder] for g in generated])
    zero = np.concatenate([g.zero_variance[~g.placeholder] for g in generated])
    for name, sel in (("labeled", lab), ("unlabeled", ~lab)):
        if sel.any():
            m[f"devenus/sampling/zero_variance_share/{name}"] = float(zero[sel].mean())
    if len(zero):
        m["devenus/sampling/zero_variance_share"] = float(zero.mean())
    return m
