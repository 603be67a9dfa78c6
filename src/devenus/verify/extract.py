"""Final-answer extraction from a model response.

A response is graded on one answer: its last answer statement. The statements, compared by where
they start (the later one wins, so no response gets two shots):

1. the final box group: the last *balanced* ``\\boxed{...}`` / ``\\fbox{...}`` (also ``\\boxed 42``)
   with the boxes just before it that only a connector separates from it (``x = \\boxed{2} and
   x = \\boxed{3}`` is the list ``2, 3``);
2. a stated final answer anywhere: the sentence after the last "final answer is" / "Final Answer:";
3. the text after the last ``####`` on its line (GSM8K style);
4. the text after ``Answer:`` when the response's last non-empty line starts with it (DAPO-Math
   style: "The last line of your response should be of the form Answer: $Answer").

Only without any statement: the text after the last "the answer is" in its sentence, then the
configured extra regex fallbacks (applied to the tail of the response only). A stated sentence
("The largest $n$ is 34") is cut to what follows its last "is".

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
# A stated final answer, anywhere: "The final answer is $255$", "Final answer is 7", "Final Answer: 7",
# "**Final Answer:** 7". It competes with boxes by position: the later statement wins.
_FINAL_IS = re.compile(r"final\s+answer(?:\s+is\s*:?|[ \t]*[*_]*[ \t]*:[*_]*)", re.IGNORECASE)
# What may separate boxes that form one answer: math delimiters, spacing, one connector
# (",", ";", "and", "or", "\text{ and }"), and the next root's "x =" / "x_2 =" / "\theta =".
_GAP_SPACE = r"(?:\s|\$|\\[()\[\]]|\\q?quad(?![A-Za-z])|\\[,;: !]|~|&|\\\\)*"
_JOIN_GAP = re.compile(
    _GAP_SPACE
    + r"(?:(?:,|;|\band\b|\bor\b|\\text\s*\{\s*,?\s*(?:and|or)?\s*\})" + _GAP_SPACE + r")?"
    + r"(?:(?:[A-Za-z]|\\[A-Za-z]+)(?:_\{?[A-Za-z0-9]+\}?)?\s*=" + _GAP_SPACE + r")?"
)
_MAX_JOINED = 8
_BLANK_LINE = re.compile(r"\n[ \t\r]*\n")  # a paragraph break ends an answer
# Prose a stated final answer may end in that is no answer ("the final answer is correct").
_PROSE_FINAL = re.compile(
    r"(?:correct|right|wrong|incorrect|indeed|as|above|below|shown|given|confirmed|verified|consistent|boxed"
    r"|the\s+same|that|this|not|unchanged|valid|in|at)\b",
    re.IGNORECASE,
)
# "The largest $n$ is 34": a sentence that states its answer after its last "is".
_SENTENCE_IS = re.compile(r"^(?P<subj>.*\S)\s+(?:is|are|equals)\s+(?P<ans>[^\s].*)$", re.DOTALL)
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_MATH_SPAN = re.compile(r"\$[^$]*\$|\\\(.*?\\\)")
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


def _box_at(text: str, m: re.Match[str], endpos: int) -> tuple[str, int] | None | bool:
    """The box command matched by ``m``: (content, end) when balanced before ``endpos``, ``None``
    when it has no argument, ``False`` when its brace never closes there."""
    j = _WS.match(text, m.end()).end()
    if j < len(text) and text[j] == "{":
        if j >= endpos:
            return None
        close = match_brace(text, j, endpos)
        if close is None:
            return False
        return text[j + 1 : close].strip(), close + 1
    if j > m.end():  # "\boxed 42": a bare token after at least one space
        tok = _BARE_TOKEN.match(text, j)
        if tok is not None:
            return tok.group(), tok.end()
    return None


def _last_boxed(text: str, cfg: ExtractConfig) -> tuple[str, int] | None | object:
    """(answer, start) of the final box group, ``None`` if there is no box, ``_OVERLONG`` if too long.

    The final box group is the last balanced, non-empty box together with the boxes just before
    it that only a connector separates from it (``x = \\boxed{2} and x = \\boxed{3}``, see
    ``_JOIN_GAP``): several roots boxed one by one form one answer, joined as a list
    (``2, 3``). A box followed by other words ("first \\boxed{1}, finally \\boxed{7}") is an
    earlier answer: the last one wins.

    Boxes are visited from last to first. An unbalanced box is skipped. Linear time: once a box
    starting at ``u`` is known to be unbalanced, any earlier box still open when it reaches ``u``
    is unbalanced too (its depth can never drop below the depth it had at ``u``), so each scan stops
    at the closest known-unbalanced start and the scanned regions never overlap.
    """
    matches = list(_box_regex(cfg.boxed_commands).finditer(text))
    unbalanced_from = len(text)
    group: list[str] = []
    group_start = -1
    for m in reversed(matches):
        if group:
            if len(group) >= _MAX_JOINED:
                break
            # A joined box must close before the group: only the gap lies between them.
            found = _box_at(text, m, group_start)
        else:
            found = _box_at(text, m, unbalanced_from)
        if found is False:
            if group:
                break
            unbalanced_from = _WS.match(text, m.end()).end()
            continue
        if not isinstance(found, tuple):  # a box command without an argument
            if group:
                break
            continue
        content, end = found
        if group and (not _JOIN_GAP.fullmatch(text, end, group_start) or _BLANK_LINE.search(text, end, group_start)):
            break  # words between them: the group is complete
        if not content:
            if group:
                break
            continue  # an empty box is not an answer; look further back
        if len(content) > cfg.max_answer_chars:
            if group:
                break
            return _OVERLONG
        group.append(content)
        group_start = m.start()
    if not group:
        return None
    return ", ".join(dict.fromkeys(reversed(group))), group_start  # the same root boxed twice is one answer


def _strip_answer(s: str) -> str:
    s = s.strip()
    # Drop math-mode wrappers and the sentence's final punctuation.
    for _ in range(2):
        s = s.strip().rstrip(".").strip()
        if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
            s = s.strip("$")
        elif (s[:2], s[-2:]) in (("\\(", "\\)"), ("\\[", "\\]")):
            s = s[2:-2]
    return s.strip()


def _after_hash(text: str) -> tuple[str, int] | None:
    idx = text.rfind("####")
    if idx < 0:
        return None
    end = text.find("\n", idx)
    line = text[idx + 4 : end if end >= 0 else len(text)]
    ans = _strip_answer(line.lstrip("#"))
    return (ans, idx) if ans else None


def _answer_line(text: str) -> tuple[str, int] | None:
    end = len(text.rstrip())
    start = text.rfind("\n", 0, end) + 1
    m = _ANSWER_LINE.match(text, start, end)
    if m is None:
        return None
    # Trailing markdown is stripped here, not in the regex: a lazy group before a trailing class
    # would make a long line of "* * *" quadratic.
    ans = _strip_answer(m.group(1).rstrip(" \t*_"))
    return (ans, start) if ans else None


def _last_match(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    last = None
    for last in pattern.finditer(text):
        pass
    return last


def _sentence_after(text: str, pattern: re.Pattern[str]) -> tuple[str, int] | None:
    """The rest of the sentence after the last match of ``pattern`` (and where that match starts)."""
    last = _last_match(pattern, text)
    if last is None:
        return None
    end = _SENTENCE_END.search(text, last.end())
    seg = text[last.end() : end.start() if end else len(text)]
    ans = _strip_answer(seg)
    return (ans, last.start()) if ans else None


def _sentence_answer(ans: str) -> str:
    """A whole sentence stated as the answer ("The largest $n$ is 34") -> what follows its last
    "is" / "are" / "equals" ("34"), when the words before it are prose. Anything else is kept."""
    m = _SENTENCE_IS.match(ans)
    if m is None or not _PROSE_WORD.search(_MATH_SPAN.sub(" ", m.group("subj"))):
        return ans
    return _strip_answer(m.group("ans")) or ans


def _final_statement(text: str) -> tuple[str, int] | None:
    found = _sentence_after(text, _FINAL_IS)
    return None if found is None or _PROSE_FINAL.match(found[0]) else found


def _extra(text: str, cfg: ExtractConfig) -> tuple[str, int] | None:
    tail = text[-cfg.fallback_window :] if cfg.fallback_window > 0 else text
    for pat in _compile_extra(cfg.extra_patterns):
        last = _last_match(pat, tail)
        if last is not None:
            ans = last.group(1) if pat.groups else last.group(0)
            ans = _strip_answer(ans or "")
            if ans:
                return ans, len(text) - len(tail) + last.start()
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
    empty_box = _empty_box_regex(cfg.boxed_commands)
    best, sentence = _last_statement(text, cfg, empty_box)
    if best is _OVERLONG:
        return None
    if best is not None:
        assert isinstance(best, tuple)
        return _final(best[0], sentence, cfg)
    return _weak_answer(text, cfg, empty_box)


def _last_statement(
    text: str, cfg: ExtractConfig, empty_box: re.Pattern
) -> tuple[tuple[str, int] | object | None, bool]:
    """The answer statement that starts last, and whether it is a stated sentence ("The largest $n$ is 34"
    -> "34"); ``(None, False)`` without one, :data:`_OVERLONG` when it is a box too long to be an answer.

    The one that starts last wins, so a response never gets two shots (a box, then "The final answer is"
    something else, is graded on the final statement). "the answer is" and the extra patterns are read
    only when the response makes no such statement (:func:`_weak_answer`)."""
    strong = (  # (enabled, finder, is a stated sentence)
        (cfg.use_boxed, lambda: _last_boxed(text, cfg), False),
        (cfg.use_answer_is, lambda: _final_statement(text), True),
        (cfg.use_hash, lambda: _after_hash(text), False),
        (cfg.use_answer_line, lambda: _answer_line(text), True),
    )
    best: tuple[str, int] | object | None = None
    best_at, best_sentence = -1, False
    for enabled, get, sentence in strong:
        found = get() if enabled else None
        if found is None:
            continue
        if found is _OVERLONG:  # placed at the last box command (there is one: a box was too long)
            at = _last_match(_box_regex(cfg.boxed_commands), text).start()  # type: ignore[union-attr]
        else:
            assert isinstance(found, tuple)
            if empty_box.search(found[0]):
                continue  # "the answer is \boxed{}": the model's final answer is empty, not the text around it
            at = found[1]
        if at > best_at:
            best, best_at, best_sentence = found, at, sentence
    return best, best_sentence


def _weak_answer(text: str, cfg: ExtractConfig, empty_box: re.Pattern) -> str | None:
    """The answer of a response that makes no answer statement: after "the answer is", else the first
    extra pattern that matches."""
    weak = (  # (enabled, finder, is a stated sentence), the first that finds an answer wins
        (cfg.use_answer_is, lambda: _sentence_after(text, _ANSWER_IS), True),
        (cfg.extra_patterns, lambda: _extra(text, cfg), False),
    )
    for enabled, get, sentence in weak:
        found = get() if enabled else None
        if found is None or empty_box.search(found[0]):
            continue
        return _final(found[0], sentence, cfg)
    return None


def _final(ans: str, sentence: bool, cfg: ExtractConfig) -> str | None:
    if len(ans) > cfg.max_answer_chars:
        return None  # checked before a sentence is cut down to its answer
    return _sentence_answer(ans) if sentence else ans

