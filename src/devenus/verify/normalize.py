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

__all__ = ["normalize", "as_number", "ParsedNumber", "parse_number"]

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


def _closes_at_end(s: str, open_pos: int) -> bool:
    """Does the brace at ``s[open_pos]`` close exactly at the last character?"""
    return match_brace(s, open_pos, len(s)) == len(s) - 1


def _peel(s: str) -> str:
    """Remove one whole-string wrapper: \\boxed{..}, \\text{..}, \\(..\\), \\[..\\]."""
    m = _BOX_HEAD.match(s)
    if m and _closes_at_end(s, m.end() - 1):
        return s[m.end() : -1].strip()
    m = _TEXT_WHOLE.match(s)
    if m:
        return m.group(1).strip()
    for lo, hi in (("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(lo) and s.endswith(hi) and lo not in s[2:-2]:
            return s[2:-2].strip()
    return s


def _normalize_impl(ans: str) -> str:
    s = ans if ans.isascii() else ans.translate(_UNICODE_MAP)
    # Collapse whitespace first: every later "\s*" then spans at most one character, which keeps
    # the regexes linear even on megabyte inputs.
    s = _WHITESPACE.sub(" ", s).strip()
    for pat, rep in _SUBS:
        s = pat.sub(rep, s)
    s = s.strip()
    for _ in range(4):  # wrappers may be nested: "\\boxed{\\text{(A)}}"
        peeled = _peel(s)
        if peeled == s:
            break
        s = peeled
    s = _TRAILING_UNIT.sub("", s)
    s = _TEXT_INNER.sub(r"\1", s)
    s = _CMD_SPACE.sub(lambda m: m.group(1) + "\x00", s)
    s = _WHITESPACE.sub("", s).replace("\x00", " ")
    s = s.rstrip(".").rstrip()
    if s.startswith("+"):
        s = s[1:]
    m = _ASSIGN.match(s)
    if m and "=" not in s[m.end() :] and "<" not in s and ">" not in s:
        s = s[m.end() :]
    for pat, rep in _FRAC_SHORT:
        s = pat.sub(rep, s)
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    return s


@lru_cache(maxsize=65536)
def _normalize_cached(ans: str) -> str:
    return _normalize_impl(ans)


def normalize(ans: str) -> str:
    """Canonical string form of an answer (may be ``""``). Pure and cached."""
    if len(ans) > _CACHE_MAX_LEN:
        return _normalize_impl(ans)
    return _normalize_cached(ans)


@dataclass(frozen=True)
class ParsedNumber:
    """A number read from an answer. ``exact`` is False when a decimal point was involved:
    decimals may be rounded answers (0.333 for 1/3), so only equality is conclusive for them."""

    value: Fraction
    exact: bool


_INT = re.compile(r"^-?\d+$")
_DEC = re.compile(r"^-?(?:\d+\.\d*|\.\d+)$")
_SLASH = re.compile(r"^(-?)(\d+)/(\d+)$")
_FRAC = re.compile(r"^(-?)\\frac\{(-?)(\d+)\}\{(-?)(\d+)\}$")


def _parse_plain(s: str) -> ParsedNumber | None:
    if _INT.match(s):
        return ParsedNumber(Fraction(int(s)), True)
    if _DEC.match(s):
        return ParsedNumber(Fraction(s), False)
    m = _SLASH.match(s)
    if m:
        den = int(m.group(3))
        if den == 0:
            return None
        val = Fraction(int(m.group(2)), den)
        return ParsedNumber(-val if m.group(1) else val, True)
    m = _FRAC.match(s)
    if m:
        den = int(m.group(5))
        if den == 0:
            return None
        val = Fraction(int(m.group(3)), den)
        negs = (m.group(1), m.group(2), m.group(4)).count("-")
        return ParsedNumber(-val if negs % 2 else val, True)
    return None


@lru_cache(maxsize=65536)
def _parse_number_cached(ans: str, percent: bool) -> ParsedNumber | None:
    s = normalize(ans)
    if not s or len(s) > _NUMBER_MAX_LEN:
        return None
    if s.startswith("--"):
        return None
    if s.endswith("%"):
        if not percent:
            return None
        inner = _parse_plain(s[:-1])
        return None if inner is None else ParsedNumber(inner.value / 100, inner.exact)
    return _parse_plain(s)


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
