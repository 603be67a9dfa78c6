import pytest

from devenus.verify import Verifier, normalize
from devenus.verify.numeval import decide, safe_eval


@pytest.fixture(scope="module")
def verifier():
    v = Verifier(timeout_s=30.0)
    yield v
    v.close()


@pytest.mark.parametrize(
    "s, value",
    [
        ("2\\sqrt{3}", 2 * 3**0.5),
        ("\\sqrt{12}", 12**0.5),
        ("\\sqrt[3]{8}", 2.0),
        ("3\\cdot4", 12.0),
        ("-3-4", -7.0),
        ("2^{10}", 1024.0),
        ("\\frac{\\pi}{2}", 3.141592653589793 / 2),
        ("(1+2)(3+4)", 21.0),
    ],
)
def test_constant_values(s, value):
    v, has_vars = safe_eval(s)
    assert v == pytest.approx(value) and not has_vars


@pytest.mark.parametrize(
    "s",
    [
        "1/2x",  # ambiguous
        "e^2",  # e is a constant for math-verify
        "2i",
        "x^23",  # LaTeX: x^2 * 3
        "10^{10^{10}}",  # overflow, never a giant integer
        "2^{2^{2^{2^{2}}}}",
        "{" * 100 + "1" + "}" * 100,  # too deep
        "1" * 300,  # too long
        "\\sin x",
        "1,2",
        "a_1",
        "\\sqrt{-1}",
        "1/0",
        "(-8)^{1/3}",
    ],
)
def test_unsupported_is_none(s):
    assert safe_eval(s) is None


def test_variables_are_flagged():
    v, has_vars = safe_eval("x^2+2x+1")
    assert has_vars and v == pytest.approx(safe_eval("(x+1)^2")[0])


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("2\\sqrt{3}", "\\sqrt{45}", False),
        ("(x+1)^2", "(x+2)^2", False),
        ("2\\sqrt{3}", "\\sqrt{12}", True),  # constants, equal values
        ("(x+1)^2", "x^2+2x+1", None),  # equal values with variables: left to math-verify
        ("10^{20}", "10^{20}+1", None),  # too large for doubles to decide
        ("0.3333333", "\\frac{1}{3}", True),  # a decimal within the relative tolerance (1e-6)
        ("0.333", "\\frac{1}{3}", False),  # ... and one outside it
        ("0.0000149", "1.5\\cdot10^{-5}", False),  # two decimals: the written values differ
        ("2X", "2x", None),
    ],
)
def test_decide(a, b, expected):
    assert decide(a, b) is expected


@pytest.mark.parametrize(
    "a, b",
    [
        ("\\pi", "3.14159265"),
        ("\\pi", "3.14"),
        ("0.333333", "\\frac{1}{3}"),
        ("0.33", "\\frac{1}{3}"),
        ("2X", "2x"),
        ("\\frac{1}{2}x", "\\frac{x}{2}"),
        ("x^2", "y^2"),
        ("3\\sqrt{2}", "\\sqrt{18}"),
        ("3\\sqrt{2}", "\\sqrt{19}"),
        ("(x+3)^2", "x^2+6x+9"),
        ("(x+3)^2", "x^2+6x+8"),
        ("a+b", "b+a"),
        ("\\frac{7}{8}", "0.875"),
    ],
)
def test_fast_paths_agree_with_mathverify(verifier, a, b):
    """The verifier (with its fast paths) must give math-verify's own answer."""
    from math_verify import LatexExtractionConfig, parse, verify

    cfg = [LatexExtractionConfig()]
    expected = verify(parse("$" + normalize(b) + "$", cfg), parse("$" + normalize(a) + "$", cfg))
    assert verifier.equivalent(a, b) is expected
