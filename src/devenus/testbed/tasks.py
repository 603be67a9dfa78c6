"""Synthetic verifiable task families with worked solutions ending in ``\\boxed{}``.

Every question has two views with the same answer (``original`` and ``paraphrase``): cross-view
methods (Co-rewarding) need them. Worked solutions are short, line-per-step procedures a ~1M
parameter model can learn; the last line is always ``\\boxed{answer}``.

Families:
- ``add``   (in-distribution): d-digit + d-digit addition, column by column with a running result.
- ``count`` (out-of-distribution): how often a digit occurs in a sequence, one line per item.
- ``max``   (out-of-distribution): the largest of k two-digit numbers, a running maximum.
- ``add_long`` (near-OOD of the ``steps`` testbed): ``add`` at a length its RL pool never draws.

Answer styles (``TestbedConfig.answer_style``): ``line`` is the solutions above; ``steps``
(:func:`styled`) rewrites the addition solutions as worked solutions with a self-check line and, in a
share :data:`SELF_CORRECTION` of them, one wrong column followed by its correction (``count`` and
``max`` keep their one-line-per-item solutions).
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Question:
    family: str
    difficulty: int
    key: str  # canonical identity of the problem (independent of view), used for de-duplication
    answer: str
    views: dict[str, str]  # view name -> question text
    solutions: dict[str, str]  # view name -> worked solution ending in \boxed{answer}

    def text(self, view: str = "original") -> str:
        return self.views[view]

    def solution(self, view: str = "original") -> str:
        return self.solutions[view]


VIEWS = ("original", "paraphrase")


def _boxed(ans: str) -> str:
    return "\\boxed{" + ans + "}"


# ---------------------------------------------------------------- add (ID)
def _column_line(a: int, b: int, carry: int, s: int, partial: str) -> str:
    return f"{a}+{b}+{carry}={s} ->{partial}"


def _columns(x: int, y: int):
    """Per column, right to left: ``(a, b, carry_in, s, running result before it, last column?)``."""
    xs, ys = str(x)[::-1], str(y)[::-1]
    n = max(len(xs), len(ys))
    carry, partial = 0, ""
    for i in range(n):
        a = int(xs[i]) if i < len(xs) else 0
        b = int(ys[i]) if i < len(ys) else 0
        s = a + b + carry
        yield a, b, carry, s, partial, i == n - 1
        partial = _running(s, partial, i == n - 1)
        carry = s // 10


def _running(s: int, before: str, last: bool) -> str:
    """The running result after a column of sum ``s``: its digit (the whole sum in the last column) first."""
    return (str(s) if last else str(s % 10)) + before


def _add_solution(x: int, y: int) -> str:
    """One line per column, right to left: ``a+b+carry_in=s ->partial``; the last partial is the sum."""
    lines = [_column_line(a, b, c, s, _running(s, before, last)) for a, b, c, s, before, last in _columns(x, y)]
    lines.append(_boxed(str(x + y)))
    return "\n".join(lines)


def operand(rng: random.Random, digits: int) -> int:
    """A number of exactly ``digits`` digits (0-9 for one digit)."""
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)


def add_question(family: str, x: int, y: int, difficulty: int) -> Question:
    """``x + y`` in the addition families' wording and worked-solution format (the paraphrase swaps the operands)."""
    return Question(
        family=family,
        difficulty=difficulty,
        key=f"add:{x}+{y}",
        answer=str(x + y),
        views={"original": f"Compute {x} + {y}.", "paraphrase": f"What is the sum of {y} and {x}?"},
        solutions={"original": _add_solution(x, y), "paraphrase": _add_solution(y, x)},
    )


def make_add(rng: random.Random, digits: int) -> Question:
    return add_question("add", operand(rng, digits), operand(rng, digits), digits)  # (x drawn first)


# ---------------------------------------------------------------- count (OOD)
def _count_solution(seq: list[int], target: int) -> str:
    lines, n = [], 0
    for v in seq:
        hit = v == target
        n += hit
        lines.append(f"{v} {'yes' if hit else 'no'} {n}")
    lines.append(_boxed(str(n)))
    return "\n".join(lines)


def make_count(rng: random.Random, length: int) -> Question:
    target = rng.randint(0, 9)
    # Bias towards the target so answers are not almost always 0 or 1.
    seq = [target if rng.random() < 0.3 else rng.randint(0, 9) for _ in range(length)]
    body = " ".join(map(str, seq))
    n = seq.count(target)
    return Question(
        family="count",
        difficulty=length,
        key=f"count:{target}:{body}",
        answer=str(n),
        views={
            "original": f"How many times does {target} appear in {body}?",
            "paraphrase": f"Count the {target}s in: {body}.",
        },
        solutions={"original": _count_solution(seq, target), "paraphrase": _count_solution(seq, target)},
    )


# ---------------------------------------------------------------- max (OOD)
def _max_solution(nums: list[int]) -> str:
    best = nums[0]
    lines = [str(best)]
    for v in nums[1:]:
        if v > best:
            lines.append(f"{v}>{best} so {v}")
            best = v
        else:
            lines.append(f"{v}<{best} so {best}" if v < best else f"{v}={best} so {best}")
    lines.append(_boxed(str(best)))
    return "\n".join(lines)


def make_max(rng: random.Random, k: int) -> Question:
    nums = [rng.randint(10, 99) for _ in range(k)]
    shuffled = nums[:]
    rng.shuffle(shuffled)
    return Question(
        family="max",
        difficulty=k,
        key="max:" + ",".join(map(str, sorted(nums))),
        answer=str(max(nums)),
        views={
            "original": "Which is the largest: " + ", ".join(map(str, nums)) + "?",
            "paraphrase": "Find the maximum of " + ", ".join(map(str, shuffled)) + ".",
        },
        solutions={"original": _max_solution(nums), "paraphrase": _max_solution(shuffled)},
    )


def make_add_long(rng: random.Random, digits: int) -> Question:
    """``make_add`` under its own family name: an addition length held out of the RL pool."""
    return dataclasses.replace(make_add(rng, digits), family="add_long")


FAMILIES: dict[str, Callable[[random.Random, int], Question]] = {
    "add": make_add,
    "count": make_count,
    "max": make_max,
    "add_long": make_add_long,
}


def generate(
    family: str,
    difficulties: tuple[int, ...],
    n: int,
    seed: int | str,
    exclude: set[str] | frozenset[str] = frozenset(),
) -> list[Question]:
    """``n`` distinct questions of one family, difficulties drawn uniformly, none whose key is excluded."""
    if family not in FAMILIES:
        raise KeyError(f"unknown task family {family!r}; known: {sorted(FAMILIES)}")
    make = FAMILIES[family]
    rng = random.Random(f"{family}:{seed}")
    seen, out = set(exclude), []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(f"cannot draw {n} distinct {family} questions at difficulties {difficulties}")
        q = make(rng, rng.choice(difficulties))
        if q.key in seen:
            continue
        seen.add(q.key)
        out.append(q)
    return out


# ---------------------------------------------------------------- answer styles
#: share of ``steps`` addition solutions (per question and view) with one wrong column then its correction
SELF_CORRECTION = 0.15
#: bump when what :func:`styled` writes changes (part of a ``steps`` testbed's cache key)
STEPS_VERSION = 1
ADD_FAMILIES = ("add", "add_long")
_ADD_KEY = re.compile(r"add:(\d+)\+(\d+)")


def add_steps_solution(x: int, y: int, wrong_column: int | None = None, slip: int = 1) -> str:
    """Column addition as worked steps, then ``check S-y=x``, then the box.

    ``wrong_column`` (0 = units): that column's sum is first written off by ``slip`` (with the running
    result it implies), and the next line is ``wait `` + the right line; the columns after it carry on
    from the right one. The check line reads the question's operands again: the sum minus the second
    one is the first."""
    lines = []
    for i, (a, b, c, s, before, last) in enumerate(_columns(x, y)):
        if i == wrong_column:
            bad = s + slip if s + slip >= 0 else s - slip
            lines.append(_column_line(a, b, c, bad, _running(bad, before, last)))
        lines.append(("wait " if i == wrong_column else "") + _column_line(a, b, c, s, _running(s, before, last)))
    lines.append(f"check {x + y}-{y}={x}")
    lines.append(_boxed(str(x + y)))
    return "\n".join(lines)


def _operands(q: Question, view: str) -> tuple[int, int]:
    m = _ADD_KEY.fullmatch(q.key)
    if m is None:
        raise ValueError(f"{q.family} question {q.key!r}: not an addition key add:<x>+<y>")
    x, y = int(m.group(1)), int(m.group(2))
    return (x, y) if view == "original" else (y, x)  # the paraphrase names the operands the other way round


def steps_solution(q: Question, view: str) -> str:
    """The ``steps`` solution of an addition question's view; the slip (whether, which column, which
    way) is drawn from the question's key and view alone, so the questions drawn are those of ``line``."""
    x, y = _operands(q, view)
    rng = random.Random(f"steps:{STEPS_VERSION}:{q.key}:{view}")
    if rng.random() >= SELF_CORRECTION:
        return add_steps_solution(x, y)
    n = max(len(str(x)), len(str(y)))
    return add_steps_solution(x, y, wrong_column=rng.randrange(n), slip=rng.choice((-1, 1)))


def _steps(q: Question) -> Question:
    if q.family not in ADD_FAMILIES:
        return q  # count and max already write one line per item
    return dataclasses.replace(q, solutions={v: steps_solution(q, v) for v in VIEWS})


#: answer style -> the question with that style's worked solutions
STYLES: dict[str, Callable[[Question], Question]] = {"line": lambda q: q, "steps": _steps}
ANSWER_STYLES = tuple(STYLES)


def styled(q: Question, style: str) -> Question:
    """``q`` with the worked solutions of answer ``style`` (questions, views and answers unchanged)."""
    if style not in STYLES:
        raise ValueError(f"unknown answer style {style!r}; known: {ANSWER_STYLES}")
    return STYLES[style](q)
