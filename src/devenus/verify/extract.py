"""Final-answer extraction from a model response.

Order of strategies (the first that yields an answer wins):

1. the last *balanced* ``\\boxed{...}`` / ``\\fbox{...}`` (also ``\\boxed 42`` without braces);
2. the text after the last ``####`` on its line (GSM8K style);
3. the text after ``Answer:`` when the response's last non-empty line starts with it (DAPO-Math
   style: "The last line of your response should be of the form Answer: $Answer");
4. the text after the last "the answer is" / "the final answer is" in its sentence;
5. the configured extra regex fallbacks (applied to the tail of the response only).

The ``Answer:`` line comes before "the answer is" because it is anchored to the last line, where a
phrase can appear anywhere (an earlier "the answer is 4. Wait, ..." must not beat a final
``Answer: 5``).

Everything here is linear in the length of the response: there is no regex with nested
quantifiers, and the brace matcher never rescans a region (see ``_last_boxed``), so megabyte
responses and thousands of unbalanced ``\\boxed{`` are cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ExtractConfig", "extract_answer"]


@dataclass(frozen=True)
class ExtractConfig:
    """Knobs of :func:`extract_answer` (frozen, so it is hashable and cacheable).

    Attributes:
        boxed_commands: LaTeX commands whose argument is a final answer.
        use_boxed / use_hash / use_answer_line / use_answer_is: enable the built-in strategies.
        extra_patterns: regexes tried last, in order; the *last* match of the first pattern that
            matches wins; group 1 is the answer (group 0 if the pattern has no group). They run on
            the last ``fallback_window`` characters only, which bounds the cost of a careless pattern.
        fallback_window: characters of the response tail the extra patterns see.
        max_answer_chars: an extracted answer longer than this is rejected (``None``): a real final
            answer is short, a giant one is a degenerate generation and would only slow the verifier.
    """

    boxed_commands: tuple[str, ...] = ("\\boxed", "\\fbox")
    use_boxed: bool = True
    use_hash: bool = True
    use_answer_line: bool = True
    use_answer_is: bool = True
    extra_patterns: tuple[str, ...] = ()
    fallback_window: int = 4096
    max_answer_chars: int = 1000


DEFAULT_EXTRACT_CONFIG = ExtractConfig()

# A brace token: an escaped brace or an escaped backslash (both ignored), or a real brace.
_BRACE_TOKEN = re.compile(r"\\[\\{}]|[{}]")
_WS = re.compile(r"[ \t\r\n]*")
_BARE_TOKEN = re.compile(r"[^\s$]+")
_ANSWER_IS = re.compile(r"the\s+(?:final\s+)?answer\s+is\s*:?", re.IGNORECASE)
# "Answer: X" as a whole line, optionally "Final Answer", markdown bold/heading or a list bullet.
_ANSWER_LINE = re.compile(
    r"[ \t]*(?:[#>*_-]+[ \t]*)?(?:final[ \t]+)?answer[ \t]*[*_]*[ \t]*:[ \t]*[*_]*[ \t]*(.*)$",
    re.IGNORECASE,
)
# End of a sentence: a period/question mark/exclamation followed by whitespace, or a newline.
_SENTENCE_END = re.compile(r"[.?!](?=\s)|\n")


@lru_cache(maxsize=32)
def _box_regex(commands: tuple[str, ...]) -> re.Pattern[str]:
    alts = "|".join(re.escape(c) for c in commands)
    # The lookahead stops "\boxed" from matching "\boxedfoo".
    return re.compile(rf"(?:{alts})(?![A-Za-z])")


@lru_cache(maxsize=32)
def _empty_box_regex(commands: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(_box_regex(commands).pattern + r"\s*\{\s*\}")  # a box command, then "{}"


@lru_cache(maxsize=32)
def _compile_extra(patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


def match_brace(text: str, open_pos: int, endpos: int) -> int | None:
    """Index of the brace closing ``text[open_pos] == '{'``, searching before ``endpos``."""
    depth = 0
    for tok in _BRACE_TOKEN.finditer(text, open_pos, endpos):
        t = tok.group()
        if t == "{":
            depth += 1
        elif t == "}":
            depth -= 1
            if depth == 0:
                return tok.start()
    return None


_OVERLONG = object()  # sentinel: the final answer exists but is too long


def _last_boxed(text: str, cfg: ExtractConfig) -> str | None | object:
    """Content of the last balanced box, ``None`` if there is none, ``_OVERLONG`` if too long.

    Boxes are visited from last to first. An unbalanced box is skipped. Linear time: once a box
    starting at ``u`` is known to be unbalanced, any earlier box still open when it reaches ``u``
    is unbalanced too (its depth can never drop below the depth it had at ``u``), so each scan stops
    at the closest known-unbalanced start and the scanned regions never overlap.
    """
    matches = list(_box_regex(cfg.boxed_commands).finditer(text))
    unbalanced_from = len(text)
    for m in reversed(matches):
        j = _WS.match(text, m.end()).end()
        if j < len(text) and text[j] == "{":
            if j >= unbalanced_from:  # cannot happen for well-formed input; be safe
                continue
            close = match_brace(text, j, unbalanced_from)
            if close is None:
                unbalanced_from = j
                continue
            content = text[j + 1 : close].strip()
        elif j > m.end():  # "\boxed 42": a bare token after at least one space
            tok = _BARE_TOKEN.match(text, j)
            if tok is None:
                continue
            content = tok.group()
        else:
            continue
        if not content:
            continue  # an empty box is not an answer; look further back
        if len(content) > cfg.max_answer_chars:
            return _OVERLONG
        return content
    return None


def _strip_answer(s: str) -> str:
    s = s.strip()
    # Drop math-mode wrappers and the sentence's final punctuation.
    for _ in range(2):
        s = s.strip().rstrip(".").strip()
        if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
            s = s.strip("$")
        elif s.startswith("\\(") and s.endswith("\\)"):
            s = s[2:-2]
        elif s.startswith("\\[") and s.endswith("\\]"):
            s = s[2:-2]
    return s.strip()


def _after_hash(text: str) -> str | None:
    idx = text.rfind("####")
    if idx < 0:
        return None
    end = text.find("\n", idx)
    line = text[idx + 4 : end if end >= 0 else len(text)]
    return _strip_answer(line.lstrip("#")) or None


def _answer_line(text: str) -> str | None:
    end = len(text.rstrip())
    start = text.rfind("\n", 0, end) + 1
    m = _ANSWER_LINE.match(text, start, end)
    if m is None:
        return None
    # Trailing markdown is stripped here, not in the regex: a lazy group before a trailing class
    # would make a long line of "* * *" quadratic.
    return _strip_answer(m.group(1).rstrip(" \t*_")) or None


def _after_answer_is(text: str) -> str | None:
    last = None
    for last in _ANSWER_IS.finditer(text):
        pass
    if last is None:
        return None
    rest_start = last.end()
    end = _SENTENCE_END.search(text, rest_start)
    seg = text[rest_start : end.start() if end else len(text)]
    return _strip_answer(seg) or None


def _extra(text: str, cfg: ExtractConfig) -> str | None:
    tail = text[-cfg.fallback_window :] if cfg.fallback_window > 0 else text
    for pat in _compile_extra(cfg.extra_patterns):
        last = None
        for last in pat.finditer(tail):
            pass
        if last is not None:
            ans = last.group(1) if pat.groups else last.group(0)
            ans = _strip_answer(ans or "")
            if ans:
                return ans
    return None


def extract_answer(
    text: str | None, config: ExtractConfig | None = None, *, truncated: bool = False
) -> str | None:
    """Extract the final answer of ``text``; ``None`` when there is none.

    Args:
        text: the decoded response.
        config: extraction knobs (defaults to :data:`DEFAULT_EXTRACT_CONFIG`).
        truncated: the response hit the length limit without EOS. Such a response has no final
            answer by definition (a box it contains may be an intermediate one), so ``None``.

    Returns:
        The stripped answer string, or ``None`` if no strategy found one, the response is
        truncated, or the answer is longer than ``config.max_answer_chars``.
    """
    if truncated or not text:
        return None
    cfg = config or DEFAULT_EXTRACT_CONFIG
    candidates = []
    if cfg.use_boxed:
        candidates.append(lambda: _last_boxed(text, cfg))
    if cfg.use_hash:
        candidates.append(lambda: _after_hash(text))
    if cfg.use_answer_line:
        candidates.append(lambda: _answer_line(text))
    if cfg.use_answer_is:
        candidates.append(lambda: _after_answer_is(text))
    if cfg.extra_patterns:
        candidates.append(lambda: _extra(text, cfg))
    for get in candidates:
        ans = get()
        if ans is _OVERLONG:
            return None
        if ans is not None:
            assert isinstance(ans, str)
            if _empty_box_regex(cfg.boxed_commands).search(ans):
                continue  # "the answer is \boxed{}": the model's final answer is empty, not the text around it
            return None if len(ans) > cfg.max_answer_chars else ans
    return None
