"""Multiple-choice answers: which option letter (A-J) an answer names.

A multiple-choice row's target is its option letter (``"C"``). Models write that letter in many
ways: ``C``, ``(C)``, ``C.``, ``C)``, ``\\text{C}``, ``\\textbf{(C)}``, ``option C``, ``c``, or the letter
followed by the option's text (``(C) 42``). :func:`choice_letter` reads all of these;
:func:`target_letter` decides whether a reference answer *is* an option letter, strictly: a bare
lowercase letter is a variable, not an option, so only an uppercase letter (bare or in an
unambiguous option form) qualifies. Numbers are never letters, so a numeric target can never be
matched by a letter. Pure, regex-only, linear in the input.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["OPTION_LETTERS", "choice_letter", "target_letter"]

OPTION_LETTERS = "ABCDEFGHIJ"

_MAX_CHARS = 200  # an option letter with its option text; longer is not a letter answer
# Font and box commands around the whole answer or around the letter: \textbf{(C)} -> (C).
_WRAPPER = re.compile(r"\\(?:text|textbf|textit|textrm|texttt|mathrm|mathbf|mathit|mathsf|mathtt|boxed|fbox|operatorname)\s*\{([^{}]*)\}")
_MARKDOWN = re.compile(r"\*\*|__")
_WORD = re.compile(r"^(?:the\s+)?(?:correct\s+)?(?:option|choice|answer)\s*(?:is\s*)?:?\s*", re.IGNORECASE)
# The letter alone: "C", "(C)", "[C]", "C)", "C.", "C:".
_ALONE = re.compile(r"^(?:\(([A-Ja-j])\)|\[([A-Ja-j])\]|([A-Ja-j])[).:]?)$")
# The letter, delimited, then the option's text: "(C) 42", "C) 42", "C. 42", "C: 42".
_WITH_TEXT = re.compile(r"^(?:\(([A-Ja-j])\)|\[([A-Ja-j])\]|([A-Ja-j])[).:])\s+\S")


def _strip(s: str) -> str:
    s = s.strip()
    for _ in range(3):  # nested wrappers: \boxed{\textbf{(C)}}
        s = _WRAPPER.sub(r"\1", s)
    s = _MARKDOWN.sub("", s).strip()
    for _ in range(2):
        if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
            s = s.strip("$").strip()
        if s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2].strip()
    return s


def _letter(m: re.Match[str]) -> str:
    return next(g for g in m.groups() if g).upper()


@lru_cache(maxsize=65536)
def choice_letter(answer: str | None) -> str | None:
    """The option letter (``"A"``-``"J"``, uppercase) that ``answer`` names, or ``None``.

    Case-insensitive (``c`` names C): only call it where the reference is an option letter.
    """
    if not answer or len(answer) > _MAX_CHARS:
        return None
    s = _WORD.sub("", _strip(answer), count=1).strip()
    s = s.rstrip(".").strip() or s  # sentence-final period: "(C)." is "(C)"
    m = _ALONE.match(s) or _WITH_TEXT.match(s)
    return _letter(m) if m else None


@lru_cache(maxsize=4096)
def target_letter(target: str | None) -> str | None:
    """The option letter a *reference* answer is, or ``None`` when it is not one.

    Strict: an uppercase letter A-J, bare or as ``(C)``, ``C)``, ``\\text{C}``, ``option C``; a
    lowercase ``c`` (a variable) and a letter followed by text are not option targets.
    """
    if not target or len(target) > _MAX_CHARS:
        return None
    s = _WORD.sub("", _strip(target), count=1).strip()
    s = s.rstrip(".").strip() or s
    m = _ALONE.match(s)
    if m is None:
        return None
    letter = next(g for g in m.groups() if g)
    return letter if letter.isupper() else None
