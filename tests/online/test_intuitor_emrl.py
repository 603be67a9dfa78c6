"""Intuitor and EMRL rewards on hand-built RolloutBatches with token statistics (no verl)."""

import numpy as np
import pytest

from devenus.online.registry import WeakTrainerInterface
from devenus.online.supervise.emrl import EMRL, EMRLConfig
from devenus.online.supervise.intuitor import Intuitor, IntuitorConfig
from batches import token_stats_batch


def make_batch(labeled, lengths, width=6, score=None, seed=0):
    return token_stats_batch(["1"] * len(labeled), lengths, labeled=labeled, group_size=2, width=width,
                             score=score, seed=seed)


def manual_mean(x, mask):
    return [float(x[i][mask[i].bool()].double().mean()) for i in range(len(x))]


def test_registered_with_needs():
    assert WeakTrainerInterface.get("intuitor").method_cls is Intuitor
    assert WeakTrainerInterface.get("emrl").method_cls is EMRL
    assert Intuitor.data_needs == {"unlabeled"} and Intuitor.step_needs == {"token_stats", "self_certainty"}
    assert EMRL.step_needs == {"token_stats"}  # verl's own pass suffices
    for cls in (Intuitor, EMRL):
        assert cls.implements("construct_rewards")
        assert not any(cls.implements(s) for s in ("construct_targets", "admit", "advantage_weights"))


def test_intuitor_reward_is_mean_self_certainty_over_valid_tokens():
    b = make_batch([False, False, False, False], [6, 1, 3, 4])
    m = Intuitor()
    r = m.construct_rewards(b)
    st = b.token_stats
    assert r == pytest.approx(manual_mean(st["self_certainty"], st["response_mask"]), rel=1e-6)
    logged = m.pop_metrics()
    assert logged["self_certainty/mean"] == pytest.approx(np.mean(r))
    assert logged["self_certainty/std"] == pytest.approx(np.std(r))
    assert logged["scored_rows"] == 4 and logged["collapse_warning"] == 0
    assert logged["response_length/mean"] == pytest.approx(3.5)


@pytest.mark.parametrize("variant", ["token_entropy", "trajectory", "sequence_prob"])
def test_emrl_variants(variant):
    b = make_batch([False] * 4, [6, 2, 5, 1])
    st = b.token_stats
    mask = st["response_mask"].bool()
    want = {
        "token_entropy": [-x for x in manual_mean(st["entropy"], mask)],
        "trajectory": manual_mean(st["log_probs"], mask),
        "sequence_prob": [float(st["log_probs"][i][mask[i]].double().sum()) for i in range(4)],
    }[variant]
    m = EMRL(EMRLConfig(variant=variant))
    assert m.construct_rewards(b) == pytest.approx(want, rel=1e-6)
    assert f"{m.score_name}/mean" in m.pop_metrics()


def test_emrl_rejects_unknown_variant():
    with pytest.raises(ValueError, match="token_entropy"):
        WeakTrainerInterface.get("emrl").build({"variant": "perplexity"})
    with pytest.raises(ValueError, match="unknown config key"):
        WeakTrainerInterface.get("intuitor").build({"varient": "x"})
    assert WeakTrainerInterface.get("intuitor").build({"chunk_size": 64}).config.chunk_size == 64


def test_labeled_rows_get_no_constructed_reward_but_inform_the_auroc_metric():
    b = make_batch([True, True, True, True, False, False], [4, 4, 4, 4, 3, 2], score=[1, 0, 1, 0, 0, 0])
    # make labeled correct answers the confident ones
    b.token_stats["self_certainty"][[0, 2]] += 10
    m = Intuitor()
    r = m.construct_rewards(b)
    assert np.isnan(r[:4]).all() and not np.isnan(r[4:]).any()
    logged = m.pop_metrics()
    assert logged["self_certainty/labeled_auroc"] == 1.0
    assert logged["scored_rows"] == 2


def test_row_without_valid_tokens_scores_nan():
    b = make_batch([False, False], [0, 3])
    r = Intuitor().construct_rewards(b)
    assert np.isnan(r[0]) and not np.isnan(r[1])


def test_missing_statistic_names_the_need():
    b = make_batch([False, False], [2, 3])
    del b.token_stats["self_certainty"]
    with pytest.raises(KeyError, match="self_certainty"):
        Intuitor().construct_rewards(b)


def test_collapse_warning_and_state_round_trip():
    m = Intuitor(IntuitorConfig(collapse_baseline_steps=1))
    assert m.state_dict() == {}
    long = make_batch([False] * 2, [6, 6])
    m.construct_rewards(long)
    m.pop_metrics()
    short = make_batch([False] * 2, [2, 2])
    short.token_stats["self_certainty"] += 100  # confidence rises
    m.construct_rewards(short)
    assert m.pop_metrics()["collapse_warning"] == 1
    state = m.state_dict()
    m2 = Intuitor(IntuitorConfig(collapse_baseline_steps=1))
    m2.load_state_dict(state)
    assert m2.monitor.lengths == [6.0] and m2.monitor.last_confidence == m.monitor.last_confidence
    with pytest.raises(ValueError):
        m2.load_state_dict({"bogus": 1})
