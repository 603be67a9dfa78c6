"""The online step's rules (devenus.online.step) on hand-built batches: no verl, no adapter."""

import numpy as np
import pytest

from batches import rollouts
from devenus.online import WeakTrainerInterface
from devenus.online.method import OnlineMethod
from devenus.online.rollouts import RolloutBatch, RowKeyError, label_states, row_identity, truncated_rows
from devenus.online.step import StepRules


def batch(labeled, preds, groups, truncated=None, targets=None, scores=None) -> RolloutBatch:
    return rollouts(preds, groups, labeled=labeled, target=targets, score=0.0 if scores is None else scores,
                    truncated=False if truncated is None else truncated,
                    response=[f"so \\boxed{{{p}}}" if p is not None else "no answer" for p in preds])


class Everywhere(OnlineMethod):
    """Proposes "7" for every row, labeled ones included."""

    name = "test_everywhere"

    def construct_targets(self, b):
        return np.array(["7"] * len(b), dtype=object)


class Refiner(Everywhere):
    name = "test_refiner"
    may_change_labeled = True


def test_labeled_rows_keep_their_target_unless_the_method_may_change_labels():
    b = batch([True, True, False, False], ["7", "1", "7", "3"], ["a", "a", "b", "b"], scores=[0, 1, 0, 0])
    rules = StepRules(Everywhere())
    out = rules.targets(b)
    assert list(out.view.target) == ["1", "1", "7", "7"]
    assert list(out.view.score) == [0.0, 1.0, 1.0, 0.0]  # unlabeled rows re-graded against "7"
    assert list(out.regraded) == [False, False, True, True]
    assert rules.metrics["devenus/target/labeled_protected"] == 2
    out = StepRules(Refiner()).targets(batch([True, True, False, False], ["7", "1", "7", "3"], ["a", "a", "b", "b"]))
    assert list(out.view.target) == ["7"] * 4 and list(out.view.score) == [1.0, 0.0, 1.0, 0.0]


def test_later_surfaces_see_the_targets_the_step_accepted_from_s_y():
    """S_r / S_b / S_a see S_y's outcome in the batch (``constructed``): the substituted rows, not the
    refused proposals on labeled rows."""
    seen = {}

    class Reads(Everywhere):
        name = "test_reads"

        def admit(self, b):
            seen["admit"] = b.constructed.tolist()
            return np.ones(len(b), bool)

        def advantage_weights(self, b):
            seen["weights"] = b.constructed.tolist()
            return np.ones(len(b))

    rules = StepRules(Reads())
    out = rules.targets(batch([True, True, False, False], ["7", "1", "7", "3"], ["a", "a", "b", "b"]))
    assert list(out.view.constructed) == [False, False, True, True] == list(out.regraded)
    rules.row_surfaces(out.view)
    assert seen == {"admit": [False, False, True, True], "weights": [False, False, True, True]}
    plain = StepRules(OnlineMethod()).targets(batch([False, False], ["7", "7"], ["a", "a"]))
    assert list(plain.view.constructed) == [False, False]  # no S_y: nothing constructed
    assert list(batch([False], ["7"], ["a"]).constructed) == [False]  # before S_y


def test_a_substituted_target_regrades_a_truncated_response_as_no_answer():
    b = batch([False] * 2, ["7", "7"], ["a", "a"], truncated=[True, False])
    out = StepRules(Everywhere()).targets(b)
    assert list(out.view.score) == [0.0, 1.0]


def test_truncated_answers_never_vote():
    # issue 9, item 1: [truncated 5, truncated 5, 3, 5] is a tie between 5 and 3, not a majority for 5
    m = WeakTrainerInterface.get("ttrl").build({})
    b = batch([False] * 4, ["5", "5", "3", "5"], ["a"] * 4, truncated=[True, True, False, False])
    out = StepRules(m).targets(b)
    assert list(out.constructed) == [None] * 4
    assert m.pop_metrics()["tie_share"] == 1.0
    b = batch([False] * 4, ["5", "5", "3", "5"], ["a"] * 4)  # the same answers, none truncated: 5 wins
    assert list(StepRules(m).targets(b).constructed) == ["5"] * 4


def test_vote_only_rows_vote_then_leave_before_anything_else():
    m = WeakTrainerInterface.get("ttrl").build({})
    b = batch([False] * 6, ["4", "4", "9", "9", "9", "9"], ["a"] * 6)
    train = np.array([True, True, False, False, False, False])
    rules = StepRules(m)
    out = rules.targets(b, train_rows=train)
    assert list(out.train_rows) == [0, 1] and len(out.view) == 2
    assert list(out.view.target) == ["9", "9"] and list(out.view.score) == [0.0, 0.0]  # the extra votes decided
    assert "vote_only" not in out.view.fields
    assert rules.metrics["devenus/votes/per_prompt"] == 6 and rules.metrics["devenus/votes/extra_rows"] == 4


class Shaper(OnlineMethod):
    name = "test_shaper"

    def __init__(self, reward=None, keep=None, weight=None, judged=None):
        super().__init__()
        self.r, self.k, self.w, self.j = reward, keep, weight, judged

    def construct_rewards(self, b):
        return None if self.r is None else np.asarray(self.r, dtype=np.float64)

    def admit(self, b):
        return self.k

    def admission_judged(self, b):
        return self.j

    def advantage_weights(self, b):
        return self.w


def test_nan_keeps_verls_reward_and_labeled_rows_keep_theirs():
    b = batch([True, True, False, False], ["1", "1", "2", "3"], ["a", "a", "b", "b"], scores=[1, 1, 0, 0])
    out = StepRules(Shaper(reward=[5.0, 5.0, np.nan, 0.25])).row_surfaces(b)
    assert list(out.reward_rows) == [False, False, False, True]
    assert out.reward[3] == 0.25 and list(b.score) == [1, 1, 0, 0.25]


def test_admission_is_whole_groups_and_weights_lie_in_0_1_with_labeled_rows_at_1():
    b = batch([True, True, False, False], ["1", "1", "2", "3"], ["a", "a", "b", "b"])
    with pytest.raises(ValueError, match="same for every rollout of a group"):
        StepRules(Shaper(keep=np.array([True, False, True, True]))).row_surfaces(b)
    rules = StepRules(Shaper(keep=np.array([False, False, True, True]), weight=np.array([0.2, 0.2, 0.5, 0.5])))
    out = rules.row_surfaces(b)
    assert list(out.weight) == [1.0, 1.0, 0.5, 0.5]
    assert rules.metrics["devenus/groups/admitted"] == 1 and rules.metrics["devenus/groups/dropped"] == 1
    for bad in ([1.5, 1, 1, 1], [np.nan, 1, 1, 1], [-0.1, 1, 1, 1], [1, 1]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            StepRules(Shaper(weight=np.array(bad, dtype=np.float64))).row_surfaces(b)


def test_which_groups_admission_judged_is_whole_groups_and_passes_through():
    b = batch([True, True, False, False], ["1", "1", "2", "3"], ["a", "a", "b", "b"])
    keep = np.array([True, True, False, False])
    assert StepRules(Shaper(keep=keep)).row_surfaces(b).judged is None  # the default: every group judged
    out = StepRules(Shaper(keep=keep, judged=[True, True, False, False])).row_surfaces(b)
    assert list(out.judged) == [True, True, False, False]
    with pytest.raises(ValueError, match="test_shaper.admission_judged must be the same for every rollout"):
        StepRules(Shaper(keep=keep, judged=[True, True, True, False])).row_surfaces(b)
    with pytest.raises(ValueError, match="admission_judged returned shape"):
        StepRules(Shaper(keep=keep, judged=[True])).row_surfaces(b)


def test_nothing_admitted_skips_the_update_and_metrics_are_collected_once():
    m = Shaper()
    m.log(seen=1)
    rules = StepRules(m)
    rules.metrics["devenus/groups/admitted"] = 0
    skip, metrics = rules.before_update(np.zeros(4, bool), np.array([True, True, False, False]),
                                        np.array([1.0, 0, 0, 0]), np.zeros(4), np.ones(4, bool), rows_dropped=4)
    assert skip and metrics["devenus/update_skipped"] == 1 and metrics["devenus/rows/dropped"] == 4
    assert metrics["devenus/test_shaper/seen"] == 1 and metrics["devenus/reward/labeled/mean"] == 0.5
    assert rules.metrics == {} and m.pop_metrics() == {}
    skip, metrics = rules.before_update(None, np.ones(2, bool), np.ones(2), np.zeros(2), np.ones(2, bool))
    assert not skip and "devenus/rows/dropped" not in metrics


def test_surfaces_wait_for_the_log_prob_pass_only_when_the_step_needs_it():
    build = WeakTrainerInterface.get
    assert not StepRules(build("ttrl").build({})).after_log_prob
    assert StepRules(build("emrl").build({})).after_log_prob
    assert not StepRules(build("unsupervised").build({"w_entropy": 0.0})).after_log_prob  # agreement only
    assert StepRules(build("unsupervised").build({"w_entropy": 0.0, "w_self_verification": 1.0})).after_log_prob
    assert StepRules(build("ttrl").build({})).decode_responses and not StepRules(build("grpo").build({})).decode_responses


def test_a_stop_token_in_the_last_slot_is_not_truncation():
    got = truncated_rows(np.array([4, 4, 3]), 4, np.array([2, 9, 9]), stop_ids={2})
    assert list(got) == [False, True, False]


def test_rows_without_a_stable_key_are_refused_and_label_state_follows_one_rule():
    with pytest.raises(RowKeyError, match="extra_info.index"):
        row_identity({"labeled": True}, {"ground_truth": "1"}, "row 3")
    with pytest.raises(RowKeyError, match="row 3"):
        row_identity({"index": "  "}, {"ground_truth": "1"}, "row 3")
    assert row_identity({"index": 7}, {"ground_truth": "1"}) == ("7", True, "1")  # verl-native: a target = labeled
    assert row_identity({"index": "a"}, {"ground_truth": ""}) == ("a", False, "")
    assert row_identity({"index": "a", "labeled": False}, {"ground_truth": "1"}) == ("a", False, "1")
    labeled, target, key = label_states([{"index": 1, "labeled": True}, {"index": 2}], [{"ground_truth": 3}, {}])
    assert list(labeled) == [True, False] and list(target) == ["3", ""] and list(key) == ["1", "2"]
