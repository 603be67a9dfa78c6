"""The unsupervised trainer's combined reward on hand-built RolloutBatches with token statistics (no verl)."""

import math

import numpy as np
import pytest

from devenus.online.config import config_from_dict
from devenus.online.registry import WeakTrainerInterface
from devenus.online.supervise.intuitor import Intuitor
from devenus.online.supervise.unsupervised import Unsupervised, UnsupervisedConfig
from devenus.signals import distinct_candidates, verdict_probability
from batches import token_stats_batch, vote_batch


make_batch = token_stats_batch


def method(**cfg):
    base = {"w_self_certainty": 0.0, "w_entropy": 0.0, "w_seq_prob": 0.0, "w_agreement": 0.0}
    return WeakTrainerInterface.get("unsupervised").build({**base, **cfg})


# direct computations (torch, not devenus.signals)
def direct(batch, name, reduce="mean"):
    st, mask = batch.token_stats, batch.token_stats["response_mask"].bool()
    x = {"self_certainty": st["self_certainty"], "neg_entropy": -st["entropy"], "seq_logprob": st["log_probs"]}[name]
    red = (lambda v: v.double().mean()) if reduce == "mean" else (lambda v: v.double().sum())
    return np.array([float(red(x[i][mask[i]])) for i in range(len(batch))])


def zscore(v, groups):
    out = np.empty(len(v))
    for rows in groups:
        x = v[rows]
        out[rows] = (x - x.mean()) / (x.std() + 1e-6)
    return out


PREDS = ["1", "1", "2", None, "5", "6", "5", "5"]  # group 0: majority "1"; group 1: majority "5"
LENGTHS = [7, 3, 5, 2, 6, 1, 4, 7]
GROUPS = [np.arange(0, 4), np.arange(4, 8)]


# ----------------------------------------------------------------------------------- registration
def test_registered_and_only_shapes_rewards():
    assert WeakTrainerInterface.get("unsupervised").method_cls is Unsupervised
    assert Unsupervised.implements("construct_rewards")
    assert not any(Unsupervised.implements(s) for s in ("construct_targets", "admit", "advantage_weights"))
    assert Unsupervised.data_needs == {"unlabeled"}
    assert Unsupervised.step_needs == {"token_stats", "self_certainty", "self_verification"}  # the most it may need


@pytest.mark.parametrize(
    "weights, needs",
    [
        ({"w_agreement": 1.0}, set()),  # no log-prob statistics: rewards at rollout time
        ({"w_entropy": 1.0}, {"token_stats"}),
        ({"w_seq_prob": 0.5, "w_agreement": 1.0}, {"token_stats"}),
        ({"w_self_certainty": 1.0}, {"token_stats", "self_certainty"}),
        ({"w_self_certainty": -0.2, "w_entropy": 1.0}, {"token_stats", "self_certainty"}),
    ],
)
def test_needs_follow_the_weights(weights, needs):
    m = method(**weights)
    assert m.step_needs == needs and m.data_needs == {"unlabeled"}
    assert set(m.config.weights) == {
        {"w_self_certainty": "self_certainty", "w_entropy": "neg_entropy", "w_seq_prob": "seq_logprob",
         "w_agreement": "agreement"}[k] for k in weights}


def test_needs_reach_the_adapter_from_the_instance():
    TS = pytest.importorskip("devenus.adapters.verl.token_stats")
    assert TS.requested_stats(method(w_entropy=1.0).step_needs) == ()  # verl's own pass suffices
    assert TS.requested_stats(method(w_self_certainty=1.0).step_needs) == ("self_certainty",)


def test_default_config():
    m = Unsupervised()
    assert m.config.weights == {"neg_entropy": 1.0, "agreement": 1.0} and m.config.normalize == "zscore"
    assert m.step_needs == {"token_stats"}


# -------------------------------------------------------------------------------------- config
def test_hydra_style_values_load():
    # `+devenus.method_config.w_agreement=1` arrives as an int
    cfg = config_from_dict(UnsupervisedConfig, {"w_agreement": 1, "w_entropy": 0, "normalize": "rank"}, "unsupervised")
    assert cfg.w_agreement == 1.0 and isinstance(cfg.w_agreement, float) and cfg.weights == {"agreement": 1.0}


@pytest.mark.parametrize(
    "cfg, exc, msg",
    [
        ({"w_self_verification": 1.0, "verification_template": "Is {answer} right?"}, ValueError, "{question}"),
        ({"w_self_verification": 1.0, "verdicts": ["yes", "yes"]}, ValueError, "verdicts"),
        ({"w_self_verification": 1.0, "verdicts": ["yes"]}, ValueError, "verdicts"),
        ({"w_entropy": 0, "w_agreement": 0}, ValueError, "every signal weight is 0"),
        ({"normalize": "minmax"}, ValueError, "normalize"),
        ({"seq_prob": "max"}, ValueError, "seq_prob"),
        ({"w_entropy": float("nan")}, ValueError, "finite"),
        ({"w_entropy": True}, ValueError, "w_entropy must be a number"),
        ({"chunk_size": 0}, ValueError, "chunk_size"),
        ({"w_confidence": 1.0}, ValueError, "unknown config key"),
    ],
)
def test_bad_config_is_refused_at_load(cfg, exc, msg):
    with pytest.raises(exc, match=msg):
        WeakTrainerInterface.get("unsupervised").build(cfg)


def test_self_verification_needs_follow_its_weight():
    build = WeakTrainerInterface.get("unsupervised").build
    assert "self_verification" not in build({}).step_needs
    m = build({"w_entropy": 0.0, "w_agreement": 0.0, "w_self_verification": 1.0})
    assert m.step_needs == {"self_verification"}  # no token statistics needed for it


def test_verdict_probability_renormalises_the_two_verdicts():
    p = verdict_probability(np.log([0.3, 0.01, 0.2]), np.log([0.1, 0.01, 0.6]))
    np.testing.assert_allclose(p, [0.75, 0.5, 0.25])
    assert verdict_probability(-1000.0, 0.0) == pytest.approx(0.0) and verdict_probability(0.0, -1000.0) == 1.0


def test_distinct_candidates_verifies_each_answer_of_a_question_once():
    pairs, idx = distinct_candidates(["q1", "q1", "q1", "q2", "q2"], ["3", "3", None, "3", "4"])
    assert pairs == [("q1", "3"), ("q2", "3"), ("q2", "4")]
    assert idx.tolist() == [0, 0, -1, 1, 2]


def test_self_verification_signal_is_group_normalised_into_the_reward():
    m = WeakTrainerInterface.get("unsupervised").build(
        {"w_entropy": 0.0, "w_agreement": 0.0, "w_self_verification": 2.0, "normalize": "center"})
    b = vote_batch([(False, "", ["3", "3", "4", None], {}), (True, "1", ["1", "2", "1", "1"], {})])
    b.fields["self_verification"] = np.array([0.9, 0.9, 0.3, np.nan, 0.8, 0.1, 0.8, 0.8])
    b.score[4:] = [1.0, 0.0, 1.0, 1.0]  # verified against the gold "1"
    r = m.construct_rewards(b)
    mean = (0.9 + 0.9 + 0.3) / 3  # the row without an answer takes the group's (neutral) mean
    np.testing.assert_allclose(r[:4], 2.0 * (np.array([0.9, 0.9, 0.3, mean]) - mean), atol=1e-12)
    assert np.isnan(r[4:]).all()  # labeled rows keep their verified reward
    met = m.pop_metrics()
    assert met["self_verification/labeled_auroc"] == 1.0  # the verdicts rank the verified answers perfectly
    with pytest.raises(ValueError, match="fields\\['self_verification'\\]"):
        m.construct_rewards(vote_batch([(False, "", ["3"], {})]))


# ------------------------------------------------------------------------------------- signals
@pytest.mark.parametrize(
    "weight, name, reduce, extra",
    [
        ("w_self_certainty", "self_certainty", "mean", {}),
        ("w_entropy", "neg_entropy", "mean", {}),
        ("w_seq_prob", "seq_logprob", "sum", {}),
        ("w_seq_prob", "seq_logprob", "mean", {"seq_prob": "mean"}),
    ],
)
def test_each_confidence_signal_matches_a_direct_computation(weight, name, reduce, extra):
    b = make_batch(PREDS, LENGTHS)
    m = method(**{weight: 1.0, "normalize": "none", **extra})
    want = direct(b, name, reduce)
    assert m.signals(b)[name] == pytest.approx(want, rel=1e-9)
    assert m.construct_rewards(b) == pytest.approx(want, rel=1e-9)  # one signal, weight 1, no normalisation
    logged = m.pop_metrics()
    assert logged[f"{name}/mean"] == pytest.approx(want.mean())
    assert logged[f"{name}/std"] == pytest.approx(want.std())


def test_agreement_is_membership_of_the_unique_majority():
    preds = ["1", "1", "2", None,  # majority "1"; the abstention scores 0
             "0.5", "\\frac{1}{2}", "3", None,  # 0.5 and 1/2 vote together -> majority {0.5, 1/2}
             "4", "4", "7", "7",  # tie: nobody agrees
             None, None, None, None]  # no answer at all
    b = make_batch(preds, [7] * 16)
    m = method(w_agreement=1.0, normalize="none")
    assert m.signals(b)["agreement"].tolist() == [1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    assert m.construct_rewards(b).tolist() == [1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    logged = m.pop_metrics()
    assert logged["agreement/mean"] == pytest.approx(4 / 16)
    assert logged["agreement/tie_share"] == pytest.approx(1 / 4)
    assert logged["agreement/no_answer_share"] == pytest.approx(1 / 4)
    assert logged["agreement/majority_ratio"] == pytest.approx(np.mean([0.5, 0.5, 0.5, 0.0]))


def test_only_signals_with_a_weight_are_computed():
    b = make_batch(PREDS, LENGTHS)
    del b.token_stats["self_certainty"]  # what the adapter gives a method that does not need it
    assert set(method(w_entropy=1.0, w_agreement=2.0).signals(b)) == {"neg_entropy", "agreement"}
    b.token_stats = {}  # agreement alone needs no token statistics at all
    assert set(method(w_agreement=1.0).signals(b)) == {"agreement"}
    b = make_batch(PREDS, LENGTHS)
    del b.token_stats["self_certainty"]
    with pytest.raises(KeyError, match="self_certainty"):  # a clear error if the adapter did not provide it
        method(w_self_certainty=1.0).signals(b)


# ------------------------------------------------------------------------------- normalisation
@pytest.mark.parametrize("mode", ["zscore", "center", "rank"])
def test_per_group_normalisation(mode):
    b = make_batch(PREDS, LENGTHS)
    raw = direct(b, "neg_entropy")
    r = method(w_entropy=1.0, normalize=mode).construct_rewards(b)
    for rows in GROUPS:
        x = raw[rows]
        if mode == "zscore":
            want = (x - x.mean()) / (x.std() + 1e-6)
        elif mode == "center":
            want = x - x.mean()
        else:
            want = np.argsort(np.argsort(x)) / (len(x) - 1)  # no ties in random floats
        assert r[rows] == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_weights_combine_normalised_signals():
    b = make_batch(PREDS, LENGTHS)
    m = method(w_self_certainty=0.5, w_entropy=-1.0, w_seq_prob=2.0, w_agreement=3.0)
    agree = np.array([1, 1, 0, 0, 1, 0, 1, 1], dtype=float)
    want = (0.5 * zscore(direct(b, "self_certainty"), GROUPS) - 1.0 * zscore(direct(b, "neg_entropy"), GROUPS)
            + 2.0 * zscore(direct(b, "seq_logprob", "sum"), GROUPS) + 3.0 * zscore(agree, GROUPS))
    assert m.construct_rewards(b) == pytest.approx(want, rel=1e-9)
    # scaling every weight scales the reward: only the ratios matter to GRPO
    m2 = method(w_self_certainty=1.0, w_entropy=-2.0, w_seq_prob=4.0, w_agreement=6.0)
    assert m2.construct_rewards(b) == pytest.approx(2 * want, rel=1e-9)


def test_constant_signal_in_a_group_contributes_nothing():
    preds = ["1"] * 4 + ["5", "6", "5", "5"]  # group 0: everyone agrees
    b = make_batch(preds, LENGTHS)
    r = method(w_agreement=1.0).construct_rewards(b)
    assert r[:4].tolist() == [0.0] * 4
    assert r[4:] == pytest.approx(zscore(np.array([1, 0, 1, 1.0]), [np.arange(4)]))


def test_single_signal_without_normalisation_is_intuitor():
    b = make_batch(PREDS, LENGTHS, labeled=[True] * 4 + [False] * 4)
    r = method(w_self_certainty=1.0, normalize="none").construct_rewards(b)
    ref = Intuitor().construct_rewards(b)
    assert np.isnan(r[:4]).all() and np.isnan(ref[:4]).all()
    assert r[4:] == pytest.approx(ref[4:], rel=1e-12)


def test_a_row_without_valid_tokens_gets_the_neutral_value():
    lengths = list(LENGTHS)
    lengths[2] = 0
    b = make_batch(PREDS, lengths)
    m = method(w_entropy=1.0)
    r = m.construct_rewards(b)
    assert r[2] == pytest.approx(0.0, abs=1e-12)  # the group's mean z-score
    raw = direct(b, "neg_entropy")
    rows = np.array([0, 1, 3])
    assert r[rows] == pytest.approx(zscore(raw, [rows])[rows], rel=1e-9)
    assert m.pop_metrics()["neg_entropy/missing_rows"] == 1


# ------------------------------------------------------------------------------ labeled rows, metrics
def test_labeled_rows_get_nan_and_groups_normalise_separately():
    labeled = [True] * 4 + [False] * 4
    b = make_batch(PREDS, LENGTHS, labeled=labeled, score=[1, 0, 1, 0, 0, 0, 0, 0])
    m = method(w_entropy=1.0, w_agreement=1.0)
    r = m.construct_rewards(b)
    assert np.isnan(r[:4]).all() and np.isfinite(r[4:]).all()
    unl_only = make_batch(PREDS[4:], LENGTHS[4:])
    unl_only.token_stats = {k: v[4:] for k, v in b.token_stats.items()}
    assert r[4:] == pytest.approx(method(w_entropy=1.0, w_agreement=1.0).construct_rewards(unl_only), rel=1e-12)
    logged = m.pop_metrics()
    assert logged["scored_rows"] == 4
    # labeled rows: how each signal ranks verified-correct answers (rows 0 and 2 are correct)
    raw_h = direct(b, "neg_entropy")[:4]
    pos, neg = raw_h[[0, 2]], raw_h[[1, 3]]
    assert logged["neg_entropy/labeled_auroc"] == pytest.approx(np.mean(pos[:, None] > neg[None, :]))
    assert logged["agreement/labeled_auroc"] == pytest.approx(0.5)  # agreement [1, 1, 0, 0] vs correct [1, 0, 1, 0]
    assert logged["agreement/voted_groups"] == 1  # the labeled group is not a vote statistic


def test_metrics_per_signal_correlation_and_reward():
    b = make_batch(PREDS, LENGTHS)
    m = method(w_self_certainty=1.0, w_entropy=1.0, w_agreement=0.5)
    r = m.construct_rewards(b)
    logged = m.pop_metrics()
    raw = {"self_certainty": direct(b, "self_certainty"), "neg_entropy": direct(b, "neg_entropy"),
           "agreement": np.array([1, 1, 0, 0, 1, 0, 1, 1], dtype=float)}
    for k, v in raw.items():
        assert logged[f"{k}/mean"] == pytest.approx(v.mean())
    z = {k: zscore(v, GROUPS) for k, v in raw.items()}
    for a, c in [("self_certainty", "neg_entropy"), ("self_certainty", "agreement"), ("neg_entropy", "agreement")]:
        assert logged[f"corr/{a}__{c}"] == pytest.approx(np.corrcoef(z[a], z[c])[0, 1], rel=1e-9)
    assert logged["reward/mean"] == pytest.approx(r.mean()) and logged["reward/std"] == pytest.approx(r.std())
    assert logged["response_length/mean"] == pytest.approx(np.mean(LENGTHS))
    assert logged["collapse_warning"] == 0.0
    assert all(math.isfinite(v) for v in logged.values())


def test_collapse_monitor_follows_the_heaviest_confidence_signal_and_survives_resume():
    m = method(w_self_certainty=0.5, w_entropy=-2.0, w_agreement=1.0)
    assert m._monitored_signal() == "neg_entropy"
    assert method(w_agreement=1.0)._monitored_signal() is None
    b = make_batch(PREDS, LENGTHS)
    m.construct_rewards(b)
    st = m.state_dict()
    assert st["collapse_monitor"]["lengths"] == [pytest.approx(np.mean(LENGTHS))]
    fresh = method(w_self_certainty=0.5, w_entropy=-2.0, w_agreement=1.0)
    fresh.load_state_dict(st)
    assert fresh.state_dict() == st
    with pytest.raises(ValueError, match="unknown state keys"):
        fresh.load_state_dict({"bogus": 1})
