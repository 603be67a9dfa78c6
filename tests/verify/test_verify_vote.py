import pytest

from devenus.verify import Verifier, majority_vote


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(timeout_s=30.0)
    yield v
    v.close()


def test_simple_majority(verifier):
    r = majority_vote(["3", "3", "4", "3"], verifier)
    assert r.target == "3" and not r.tie
    assert r.majority_ratio == pytest.approx(0.75)
    assert r.agrees == (True, True, False, True)
    assert r.cluster_sizes == (3, 1)
    assert r.cluster_of == (0, 0, 1, 0)


def test_equivalent_forms_vote_together(verifier):
    answers = ["0.5", "\\frac{1}{2}", "1/2", "3", "3", None]
    r = majority_vote(answers, verifier)
    # 3 half-forms beat two 3s; the target is a raw answer of the winning cluster
    assert r.target in {"0.5", "\\frac{1}{2}", "1/2"}
    assert r.majority_ratio == pytest.approx(3 / 6)
    assert r.agrees == (True, True, True, False, False, False)
    assert r.cluster_of[5] is None and r.n_abstain == 1


def test_symbolic_forms_vote_together(verifier):
    r = majority_vote(["\\sqrt{8}", "2\\sqrt{2}", "3", "4"], verifier)
    assert r.target == "\\sqrt{8}" and r.majority_ratio == pytest.approx(0.5)
    assert r.agrees == (True, True, False, False)


def test_tie_gives_no_majority(verifier):
    r = majority_vote(["1", "2", "1", "2", None], verifier)
    assert r.tie and r.target is None and r.winner is None
    assert r.majority_ratio == pytest.approx(2 / 5)
    assert not any(r.agrees)


def test_abstentions_never_win(verifier):
    r = majority_vote([None, None, None, "7", ""], verifier)
    assert r.target == "7"
    assert r.n_abstain == 4
    assert r.majority_ratio == pytest.approx(1 / 5)
    assert r.agrees == (False, False, False, True, False)


def test_all_none_and_empty(verifier):
    for answers in ([None] * 4, []):
        r = majority_vote(answers, verifier)
        assert r.target is None and not r.tie and r.majority_ratio == 0.0
        assert r.cluster_sizes == () and not any(r.agrees)


def test_min_agreement(verifier):
    answers = ["5", "5", "6", "7"]
    assert majority_vote(answers, verifier, min_agreement=0.5).target == "5"
    r = majority_vote(answers, verifier, min_agreement=0.6)
    assert r.target is None and not r.tie
    assert r.majority_ratio == pytest.approx(0.5)
    assert not any(r.agrees)


def test_most_frequent_raw_form_is_the_target(verifier):
    r = majority_vote(["\\frac{1}{2}", "0.5", "0.5", "9"], verifier)
    assert r.target == "0.5"


def test_distinct_forms_only_are_compared():
    class Counting:
        def __init__(self):
            self.calls = 0

        def equivalent(self, a, b):
            self.calls += 1
            return False

    c = Counting()
    majority_vote(["1"] * 30 + ["2"] * 20 + ["3"] * 14, c)  # G=64, three distinct forms
    assert c.calls == 3  # (2 vs 1), (3 vs 1), (3 vs 2)
