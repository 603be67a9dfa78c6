"""Co-rewarding I on hand-built RolloutBatches: each view is labelled by its partner view's majority."""

import pytest

from devenus.online import WeakTrainerInterface
from batches import vote_batch


def batch(groups, vote_only=None):
    """``groups``: (pair_key, labeled, target, answers) per prompt; views of a pair share pair_key."""
    return vote_batch([(labeled, target, answers, {"pair_key": pk}) for pk, labeled, target, answers in groups],
                      vote_only)


def cor(**cfg):
    return WeakTrainerInterface.get("corewarding").build(cfg)


def test_each_view_gets_the_other_views_majority():
    m = cor()
    b = batch([("p", False, "", ["3", "3", "4"]),   # original: majority 3
               ("p", False, "", ["4", "4", "3"])])  # rewrite: majority 4
    new = m.construct_targets(b)
    assert list(new[:3]) == ["4"] * 3  # original trained towards the rewrite's majority
    assert list(new[3:]) == ["3"] * 3
    met = m.pop_metrics()
    assert met["view_agreement"] == 0.0 and met["pairs"] == 1 and met["both_majority_share"] == 1.0


def test_agreement_is_equivalence_aware_and_pairs_are_independent():
    m = cor()
    b = batch([("a", False, "", ["0.5", "0.5", "2"]), ("b", False, "", ["7", "7", "1"]),
               ("a", False, "", ["\\frac{1}{2}", "\\frac{1}{2}", "3"]), ("b", False, "", ["7", "8", "8"])])
    new = m.construct_targets(b)
    assert list(new[:3]) == ["\\frac{1}{2}"] * 3 and list(new[6:9]) == ["0.5"] * 3  # pair a, rows not adjacent
    assert list(new[3:6]) == ["8"] * 3 and list(new[9:]) == ["7"] * 3
    assert m.pop_metrics()["view_agreement"] == 0.5  # a agrees (1/2 == 0.5), b does not


def test_partner_tie_or_missing_partner_gives_no_target():
    m = cor()
    b = batch([("p", False, "", ["1", "1", "1"]), ("p", False, "", ["1", "2", None, None]),
               ("q", False, "", ["5", "5"])])  # q's partner is not in this step
    new = m.construct_targets(b)
    assert list(new[:3]) == [None] * 3  # partner tied 1-1
    assert list(new[3:7]) == ["1"] * 4
    assert list(new[7:]) == [None] * 2
    met = m.pop_metrics()
    assert met["missing_partner_share"] == pytest.approx(1 / 3)
    assert met["tie_share"] == pytest.approx(1 / 2)  # two partner votes taken: one tie
    # fallback to the view's own majority
    assert list(cor(missing_partner="self").construct_targets(b)[7:]) == ["5", "5"]


def test_semi_supervised_labeled_rows_untouched_and_partner_gold_used():
    b = batch([("p", True, "12", ["12", "11", "11"]), ("p", False, "", ["11", "11", "12"]),
               ("q", True, "3", ["3", "3", "3"]), ("q", True, "3", ["3", "4", "4"])])
    m = cor()
    new = m.construct_targets(b)
    assert list(new[:3]) == [None] * 3  # labeled view keeps its gold target
    assert list(new[3:6]) == ["12"] * 3  # unlabeled view takes its labeled partner's gold target
    assert all(t is None for t in new[6:])
    assert m.pop_metrics()["partner_label_share"] == 1.0
    new = cor(use_partner_label=False).construct_targets(b)
    assert list(new[3:6]) == ["11"] * 3  # the partner's majority instead of its label


def test_vote_only_rows_of_the_partner_vote():
    b = batch([("p", False, "", ["1", "1"]), ("p", False, "", ["1", "2", "2", "2"])],
              vote_only=[False, False, False, False, True, True])
    new = cor(votes=4).construct_targets(b)
    # group 0 has only 2 rows here (hand-built), group 1 has 2 train + 2 vote-only rows: votes use all of them
    assert list(new[:2]) == ["2", "2"]


def test_config_and_needs():
    m = cor(votes=8, vote_temperatures=[0.7])
    assert m.extra_rollouts(4) == [0.7] * 4
    assert m.data_needs == {"paraphrases", "unlabeled"} and not m.step_needs
    with pytest.raises(ValueError, match="missing_partner"):
        cor(missing_partner="drop")
