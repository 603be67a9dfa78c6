from fractions import Fraction

import pytest

from devenus.verify import as_number, normalize, parse_number


@pytest.mark.parametrize(
    "raw, canon",
    [
        ("  42 ", "42"),
        ("$\\dfrac{1}{2}$", "\\frac{1}{2}"),
        ("\\tfrac12", "\\frac{1}{2}"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("1,234", "1234"),
        ("1,234,567.5", "1234567.5"),
        ("1{,}234", "1234"),
        ("1\\,234", "1234"),
        ("+7.", "7"),
        ("x = 5", "5"),
        ("a_1=5", "5"),
        ("\\theta = \\pi", "\\pi"),
        ("5\\text{ cm}", "5"),
        ("3 \\mbox{ m}^2", "3"),
        ("\\text{(A)}", "(A)"),
        ("\\boxed{\\text{(B)}}", "(B)"),
        ("90^\\circ", "90"),
        ("90^{\\circ}", "90"),
        ("50\\%", "50%"),
        ("\\sqrt2", "\\sqrt{2}"),
        ("−５", "-5"),  # unicode minus and full-width digit
        ("\\pi r^2", "\\pi r^2"),  # a control word keeps its separating space
        ("\\displaystyle\\frac{3}{4}", "\\frac{3}{4}"),
        ("\\(7\\)", "7"),
    ],
)
def test_normalize(raw, canon):
    assert normalize(raw) == canon


@pytest.mark.parametrize(
    "raw",
    [
        "\\boxed{1}+\\boxed{2}",  # not one wrapper
        "x = y = 3",  # a chain, not an assignment
        "x \\le 3",
        "(1,234)",  # a tuple, not a thousands separator
        "12,34",
        "\\sum_{n=1}^{10} n",  # an operator subscript is not an assignment
        "\\pi = 3",  # pi is a constant
    ],
)
def test_normalize_is_conservative(raw):
    n = normalize(raw)
    assert n not in {"1+2", "3", "1234"} and not n.startswith("1}")


@pytest.mark.parametrize(
    "s, value",
    [
        ("7", Fraction(7)),
        ("-7", Fraction(-7)),
        ("0.5", Fraction(1, 2)),
        (".25", Fraction(1, 4)),
        ("3/4", Fraction(3, 4)),
        ("-3/4", Fraction(-3, 4)),
        ("\\frac{1}{2}", Fraction(1, 2)),
        ("-\\frac{3}{6}", Fraction(-1, 2)),
        ("\\frac{-1}{-2}", Fraction(1, 2)),
        ("$\\dfrac{2}{4}$", Fraction(1, 2)),
        ("1,000", Fraction(1000)),
    ],
)
def test_as_number(s, value):
    assert as_number(s) == value


@pytest.mark.parametrize("s", ["x", "1/0", "\\frac{1}{0}", "2^3", "\\sqrt{4}", "1e3", "", "9" * 100, "--5"])
def test_as_number_rejects(s):
    assert as_number(s) is None


def test_percent_is_optional():
    assert as_number("50\\%") is None
    assert as_number("50\\%", percent=True) == Fraction(1, 2)


def test_exactness_flag():
    assert parse_number("0.5").exact is False
    assert parse_number("\\frac{1}{2}").exact is True
