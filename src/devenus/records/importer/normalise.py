"""Stage 3, normalise: the final target of a raw answer (or why none can ever match), keys, repeats
and multiple-choice questions. Every pattern is linear and lengths are checked before any runs."""

from __future__ import annotations

import functools
import hashlib
import math
import random
import re
import string
import unicodedata
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ..validate import Issue
from .chunks import Raw, _at
from .fields import GPQA_CORRECT, GPQA_INCORRECT, SOLUTION_FIELDS, FieldMap, _missing

_INT64 = (-(2**63), 2**63 - 1)


def _boxed_answer(text: str) -> str | None:
    """The boxed final answer, extracted exactly as the verifier extracts it (targets match predictions)."""
    from devenus.verify.extract import extract_answer

    got = extract_answer(text)
    return got.strip() if isinstance(got, str) and got.strip() else None


# Every pattern is linear in its input: possessive quantifiers (``++``) never give back what they
# matched, so a long digit run fails in one scan (``\d+\.?\d*`` tried every split of it: a 10 MB
# answer ran for minutes). The length limits below are checked before any of them runs anyway.
_NUMBER_WITH_COMMAS = re.compile(r"[-+]?+\d{1,3}+(?:,\d{3})++(?:\.\d++)?+")
_SCIENTIFIC = re.compile(r"[-+]?+(?:\d++(?:\.\d*+)?+|\.\d++)[eE][-+]?+\d++")
_NON_FINITE = re.compile(r"[-+]?+(?:inf|infinity|nan)", re.IGNORECASE)
#: a raw answer field longer than this is refused before it is searched for ``####`` or ``\boxed{}``
#: (a real solution text is a few kB; the verifier extracts at most ``max_answer_chars`` of it)
MAX_ANSWER_FIELD_CHARS = 100_000


def canonical_number(value: int | float | Decimal) -> str | None:
    """A number as the plain decimal string a model would write (``1e-07`` -> ``0.0000001``,
    ``42.0`` -> ``42``); None for a non-finite one."""
    if isinstance(value, int):
        return str(value)
    d = Decimal(repr(value)) if isinstance(value, float) else value
    if not d.is_finite():
        return None
    if d == d.to_integral_value():
        return str(int(d))
    text = format(d.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def reduce_answer(value: Any, field: str | None = None) -> tuple[str | None, str | None]:
    """The final target in a raw answer value, and why there is none.

    Returns ``(answer, None)`` or ``(None, reason)``. ``"... #### 1,234"`` -> ``"1234"``; text with a
    ``\\boxed{}`` -> the last box's content; a ``solution`` field without a box has no answer;
    numbers -> canonical decimal strings; a one-element list gives its element. Whether the target
    can be matched at all is :func:`unmatchable`'s question.
    """
    if isinstance(value, str):  # (the common case first)
        if len(value) > MAX_ANSWER_FIELD_CHARS:  # before strip, search or extraction touch it
            return None, f"{len(value)} characters (an answer field holds at most {MAX_ANSWER_FIELD_CHARS})"
        s = value.strip()
        return _reduce_text(s, field) if s else (None, "empty")
    if _missing(value):
        return None, "empty"
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return reduce_answer(value[0], field)
        return None, f"a list of {len(value)} answers (expected one)"
    if isinstance(value, Mapping):
        return None, "a dict (expected a str or a number)"
    if isinstance(value, bool):
        return str(value), None  # refused by unmatchable(): kept here so the refusal can show it
    if isinstance(value, (int, float, Decimal)):
        text = canonical_number(value)
        return (text, None) if text is not None else (str(value), None)
    return None, f"a {type(value).__name__} (expected a str or a number)"


def _reduce_text(s: str, field: str | None) -> tuple[str | None, str | None]:
    """:func:`reduce_answer` for a stripped, non-empty text."""
    if "####" in s:
        tail = s.rsplit("####", 1)[1].strip()
        if len(tail) <= _max_answer_chars() and _NUMBER_WITH_COMMAS.fullmatch(tail):
            tail = tail.replace(",", "")
        return (tail, None) if tail else (None, "nothing after '####'")
    if "\\boxed" in s or "\\fbox" in s:
        boxed = _boxed_answer(s)
        if boxed:
            return boxed, None
        if field in SOLUTION_FIELDS:
            return None, "its \\boxed{} does not close or is empty"
    if field in SOLUTION_FIELDS:
        return None, "no \\boxed{} final answer (or '####') in the solution"
    if len(s) > _max_answer_chars():
        return s, None  # refused by unmatchable() for its length, before any pattern runs on it
    if _SCIENTIFIC.fullmatch(s):
        try:
            return canonical_number(Decimal(s)) or s, None
        except InvalidOperation:
            pass
    return s, None


@functools.lru_cache(maxsize=1)
def _max_answer_chars() -> int:
    from devenus.verify.extract import DEFAULT_EXTRACT_CONFIG

    return DEFAULT_EXTRACT_CONFIG.max_answer_chars


def _braces_balanced(text: str) -> bool:
    if "{" not in text and "}" not in text:
        return True
    depth = 0
    for m in re.finditer(r"\\[\\{}]|[{}]", text):
        tok = m.group(0)
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def unmatchable(raw_value: Any, target: str) -> str | None:
    """Why no model answer can ever be graded equal to ``target`` (None when it can)."""
    if isinstance(raw_value, bool):
        return f"a bool ({raw_value}) is not an answer a model writes; map it to text (e.g. yes/no) first"
    if isinstance(raw_value, (float, Decimal)) and not (raw_value == raw_value and abs(raw_value) != math.inf):
        return f"a non-finite number ({raw_value})"
    limit = _max_answer_chars()
    if len(target) > limit:  # first: every check below is linear, but a 10 MB target needs none of them
        return f"{len(target)} characters; the verifier extracts answers of at most {limit}"
    if _NON_FINITE.fullmatch(target):
        return f"a non-finite number ({target!r})"
    if not _braces_balanced(target):
        return f"unbalanced braces in {target[:60]!r}"
    if "\\boxed" in target or "\\fbox" in target:
        return f"a \\boxed{{}} that does not close in {target[:60]!r}"
    return None


def normalise_target(value: Any, field: str | None) -> tuple[str | None, str | None, str | None]:
    """``(target, why_missing, refusal)``: the target, or why there is none, or why it is refused."""
    if isinstance(value, str) and len(value) > MAX_ANSWER_FIELD_CHARS:  # first: nothing else reads it
        return None, None, f"{len(value)} characters; an answer field holds at most {MAX_ANSWER_FIELD_CHARS}"
    target, why = reduce_answer(value, field)
    if target is None:
        return None, why, None
    refused = unmatchable(value[0] if isinstance(value, (list, tuple)) and len(value) == 1 else value, target)
    return (None, None, refused) if refused else (target, None, None)


def normalize_question(text: str) -> str:
    """Text used for hash keys: NFKC, whitespace runs collapsed to one space, ends stripped."""
    if text.isascii():  # ASCII is NFKC already; printable ASCII has no whitespace but " "
        if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
            return text  # (what the split and join below would give, in one scan)
    else:
        text = unicodedata.normalize("NFKC", text)
    return " ".join(text.split())


def question_hash(text: str) -> str:
    """``sha1(normalize_question(text))[:16]``."""
    return hashlib.sha1(normalize_question(text).encode("utf-8")).hexdigest()[:16]


def _id_str(value: Any) -> str | None:
    if _missing(value):
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (float, Decimal)):
        return canonical_number(value) if value == value else None
    if isinstance(value, (str, int)):
        return str(value).strip()
    return None


def _difficulty(value: Any) -> int | None:
    if _missing(value) or isinstance(value, bool):
        return None
    if isinstance(value, (float, Decimal)):
        if not (value == value and abs(value) != math.inf) or value != int(value):
            return None
        value = int(value)
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise ValueError(f"expected a difficulty that fits in 64 bits, found an integer of {len(str(abs(value)))} digits")
        return value
    if isinstance(value, str):
        if len(value) > 64:  # "Level 5" or " 3 ": a longer text is no difficulty, and is not searched
            return None
        m = re.fullmatch(r"\s*+(?:level\s*+)?+([-+]?+\d{1,18}+)\s*+", value, flags=re.IGNORECASE)
        return int(m.group(1)) if m else None
    return None


def _family(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


class KeyBuilder:
    """``extra_info.index`` for each record in file order: from the id column, or the question hash
    with ``-2``, ``-3``, ... for repeats. Keeps one small entry per row (ids / hash counts)."""

    def __init__(self, source: str, id_field: str | None):
        self.source, self.id_field = source, id_field
        self.seen_ids: dict[str, int] = {}
        self.hash_counts: dict[str, int] = {}

    def key(self, rec: Raw, question: str) -> tuple[str | None, Issue | None]:
        if self.id_field is not None:
            raw_id = _id_str(rec.data.get(self.id_field))
            if raw_id is None:
                return None, Issue(rec.pos, None, self.id_field,
                                   f"expected an id (str or int), found {rec.data.get(self.id_field)!r:.60}{_at(rec)}")
            if raw_id in self.seen_ids:
                return None, Issue(rec.pos, None, self.id_field,
                                   f"expected a unique id, found {raw_id!r} again (first in row {self.seen_ids[raw_id]}){_at(rec)}")
            self.seen_ids[raw_id] = rec.pos
            return f"{self.source}/{raw_id}", None
        return self.hash_key_of(question_hash(question)), None

    def hash_key_of(self, h: str) -> str:
        """The key of a question whose :func:`question_hash` is ``h``."""
        n = self.hash_counts.get(h, 0) + 1
        self.hash_counts[h] = n
        return f"{self.source}/{h}" if n == 1 else f"{self.source}/{h}-{n}"

    def hash_keys(self, hashes: list[str]) -> Any:
        """:meth:`hash_key_of` of each hash in order, as a pyarrow string array: joined column-wise
        where no hash repeats (within ``hashes`` or with an earlier one), else one by one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        new = dict.fromkeys(hashes, 1)
        if len(new) == len(hashes) and self.hash_counts.keys().isdisjoint(new):
            self.hash_counts.update(new)
            return pc.binary_join_element_wise(f"{self.source}/", pa.array(hashes, pa.string()), "")
        return pa.array([self.hash_key_of(h) for h in hashes], pa.string())


class Deduper:
    """``dedupe="exact"``: a record whose prompt and target repeat an earlier record's exactly is
    dropped (the first is kept, with the key it has without deduplication); the same prompt with
    another target is a *conflict*: kept as a row of its own (its own key) and reported, since which
    target is right is not the importer's to decide. Keeps one digest per distinct prompt/target."""

    MAX_LISTED = 20

    def __init__(self) -> None:
        self.first: dict[bytes, dict[bytes, str]] = {}  # prompt digest -> {target digest: where first}
        self.duplicates = 0
        self.conflicts = 0
        self.listed: list[str] = []

    @staticmethod
    def _digest(text: str) -> bytes:
        return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()

    def repeat(self, prompt: str, target: str | None, where: str) -> bool:
        """Whether this record repeats an earlier one exactly (then it is left out)."""
        p = self._digest(prompt)
        t = b"" if target is None else b"=" + self._digest(target)
        seen = self.first.get(p)
        if seen is None:
            self.first[p] = {t: where}
            return False
        if t in seen:
            self.duplicates += 1
            return True
        self.conflicts += 1
        if len(self.listed) < self.MAX_LISTED:
            first_where = next(iter(seen.values()))
            self.listed.append(f"{where}: the prompt of {first_where} with another target ({target!r:.40})")
        seen[t] = where
        return False


LETTERS = string.ascii_uppercase


def _choice_texts(value: Any) -> tuple[list[str], list[str]] | None:
    """(option texts, their own labels) from a list of texts or ARC's ``{"text": [...], "label": [...]}``."""
    if isinstance(value, Mapping) and isinstance(value.get("text"), list):
        texts = [str(t) for t in value["text"]]
        labels = value.get("label") if isinstance(value.get("label"), list) else list(LETTERS[: len(texts)])
        return texts, [str(x) for x in labels]
    if isinstance(value, list) and value and all(isinstance(t, (str, int, float, Decimal)) for t in value):
        texts = [str(t) for t in value]
        return texts, list(LETTERS[: len(texts)])
    return None


def choice_question(fm: FieldMap, rec: Raw, question: str) -> tuple[str, list[str], Any] | str:
    """(question with lettered options, option texts, raw answer as a letter or None), or why not."""
    d = rec.data
    if fm.choices == "gpqa":
        correct = d.get(GPQA_CORRECT)
        texts = [str(o).strip() for o in [correct, *(d.get(c) for c in GPQA_INCORRECT)] if not _missing(o)]
        answer = None
        if not _missing(correct):
            # a fixed shuffle per question, so the correct option is not always (A)
            random.Random(question_hash(question)).shuffle(texts)
            answer = LETTERS[texts.index(str(correct).strip())]
    else:
        got = _choice_texts(d.get(fm.options))
        if got is None:
            return f"expected a list of options, found {d.get(fm.options)!r:.60}"
        texts, labels = got
        if len(texts) > len(LETTERS):
            return f"{len(texts)} options (at most {len(LETTERS)})"
        raw = d.get(fm.answer) if fm.answer else None
        answer = None
        if not _missing(raw):
            if isinstance(raw, (int, Decimal, float)) and not isinstance(raw, bool):
                i = int(raw)
                answer = LETTERS[i] if 0 <= i < len(texts) and i == raw else None
            else:
                s = str(raw).strip()
                if s in labels:
                    answer = LETTERS[labels.index(s)]
                elif len(s) == 1 and s.upper() in LETTERS[: len(texts)]:
                    answer = s.upper()
                elif s in texts:
                    answer = LETTERS[texts.index(s)]
            if answer is None:
                return f"answer {raw!r:.40} is none of the {len(texts)} options' labels, letters or texts"
    lettered = question + "\n\n" + "\n".join(f"{LETTERS[i]}. {t}" for i, t in enumerate(texts))
    return lettered, texts, answer
