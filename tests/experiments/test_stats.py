"""Paired Student-t intervals against scipy and against hand numbers."""

import math

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
