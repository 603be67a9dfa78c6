"""OLR's decisions on hand-built visits, against an independent computation (numpy.polyfit slope, a
Counter mode, the visit gate), and through the step rules (labeled rows re-graded, corrections and their
precision against hidden truth)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from refine_batches import answers, exact_grade, step_batch

from devenus.online.refine.olr import OLR, OLRConfig, olr_decision
from devenus.online.step import StepRules


def reference_decision(majorities, rates, visits, start=4, min_slope=0.05):
    """The rule written out independently: polyfit slope, Counter mode (None visits left out), exact gate."""
    slope = np.polyfit(np.arange(len(rates)), rates, 1)[0] if len(rates) >= 2 else 0.0
    c = Counter(a for a in majorities if a is not None).most_common()
    mode = c[0][0] if c and (len(c) == 1 or c[0][1] > c[1][1]) else None
    cur = majorities[-1]
    if visits > start and cur is not None and slope >= min_slope - 1e-12 and mode == cur:
        return cur
    return None


def test_olr_corrects_a_noisy_label_as_the_reference_rule_decides():
    m = OLR()
    # a noisy label "9"; the policy's majority moves to "7" with a rising majority pass rate
    counts = [2, 3, 3, 4, 5, 6, 7, 8, 8, 8]
    majorities, rates, decided = [], [], []
    for step, k in enumerate(counts, 1):
        b = step_batch([("a", True, "9", answers("7", k))], step)
        new = m.construct_targets(b)
        majorities.append("7")
        rates.append(k / 8)
        want = reference_decision(majorities, rates, step)
        assert list(new) == [want] * 8, (step, new[0], want)
        ev = m.pop_evidence()
        assert ev[0]["key"] == "a" and ev[0]["step"] == step and ev[0]["majority_answer"] == "7"
        assert ev[0]["majority_pass_rate"] == k / 8 and ev[0]["target_pass_rate"] == 0.0
        assert ev[0]["values"]["corrected"] == (want is not None)
        assert m.pop_metrics()["corrections"] == (want is not None)
        decided.append(want is not None)
    assert decided[:4] == [False] * 4 and any(decided)  # the gate holds the first four visits


def test_the_first_refinement_is_on_visit_start_epoch_plus_one():
    cfg = OLRConfig(start_epoch=4)
    rising = [0.25, 0.375, 0.5, 0.625, 0.75, 0.875]
    for visits in range(1, 7):
        got, _, _ = olr_decision(["7"] * visits, rising[:visits], visits, cfg)
        assert got == ("7" if visits >= 5 else None)  # the reference (0-based epoch > 4) starts on visit 6


def test_slope_exactly_at_the_threshold_refines():
    rates = [0.5, 0.55, 0.6, 0.65, 0.7]  # slope 0.05, which float arithmetic puts a hair below 0.05
    got, slope, _ = olr_decision(["7"] * 5, rates, 5, OLRConfig())
    assert slope == pytest.approx(0.05) and got == "7"
    got, _, _ = olr_decision(["7"] * 5, [0.5, 0.54, 0.58, 0.62, 0.66], 5, OLRConfig())
    assert got is None  # 0.04 < 0.05


def test_no_majority_never_becomes_a_target_and_ties_in_history_block():
    cfg = OLRConfig(start_epoch=0)
    # the current visit has no majority: the reference's "no majority" sentinel would match itself
    assert olr_decision(["7", None, None], [0.1, 0.0, 0.0], 3, cfg)[0] is None
    assert olr_decision([None, None, "7"], [0.0, 0.0, 0.5], 3, cfg)[0] == "7"  # None visits do not vote in the mode
    assert olr_decision(["5", "5", "7", "7"], [0.2, 0.3, 0.4, 0.5], 4, cfg)[0] is None  # tied mode
    assert olr_decision(["5", "5", "5", "7"], [0.2, 0.3, 0.4, 0.5], 4, cfg)[0] is None  # mode is not the current


def test_through_the_step_rules_labeled_rows_are_regraded_and_precision_uses_hidden_truth():
    m = OLR(OLRConfig(start_epoch=0, min_slope=0.0))
    rules = StepRules(m, grade=exact_grade)
    # visit 1 of "a" (label 9, truth 7): slope 0 >= 0, mode 7 -> trains against 7; "b" (label 3 = majority): no correction
    b = step_batch([("a", True, "9", answers("7", 6)), ("b", True, "3", answers("3", 5)), ("c", False, "", answers("4", 6))])
    hidden = np.array(["7"] * 8 + ["3"] * 8 + ["4"] * 8, dtype=object)
    t = rules.targets(b, None, hidden)
    assert list(t.view.target[:8]) == ["7"] * 8 and list(t.view.target[8:16]) == ["3"] * 8
    assert list(t.view.target[16:]) == [""] * 8  # unlabeled rows are left alone
    assert list(t.view.score[:8]) == [1.0] * 6 + [0.0] * 2  # re-graded against the majority
    assert rules.metrics["devenus/target/corrections"] == 1
    assert rules.metrics["devenus/target/correction_precision"] == 1.0
    assert m.pop_metrics()["corrections"] == 1
    # a wrong correction: truth was 9 after all
    m2 = OLR(OLRConfig(start_epoch=0, min_slope=0.0))
    r2 = StepRules(m2, grade=exact_grade)
    r2.targets(step_batch([("a", True, "9", answers("7", 6))]), None, np.array(["9"] * 8, dtype=object))
    assert r2.metrics["devenus/target/correction_precision"] == 0.0


def test_state_round_trip_decides_like_an_uninterrupted_run_and_the_window_bounds_memory():
    cfg = OLRConfig(window=4)
    a, b = OLR(cfg), OLR(cfg)
    counts = [2, 2, 3, 3, 4, 5, 6, 7, 8]
    for step, k in enumerate(counts, 1):
        batch = step_batch([("x", True, "9", answers("7", k))], step)
        if step == 5:
            state = a.state_dict()
            b = OLR(cfg)
            b.load_state_dict(state)
        ra = a.construct_targets(batch)
        if step >= 5:
            rb = b.construct_targets(step_batch([("x", True, "9", answers("7", k))], step))
            assert list(ra) == list(rb)
    assert len(a.history.by_key["x"]) == 4 and a.history.visits["x"] == len(counts)
    assert a.state_dict() == b.state_dict()
    with pytest.raises(ValueError, match="window"):
        OLR(OLRConfig(window=5)).load_state_dict(a.state_dict())


def test_nan_and_empty_histories_never_refine():
    from devenus.signals import ls_slope, unique_mode

    assert math.isnan(ls_slope([0.1, float("nan"), 0.9])) and math.isnan(ls_slope([float("nan")]))
    assert ls_slope([]) == 0.0 and ls_slope([0.3]) == 0.0 and unique_mode([]) is None
    cfg = OLRConfig(start_epoch=0, min_slope=0.0)
    # a rising series with one NaN point: the slope is undefined, so the label stays
    got, slope, _ = olr_decision(["7"] * 3, [0.1, float("nan"), 0.9], 3, cfg)
    assert got is None and math.isnan(slope)
    assert olr_decision([], [], 0, cfg) == (None, 0.0, None)  # no visit yet: no IndexError
    assert olr_decision([], [], 5, cfg)[0] is None
