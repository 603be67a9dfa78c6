"""Paired Student-t intervals against scipy and against hand numbers."""

import math

import numpy as np
import pytest
import scipy.stats as scipy_stats

from devenus.experiments.stats import mean_interval, paired_over_questions, paired_over_seeds, t_ppf

# two-sided 95% quantiles from printed t tables
T_TABLE = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 9: 2.262, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize("df,t", sorted(T_TABLE.items()))
def test_t_quantile_matches_the_printed_table(df, t):
    assert t_ppf(0.975, df) == pytest.approx(t, abs=5e-4)


def test_paired_over_seeds_by_hand():
    # arm 0.50, 0.50, 0.60 against base 0.20, 0.30, 0.25: differences 0.30, 0.20, 0.35
    iv = paired_over_seeds({0: 0.5, 1: 0.5, 2: 0.6}, {0: 0.2, 1: 0.3, 2: 0.25})
    d = [0.30, 0.20, 0.35]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    assert iv.n == 3 and iv.mean == pytest.approx(mean)
    assert iv.half_width == pytest.approx(4.302652729911275 * sd / math.sqrt(3), rel=1e-9)
    assert iv.fmt() == "+0.283 ± 0.190"
    assert iv.verdict(+1) == "excludes 0 (claimed side)" and iv.verdict(-1) == "excludes 0 (other side)"


def test_paired_interval_equals_scipy_on_the_differences():
    arm = {0: 0.41, 1: 0.38, 2: 0.47, 3: 0.33, 5: 0.5}
    base = {0: 0.30, 1: 0.36, 2: 0.31, 3: 0.35, 4: 0.9}  # seed 4 and 5 have no partner: dropped
    iv = paired_over_seeds(arm, base)
    d = [arm[s] - base[s] for s in (0, 1, 2, 3)]
    lo, hi = scipy_stats.t.interval(0.95, len(d) - 1, loc=sum(d) / 4, scale=scipy_stats.sem(d))
    assert iv.n == 4 and iv.low == pytest.approx(lo) and iv.high == pytest.approx(hi)
    assert iv.verdict(+1) == "inconclusive"
    r = scipy_stats.ttest_rel([arm[s] for s in range(4)], [base[s] for s in range(4)])
    assert (r.pvalue < 0.05) == (iv.low > 0 or iv.high < 0)


def test_ours_not_scipys_interval_because_committed_reports_hold_every_digit():
    # scipy's t.interval over numpy's mean and sem agrees with ours to rounding, not to the bit (numpy sums left to
    # right, math.fsum exactly), and the reports' .json files keep every digit: scipy here would rewrite them
    xs = [0.1, 0.2, 0.3]
    iv = mean_interval(xs)
    assert iv.mean == math.fsum(xs) / 3 == 0.19999999999999998 != float(np.mean(xs))
    lo, hi = scipy_stats.t.interval(0.95, 2, loc=np.mean(xs), scale=scipy_stats.sem(xs))
    assert (iv.low, iv.high) == pytest.approx((lo, hi))


def test_pairing_removes_the_shared_question_difficulty():
    # two runs that differ by exactly +0.25 on every question: the paired interval has width 0,
    # while the unpaired intervals of each run are wide (questions differ a lot)
    base = {f"q{i}": (i % 5) / 5 for i in range(40)}
    arm = {q: v + 0.25 for q, v in base.items()}
    iv = paired_over_questions(arm, base)
    assert iv.mean == pytest.approx(0.25) and iv.half_width == pytest.approx(0.0, abs=1e-12)
    assert mean_interval(list(base.values())).half_width > 0.05


def test_one_value_has_no_interval_and_nothing_in_common_is_an_error():
    iv = mean_interval([0.3])
    assert math.isnan(iv.half_width) and iv.fmt(signed=False) == "0.300" and iv.verdict() == "one run: no interval"
    with pytest.raises(ValueError):
        paired_over_seeds({0: 1.0}, {1: 1.0})
    with pytest.raises(ValueError):
        t_ppf(1.0, 3)


# ---- decisions, Holm, power (hand-made numbers)
from devenus.experiments.stats import decide, holm, seeds_needed, verdicts  # noqa: E402


def test_decide_matches_scipy_paired_t_and_tost():
    d = [0.05, 0.07, 0.06, 0.04, 0.08]
    r = decide("x", d, side=+1, margin=0.02)
    assert r.p_diff == pytest.approx(scipy_stats.ttest_1samp(d, 0).pvalue)
    lo = scipy_stats.ttest_1samp(d, -0.02, alternative="greater").pvalue
    hi = scipy_stats.ttest_1samp(d, 0.02, alternative="less").pvalue
    assert r.p_equiv == pytest.approx(max(lo, hi))
    assert r.verdict() == "reproduced" and decide("x", d, side=-1, margin=0.02).verdict() == "wrong side"


def test_a_precise_null_is_called_a_null_and_a_wide_one_is_not():
    precise = [0.004, -0.003, 0.001, -0.002, 0.000, 0.002]
    assert decide("p", precise, side=+1, margin=0.02).verdict() == "null within margin"
    wide = [0.15, -0.12, 0.02, -0.09]  # mean about 0 but the interval reaches past the margin
    assert decide("w", wide, side=+1, margin=0.02).verdict() == "inconclusive"
    # an equivalence claim: the null is the claim
    assert decide("e", precise, side=0, margin=0.02).verdict() == "reproduced"
    assert decide("e", [0.30, 0.31, 0.29], side=0, margin=0.05).verdict() == "wrong side"
    assert decide("one", [0.3], side=+1, margin=0.02).verdict() == "inconclusive"


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04 -> 3*0.01, max(0.03, 2*0.02), max(0.04, 1*0.04)
    assert holm([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.5, float("nan"), 0.01]) == pytest.approx([0.5, float("nan"), 0.02], nan_ok=True)
    assert holm([0.3, 0.4]) == pytest.approx([0.6, 0.6])


def test_holm_turns_a_lone_significant_claim_into_inconclusive():
    d = [0.021, 0.030, 0.012, 0.027]  # p about 0.01 alone
    alone = decide("a", d, side=+1, margin=0.005)
    assert alone.p_diff < 0.05 and alone.verdict() == "reproduced"
    family = [alone] + [decide(f"z{i}", [0.02, -0.03, 0.01, 0.00], side=+1, margin=0.005) for i in range(5)]
    assert verdicts(family)["a"] == "inconclusive"  # 6 x p > 0.05


def test_seeds_needed_matches_the_published_one_sample_t_sizes():
    # G*Power, one-sample / paired t, two-sided alpha 0.05, power 0.8: d = 1 -> 10, d = 0.5 -> 34
    assert seeds_needed(1.0, 1.0) == 10
    assert seeds_needed(0.02, 0.01) == 34
    # TOST needs more than detecting an effect of the margin's size, and more with a wider SD
    assert seeds_needed(0.02, 0.02, "equivalence") > seeds_needed(0.02, 0.02)
    assert seeds_needed(0.04, 0.02, "equivalence") > seeds_needed(0.02, 0.02, "equivalence")


def test_power_far_in_the_tail_is_one_not_nan():
    from devenus.experiments.stats import power_difference, power_equivalence

    assert power_difference(6, 0.0347, 0.3) == 1.0 and power_equivalence(6, 0.001, 0.3) == 1.0
    assert 0.40 < power_difference(6, 0.0347, 0.03) < 0.41


def test_decide_claims_pairs_seeds_on_the_same_weights_and_holm_spans_only_decided_claims():
    from devenus.experiments.stats import decide_claims

    def rec(acc, w="w0"):
        return {"accuracy": {"ID": acc}, "base_model": w}

    records = {("a", 0): rec(0.60), ("a", 1): rec(0.62), ("a", 2): rec(0.61), ("a", 3): rec(0.9, "w1"),
               ("r", 0): rec(0.50), ("r", 1): rec(0.51), ("r", 2): rec(0.52), ("r", 3): rec(0.5),
               ("b", 0): rec(0.55)}
    a, b, c = decide_claims(records, [("a", "r", 1), ("b", "r", 1), ("z", "r", 1)], margin=0.03)
    assert a.seeds == [0, 1, 2] and a.diffs == pytest.approx([0.10, 0.11, 0.09])  # seed 3: other weights
    alone = verdicts([decide("a vs r", a.diffs, 1, 0.03)])  # one decided claim: Holm changes nothing
    assert a.verdict == alone["a vs r"] == "reproduced"
    assert (b.seeds, b.decision, b.verdict) == ([0], None, None)  # one seed: below min_seeds, not in the family
    assert (c.seeds, c.diffs, c.decision) == ([], [], None)
    (b1,) = decide_claims(records, [("b", "r", 1)], margin=0.03, min_seeds=1)
    assert b1.decision.n == 1 and b1.verdict == "inconclusive"
