"""Multiple-choice grading: a single option letter as the target grades letter answers."""

import pytest

from devenus.verify import Verifier, compute_score, grade, majority_vote
from devenus.verify.choice import choice_letter, target_letter


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(timeout_s=30.0)
    yield v
    v.close()


SAME_AS_C = ["C", "(C)", "C.", "C)", "\\text{C}", "\\textbf{(C)}", "option C", "c", "Option (c).", "$C$", "**C**", "(C) 42", "[C]"]


@pytest.mark.parametrize("pred", SAME_AS_C)
def test_letter_forms_name_the_option(pred):
    assert choice_letter(pred) == "C"


@pytest.mark.parametrize("pred", SAME_AS_C)
def test_letter_forms_grade_equal(verifier, pred):
    assert verifier.equivalent(pred, "C") is True
    for other in "ABDEFGHIJ":
        assert verifier.equivalent(pred, other) is False, other


@pytest.mark.parametrize(
    "response, target, score",
    [
        ("Comparing the options, \\boxed{\\textbf{(C)}}", "C", 1.0),
        ("The answer is (c).", "C", 1.0),
        ("Reasoning...\nAnswer: C", "C", 1.0),
        ("Reasoning...\nAnswer: option C", "C", 1.0),
        ("\\boxed{D}", "C", 0.0),
        ("\\boxed{CD}", "C", 0.0),  # two letters name no single option
        ("\\boxed{42}", "C", 0.0),  # the option's value, not its letter: ungradable here
        ("\\boxed{J}", "J", 1.0),
    ],
)
def test_compute_score_by_letter(response, target, score):
    assert compute_score("gpqa", response, target)["score"] == score


@pytest.mark.parametrize("target", [str(n) for n in range(11)] + ["0.5", "\\frac{1}{2}", "-3"])
def test_a_numeric_target_is_never_matched_by_a_letter(verifier, target):
    assert target_letter(target) is None
    for letter in "ABCDEFGHIJ":
        for pred in (letter, f"({letter})", f"\\text{{{letter}}}", letter.lower(), f"option {letter}"):
            assert verifier.equivalent(pred, target) is False, (pred, target)


@pytest.mark.parametrize("target", ["c", "x", "K", "CD", "(C) 42", "C and D", "", "3"])
def test_what_is_not_an_option_target(target):
    """Lowercase letters are variables; K is past J; text after a letter is not a target."""
    assert target_letter(target) is None


def test_letter_answers_vote_together(verifier):
    r = majority_vote(["C", "(C)", "c", "\\text{C}", "B", "B", "B"], verifier)
    assert r.target == "C" and sorted(r.cluster_sizes) == [3, 4]
    assert r.agrees == (True, True, True, True, False, False, False)
