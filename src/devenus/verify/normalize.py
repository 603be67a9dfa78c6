"""Canonical string form of an answer and a safe numeric fast path.

``normalize`` removes notation that never changes the value of a final answer (math delimiters,
spacing commands, ``\\left``/``\\right``, unit text, thousands separators, ...), so that most
equal answers become *identical strings* and need no symbolic check. It must never make two
different answers equal, so every rule is conservative; anything it leaves alone is still handled
by the symbolic check.

``as_number`` parses plain integers, decimals, ``a/b`` and ``\\frac{a}{b}`` (optionally a percent)
into an exact :class:`fractions.Fraction` by regex. Nothing is ever evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from devenus.verify.extract import match_brace

__all__ = ["normalize", "assigned_variable", "as_number", "ParsedNumber", "parse_number", "is_list", "drop_percent", "values_agree", "parse_plain", "numbers_equal"]

# Strings longer than this are normalised without caching (so the cache cannot hold megabytes)
# and are never numbers.
_CACHE_MAX_LEN = 512
_NUMBER_MAX_LEN = 64

# Unicode look-alikes that models (or adversaries) emit: full-width ASCII, minus signs, odd spaces.
_UNICODE_MAP = {i: i - 0xFEE0 for i in range(0xFF01, 0xFF5F)}  # full-width ! .. ~
_UNICODE_MAP.update(
    {
        0x2212: "-",  # minus sign
        0x2013: "-",  # en dash
        0x2012: "-",  # figure dash
        0xFE63: "-",  # small hyphen-minus
        0x00A0: " ",  # no-break space
        0x2009: " ",  # thin space
        0x202F: " ",  # narrow no-break space
        0x3000: " ",  # ideographic space
        0x00B0: "",  # degree sign
    }
)

_BOX_HEAD = re.compile(r"^\\(?:boxed|fbox) ?\{")
_TEXT_WHOLE = re.compile(r"^\\(?:text|textbf|textrm|mbox|mathrm) ?\{([^{}]*)\}$")
_SUBS = (
    (re.compile(r"\\?\$"), ""),
    (re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)(?![A-Za-z])"), ""),
    (re.compile(r"\\(?:displaystyle|textstyle|scriptstyle)(?![A-Za-z])"), ""),
    # LaTeX spacing commands; "\\\\" (a line break) is matched first so it is kept intact.
    (re.compile(r"\\\\|\\[!,;:> ]"), lambda m: m.group() if m.group() == "\\\\" else " "),
    (re.compile(r"\\q?quad(?![A-Za-z])"), " "),
    (re.compile(r"~"), " "),
    (re.compile(r"\\[dt]frac(?![A-Za-z])"), r"\\frac"),
    (re.compile(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])"), ""),  # degrees
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\{,\}"), ","),  # 1{,}234
)
# Trailing unit text after a value: "5 \text{ cm}", "3\mbox{ m}^2".
_TRAILING_UNIT = re.compile(r"(?<=\S)\s*\\(?:text|mbox)\s*\{[^{}]*\}\s*(?:\^\s*\{?\d\}?)?\s*$")
# The same written upright in math mode ("83\mathrm{cm}"): letters only, two at least, so that a
# constant set upright (\mathrm{e}, \mathrm{i}) or a differential (\mathrm{d}) is never dropped.
_TRAILING_MATHRM_UNIT = re.compile(r"(?<=[\d}.])\s*\\mathrm\s*\{\s*[A-Za-z]{2,}\s*\}\s*(?:\^\s*\{?\d\}?)?\s*$")
_TEXT_INNER = re.compile(r"\\(?:text|textbf|textrm|mbox|mathrm)\s*\{([^{}]*)\}")
# Keep the space that separates a control word from a following letter ("\pi r" != "\pir").
_CMD_SPACE = re.compile(r"(\\[A-Za-z]+)\s+(?=[A-Za-z])")
_WHITESPACE = re.compile(r"\s+")
_FRAC_SHORT = (
    (re.compile(r"\\frac(\d)(\d)"), r"\\frac{\1}{\2}"),
    (re.compile(r"\\frac(\d)\{"), r"\\frac{\1}{"),
    (re.compile(r"\\frac\{([^{}]*)\}(\d)"), r"\\frac{\1}{\2}"),
    (re.compile(r"\\sqrt(\d)"), r"\\sqrt{\1}"),
)
# "x = 5", "a_1=5", "\theta = 5" -> "5" (a single variable on the left, no other relation).
# Greek letters only: "\\sum_{n=1}^{..}" or "\\pi = 3.14" are not assignments.
_GREEK = (
    "alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|kappa|lambda|mu|nu|xi|rho"
    "|sigma|tau|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Phi|Psi|Omega"
)
_ASSIGN = re.compile(
    rf"^(?:[A-Za-z]|\\(?:{_GREEK})(?![A-Za-z]))(?:_(?:[A-Za-z0-9]|\{{[A-Za-z0-9]+\}}))?=(?![=<>])"
)
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
# Read on the raw text, before spacing commands turn into spaces.
# MATH's thousands idiom "10,\!000" is a thousands separator, not a list comma.
_THOUSANDS_IDIOM = re.compile(r"(?<=\d),\\!(?=\d{3}(?!\d))")
# Connector words between list items: "p=-1 \text{ and } p=2", "2 or 3" -> "p=-1, p=2", "2, 3".
_TEXT_CONNECTOR = re.compile(r"\s*\\(?:text|textrm|mbox|mathrm)\s*\{\s*,?\s*(?:and|or)\s*\}\s*")
_WORD_CONNECTOR = re.compile(r"(?<=\S)\s*,?\s+(?:and|or)\s+(?=\S)")
# Percent words are the percent sign: "28 percent", "28 pct", "28 percentage", "28\text{ percent}".
_PERCENT_WORD = re.compile(
    r"(?<=[\d}.])\s*(?:\\(?:text|textrm|mbox|mathrm)\s*\{\s*(?:percent(?:age)?s?|pct)\s*\}|(?:percent(?:age)?s?|pct)(?![A-Za-z]))"
)
# A comma followed by a space separates elements ("32, 349" is two numbers). Where the comma
# would read as a thousands separator (a digit before it, exactly three after), the canonical form
# keeps the space, so that it stays a list for every later reader (this module again, math-verify).
_LIST_COMMA_BEFORE_3_DIGITS = re.compile(r"(?<=\d),\s+(?=\d{3}(?!\d))")
_BOOLEANS = {"true": "true", "false": "false"}
# The right side of an assignment that is a value: no variable letters once command names are gone.
_COMMAND_NAME = re.compile(r"\\[A-Za-z]+")
_LETTER = re.compile(r"[A-Za-z]")


def _peel(s: str) -> str:
    """Remove one whole-string wrapper: \\boxed{..}, \\text{..}, \\(..\\), \\[..\\]."""
    m = _BOX_HEAD.match(s)
    if m and match_brace(s, m.end() - 1, len(s)) == len(s) - 1:  # the box's brace closes at the end
        return s[m.end() : -1].strip()
    m = _TEXT_WHOLE.match(s)
    if m:
        return m.group(1).strip()
    for lo, hi in (("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(lo) and s.endswith(hi) and lo not in s[2:-2]:
            return s[2:-2].strip()
    return s


def _canon_impl(ans: str) -> tuple[str | None, str]:
    s = ans if ans.isascii() else ans.translate(_UNICODE_MAP)
    # Collapse whitespace first: every later "\s*" then spans at most one character, which keeps
    # the regexes linear even on megabyte inputs.
    s = _WHITESPACE.sub(" ", s).strip()
    s = _THOUSANDS_IDIOM.sub(",", s)
    s = _TEXT_CONNECTOR.sub(", ", s)
    if "\\text" not in s and "\\mbox" not in s:  # words inside text ("Alice and Bob") are no connectors
        s = _WORD_CONNECTOR.sub(", ", s)
    s = _PERCENT_WORD.sub("%", s)
    for pat, rep in _SUBS:
        s = pat.sub(rep, s)
    s = s.strip()
    for _ in range(4):  # wrappers may be nested: "\\boxed{\\text{(A)}}"
        peeled = _peel(s)
        if peeled == s:
            break
        s = peeled
    s = _TRAILING_UNIT.sub("", s)
    s = _TRAILING_MATHRM_UNIT.sub("", s)
    s = _TEXT_INNER.sub(r"\1", s)
    s = _CMD_SPACE.sub(lambda m: m.group(1) + "\x00", s)
    s = _LIST_COMMA_BEFORE_3_DIGITS.sub(",\x00", s)
    s = _WHITESPACE.sub("", s).replace("\x00", " ")
    s = s.rstrip(".").rstrip()
    if s.startswith("+"):
        s = s[1:]
    var = None
    m = _ASSIGN.match(s)
    if m and "=" not in s[m.end() :] and "<" not in s and ">" not in s:
        rhs = s[m.end() :]
        # Only a value is stripped ("x = 5" -> "5"); "y = 2x + 1" is a relation and stays whole,
        # so that it is compared with "2x - y + 1 = 0" as an equation, never as "2x + 1".
        if rhs and not _LETTER.search(_COMMAND_NAME.sub("", rhs)):
            var, s = s[: m.end() - 1], rhs
    for pat, rep in _FRAC_SHORT:
        s = pat.sub(rep, s)
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    s = _BOOLEANS.get(s.lower(), s)
    return var, s


_canon_cached = lru_cache(maxsize=65536)(_canon_impl)


def _canon(ans: str) -> tuple[str | None, str]:
    return _canon_impl(ans) if len(ans) > _CACHE_MAX_LEN else _canon_cached(ans)


def normalize(ans: str) -> str:
    """Canonical string form of an answer (may be ``""``). Pure and cached."""
    return _canon(ans)[1]


def assigned_variable(ans: str) -> str | None:
    """The variable of a single-variable assignment of a value (``"x"`` for ``x = 5``), else ``None``.
    :func:`normalize` strips it; equivalence uses it to keep ``x = 3`` apart from ``y = 3``."""
    return _canon(ans)[0]


@dataclass(frozen=True)
class ParsedNumber:
    """A number read from an answer. ``exact`` is False when a decimal point was involved:
    decimals may be rounded answers (0.333 for 1/3), so only equality is conclusive for them."""

    value: Fraction
    exact: bool


_INT = re.compile(r"^-?\d+$")
_DEC = re.compile(r"^-?(?:\d+\.\d*|\.\d+)$")
# In both fraction forms every "-" is a sign: the value is negative when they are odd in number.
_SLASH = re.compile(r"^-?(?P<num>\d+)/(?P<den>\d+)$")
_FRAC = re.compile(r"^-?\\frac\{-?(?P<num>\d+)\}\{-?(?P<den>\d+)\}$")
# A mixed number "2\frac{1}{6}" (= 13/6, the answer convention math-verify reads too); only a proper
# fraction: "2\frac{3}{2}" is left to the symbolic check.
_MIXED = re.compile(r"^(-?)(\d+)\\frac\{(\d+)\}\{(\d+)\}$")


def parse_plain(s: str) -> ParsedNumber | None:
    """A plain number written in canonical form (see :func:`normalize`): an integer, a decimal,
    ``a/b``, ``\\frac{a}{b}`` or a mixed number ``2\\frac{1}{6}``, each optionally negative;
    else ``None``. Regex only, never evaluated."""
    if _INT.match(s):
        return ParsedNumber(Fraction(int(s)), True)
    if _DEC.match(s):
        return ParsedNumber(Fraction(s), False)
    m = _SLASH.match(s) or _FRAC.match(s)
    if m:
        den = int(m["den"])
        if den == 0:
            return None
        val = Fraction(int(m["num"]), den)
        return ParsedNumber(-val if s.count("-") % 2 else val, True)
    m = _MIXED.match(s)
    if m:
        num, den = int(m.group(3)), int(m.group(4))
        if not 0 < num < den:
            return None
        val = int(m.group(2)) + Fraction(num, den)
        return ParsedNumber(-val if m.group(1) else val, True)
    return None


@lru_cache(maxsize=65536)
def _parse_number_cached(ans: str, percent: bool) -> ParsedNumber | None:
    s = normalize(ans)
    if not s or len(s) > _NUMBER_MAX_LEN or s.startswith("--"):
        return None
    if s.endswith("%"):
        if not percent:
            return None
        inner = parse_plain(s[:-1])
        return None if inner is None else ParsedNumber(inner.value / 100, inner.exact)
    return parse_plain(s)


def parse_number(ans: str, percent: bool = False) -> ParsedNumber | None:
    """Like :func:`as_number` but also says whether the form was exact (no decimal point)."""
    if len(ans) > _CACHE_MAX_LEN:
        return None
    return _parse_number_cached(ans, percent)


def as_number(s: str, percent: bool = False) -> Fraction | None:
    """Exact value of a plain numeric answer, else ``None``.

    Accepts (after :func:`normalize`) integers, decimals, ``a/b``, ``\\frac{a}{b}`` and their
    negatives; with ``percent=True`` also ``50%`` (= 1/2). Parsed by regex, never evaluated;
    strings longer than 64 characters are not numbers here (no giant-int conversion).
    """
    p = parse_number(s, percent)
    return None if p is None else p.value


_OPEN, _CLOSE = "([{", ")]}"


def is_list(s: str) -> bool:
    """Does the canonical answer ``s`` hold a comma outside every bracket (``2,3``, ``1000,99``)?
    Such an answer is a list of elements and never equals a single number."""
    if "," not in s:
        return False
    depth = 0
    for ch in s:
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
        elif ch == "," and depth == 0:
            return True
    return False


_PERCENT_SIGN = re.compile(r"(?<=[\d}.])%")


def drop_percent(s: str) -> str:
    """The canonical answer ``s`` with its percent signs dropped: a percent sign is a unit, as
    math-verify reads ``28\\%`` (28, never 0.28)."""
    return _PERCENT_SIGN.sub("", s) if "%" in s else s


def _terminates(x: Fraction) -> bool:
    """Has ``x`` a finite decimal expansion (no prime but 2 and 5 in its denominator)?"""
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def values_agree(x: Fraction, y: Fraction, float_rounding: int) -> bool:
    """Equality of two numeric values when one of them was written as a decimal.

    Two values with finite decimal expansions (integers, decimals, ``3/8``) are compared exactly, so
    ``0.00203426 != 0.0020343`` and ``0.0000149 != 0.000015`` (a rounded answer is a different
    answer); a decimal against a value it can only approximate (``1/3``, ``2/7``) is equal within
    the relative tolerance ``10 ** -float_rounding`` (``0.333333 ~ 1/3`` at the default 6), never at
    a fixed number of decimal places, which would make every small number equal to its rounding."""
    if x == y:
        return True
    if _terminates(x) and _terminates(y):
        return False
    return abs(x - y) * 10**float_rounding <= max(abs(x), abs(y))


def numbers_equal(a: ParsedNumber, b: ParsedNumber, float_rounding: int) -> bool:
    """Two plain numbers: two exact forms (integers, ``a/b``) are equal only with equal values; with a
    decimal involved, :func:`values_agree` decides."""
    if a.exact and b.exact:
        return a.value == b.value
    return values_agree(a.value, b.value, float_rounding)
