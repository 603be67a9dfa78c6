"""avg@k, pass@k (unbiased estimator), maj@k and the bootstrap intervals against hand computations."""

import math

import numpy as np
import pytest

from devenus.evaluate.metrics import (
    avg_score,
    bootstrap_interval,
    bootstrap_macro_interval,
    majority_correct,
    normal_half_width,
    pass_at_k,
)
from devenus.evaluate.run import QuestionResult, score_benchmark


# ------------------------------------------------------------------------------------------ pass@k
@pytest.mark.parametrize("n,c,k,expected", [
    (4, 1, 1, 0.25),                 # pass@1 = c/n
    (4, 1, 2, 1 - 3 / 6),            # 1 - C(3,2)/C(4,2)
    (4, 2, 2, 1 - 1 / 6),            # 1 - C(2,2)/C(4,2)
    (10, 3, 5, 1 - 21 / 252),        # 1 - C(7,5)/C(10,5)
    (32, 0, 32, 0.0),
    (32, 1, 32, 1.0),                # n - c < k: every k-subset holds the correct sample
    (5, 4, 2, 1.0),
    (4, 4, 1, 1.0),
])
def test_pass_at_k_hand_values(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_binomial_formula_on_a_grid():
    for n in range(1, 21):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - (math.comb(n - c, k) / math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


def test_pass_at_1_equals_avg():
    scores = [1, 0, 0, 1, 1, 0, 0, 0]
    assert pass_at_k(8, 3, 1) == pytest.approx(avg_score(scores)) == pytest.approx(3 / 8)


@pytest.mark.parametrize("n,c,k", [(4, 1, 5), (4, 1, 0), (4, 5, 1), (4, -1, 1)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_avg_of_no_samples_is_an_error():
    with pytest.raises(ValueError):
        avg_score([])


# ------------------------------------------------------------------------------------------ maj@k
def test_majority_right_and_wrong():
    assert majority_correct(["5", "5", "3", "5"], [1, 1, 0, 1]) == 1.0
    assert majority_correct(["3", "3", "5", "3"], [0, 0, 1, 0]) == 0.0


def test_majority_is_equivalence_aware():
    # "1/2" and "0.5" are one cluster (2 votes) against "3" (1 vote); the cluster is right
    assert majority_correct(["1/2", "3", "0.5"], [1, 0, 1]) == 1.0
    # by strings "3" would win 2-1-1; merged, "1/2"/"0.5" (3 votes) beats it
    assert majority_correct(["1/2", "3", "0.5", "3", "2/4"], [1, 0, 1, 0, 1]) == 1.0


def test_majority_tie_counts_as_wrong():
    assert majority_correct(["3", "3", "5", "5"], [1, 1, 0, 0]) == 0.0
    assert majority_correct(["1/2", "0.5", "3", "3"], [1, 1, 0, 0]) == 0.0  # 2 vs 2 after clustering


def test_abstentions_never_win():
    # three samples without an answer and one "7": the only cluster is "7"; it is the majority
    assert majority_correct([None, None, None, "7"], [0, 0, 0, 1]) == 1.0
    # nobody answered: no majority, wrong
    assert majority_correct([None, None], [0, 0]) == 0.0


def test_majority_by_letter():
    assert majority_correct(["C", "C", "B", None], [1, 1, 0, 0]) == 1.0
    assert majority_correct(["B", "C", "B"], [0, 1, 0]) == 0.0


def test_majority_needs_aligned_inputs():
    with pytest.raises(ValueError):
        majority_correct(["1", "2"], [1])


# ------------------------------------------------------------------------------------------ intervals
def test_bootstrap_constant_values_have_a_point_interval():
    iv = bootstrap_interval([0.5] * 50, n_boot=200, seed=0)
    assert iv.mean == iv.lo == iv.hi == 0.5


def test_bootstrap_is_seeded_and_brackets_the_mean():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 2, 400).astype(float)
    a, b = bootstrap_interval(x, seed=3), bootstrap_interval(x, seed=3)
    assert a == b
    assert a.lo < a.mean < a.hi
    assert bootstrap_interval(x, seed=4) != a
    # Bernoulli(~0.5) over 400 questions: the 95% half-width is about 1.96 * 0.5 / 20 = 0.049
    assert 0.04 < a.half_width < 0.058
    assert a.half_width == pytest.approx(normal_half_width(x), rel=0.1)


def test_macro_interval_is_the_unweighted_mean_of_benchmarks():
    a = [1.0] * 10 + [0.0] * 40    # 0.2 over 50 questions
    b = [1.0] * 6 + [0.0] * 4      # 0.6 over 10 questions
    iv = bootstrap_macro_interval([a, b], n_boot=500, seed=0)
    assert iv.mean == pytest.approx(0.4)  # not the pooled 16/60
    assert iv.lo < 0.4 < iv.hi


def test_bootstrap_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        bootstrap_interval([])


# ------------------------------------------------------------------------------------------ per benchmark
def test_score_benchmark_by_hand():
    qs = [
        QuestionResult("q1", "4", ("4", "4", "5", None), (1, 1, 0, 0)),   # avg .5, pass@4 1, maj 1
        QuestionResult("q2", "9", ("1", "1", "9", "2"), (0, 0, 1, 0)),     # avg .25, pass@4 1, maj 0
        QuestionResult("q3", "7", ("3", "3", "2", "2"), (0, 0, 0, 0)),     # avg 0, pass@4 0, maj 0 (tie)
        QuestionResult("q4", "6", ("6", "6", "6", "6"), (1, 1, 1, 1)),     # avg 1, pass@4 1, maj 1
    ]
    m = score_benchmark("toy", "avg@k", qs, n_boot=300, seed=0)
    assert m["k"] == 4 and m["n_questions"] == 4 and m["headline"] == "avg@4"
    assert m["avg@4"]["mean"] == pytest.approx((0.5 + 0.25 + 0 + 1) / 4)
    assert m["pass@1"]["mean"] == pytest.approx(m["avg@4"]["mean"])
    assert m["pass@4"]["mean"] == pytest.approx(3 / 4)
    assert m["maj@4"]["mean"] == pytest.approx(2 / 4)
    assert m["abstain_rate"] == pytest.approx(1 / 16)
    assert m["truncated_rate"] == 0  # no sample says it was cut


def test_truncated_share_beside_the_no_answer_share():
    # q1's None is a sample cut at the token limit; q2's None ended but boxed nothing
    qs = [QuestionResult("q1", "4", ("4", None), (1, 0), ("\\boxed{4}", "4 + 4 = 8, so"), (False, True)),
          QuestionResult("q2", "9", (None, "9"), (0, 1), ("no idea", "\\boxed{9}"), (False, False))]
    m = score_benchmark("toy", "avg@k", qs, n_boot=50)
    assert m["abstain_rate"] == pytest.approx(2 / 4)
    assert m["truncated_rate"] == pytest.approx(1 / 4)


def test_score_benchmark_pass1_headline_with_one_sample():
    qs = [QuestionResult(f"q{i}", "1", ("1",), (float(i % 2),)) for i in range(6)]
    m = score_benchmark("mc", "pass@1", qs, n_boot=100)
    assert m["headline"] == "pass@1" and m["k"] == 1
    assert m["pass@1"]["mean"] == pytest.approx(0.5)
    assert set(m) >= {"avg@1", "pass@1", "maj@1"}
