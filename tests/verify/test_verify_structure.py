"""The exact structural comparison (devenus.verify.structure): it decides only forms it parses fully,
and returns None (falls through to math-verify) for everything else."""

from __future__ import annotations

import pytest

from devenus.verify import normalize
from devenus.verify.numeval import polynomial
from devenus.verify.structure import decide_structure


def _decide(a: str, b: str, strict: bool = True) -> bool | None:
    return decide_structure(normalize(a), normalize(b), 6, strict)


@pytest.mark.parametrize(
    "a,b,want",
    [
        ("\\{1, 2\\}", "2, 1", True),
        ("\\{1, 2\\}", "\\{1, 3\\}", False),
        ("\\{0.333333, 1\\}", "\\{\\frac{1}{3}, 1\\}", True),  # the scalar decimal policy, per element
        ("\\{0.33, 1\\}", "\\{\\frac{1}{3}, 1\\}", False),
        ("(1, 2)", "(1, 2)", True),
        ("(1, 2)", "(2, 1)", False),
        ("(1, 2)", "[1, 2)", False),
        ("(13, 693)", "(13, 693.0)", True),
        ("(13, 693)", "(13, 639)", False),
        ("(-\\infty, 0) \\cup (1, 2]", "(1, 2] \\cup (-\\infty, 0)", True),
        ("(-\\infty, 0) \\cup (1, 2]", "(-\\infty, 0) \\cup (1, 3]", False),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{bmatrix}1&2\\\\3&4\\end{bmatrix}", True),
        ("\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "\\begin{pmatrix}1&2&0\\\\3&4&0\\end{pmatrix}", False),
        ("y = 2x + 1", "2x - y + 1 = 0", True),
        ("y = 2x + 1", "y = 2x + 2", False),
        ("x^2 + y^2 = 4", "3x^2 + 3y^2 = 12", True),
    ],
)
def test_decides(a, b, want):
    assert _decide(a, b) is want


@pytest.mark.parametrize(
    "a,b",
    [
        ("(1, 2] \\cup (2, 3)", "(1, 3)"),  # unions that merge: left to math-verify
        ("\\{1, 1, 2\\}", "\\{1, 2\\}"),  # repeated elements
        ("\\{\\sqrt{2}, 1\\}", "\\{1, \\sqrt{2}\\}"),  # an element that is not a plain number
        ("\\{1, 2\\}", "(1, 2)"),  # a set and a tuple / interval
        ("(1, 2)", "1, 2"),
        ("\\begin{pmatrix}1\\\\2\\end{pmatrix}", "(1, 2)"),
        ("\\begin{pmatrix}\\sqrt{2}\\\\2\\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
        ("\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}", "\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}"),  # a determinant
        ("y = 0.33x", "y = \\frac{1}{3}x"),  # a decimal coefficient may be a rounding
        ("y = \\sqrt{2}x", "y = x"),  # not a polynomial with rational coefficients
        ("y = \\frac{1}{x}", "xy = 1"),
        ("x^2 = 4", "x = 2, x = -2"),
        ("y < 2x", "y < 2x + 1"),  # inequalities are not equations
        ("1 = 1", "2 = 2"),  # no variable
        ("2\\frac{3}{2}", "\\frac{7}{2}"),  # an improper "mixed number": math-verify's reading
    ],
)
def test_falls_through(a, b):
    assert _decide(a, b) is None


def test_equations_are_left_to_math_verify_without_strict():
    assert _decide("y = 2x + 1", "2x - y + 1 = 0", strict=False) is None
    assert _decide("\\{1, 2\\}", "2, 1", strict=False) is True  # no variables: strict changes nothing


def test_polynomials_are_exact_and_bounded():
    p, dec = polynomial("(x-1)(x+1)")
    assert p == polynomial("x^2-1")[0] and not dec
    assert polynomial("2.5x")[1] is True
    assert polynomial("(x+1)^{40}") is None  # degree bound: no blow-up
    assert polynomial("9" * 100 + "x") is None  # coefficient bound
    assert polynomial("x^{y}") is None and polynomial("\\pi x") is None and polynomial("\\frac{1}{x}") is None
