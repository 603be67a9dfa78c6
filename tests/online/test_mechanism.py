"""Mechanism metrics (devenus.online.mechanism) on hand-built steps whose true answers are known, through
the step rules as the adapter drives them; and the audit that simulation truth never reaches a reward, a
target, an admission or an advantage weight."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from batches import rollouts
from refine_batches import answers, exact_grade, step_batch

import devenus.online as online_pkg
from devenus.online import WeakTrainerInterface
from devenus.online.mechanism import MECHANISM_METRICS, MechanismMeter
from devenus.online.refine.nl_olr2 import NLOLR2
from devenus.online.refine.olr import OLR, OLRConfig
from devenus.online.refine.trapo import TraPO, TraPOConfig
from devenus.online.refine.trapo2 import TraPO2
from devenus.online.step import StepRules

P = "devenus/mechanism"


def truth_of(batch, truth: dict) -> np.ndarray:
    return np.array([truth.get(str(k)) for k in batch.key], dtype=object)


def step(rules: StepRules, batch, hidden) -> tuple[dict, object]:
    """One step as the adapter runs it (early placement): S_y, S_r/S_b/S_a, the update's metrics."""
    t = rules.targets(batch, None, hidden)
    d = rules.row_surfaces(t.view, t.hidden)
    v = t.view
    _, m = rules.before_update(d.admit, v.labeled, v.score, np.zeros(len(v)), np.ones(len(v), bool))
    return m, d


def mech(m: dict) -> dict:
    return {k[len(P) + 1:]: v for k, v in m.items() if k.startswith(P + "/")}


def test_every_method_declares_the_metrics_that_judge_it():
    got = {n: WeakTrainerInterface.get(n).method_cls.mechanism_metrics for n in WeakTrainerInterface.names()}
    assert got == {
        "grpo": frozenset(), "ttrl": {"pseudo_target"}, "corewarding": {"pseudo_target"},
        "corewarding2": {"pseudo_target"}, "intuitor": {"reward_auroc"}, "emrl": {"reward_auroc"},
        "unsupervised": {"reward_auroc"}, "trapo": {"admission"}, "geomin": {"admission"},
        "olr": {"correction"}, "nl_olr2": {"proposed_correction"}, "trapo2": {"promotion"},
    }
    assert set().union(*got.values()) == MECHANISM_METRICS
    with pytest.raises(ValueError, match="unknown mechanism metrics"):
        MechanismMeter(frozenset({"vibes"}))
    from devenus.online.mechanism import PROPOSAL_RULES
    from devenus.online.refine import nl_olr2, trapo2

    assert PROPOSAL_RULES == {"proposed_correction": nl_olr2.RULE, "promotion": trapo2.RULE}


# ------------------------------------------------------------------------------ pseudo targets
def ttrl_step():
    # a: majority 3 = truth; b: majority 7, truth 8; c: a tie (no target); d: labeled (not judged)
    b = step_batch([("a", False, "", answers("3", 5)), ("b", False, "", answers("7", 4)),
                    ("c", False, "", ["1", "1", "2", "2", "5", "6", "8", "9"]), ("d", True, "4", answers("4", 6))])
    return b, truth_of(b, {"a": "3", "b": "8", "c": "1", "d": "4"})


def test_pseudo_target_precision_and_coverage_for_ttrl():
    b, hidden = ttrl_step()
    m, _ = step(StepRules(WeakTrainerInterface.get("ttrl").build(), grade=exact_grade), b, hidden)
    got = mech(m)
    assert got == {"pseudo_target/seen": 3, "pseudo_target/given": 2, "pseudo_target/right": 1,
                   "pseudo_target/coverage": pytest.approx(2 / 3), "pseudo_target/precision": 0.5}
    assert m["devenus/target/accuracy"] == 0.5  # the older name, computed by the same count


def test_counts_add_up_over_the_generation_rounds_of_one_step():
    rules = StepRules(WeakTrainerInterface.get("ttrl").build(), grade=exact_grade)
    b, hidden = ttrl_step()
    rules.targets(b, None, hidden)  # a refill round: its groups count in the same step
    m, _ = step(rules, b, hidden)
    assert mech(m)["pseudo_target/given"] == 4 and mech(m)["pseudo_target/precision"] == 0.5
    m, _ = step(rules, *ttrl_step())
    assert mech(m)["pseudo_target/given"] == 2  # popped with the step's metrics


def test_without_truth_nothing_is_logged_and_one_line_says_so(capsys):
    rules = StepRules(WeakTrainerInterface.get("ttrl").build(), grade=exact_grade)
    for _ in range(3):
        m, _ = step(rules, ttrl_step()[0], None)
        assert mech(m) == {}
    out = capsys.readouterr().out
    assert out.count("mechanism metrics (pseudo_target) are off") == 1
    assert "simulation.hidden_answer" in out
    m, _ = step(StepRules(WeakTrainerInterface.get("grpo").build(), grade=exact_grade), *ttrl_step())
    assert mech(m) == {} and capsys.readouterr().out == ""  # a method that declares nothing says nothing


# ------------------------------------------------------------------------------ reward AUROC
def emrl_batch(entropy, preds):
    """EMRL token_entropy rewards -mean entropy: row i's reward is -entropy[i] (constant over its tokens)."""
    n, w = len(preds), 3
    stats = {"entropy": torch.tensor(entropy, dtype=torch.float32)[:, None].repeat(1, w),
             "log_probs": torch.zeros(n, w), "response_mask": torch.ones(n, w, dtype=torch.long)}
    return rollouts(preds, ["g0"] * 4 + ["g1"] * 4, key=["q0"] * 4 + ["q1"] * 4, step=1, token_stats=stats)


def test_reward_auroc_for_emrl_against_truth():
    # truth 5 for q0 and q1: correct rows 0, 1, 4; rewards -entropy
    entropy = [0.1, 0.5, 0.3, 0.9, 0.2, 0.4, 0.6, 0.05]
    preds = ["5", "5", "6", "7", "5", None, "8", "6"]
    b = emrl_batch(entropy, preds)
    m, d = step(StepRules(WeakTrainerInterface.get("emrl").build(), grade=exact_grade), b, np.array(["5"] * 8, dtype=object))
    got = mech(m)
    correct = [1, 1, 0, 0, 1, 0, 0, 0]
    # by hand: pairs (correct, incorrect) where the correct row has the higher reward (lower entropy):
    # 0.1 beats 4 of 5 (not 0.05); 0.5 beats 0.9, 0.6 (2); 0.2 beats 0.3, 0.9, 0.4, 0.6 (4) -> 10 / 15
    assert got["reward_auroc/auroc"] == pytest.approx(10 / 15)
    assert got["reward_auroc/auroc"] == pytest.approx(roc_auc_score(correct, d.reward))
    assert got["reward_auroc/rows"] == 8 and got["reward_auroc/correct"] == 3


def test_reward_auroc_is_not_logged_with_one_class_only():
    b = emrl_batch([0.1, 0.2, 0.3, 0.4] * 2, ["5"] * 8)
    m, _ = step(StepRules(WeakTrainerInterface.get("emrl").build(), grade=exact_grade), b, np.array(["5"] * 8, dtype=object))
    assert mech(m) == {"reward_auroc/rows": 8, "reward_auroc/correct": 8}


# ------------------------------------------------------------------------------ admission
def test_admitted_and_rejected_pseudo_label_precision_for_trapo():
    rules = StepRules(TraPO(TraPOConfig(warmup=1, min_score=0.9)), grade=exact_grade)
    truth = {"L": "5", "u": "7", "v": "8", "w": "2"}

    def visit(s, lab, u):
        return step_batch([("L", True, "5", answers("5", lab)), ("u", False, "", answers("7", u)),
                           ("v", False, "", answers("8", 1)), ("w", False, "", answers("3", 4))], s)

    b = visit(1, 2, 2)
    m, d = step(rules, b, truth_of(b, truth))
    # warm-up: every unlabeled group dropped unscored, counted as unjudged, not as rejected (a rejection is the
    # filter's judgement; these had none)
    assert not d.admit[8:].any()
    assert mech(m) == {"admission/admitted": 0, "admission/rejected": 0, "admission/unjudged": 3,
                       "admission/admitted_labeled": 0, "admission/admitted_right": 0,
                       "admission/rejected_labeled": 0, "admission/rejected_right": 0}
    b = visit(2, 6, 6)
    m, d = step(rules, b, truth_of(b, truth))
    assert list(d.admit[8:16]) == [True] * 8 and not d.admit[16:].any()
    got = mech(m)
    assert got["admission/admitted"] == 1 and got["admission/admitted_precision"] == 1.0
    assert got["admission/rejected"] == 2 and got["admission/rejected_precision"] == 0.0


def test_geomin_warm_up_groups_are_unjudged_and_judged_ones_counted():
    from devenus.online.refine.geomin import GeoMin, GeoMinConfig
    from refine_batches import geomin_batch, geomin_features

    truth = {**{f"L{i}": "7" for i in range(3)}, **{f"U{i}": "5" for i in range(10)}, "Utie": "5"}
    # in the warm-up nothing is judged; after it, 7 reliable groups admitted, the 3 unreliable ones rejected, and
    # the tie (no majority: nothing to judge) unjudged
    for warmup, want in ((1, {"admitted": 0, "rejected": 0, "unjudged": 11}),
                         (0, {"admitted": 7, "rejected": 3, "unjudged": 1, "admitted_precision": 1.0})):
        rules = StepRules(GeoMin(GeoMinConfig(warmup_steps=warmup, min_per_class=4, min_mixture_points=4, top_layers=1)),
                          grade=exact_grade)
        b = geomin_batch(step=1)
        t = rules.targets(b, None, truth_of(b, truth))
        t.view.token_stats = {"hidden_pooled": geomin_features(t.view, ("U7", "U8", "U9"))}
        d = rules.row_surfaces(t.view, t.hidden)
        v = t.view
        _, m = rules.before_update(d.admit, v.labeled, v.score, np.zeros(len(v)), np.ones(len(v), bool))
        got = mech(m)
        assert {k: got.get(f"admission/{k}", 0) for k in want} == want, warmup


# ------------------------------------------------------------------------------ corrections and promotions
def test_correction_precision_and_recall_for_olr():
    rules = StepRules(OLR(OLRConfig(start_epoch=0, min_slope=0.0)), grade=exact_grade)
    # a: label 9 wrong (truth 7), corrected to 7; b: right label kept; d: right label 5 changed to 6 (a false
    # correction); e: wrong label 8 (truth 2) the majority agrees with: missed
    b = step_batch([("a", True, "9", answers("7", 6)), ("b", True, "3", answers("3", 5)),
                    ("d", True, "5", answers("6", 5)), ("e", True, "8", answers("8", 5)),
                    ("u", False, "", answers("4", 6))])
    m, _ = step(rules, b, truth_of(b, {"a": "7", "b": "3", "d": "5", "e": "2", "u": "4"}))
    assert mech(m) == {"correction/seen": 4, "correction/wrong": 2, "correction/changed": 2,
                       "correction/changed_wrong": 1, "correction/fixed": 1,
                       "correction/precision": 0.5, "correction/recall": 0.5}


def test_a_correction_to_another_wrong_answer_is_precise_but_recalls_nothing():
    rules = StepRules(OLR(OLRConfig(start_epoch=0, min_slope=0.0)), grade=exact_grade)
    b = step_batch([("a", True, "9", answers("7", 6))])
    got = mech(step(rules, b, truth_of(b, {"a": "1"}))[0])
    assert got["correction/precision"] == 1.0 and got["correction/recall"] == 0.0


def test_proposed_correction_precision_and_recall_for_nl_olr2():
    m = NLOLR2()
    rules = StepRules(m, grade=exact_grade)
    truth = {"noisy": "7", "clean": "9", "wrong_kept": "3", "bad": "9"}
    for s in range(1, 4):  # three visits: the margin rule proposes on the third
        b = step_batch([("noisy", True, "9", ["7"] * 7 + ["2001"]), ("clean", True, "9", answers("9", 7)),
                        ("wrong_kept", True, "9", answers("9", 7)), ("bad", True, "9", ["4"] * 7 + ["2001"])], s)
        met, _ = step(rules, b, truth_of(b, truth))
        met.update(rules.evidence_metrics(m.pop_evidence()))
    # proposals on the third visit: noisy -> 7 (wrong label, fixed), bad -> 4 (right label, a false proposal)
    assert mech(met) == {"proposed_correction/seen": 4, "proposed_correction/wrong": 2,
                         "proposed_correction/changed": 2, "proposed_correction/changed_wrong": 1,
                         "proposed_correction/fixed": 1, "proposed_correction/precision": 0.5,
                         "proposed_correction/recall": 0.5}


def test_promotion_precision_and_recall_for_trapo2():
    m = TraPO2()
    rules = StepRules(m, grade=exact_grade)
    truth = {"lab": "1", "rise": "7", "liar": "5", "flat": "4"}
    for s, n in enumerate([3, 4, 6], 1):  # rise and liar climb to a promotion on the third probe; flat never
        b = step_batch([("lab", True, "1", answers("1", 4)), ("rise", False, "", answers("7", n)),
                        ("liar", False, "", answers("6", n)), ("flat", False, "", answers("4", 8))], s)
        met, _ = step(rules, b, truth_of(b, truth))
        met.update(rules.evidence_metrics(m.pop_evidence()))
    assert mech(met) == {"promotion/seen": 3, "promotion/given": 2, "promotion/right": 1,
                         "promotion/precision": 0.5, "promotion/recall": pytest.approx(1 / 3)}
    assert rules.evidence_metrics([]) == {}  # nothing seen since: nothing judged


# ------------------------------------------------------------------------------ audit: truth never reaches supervision
def decisions(method_name, batch_fn, hidden, cfg=None, method=None):
    m = method or WeakTrainerInterface.get(method_name).build(cfg or {})
    rules = StepRules(m, grade=exact_grade)
    out = []
    for s, b in enumerate(batch_fn(), 1):
        t = rules.targets(b, None, None if hidden is None else hidden(b))
        d = rules.row_surfaces(t.view, t.hidden)
        out.append((list(t.view.target), list(t.view.score), list(t.constructed), list(t.regraded),
                    None if d.reward is None else list(d.reward), None if d.admit is None else list(d.admit),
                    None if d.weight is None else list(d.weight)))
    return out


def olr_visits():
    return [step_batch([("a", True, "9", answers("7", k)), ("b", True, "3", answers("3", 5)),
                        ("u", False, "", answers("4", 6))], s) for s, k in enumerate([3, 5, 6], 1)]


@pytest.mark.parametrize("name,cfg,visits", [
    ("ttrl", {}, lambda: [ttrl_step()[0]]),
    ("olr", {"start_epoch": 0, "min_slope": 0.0}, olr_visits),
    ("trapo", {"warmup": 1, "min_score": 0.9}, lambda: [
        step_batch([("L", True, "5", answers("5", k)), ("u", False, "", answers("7", k))], s)
        for s, k in enumerate([2, 6], 1)]),
])
def test_scrambled_truth_changes_no_target_reward_admission_or_weight(name, cfg, visits):
    true = {"a": "7", "b": "3", "c": "1", "d": "4", "u": "4", "L": "5"}
    scrambled = {k: str(100 + i) for i, k in enumerate(true)}
    runs = [decisions(name, visits, h, cfg) for h in (lambda b: truth_of(b, true), lambda b: truth_of(b, scrambled), None)]
    assert runs[0] == runs[1] == runs[2]


def test_scrambled_truth_changes_no_confidence_reward():
    b = lambda: [emrl_batch([0.1, 0.5, 0.3, 0.9, 0.2, 0.4, 0.6, 0.05], ["5", "5", "6", "7", "5", None, "8", "6"])]
    runs = [decisions("emrl", b, h) for h in (lambda x: np.array(["5"] * 8, dtype=object),
                                               lambda x: np.array(["6"] * 8, dtype=object), None)]
    assert runs[0] == runs[1] == runs[2]


def test_no_method_module_reads_simulation_truth():
    """Methods get the view only; the one module that reads ``simulation`` is the step's (diagnostics,
    mechanism, the noise redraw, which removes its field before any method sees the view)."""
    root = Path(online_pkg.__file__).parent
    offenders = [str(p.relative_to(root)) for folder in ("supervise", "refine") for p in (root / folder).glob("*.py")
                 if re.search(r"hidden_answer|simulation|mechanism\b", p.read_text())]
    assert offenders == []
