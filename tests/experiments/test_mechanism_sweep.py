"""mechanism_sweep's verdicts (experiments/plans/mechanism_sweep.md) on hand-built counts and series, against
scipy where a library has the statistic."""

import pytest
from scipy.stats import binomtest

from devenus.experiments.definitions import mechanism_sweep as M
from devenus.experiments.mechanism import AUROC
from devenus.experiments.stats import wilson_interval


def test_target_verdicts_at_the_margin():
    ref = {"num": 1800, "den": 2000}  # 0.90 on many groups: the reference
    assert M.target_verdict({"num": 1790, "den": 2000}, ref)[3] == "level within the margin"
    assert M.target_verdict({"num": 1200, "den": 2000}, ref)[3] == "below the reference"
    assert M.target_verdict({"num": 1960, "den": 2000}, ref)[3] == "above the reference"
    d, lo, hi, verdict = M.target_verdict({"num": 90, "den": 100}, {"num": 180, "den": 200})
    assert d == pytest.approx(0.0) and verdict == "inconclusive" and hi - lo > 2 * M.PRECISION_MARGIN  # too few groups


def test_auroc_verdicts_and_the_wilson_interval_is_scipys():
    assert M.auroc_verdict([0.70, 0.75, 0.80, 0.72])[2] == "ranks right answers higher"
    assert M.auroc_verdict([0.30, 0.25, 0.35, 0.28])[2] == "ranks right answers lower"
    assert M.auroc_verdict([0.49, 0.51, 0.50, 0.50, 0.52, 0.48])[2] == "at chance within the margin"
    assert M.auroc_verdict([0.3, 0.7, 0.5, 0.6])[2] == "inconclusive"
    ci = binomtest(7, 10).proportion_ci(method="wilson")
    assert wilson_interval(7, 10) == pytest.approx((ci.low, ci.high))  # what M.report_text uses


def test_report_pairs_each_target_method_with_the_reference_of_its_seed():
    def rec(mech):
        return {"mechanism": mech}

    prec = lambda k, n: {M.TARGET_PRECISION: {"value": k / n, "num": k, "den": n, "series": []},  # noqa: E731
                         M.TARGET_COVERAGE: {"value": 0.5, "num": n, "den": 2 * n, "series": []}}
    recs = {("ttrl@0", 0): rec(prec(1800, 2000)), ("corewarding2@0", 0): rec(prec(1200, 2000)),
            ("intuitor@0", 0): rec({AUROC: {"value": 0.7, "num": 7, "den": 10, "series": [[1, 0.7], [2, 0.75], [3, 0.8]]}}),
            ("grpo@0", 0): rec({}), ("base", 0): rec({})}
    text = M.report_text(recs)
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("| ") and "@0" in line}
    assert "the reference" in rows["ttrl@0"] and "below the reference" in rows["corewarding2@0"]
    assert "-0.300" in rows["corewarding2@0"] and "ranks right answers higher" in rows["intuitor@0"]
    assert "none logged" in rows["grpo@0"] and "| base |" not in text
