"""Dynamic sampling's adapter half on hand-built DataProtos (no Ray): rows replaced in place keep the aliases
fit() holds (its reward tensor is ``rm_scores``, its extra reward arrays are the batch's arrays), placeholder
rows carry the skipped prompt's own input fields in the prompts' row order, and the setup checks refuse
combinations that cannot work before Ray starts."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from verl import DataProto

from devenus.adapters.verl.sampling import prompt_keys, replace_rows, score_view, with_placeholders
from devenus.online.sampling.dynamic_sampling import PLACEHOLDER_KEY, judge


def rows(n, tag, width=3, score=None):
    info = np.array([{"index": f"{tag}{i // 2}"} for i in range(n)], dtype=object)
    rm = torch.zeros(n, width)
    rm[:, -1] = torch.tensor(score if score is not None else [float(i) for i in range(n)])
    return DataProto.from_single_dict({
        "rm_scores": rm, "responses": torch.full((n, width), hash(tag) % 100),
        "uid": np.array([f"{tag}-u{i // 2}" for i in range(n)], dtype=object), "extra_info": info,
        "reward_model": np.array([{"ground_truth": "1"}] * n, dtype=object),
        "acc": np.array([f"{tag}{i}" for i in range(n)]),  # a fixed-width string array, as np.array(list) makes
    }, meta_info={"reward_extra_keys": ["acc"]})


def test_replace_rows_writes_into_the_tensors_and_arrays_fit_holds():
    batch, cand = rows(6, "a"), rows(4, "b", score=[1, 0, 1, 1])
    reward, extra = batch.batch["rm_scores"], batch.non_tensor_batch["acc"]  # what extract_reward returned
    replace_rows(batch, np.array([4, 0]), cand, np.array([0, 1]), frozenset({"acc"}))
    assert reward is batch.batch["rm_scores"] and extra is batch.non_tensor_batch["acc"]
    assert reward[:, -1].tolist() == [0.0, 1, 2, 3, 1.0, 5] and extra.tolist() == ["b1", "a1", "a2", "a3", "b0", "a5"]
    assert batch.non_tensor_batch["uid"].tolist() == ["b-u0", "a-u0", "a-u1", "a-u1", "b-u0", "a-u2"]
    assert len(batch) == 6
    # the composed batch is judged by its new groups
    g = judge(score_view(batch, 1))
    assert g.uid.tolist() == ["b-u0", "a-u0", "a-u1", "a-u2"] and g.zero_variance.tolist() == [False, True, False, True]


def test_replace_rows_widens_a_narrow_string_array_but_never_breaks_a_reward_alias():
    batch, cand = rows(2, "a"), rows(2, "longer")
    replace_rows(batch, np.array([0]), cand, np.array([0]))
    assert batch.non_tensor_batch["acc"].tolist() == ["longer0", "a1"]
    with pytest.raises(ValueError, match="reward column 'acc'"):
        replace_rows(rows(2, "a"), np.array([0]), cand, np.array([0]), frozenset({"acc"}))
    other = rows(2, "b")
    other.non_tensor_batch["more"] = np.zeros(2)
    with pytest.raises(ValueError, match="other columns"):
        replace_rows(rows(2, "a"), np.array([0]), other, np.array([0]))
    with pytest.raises(ValueError, match="'rm_scores' have shape"):
        replace_rows(rows(2, "a"), np.array([0]), rows(2, "b", width=4), np.array([0]))


def test_placeholders_copy_a_generated_row_with_the_skipped_prompts_own_fields_in_prompt_order():
    prompts = rows(6, "p")  # 3 prompts x 2 rows; the second is skipped
    of_row, keys = prompt_keys(prompts)
    assert keys == ["p0", "p1", "p2"] and of_row.tolist() == [0, 0, 1, 1, 2, 2]
    skipped = np.array([False, True, False])[of_row]
    generated = rows(6, "p").select_idxs(np.flatnonzero(~skipped))
    out = with_placeholders(prompts, skipped, generated)
    assert len(out) == 6 and out.non_tensor_batch[PLACEHOLDER_KEY].tolist() == [0, 0, 1, 1, 0, 0]
    for k in ("uid", "extra_info", "acc"):  # fit's union with its batch compares these
        assert out.non_tensor_batch[k].tolist() == prompts.non_tensor_batch[k].tolist()
    assert out.batch["rm_scores"][:, -1].tolist() == [0, 1, 0, 1, 4, 5]  # copies of generated rows 0, 1
    g = judge(score_view(out, 1))
    assert g.placeholder.tolist() == [False, True, False] and g.empty.tolist() == [False, True, False]


@pytest.mark.parametrize("extra, message", [
    (["algorithm.rollout_correction.bypass_mode=true"], "bypass_mode=true skips"),
    (["algorithm.adv_estimator=reinforce_plus_plus"], "not one"),
    (["+devenus.dynamic_sampling.refill_prompts=3", "actor_rollout_ref.rollout.agent.num_workers=2",
      "actor_rollout_ref.rollout.n=3"], "devenus.dynamic_sampling.refill_prompts: 3 refill prompts x 3"),
    (["+devenus.dynamic_sampling.max_refill_rounds=-1"], "devenus.dynamic_sampling.max_refill_rounds"),
])
def test_setup_refuses_dynamic_sampling_that_cannot_work(base_testbed, tmp_path, extra, message):
    from devenus.runs.testbed import RunConfig
    from e2e import setup_error

    cfg = RunConfig(steps=1, prompts_per_step=4, rollouts_per_prompt=4, val_before_train=False)
    assert message in setup_error(base_testbed, tmp_path, cfg, "+devenus.dynamic_sampling.enabled=true", *extra)


def test_setup_checks_skipping_alone_as_it_refills_the_same_way(base_testbed, tmp_path):
    """Skipping without dynamic sampling still refills the skipped slots: the same refusals, naming its key."""
    from devenus.runs.testbed import RunConfig
    from e2e import setup_error

    cfg = RunConfig(steps=1, prompts_per_step=4, rollouts_per_prompt=4, val_before_train=False)
    message = setup_error(base_testbed, tmp_path, cfg, "+devenus.skip.enabled=true",
                          "algorithm.rollout_correction.bypass_mode=true")
    assert "devenus.skip.enabled=true refills inside" in message
    assert "devenus.skip.p_easy" in setup_error(base_testbed, tmp_path, cfg, "+devenus.skip.enabled=true",
                                                "+devenus.skip.p_easy=1.5")


def test_reward_string_columns_become_object_arrays_at_generation_so_longer_refill_strings_fit_in_place():
    from devenus.adapters.verl.sampling import widen_reward_columns

    batch, cand = rows(2, "a"), rows(2, "longer")
    widen_reward_columns(batch)
    widen_reward_columns(cand)
    extra = batch.non_tensor_batch["acc"]
    assert extra.dtype == object
    replace_rows(batch, np.array([0]), cand, np.array([0]), frozenset({"acc"}))
    assert extra is batch.non_tensor_batch["acc"] and extra.tolist() == ["longer0", "a1"]


def test_a_decision_column_only_one_generation_has_gets_its_neutral_value_on_the_other():
    from devenus.adapters.verl import surfaces
    from devenus.adapters.verl.sampling import align_decisions

    batch, cand = rows(4, "a"), rows(2, "b")
    cand.non_tensor_batch[surfaces.ADMIT_KEY] = np.array([False, False])
    batch.non_tensor_batch[surfaces.WEIGHT_KEY] = np.array([0.5, 0.5, 0.2, 0.2])
    align_decisions(batch, cand)
    replace_rows(batch, np.array([0, 1]), cand, np.array([0, 1]))
    assert batch.non_tensor_batch[surfaces.ADMIT_KEY].tolist() == [False, False, True, True]
    assert batch.non_tensor_batch[surfaces.WEIGHT_KEY].tolist() == [1.0, 1.0, 0.2, 0.2]


class SkipPrompt:
    """Test-only pre-rollout filter: skips the prompts whose keys it is given."""

    def __init__(self, keys):
        self.keys, self.asked = set(keys), []

    def decide(self, keys, step, granule=1):
        self.asked.append(list(keys))
        return np.array([k in self.keys for k in keys])

    def observe(self, keys, zero_variance, mean_score, step):
        pass


def test_the_generate_wrapper_generates_only_kept_prompts_and_counts_every_response():
    from test_votes import GROUPS, prompts_for, trainer_with

    t, fake = trainer_with("grpo", 2, GROUPS)
    t.pre_rollout_filter = SkipPrompt({"k1"})
    out = t.async_rollout_manager.generate_sequences(prompts_for(GROUPS, 2, gold=["2", "5", "8"]))
    assert t.pre_rollout_filter.asked == [["k0", "k1", "k2"]]
    assert len(fake.calls) == 1 and list(fake.calls[0].non_tensor_batch["uid"]) == ["u0", "u0", "u2", "u2"]
    assert len(out) == 6 and out.non_tensor_batch[PLACEHOLDER_KEY].tolist() == [0, 0, 1, 1, 0, 0]
    assert t._rollouts_generated == 4  # placeholders are not generated
    # a filter that keeps nothing (the shipped SkipRule never does: decide's granule) is a one-line error, not
    # an empty generate call
    t.pre_rollout_filter = SkipPrompt({"k0", "k1", "k2"})
    with pytest.raises(ValueError, match=r"SkipPrompt.decide kept 0 of 3 prompts; a generate call needs a non-zero "
                                         r"multiple of 1"):
        t.async_rollout_manager.generate_sequences(prompts_for(GROUPS, 2, gold=["2", "5", "8"]))
    # vote-only rows count too: TTRL with 4 votes per prompt, 2 of them training rows
    t, _ = trainer_with("ttrl", 2, GROUPS, votes=4)
    assert len(t.async_rollout_manager.generate_sequences(prompts_for(GROUPS, 2))) == 6
    assert t._rollouts_generated == 12


def test_rollouts_generated_is_logged_every_step_with_sampling_off_and_reset_after():
    from test_votes import GROUPS, prompts_for, trainer_with

    from devenus.online.sampling.dynamic_sampling import ROLLOUTS_GENERATED

    t, _ = trainer_with("grpo", 2, GROUPS)
    assert not t.sampling_config.enabled and t.pre_rollout_filter is None
    out = t.async_rollout_manager.generate_sequences(prompts_for(GROUPS, 2, gold=["2", "5", "8"]))
    batch = DataProto.from_dict(
        tensors={"response_mask": out.batch["response_mask"], "token_level_rewards": out.batch["rm_scores"],
                 "advantages": torch.zeros_like(out.batch["rm_scores"])},
        non_tensors={k: prompts_for(GROUPS, 2, gold=["2", "5", "8"]).non_tensor_batch[k]
                     for k in ("extra_info", "reward_model")})
    _, metrics, _ = t._prepare_update(batch)
    assert metrics[ROLLOUTS_GENERATED] == 6 and t._rollouts_generated == 0


def test_check_kept_wants_a_non_zero_multiple_of_the_granule_where_the_call_has_one():
    from devenus.adapters.verl.trainer import check_kept

    check_kept(SkipPrompt(()), prompts=8, kept=4, granule=2)
    check_kept(SkipPrompt(()), prompts=5, kept=3, granule=2)  # the call itself is no multiple: verl's concern
    for prompts, kept in ((8, 3), (8, 0), (5, 0)):
        with pytest.raises(ValueError, match=f"kept {kept} of {prompts} prompts"):
            check_kept(SkipPrompt(()), prompts=prompts, kept=kept, granule=2)
