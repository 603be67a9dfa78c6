"""The LaTeX answer corpus of ``bench/verify_throughput.py --mix latex``: (response, gold) pairs with the
label a careful human grader gives, in eight classes of answer forms.

    python bench/verify_latex_corpus.py            # (re)writes bench/data/verify_latex.jsonl
    python bench/verify_latex_corpus.py --check    # exits 1 when the committed file is not this output

Classes: fraction, root, interval, set, matrix, unit, percent, equation. Every drawn gold gives one
pair written in an equivalent form (label 1) and one near miss (label 0): a reciprocal, a flipped
bracket, a missing element, a transposed matrix, a shifted decimal point, a list read as one number,
a sign. Each answer is put in a worked response that ends in a box or a stated final answer (six
styles); in about one pair in ten the response boxes another answer earlier and then corrects it,
and the label follows the final answer, as a human reads it. Only forms whose grade no careful grader
would dispute are used (no unreduced fractions, no ``0.25`` for ``25\\%``).

Each row: ``id``, ``class``, ``gold``, ``answer`` (the final answer as written in the response),
``response``, ``label`` (1/0), ``form`` (which rewrite or near miss), ``style`` (how the response
states it), ``early`` (the answer boxed before the correction, or null). Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from fractions import Fraction
from math import gcd
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CORPUS = Path(__file__).resolve().parent / "data" / "verify_latex.jsonl"
PAIRS_PER_CLASS = 90
SEED = 0

Forms = list[tuple[str, str]]  # (written answer, name of the form)


# ---------------------------------------------------------------------------- writing numbers


def frac(x: Fraction, style: str = "frac") -> str:
    """``x`` in LaTeX: an integer, ``\\frac{p}{q}`` (``dfrac``), ``p/q`` (``slash``) or a decimal (``dec``)."""
    if x.denominator == 1:
        return str(x.numerator)
    sign = "-" if x < 0 else ""
    p, q = abs(x.numerator), x.denominator
    if style == "slash":
        return f"{sign}{p}/{q}"
    if style == "dec":
        return sign + _decimal(Fraction(p, q))
    return f"{sign}\\{'dfrac' if style == 'dfrac' else 'frac'}{{{p}}}{{{q}}}"


def _decimal(x: Fraction) -> str:
    """The exact decimal of a fraction whose denominator has only the factors 2 and 5."""
    digits = 0
    while (x * 10**digits).denominator != 1:
        digits += 1
    s = f"{x.numerator * 10**digits // x.denominator:0{digits + 1}d}"
    return (s[:-digits] + "." + s[-digits:]) if digits else s


def terminates(x: Fraction) -> bool:
    q = x.denominator
    for f in (2, 5):
        while q % f == 0:
            q //= f
    return q == 1


def linear(m: int, c: int, var: str = "x", spaced: bool = True) -> str:
    """``m var + c`` written as a person writes it (``x``, ``-x``, no ``+ -``, no ``+ 0``)."""
    head = {1: var, -1: f"-{var}"}.get(m, f"{m}{var}") if m else ""
    if not c:
        return head or "0"
    if not head:
        return str(c)
    op = "-" if c < 0 else "+"
    return f"{head} {op} {abs(c)}" if spaced else f"{head}{op}{abs(c)}"


def _square(var: str, v: int) -> str:
    if v == 0:
        return f"{var}^2"
    return f"({var} {'-' if v > 0 else '+'} {abs(v)})^2"


# ---------------------------------------------------------------------------- classes
# Each returns (gold, right forms, wrong forms); the bench draws one of each.


def _fraction(rng: random.Random) -> tuple[str, Forms, Forms]:
    q = rng.choice([3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 15, 16, 20, 24, 25, 32])
    p = rng.choice([p for p in range(1, 3 * q) if gcd(p, q) == 1])
    x = Fraction(p, q) * (-1 if rng.random() < 0.25 else 1)
    gold = frac(x)
    right: Forms = [(frac(x, "dfrac"), "dfrac"), (frac(x, "slash"), "slash")]
    if x < 0:
        right.append((f"\\frac{{-{p}}}{{{q}}}", "sign in numerator"))
    if p < 10 and q < 10:
        right.append((("-" if x < 0 else "") + f"\\frac{p}{q}", "frac without braces"))
    if terminates(x):
        right.append((frac(x, "dec"), "exact decimal"))
    if p > q:
        right.append((("-" if x < 0 else "") + f"{p // q}\\frac{{{p % q}}}{{{q}}}", "mixed number"))
    right.append((f"\\left({gold}\\right)", "parenthesised"))
    wrong: Forms = [
        (frac(1 / x), "reciprocal"),
        (frac(x + Fraction(1 if x > 0 else -1, q)), "numerator off by one"),
        (frac(Fraction(x.numerator, q + 1)), "denominator off by one"),
        (frac(-x), "sign"),
    ]
    if not terminates(x):
        wrong.append((f"{float(x):.2f}", "rounded to 2 places"))
    return gold, right, wrong


def _root(rng: random.Random) -> tuple[str, Forms, Forms]:
    a = rng.randint(2, 9)
    b = rng.choice([2, 3, 5, 6, 7, 10, 11, 13])
    kind = rng.choice(["times", "over", "sum", "cube"])
    if kind == "times":
        gold = f"{a}\\sqrt{{{b}}}"
        right: Forms = [(f"\\sqrt{{{a * a * b}}}", "under one root"), (f"{a} \\cdot \\sqrt{{{b}}}", "cdot"),
                        (f"\\sqrt{{{b}}} \\cdot {a}", "commuted")]
        if b < 10:
            right.append((f"{a}\\sqrt {b}", "sqrt without braces"))
        wrong: Forms = [(f"\\sqrt{{{a * b}}}", "factor left under the root"), (f"{a + 1}\\sqrt{{{b}}}", "coefficient off by one"),
                        (f"{a}\\sqrt{{{b + 1}}}", "radicand off by one"), (f"{a * a}\\sqrt{{{b}}}", "coefficient squared")]
        return gold, right, wrong
    if kind == "over":
        c = rng.choice([c for c in range(2, 12) if gcd(a, c) == 1])
        gold = f"\\frac{{{a}\\sqrt{{{b}}}}}{{{c}}}"
        right = [(f"\\frac{{{a}}}{{{c}}}\\sqrt{{{b}}}", "coefficient as a fraction"),
                 (f"\\frac{{\\sqrt{{{a * a * b}}}}}{{{c}}}", "under one root"),
                 (f"\\frac{{{a * b}}}{{{c}\\sqrt{{{b}}}}}", "not rationalised"),
                 (f"\\dfrac{{{a}\\sqrt{{{b}}}}}{{{c}}}", "dfrac")]
        wrong = [(f"\\frac{{{a}\\sqrt{{{b}}}}}{{{c + 1}}}", "denominator off by one"),
                 (f"\\frac{{{c}\\sqrt{{{b}}}}}{{{a}}}", "coefficient inverted"),
                 (f"\\frac{{{a}}}{{{c}\\sqrt{{{b}}}}}", "root in the wrong place")]
        return gold, right, wrong
    if kind == "sum":
        p = rng.randint(1, 9)
        gold = f"{p} + {a}\\sqrt{{{b}}}"
        right = [(f"{a}\\sqrt{{{b}}} + {p}", "commuted"), (f"{p}+\\sqrt{{{a * a * b}}}", "under one root"),
                 (f"{p}+{a}\\sqrt{{{b}}}", "no spaces")]
        wrong = [(f"{p} - {a}\\sqrt{{{b}}}", "sign"), (f"{p} + \\sqrt{{{b}}}", "coefficient dropped"),
                 (f"{p + 1} + {a}\\sqrt{{{b}}}", "constant off by one")]
        if p != a:
            wrong.append((f"{a} + {p}\\sqrt{{{b}}}", "constant and coefficient swapped"))
        return gold, right, wrong
    b = rng.choice([2, 3, 4, 5, 6, 7, 9])
    gold = f"{a}\\sqrt[3]{{{b}}}"
    right = [(f"\\sqrt[3]{{{a ** 3 * b}}}", "under one root"), (f"{a} \\sqrt[3]{{{b}}}", "spaced")]
    wrong = [(f"{a}\\sqrt{{{b}}}", "square root for cube root"), (f"\\sqrt[3]{{{a * a * b}}}", "coefficient squared in")]
    return gold, right, wrong


def _interval(rng: random.Random) -> tuple[str, Forms, Forms]:
    lo = rng.randint(-9, 6)
    hi = lo + rng.randint(1, 9)
    half = rng.random() < 0.3
    lo_x = Fraction(2 * lo + 1, 2) if half else Fraction(lo)  # a half-integer endpoint now and then
    lo_s, lo_alt = frac(lo_x), frac(lo_x, "dec")
    kind = rng.choice(["bounded", "bounded", "ray", "union"])
    if kind == "bounded":
        left, right_b = rng.choice("(["), rng.choice(")]")
        gold = f"{left}{lo_s}, {hi}{right_b}"
        right: Forms = [(f"{left}{lo_s},{hi}{right_b}", "no spaces"),
                        (f"\\left{left} {lo_s}, {hi} \\right{right_b}", "left/right")]
        if half:
            right.append((f"{left}{lo_alt}, {hi}{right_b}", "decimal endpoint"))
        flip = {"(": "[", "[": "(", ")": "]", "]": ")"}
        wrong: Forms = [(f"{flip[left]}{lo_s}, {hi}{right_b}", "left bracket flipped"),
                        (f"{left}{lo_s}, {hi}{flip[right_b]}", "right bracket flipped"),
                        (f"{left}{lo_s}, {hi + 1}{right_b}", "endpoint off by one"),
                        (f"{left}{frac(-lo_x)}, {hi}{right_b}", "endpoint sign")] if lo_x else [
                        (f"{flip[left]}{lo_s}, {hi}{right_b}", "left bracket flipped"),
                        (f"{left}{lo_s}, {hi + 1}{right_b}", "endpoint off by one")]
        return gold, right, wrong
    if kind == "ray":
        closed = rng.random() < 0.5
        gold = f"{'[' if closed else '('}{lo_s}, \\infty)"
        right = [(f"{'[' if closed else '('}{lo_s},\\infty)", "no spaces"),
                 (f"{'[' if closed else '('}{lo_s}, +\\infty)", "+infinity")]
        if half:
            right.append((f"{'[' if closed else '('}{lo_alt}, \\infty)", "decimal endpoint"))
        wrong = [(f"{'(' if closed else '['}{lo_s}, \\infty)", "bracket flipped"),
                 (f"(-\\infty, {lo_s}{']' if closed else ')'}", "other side")]
        return gold, right, wrong
    gold = f"(-\\infty, {lo_s}) \\cup ({hi}, \\infty)"
    right = [(f"({hi}, \\infty) \\cup (-\\infty, {lo_s})", "pieces reordered"),
             (f"(-\\infty,{lo_s})\\cup({hi},\\infty)", "no spaces")]
    wrong = [(f"(-\\infty, {lo_s}] \\cup [{hi}, \\infty)", "brackets closed"),
             (f"({lo_s}, {hi})", "complement"),
             (f"(-\\infty, {lo_s})", "one piece")]
    return gold, right, wrong


def _set(rng: random.Random) -> tuple[str, Forms, Forms]:
    if rng.random() < 0.2:
        # A list of two roots against the number their digits spell: never equal (a reward hack if so).
        a, b = rng.randint(1, 99), rng.randint(100, 999)
        if rng.random() < 0.5:
            return (f"{a}, {b}", [(f"{b}, {a}", "reordered"), (f"\\{{{a}, {b}\\}}", "braced")],
                    [(f"{a}{b}", "list read as one number")])
        return (f"{a}{b}", [(f"{a}{b}.0", "trailing .0"), (f"{a * 1000 + b:,}".replace(",", "{,}"), "thousands separator {,}")],
                [(f"{a}, {b}", "number read as a list")])
    n = rng.randint(2, 4)
    pool = list(range(-9, 13)) + [Fraction(p, q) for p, q in ((1, 2), (-1, 2), (1, 3), (2, 3), (3, 4), (-5, 2))]
    elems = rng.sample(pool, n)
    elems.sort()
    shown = [frac(Fraction(e)) for e in elems]
    gold = "\\{" + ", ".join(shown) + "\\}"
    perm = shown[:]
    while perm == shown:
        rng.shuffle(perm)
    right: Forms = [("\\{" + ", ".join(perm) + "\\}", "reordered"), (", ".join(perm), "bare list"),
                    ("\\left\\{" + ",".join(shown) + "\\right\\}", "left/right, no spaces")]
    fresh = next(v for v in range(13, 40) if Fraction(v) not in elems)
    changed = shown[:]
    changed[rng.randrange(n)] = str(fresh)
    wrong: Forms = [("\\{" + ", ".join(shown[:-1]) + "\\}", "element missing"),
                    ("\\{" + ", ".join(shown + [str(fresh)]) + "\\}", "extra element"),
                    ("\\{" + ", ".join(changed) + "\\}", "element changed")]
    return gold, right, wrong


def _matrix(rng: random.Random) -> tuple[str, Forms, Forms]:
    shape = rng.choice([(2, 2), (2, 2), (2, 1), (3, 1), (2, 3)])
    rows, cols = shape
    vals = [[Fraction(rng.randint(-9, 9)) for _ in range(cols)] for _ in range(rows)]
    if rng.random() < 0.3:
        vals[0][0] = Fraction(rng.choice([1, 3, 5]), 2)

    def tex(m: list[list[Fraction]], env: str = "pmatrix", style: str = "frac", tight: bool = False) -> str:
        sep, nl = ("&", "\\\\") if tight else (" & ", " \\\\ ")
        body = nl.join(sep.join(frac(v, style) for v in row) for row in m)
        return f"\\begin{{{env}}}{body}\\end{{{env}}}" if tight else f"\\begin{{{env}}} {body} \\end{{{env}}}"

    gold = tex(vals)
    right: Forms = [(tex(vals, "bmatrix"), "bmatrix"), (tex(vals, tight=True), "no spaces")]
    if any(v.denominator != 1 for row in vals for v in row):
        right.append((tex(vals, style="dec"), "decimal entry"))
    wrong: Forms = []
    bumped = [row[:] for row in vals]
    i, j = rng.randrange(rows), rng.randrange(cols)
    bumped[i][j] += 1
    wrong.append((tex(bumped), "entry off by one"))
    if rows > 1 and vals[0] != vals[1]:
        wrong.append((tex([vals[1], vals[0]] + vals[2:]), "rows swapped"))
    if rows == cols and vals[0][1] != vals[1][0]:
        wrong.append((tex([[vals[0][0], vals[1][0]], [vals[0][1], vals[1][1]]]), "transposed"))
    nz = [(i, j) for i in range(rows) for j in range(cols) if vals[i][j]]
    if nz:
        i, j = rng.choice(nz)
        neg = [row[:] for row in vals]
        neg[i][j] = -neg[i][j]
        wrong.append((tex(neg), "sign of one entry"))
    return gold, right, wrong


_UNITS = [  # (unit written after the number, spelled-out alternative)
    ("\\text{ cm}", "\\mathrm{cm}"), ("\\text{ m}", "\\text{ meters}"), ("\\text{ cm}^2", "\\text{ square cm}"),
    ("^\\circ", "\\text{ degrees}"), ("\\text{ inches}", "\\text{ in}"), ("\\text{ hours}", "\\text{ hrs}"),
    ("\\text{ mph}", "\\text{ miles per hour}"), ("\\text{ km}", "\\,\\text{km}"),
]


def _unit(rng: random.Random) -> tuple[str, Forms, Forms]:
    if rng.random() < 0.25:  # money
        cents = rng.choice([0, 25, 50, 75, 5])
        dollars = rng.randint(1, 300)
        v = Fraction(100 * dollars + cents, 100)
        gold = _decimal(v)
        right: Forms = [(f"\\${dollars}.{cents:02d}", "dollar sign, cents"), (f"{_decimal(v)}\\text{{ dollars}}", "dollars")]
        wrong: Forms = [(f"\\${_decimal(v + 1)}", "off by a dollar"), (f"\\${_decimal(v * 10)}", "decimal point shifted")]
        return gold, right, wrong
    v = Fraction(rng.randint(2, 400), rng.choice([1, 1, 1, 10, 2]))
    unit, alt = rng.choice(_UNITS)
    num = frac(v, "dec")
    with_unit = rng.random() < 0.5
    gold = f"{num}{unit}" if with_unit else num
    right = [(f"{num}{alt}", "unit spelled differently"), (f"{num}{unit}" if not with_unit else num, "unit added" if not with_unit else "unit dropped")]
    if unit == "^\\circ":
        right.append((f"{num}^{{\\circ}}", "braced degree sign"))
    wrong = [(f"{frac(v + 1, 'dec')}{unit}", "value off by one"), (f"{frac(v * 10, 'dec')}{unit}", "decimal point shifted"),
             (f"{frac(v / 10, 'dec')}{unit}", "decimal point shifted")]
    return gold, right, wrong


def _percent(rng: random.Random) -> tuple[str, Forms, Forms]:
    p = Fraction(rng.randint(1, 99)) if rng.random() < 0.8 else Fraction(rng.randint(1, 199), 2)
    if p == 50:
        p = Fraction(45)
    num = frac(p, "dec")
    with_sign = rng.random() < 0.7
    gold = f"{num}\\%" if with_sign else num
    right: Forms = [(f"{num} \\%", "spaced percent sign"), (f"{num}\\text{{ percent}}", "percent in words")]
    right.append((num, "percent sign dropped") if with_sign else (f"{num}\\%", "percent sign added"))
    if p.denominator == 1:
        right.append((f"{num}.0\\%", "trailing .0"))
    wrong: Forms = [(f"{frac(p + 1, 'dec')}\\%", "off by one"), (f"{frac(p / 10, 'dec')}\\%", "decimal point shifted"),
                    (f"{frac(100 - p, 'dec')}\\%", "complement")]
    return gold, right, wrong


def _equation(rng: random.Random) -> tuple[str, Forms, Forms]:
    kind = rng.choice(["line", "line", "circle", "root", "parabola"])
    if kind == "line":
        m = rng.choice([v for v in range(-5, 6) if v])
        c = rng.choice([v for v in range(-9, 10) if v])
        gold = f"y = {linear(m, c)}"
        right: Forms = [(f"y={linear(m, c, spaced=False)}", "no spaces"), (f"y = {c} {'+' if m > 0 else '-'} {linear(abs(m), 0)}", "terms swapped"),
                        (f"{linear(m, c)} = y", "sides swapped"), (f"{linear(m, 0)} - y {'+' if c > 0 else '-'} {abs(c)} = 0", "implicit form")]
        wrong: Forms = [(f"y = {linear(m, -c)}", "intercept sign"), (f"y = {linear(-m, c)}", "slope sign")]
        if c != m:
            wrong.append((f"y = {linear(c, m)}", "slope and intercept swapped"))
        return gold, right, wrong
    if kind == "circle":
        h, k, r = rng.randint(-6, 6), rng.randint(-6, 6), rng.randint(2, 7)
        gold = f"{_square('x', h)} + {_square('y', k)} = {r * r}"
        right = [(f"{_square('y', k)} + {_square('x', h)} = {r * r}", "terms swapped"),
                 (f"{_square('x', h)} + {_square('y', k)} = {r}^2", "radius squared written out")]
        wrong = [(f"{_square('x', h)} + {_square('y', k)} = {r}", "radius for its square"),
                 (f"{_square('x', h + 1)} + {_square('y', k)} = {r * r}", "centre off by one")]
        if h:
            wrong.append((f"{_square('x', -h)} + {_square('y', k)} = {r * r}", "centre sign"))
        return gold, right, wrong
    if kind == "root":
        v = rng.choice([v for v in range(-20, 40) if v])
        gold = str(v) if rng.random() < 0.5 else f"x = {v}"
        right = [(f"x = {v}" if gold == str(v) else str(v), "variable named" if gold == str(v) else "variable dropped"),
                 (f"x={v}", "no spaces")]
        wrong = [(f"x = {-v}", "sign"), (f"x = {v + 1}", "off by one")]
        return gold, right, wrong
    a, b = rng.sample([v for v in range(-7, 8) if v], 2)
    s = a + b
    middle = f" {'-' if s > 0 else '+'} {linear(abs(s), 0)}" if s else ""
    gold = f"y = x^2{middle} {'+' if a * b > 0 else '-'} {abs(a * b)}"
    fac = f"y = (x {'-' if a > 0 else '+'} {abs(a)})(x {'-' if b > 0 else '+'} {abs(b)})"
    right = [(fac, "factored")]
    wrong = [(f"y = (x {'-' if a > 0 else '+'} {abs(a)})(x {'-' if b > 0 else '+'} {abs(b) + 1})", "root off by one")]
    if a != -b:  # roots +-a: flipping both signs gives the same parabola
        wrong.append((f"y = (x {'+' if a > 0 else '-'} {abs(a)})(x {'+' if b > 0 else '-'} {abs(b)})", "root signs flipped"))
    return gold, right, wrong


CLASSES: dict[str, Callable[[random.Random], tuple[str, Forms, Forms]]] = {
    "fraction": _fraction, "root": _root, "interval": _interval, "set": _set,
    "matrix": _matrix, "unit": _unit, "percent": _percent, "equation": _equation,
}

# ---------------------------------------------------------------------------- responses


def _work(rng: random.Random) -> list[str]:
    steps = []
    for k in range(rng.randint(3, 8)):
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        steps.append(rng.choice([
            f"Step {k + 1}: since ${a} \\times {b} = {a * b}$, the quantity $\\frac{{{a * b}}}{{{b}}}$ simplifies to ${a}$.",
            f"Next, substituting $t = {a}$ gives $t^2 - {b} = {a * a - b}$, which we keep for later.",
            f"We check the case $n = {a}$: the sum ${a} + {b} = {a + b}$ is consistent with the constraint.",
        ]))
    return steps


STYLES: dict[str, Callable[[str], str]] = {
    "boxed": lambda x: f"Therefore, the answer is $\\boxed{{{x}}}$.",
    "display box": lambda x: f"Putting it together:\n\\[\n\\boxed{{{x}}}\n\\]",
    "minerva": lambda x: f"Final Answer: The final answer is ${x}$. I hope it is correct.",
    "answer is": lambda x: f"So the final answer is ${x}$.",
    "answer line": lambda x: f"Answer: ${x}$",
    "bold box": lambda x: f"**Final Answer**\n\n$\\boxed{{{x}}}$",
}


def response(answer: str, rng: random.Random, early: str | None = None) -> tuple[str, str]:
    """A worked response whose final answer is ``answer``; with ``early``, one that boxes ``early``
    first and then corrects it. Returns (response, style)."""
    lines = _work(rng)
    if early is not None:
        lines.insert(rng.randint(1, len(lines)), f"This gives $\\boxed{{{early}}}$. Wait, let me recheck the last step: "
                     "the sign of one term was wrong, so that value does not hold.")
    style = rng.choice(sorted(STYLES))
    return "\n".join(lines + [STYLES[style](answer)]), style


def build(seed: int = SEED, per_class: int = PAIRS_PER_CLASS) -> list[dict]:
    """The corpus: ``per_class`` pairs per class, half of them right, in a fixed order for a seed."""
    rows: list[dict] = []
    for cls, make in CLASSES.items():
        rng = random.Random(f"{seed}:{cls}")
        seen: set[tuple[str, str]] = set()
        n = 0
        while n < per_class:
            gold, right, wrong = make(rng)
            picks = [(rng.choice(right), 1), (rng.choice(wrong), 0)]
            if any((gold, form) in seen or form == gold for (form, _), _ in picks):
                continue
            # the wrong pick is the only near miss this gold gets; a right pick's early box is that near miss
            for (form, name), label in picks:
                seen.add((gold, form))
                early = None
                if rng.random() < 0.1:
                    early = picks[1][0][0] if label else gold  # corrected away: right then, wrong now or the reverse
                text, style = response(form, rng, early)
                rows.append({"id": f"{cls}-{n:03d}", "class": cls, "gold": gold, "answer": form, "response": text,
                             "label": label, "form": name, "style": style, "early": early})
                n += 1
    return rows


def dumps(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)


def load(path: str | Path = CORPUS) -> list[dict]:
    """The committed corpus; one clear error naming the line for a row that is not a corpus row."""
    path = Path(path)
    rows = []
    fields = {"id", "class", "gold", "answer", "response", "label", "form", "style", "early"}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from None
        missing = fields - set(row) if isinstance(row, dict) else fields
        if missing:
            raise ValueError(f"{path}:{i}: missing field(s) {sorted(missing)}")
        if row["label"] not in (0, 1):
            raise ValueError(f"{path}:{i}: field 'label' must be 0 or 1, got {row['label']!r}")
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare the committed corpus with this generator's output")
    args = ap.parse_args()
    text = dumps(build())
    if args.check:
        same = CORPUS.exists() and CORPUS.read_text(encoding="utf-8") == text
        print(f"{CORPUS}: {'up to date' if same else 'differs from the generator (rerun without --check)'}")
        return 0 if same else 1
    from devenus.atomic import write_text_atomic

    write_text_atomic(CORPUS, text)
    print(f"wrote {CORPUS} ({text.count(chr(10))} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
