"""Dynamic sampling's verl-free rules (devenus.online.sampling.dynamic_sampling) on hand-built RolloutBatches: the zero-variance
group rule on verified, pseudo-label and confidence rewards, the slot composition with placeholders, the refill
order and its cursor, the step metrics and the config."""

from __future__ import annotations

import numpy as np
import pytest

from batches import rollouts
from devenus.config import ConfigError, config_from_dict
from devenus.online.rollouts import RolloutBatch
from devenus.online.sampling.dynamic_sampling import (PLACEHOLDER_KEY, DynamicSamplingConfig, RefillOrder, SlotComposer, judge,
                                     refill_granule, refill_size, step_metrics)


def batch(scores, labeled=None, size=4, shuffle=None, **fields) -> RolloutBatch:
    n = len(scores)
    labeled = [True] * (n // size) if labeled is None else labeled
    uid = np.array([f"u{i // size}" for i in range(n)], object)
    lab = np.array([labeled[i // size] for i in range(n)], bool)
    b = rollouts([None] * n, uid, key=[f"k{i // size}" for i in range(n)], labeled=lab, score=scores,
                 response_length=3, fields={k: np.asarray(v) for k, v in fields.items()})
    return b if shuffle is None else b.select(shuffle)


def test_zero_variance_on_verified_pseudo_label_and_confidence_rewards():
    verified = [0, 0, 0, 0, 1, 1, 1, 1, 0, 1, 0, 0]
    assert judge(batch(verified)).zero_variance.tolist() == [True, True, False]
    pseudo = [1, 1, 1, 1, 0, 1, 1, 1]  # TTRL: agreement with the majority
    assert judge(batch(pseudo, labeled=[False, False])).zero_variance.tolist() == [True, False]
    conf = [0.31, 0.31 + 1e-9, 0.31, 0.31, 0.2, 0.4, 0.3, 0.3]  # self-certainty: continuous
    assert judge(batch(conf), tolerance=1e-6).zero_variance.tolist() == [True, False]
    assert judge(batch(conf), tolerance=0.0).zero_variance.tolist() == [False, False]
    assert judge(batch([0.2, 0.25, 0.3, 0.2]), tolerance=0.1).zero_variance.tolist() == [True]


def test_groups_follow_uid_not_position_and_skip_vote_only_rows():
    # verl's balancing reorders rows: groups are found by uid wherever their rows are
    g = judge(batch([0, 0, 0, 0, 1, 0, 1, 1], shuffle=[0, 4, 1, 5, 2, 6, 3, 7]))
    assert g.zero_variance.tolist() == [True, False] and [r.tolist() for r in g.rows] == [[0, 2, 4, 6], [1, 3, 5, 7]]
    # a group whose training rows agree is zero-variance whatever its vote-only rows scored
    vo = batch([1, 1, 0, 0, 1, 0, 1, 0], size=4, vote_only=[0, 0, 1, 1, 0, 0, 0, 0])
    g = judge(vo)
    assert g.zero_variance.tolist() == [True, False] and g.rows[0].tolist() == [0, 1]
    assert judge(batch([1.0, float("nan"), 1, 1])).zero_variance.tolist() == [False]  # NaN: not "equal"


def test_placeholders_are_empty_not_zero_variance_and_label_state_is_per_group():
    b = batch([1, 1, 1, 1, 0, 1, 0, 1, 0, 0, 0, 0], labeled=[True, False, False],
              **{PLACEHOLDER_KEY: [1] * 4 + [0] * 8})
    g = judge(b)
    assert g.placeholder.tolist() == [True, False, False] and g.zero_variance.tolist() == [False, False, True]
    assert g.empty.tolist() == [True, False, True] and g.labeled.tolist() == [True, False, False]
    assert g.mean_score.tolist() == [1.0, 0.5, 0.0] and g.key.tolist() == ["k0", "k1", "k2"]


def test_composition_fills_placeholders_first_then_zero_variance_slots_and_leaves_the_rest():
    c = SlotComposer(placeholder=[False, True, False, False], zero_variance=[True, False, False, True])
    assert c.open_slots().tolist() == [1, 0, 3]
    assert c.offer([False, True, False]) == [(1, 1)]  # one informative candidate: the placeholder takes it
    assert c.offer([True, True, True]) == [(0, 0), (3, 1)]  # the third candidate is left over
    assert c.done() and c.unfilled == 0 and c.offer([True]) == []
    c = SlotComposer(placeholder=[True, False], zero_variance=[False, True])
    assert c.offer([False, False]) == [] and c.unfilled == 2 and c.placeholders_unfilled == 1
    # the last resort: a placeholder takes any real group (no variance filter); zero-variance slots stay
    assert c.open_slots(variance_filter=False).tolist() == [0]
    assert c.offer([True], variance_filter=False) == [(0, 0)] and c.filled_unfiltered == 1
    assert c.placeholders_unfilled == 0 and c.unfilled == 1 and c.done(variance_filter=False)


def test_refill_order_is_seeded_avoids_excluded_keys_and_resumes_from_its_cursor():
    keys = [f"k{i}" for i in range(10)]
    a = RefillOrder(keys, seed=3)
    first = a.take(4, exclude={"k0", "k1"})
    assert len(first) == 4 and not {keys[i] for i in first} & {"k0", "k1"}
    state = a.state_dict()
    nxt = a.take(6)
    b = RefillOrder(keys, seed=3)
    b.load_state_dict(state)
    assert b.take(6).tolist() == nxt.tolist()  # a resumed run refills the same prompts
    assert RefillOrder(keys, seed=3).take(4, {"k0", "k1"}).tolist() == first.tolist()
    assert RefillOrder(keys, seed=4).take(10).tolist() != RefillOrder(keys, seed=3).take(10).tolist()
    # epochs wrap; one call never returns a key twice, and returns fewer when the set runs out
    c = RefillOrder(keys[:3], seed=0)
    assert len(c.take(2)) == 2 and len(set(c.take(5).tolist())) == 3 and c.epoch == 1
    assert len(RefillOrder(keys[:3]).take(5, exclude={"k0"})) == 2
    with pytest.raises(ValueError, match="seed"):
        RefillOrder(keys, seed=5).load_state_dict(state)


def test_refill_size_is_the_open_slots_over_the_informative_share_so_far_within_one_batch():
    # 16 prompts drawn, 4 informative (share 1/4): 3 empty slots need 12 prompts, 5 would need 20 -> one batch
    assert refill_size(3, drawn=16, informative=4, batch_size=16) == 12
    assert refill_size(5, drawn=16, informative=4, batch_size=16) == 16
    # share 13/16 (the testbed's late steps): 3 slots -> ceil(3 * 16 / 13) = 4 prompts, not a batch of 16
    assert refill_size(3, drawn=16, informative=13, batch_size=16) == 4
    assert refill_size(1, drawn=16, informative=15, batch_size=16) == 2  # ceil(16 / 15): never under the need
    assert refill_size(2, drawn=16, informative=8, batch_size=16) == 4  # exact: no float round-off upwards
    # the share pools every round so far: 16 + 12 drawn, 4 + 6 informative -> 2 slots need ceil(2 * 28 / 10) = 6
    assert refill_size(2, drawn=28, informative=10, batch_size=16) == 6
    # nothing informative yet (or nothing drawn): one batch, as the whole-batch rule did; no slot open: nothing
    assert refill_size(4, drawn=16, informative=0, batch_size=16) == 16
    assert refill_size(4, drawn=0, informative=0, batch_size=16) == 16
    assert refill_size(0, drawn=16, informative=0, batch_size=16) == 0
    # without the variance filter (the placeholders' last resort) every drawn prompt fills a slot
    assert refill_size(3, drawn=16, informative=1, batch_size=16, variance_filter=False) == 3
    assert refill_size(30, drawn=16, informative=1, batch_size=16, variance_filter=False) == 16
    # refill_prompts=N still means N, whatever the share; zero open slots still draw nothing
    assert refill_size(1, drawn=16, informative=15, batch_size=16, explicit=16) == 16
    assert refill_size(9, drawn=16, informative=1, batch_size=16, explicit=3) == 3
    assert refill_size(0, drawn=16, informative=1, batch_size=16, explicit=3) == 0
    # rounded up to the workers' granule, never past the batch
    assert refill_size(3, drawn=16, informative=13, batch_size=16, granule=4) == 4
    assert refill_size(5, drawn=16, informative=13, batch_size=16, granule=4) == 8
    assert refill_size(5, drawn=16, informative=4, batch_size=16, granule=4) == 16
    # a granule of one batch (late placement: verl's log-prob pass needs the step's shape) is whole batches
    assert refill_size(1, drawn=16, informative=15, batch_size=16, granule=16) == 16
    assert refill_size(1, drawn=16, informative=15, batch_size=16, granule=16, variance_filter=False) == 16


def test_refill_granule_is_the_fewest_prompts_every_generate_call_splits_evenly():
    assert refill_granule(1, [8]) == 1
    assert refill_granule(8, [8]) == 1  # 8 rollouts a prompt: any prompt count splits over 8 workers
    assert refill_granule(8, [4]) == 2 and refill_granule(8, [3]) == 8
    assert refill_granule(8, [4, 6]) == 4  # training rollouts and vote-on-N: both calls must split
    assert refill_granule(2, [3, 5]) == 2


def test_step_metrics_count_kept_groups_rounds_and_zero_variance_by_label_state():
    first = judge(batch([0, 0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 0, 0], labeled=[True, True, False, False],
                        **{PLACEHOLDER_KEY: [0] * 12 + [1] * 4}))
    c = SlotComposer(first.placeholder, first.zero_variance)
    refill = judge(batch([1, 0, 1, 1, 0, 0, 0, 0], labeled=[True, False]))
    c.offer(refill.informative)
    m = step_metrics(first, [refill], c, rounds=1, rollouts=12 + 8, weight_syncs=1)
    assert m["devenus/sampling/groups_zero_variance"] == 2 and m["devenus/sampling/groups_placeholder"] == 1
    assert m["devenus/sampling/groups_kept"] == 2  # the one informative + the placeholder's refill
    assert m["devenus/sampling/slots_unfilled"] == 2 and m["devenus/sampling/refill_rounds"] == 1
    assert m["devenus/sampling/extra_weight_syncs"] == 1
    assert m["devenus/sampling/rollouts_generated"] == 20 and m["devenus/sampling/refill_groups"] == 2
    assert m["devenus/sampling/refill_groups_unused"] == 1  # r1 is zero-variance: generated, fills nothing
    # generated groups, placeholders aside: labeled g0 (zero), g1, r0; unlabeled g2 (zero), r1 (zero)
    assert m["devenus/sampling/zero_variance_share/labeled"] == pytest.approx(1 / 3)
    assert m["devenus/sampling/zero_variance_share/unlabeled"] == 1.0
    assert m["devenus/sampling/zero_variance_share"] == pytest.approx(3 / 5)


def test_config_keys_bounds_and_defaults():
    c = config_from_dict(DynamicSamplingConfig, None)
    assert c == DynamicSamplingConfig() and not c.enabled and c.prompts_per_round(8) == 8
    assert config_from_dict(DynamicSamplingConfig, {"enabled": True, "refill_prompts": 3}).prompts_per_round(8) == 3
    assert c.refill_prompts == 0  # auto: refill_size sizes each round to its open slots
    with pytest.raises(ConfigError, match="devenus.dynamic_sampling.max_refill_rounds"):
        config_from_dict(DynamicSamplingConfig, {"max_refill_rounds": -1})
    with pytest.raises(ConfigError, match="devenus.dynamic_sampling.tolerance"):
        config_from_dict(DynamicSamplingConfig, {"tolerance": float("nan")})
    with pytest.raises(ConfigError, match="enabled"):
        config_from_dict(DynamicSamplingConfig, {"enable": True})
