"""TTRL on hand-built RolloutBatches with known answers (no verl, no model)."""

import numpy as np
import pytest

from devenus.online import WeakTrainerInterface
from devenus.online.supervise.ttrl import TTRL, TTRLConfig
from devenus.online.supervise.voting import extra_vote_temperatures
from batches import vote_batch


def batch(groups, labeled=None, targets=None, vote_only=None):
    """``groups``: one list of extracted answers per prompt (None = no answer)."""
    return vote_batch([(bool(labeled[g]) if labeled else False, targets[g] if targets else "", answers, {})
                       for g, answers in enumerate(groups)], vote_only)


def ttrl(**cfg):
    return WeakTrainerInterface.get("ttrl").build(cfg)


def test_majority_becomes_target_of_every_row_of_the_group():
    m = ttrl()
    b = batch([["3", "3", "4", "3"], ["7", "8", "7", None]])
    new = m.construct_targets(b)
    assert list(new) == ["3"] * 4 + ["7"] * 4
    met = m.pop_metrics()
    assert met["majority_ratio"] == pytest.approx((3 / 4 + 2 / 4) / 2)
    assert met["no_majority_share"] == 0 and met["voted_groups"] == 2
    assert met["abstain_share"] == pytest.approx(1 / 8)


def test_equivalent_forms_vote_together_half_vs_frac():
    m = ttrl()
    new = m.construct_targets(batch([["0.5", "\\frac{1}{2}", "3", "3", "1/2", None]]))
    assert new[0] in {"0.5", "\\frac{1}{2}", "1/2"}  # three equivalent halves beat two 3s
    assert len(set(new)) == 1
    assert m.pop_metrics()["majority_ratio"] == pytest.approx(3 / 6)


def test_tie_gives_no_target_and_is_counted():
    m = ttrl()
    new = m.construct_targets(batch([["1", "2", "1", "2"], ["5", "5", "6", "6"], ["9", "9", "9", "1"]]))
    assert list(new[:8]) == [None] * 8 and list(new[8:]) == ["9"] * 4
    met = m.pop_metrics()
    assert met["tie_share"] == pytest.approx(2 / 3) and met["no_majority_share"] == pytest.approx(2 / 3)


def test_abstentions_never_win():
    m = ttrl()
    new = m.construct_targets(batch([[None, None, None, "4"], [None, None, None, None]]))
    assert list(new[:4]) == ["4"] * 4  # one answer beats three abstentions
    assert list(new[4:]) == [None] * 4  # nobody answered: no target
    met = m.pop_metrics()
    assert met["no_answer_share"] == pytest.approx(0.5) and met["abstain_share"] == pytest.approx(7 / 8)


def test_min_agreement_counts_abstentions_in_the_group_size():
    answers = [["3", "3", "4", None]]  # ratio 2/4
    assert list(ttrl(min_agreement=0.5).construct_targets(batch(answers))) == ["3"] * 4
    m = ttrl(min_agreement=0.6)
    assert list(m.construct_targets(batch(answers))) == [None] * 4
    assert m.pop_metrics()["low_agreement_share"] == 1.0


def test_labeled_groups_are_neither_voted_nor_targeted():
    m = ttrl()
    b = batch([["1", "1", "2"], ["5", "5", "6"]], labeled=[True, False], targets=["2", ""])
    new = m.construct_targets(b)
    assert list(new) == [None] * 3 + ["5"] * 3
    assert m.pop_metrics()["voted_groups"] == 1


def test_vote_only_rows_vote_and_their_agreement_is_reported():
    # group of 6: 4 training rows (two "1", two "2") + 2 vote-only rows ("2", "2"): the extra votes decide
    b = batch([["1", "1", "2", "2", "2", "2"]], vote_only=[False] * 4 + [True] * 2)
    m = ttrl(votes=6)
    new = m.construct_targets(b)
    assert list(new) == ["2"] * 6
    met = m.pop_metrics()
    assert met["votes_per_group"] == 6
    assert met["extra_vote_agreement"] == 1.0 and met["train_vote_agreement"] == 0.5
    # without the extra votes it is a tie
    assert list(ttrl().construct_targets(batch([["1", "1", "2", "2"]]))) == [None] * 4


def test_vote_config_validation():
    assert extra_vote_temperatures(TTRLConfig(), 4) == []
    assert extra_vote_temperatures(TTRLConfig(votes=4), 4) == []
    assert extra_vote_temperatures(TTRLConfig(votes=7), 4) == [None] * 3
    assert extra_vote_temperatures(TTRLConfig(votes=8, vote_temperatures=[0.6, 1.2]), 4) == [0.6, 1.2, 0.6, 1.2]
    with pytest.raises(ValueError, match="votes=2 must be >= actor_rollout_ref.rollout.n=4"):
        extra_vote_temperatures(TTRLConfig(votes=2), 4)
    with pytest.raises(ValueError, match="needs extra votes"):
        extra_vote_temperatures(TTRLConfig(vote_temperatures=[0.6]), 4)
    for bad in (dict(min_agreement=1.5), dict(votes=-1), dict(vote_temperatures=0.6), dict(vote_temperatures=[-1.0])):
        with pytest.raises(ValueError):
            ttrl(**bad)
    with pytest.raises(ValueError, match="unknown config key"):
        ttrl(vote=8)
    assert isinstance(ttrl(), TTRL) and TTRL.implements("extra_rollouts") and TTRL.implements("construct_targets")


def test_ttrl_never_reads_simulation_truth():
    # the view has no simulation column; a field that looks like one must not matter
    b = batch([["3", "3", "4"]])
    b.fields["simulation"] = np.array([{"hidden_answer": "4"}] * 3, dtype=object)
    assert list(ttrl().construct_targets(b)) == ["3"] * 3
