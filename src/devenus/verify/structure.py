"""Exact structural comparison of answers that are structures of plain numbers, before math-verify.

Sets and bare lists (``\\{1, 2\\}``, ``2, 1``), intervals and their unions (``(-\\infty, 3) \\cup
[5, 6]``, also two-element tuples), matrices (``pmatrix`` / ``bmatrix``) and polynomial equations
(``y = x^2 - 11x + 28``). :func:`decide_structure` answers only when both canonical answers parse
*fully* into the same kind of structure; anything else (an element that is not a plain number, a
union that is not in canonical form, an equation with a root or a decimal coefficient, mixed
kinds) returns ``None`` and goes on to the symbolic check. It never guesses.

The elements are compared with the scalar rules (:func:`.normalize.parse_plain` and
:func:`.normalize.numbers_equal`: exact forms exactly, a decimal by the decimal policy); equations with the exact polynomials of
:func:`.numeval.polynomial`. The rules are math-verify's for these forms (strict mode): a set
equals a bare list with the same elements in any order, an interval union is a set of reals, a
matrix is equal entry by entry with the same shape, and an equation ``L = R`` equals ``L' = R'``
when ``L - R`` is a non-zero constant multiple of ``L' - R'`` (``y = x + 8`` ~ ``x - y + 8 = 0``).
"""

from __future__ import annotations

import re
from fractions import Fraction

from .normalize import ParsedNumber, numbers_equal, parse_plain
from .numeval import poly_add, polynomial

__all__ = ["decide_structure"]

_OPEN, _CLOSE = "([{", ")]}"
_MAX_ELEMENTS = 64
_SET = re.compile(r"^\\\{(.*)\\\}$")
_MATRIX = re.compile(r"^\\begin\{([pb]matrix)\}(.*)\\end\{\1\}$")
_INF = {"\\infty": 1, "+\\infty": 1, "-\\infty": -1}
_RELATION = re.compile(r"<|>|\\(?:le|ge|leq|geq|neq|ne|approx|sim|equiv|pm|mp)(?![A-Za-z])|!=")


def _split_top(s: str, sep: str) -> list[str] | None:
    """``s`` split at ``sep`` outside every bracket; ``None`` when the brackets do not balance."""
    parts, depth, start, i = [], 0, 0, 0
    n, k = len(s), len(sep)
    while i < n:
        ch = s[i]
        if ch == "\\" and i + 1 < n and s[i + 1] in "{}":
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            depth -= 1
            if depth < 0:
                return None
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += k
            start = i
            continue
        i += 1
    if depth != 0:
        return None
    parts.append(s[start:])
    return parts


def _numbers(items: list[str]) -> list[ParsedNumber] | None:
    if not 0 < len(items) <= _MAX_ELEMENTS:
        return None
    # the canonical form keeps the space of ", 693" (a list, not thousands)
    out = [parse_plain(it.strip()) for it in items]
    return None if None in out else out  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------- sets


def _as_set(s: str) -> list[ParsedNumber] | None:
    """Elements of a braced set or a bare list of plain numbers, else ``None``."""
    m = _SET.match(s)
    body = m.group(1) if m else s
    if not m and ("," not in s or s[0] in _OPEN):
        return None  # a scalar, or a tuple / interval: not a bare list
    parts = _split_top(body, ",")
    return None if parts is None else _numbers(parts)


def _match_sets(a: list[ParsedNumber], b: list[ParsedNumber], fr: int) -> bool | None:
    if len({x.value for x in a}) != len(a) or len({x.value for x in b}) != len(b):
        return None  # repeated elements: left to math-verify's reading
    matches_a = [[j for j, y in enumerate(b) if numbers_equal(x, y, fr)] for x in a]
    matches_b = [[i for i, x in enumerate(a) if numbers_equal(x, y, fr)] for y in b]
    if any(not m for m in matches_a) or any(not m for m in matches_b):
        return False  # an element with no equal on the other side
    if len(a) == len(b) and all(len(m) == 1 for m in matches_a) and len({m[0] for m in matches_a}) == len(a):
        return True  # a bijection
    return None


# ----------------------------------------------------------------------------------- intervals

_Bound = tuple[int, ParsedNumber | None]  # (-1 | 0 | 1 for -inf / finite / +inf, value)


def _bound(s: str) -> _Bound | None:
    s = s.strip()  # "(13, 693)" keeps its list space in canonical form
    if s in _INF:
        return _INF[s], None
    p = parse_plain(s)
    return None if p is None else (0, p)


def _as_intervals(s: str) -> list[tuple[bool, _Bound, _Bound, bool]] | None:
    """Pieces ``(left closed, lower, upper, right closed)`` of an interval union, else ``None``."""
    pieces = _split_top(s, "\\cup")
    if pieces is None or len(pieces) > _MAX_ELEMENTS:
        return None
    out = []
    for p in pieces:
        if len(p) < 5 or p[0] not in "([" or p[-1] not in ")]":
            return None
        ends = _split_top(p[1:-1], ",")
        if ends is None or len(ends) != 2:
            return None
        lo, hi = _bound(ends[0]), _bound(ends[1])
        if lo is None or hi is None:
            return None
        lc, rc = p[0] == "[", p[-1] == "]"
        if (lo[0] and lc) or (hi[0] and rc) or lo[0] == 1 or hi[0] == -1:
            return None  # "[-\infty", "\infty)" as a lower bound: not an interval
        out.append((lc, lo, hi, rc))
    return out


def _key(b: _Bound) -> Fraction | float:
    return float(b[0]) * float("inf") if b[0] else b[1].value  # type: ignore[union-attr]


def _canonical(pieces: list[tuple[bool, _Bound, _Bound, bool]]) -> bool:
    """Are the pieces non-empty, pairwise disjoint and not touching (so the union is written one way)?"""
    ps = sorted(pieces, key=lambda p: _key(p[1]))
    for i, (lc, lo, hi, rc) in enumerate(ps):
        if not _key(lo) < _key(hi):
            return False
        if i + 1 < len(ps):
            nlc, nlo = ps[i + 1][0], ps[i + 1][1]
            if _key(hi) > _key(nlo) or (_key(hi) == _key(nlo) and (rc or nlc)):
                return False
    return True


def _bounds_equal(x: _Bound, y: _Bound, fr: int) -> bool:
    if x[0] or y[0]:
        return x[0] == y[0]
    return numbers_equal(x[1], y[1], fr)  # type: ignore[arg-type]


def _match_intervals(a: list, b: list, fr: int) -> bool | None:
    if len(a) == 1 and len(b) == 1:
        # One piece each: an interval or an ordered pair, equal exactly when both ends and both
        # brackets are (the two readings agree on that).
        (la, xa, ya, ra), (lb, xb, yb, rb) = a[0], b[0]
        return la == lb and ra == rb and _bounds_equal(xa, xb, fr) and _bounds_equal(ya, yb, fr)
    if not (_canonical(a) and _canonical(b)):
        return None  # "(1, 2] \cup (2, 3)" is "(1, 3)": unions that merge are left to math-verify
    sa, sb = sorted(a, key=lambda p: _key(p[1])), sorted(b, key=lambda p: _key(p[1]))
    same = len(sa) == len(sb) and all(
        pa[0] == pb[0] and pa[3] == pb[3] and _bounds_equal(pa[1], pb[1], fr) and _bounds_equal(pa[2], pb[2], fr)
        for pa, pb in zip(sa, sb)
    )
    if same:
        return True
    if all(bd[0] or bd[1].exact for p in a + b for bd in (p[1], p[2])):  # type: ignore[union-attr]
        return False  # exact canonical unions that differ are different sets
    return None  # a decimal end may reorder the pieces under the tolerance: not decided here


# ------------------------------------------------------------------------------------ matrices


def _as_matrix(s: str) -> list[list[ParsedNumber]] | None:
    m = _MATRIX.match(s)
    if m is None:
        return None
    rows = m.group(2).split("\\\\")
    if rows and rows[-1] == "":
        rows.pop()  # a trailing "\\" ends the last row
    out = [_numbers(r.split("&")) for r in rows]
    return out if out and None not in out else None  # type: ignore[return-value]


def _match_matrices(a: list[list[ParsedNumber]], b: list[list[ParsedNumber]], fr: int) -> bool:
    if len(a) != len(b) or any(len(ra) != len(rb) for ra, rb in zip(a, b)):
        return False  # another shape (a row vector is not a column vector)
    return all(numbers_equal(x, y, fr) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


# ----------------------------------------------------------------------------------- equations


def _as_equation(s: str):  # -> tuple[Poly, bool] | None
    if s.count("=") != 1 or _RELATION.search(s) or "," in s:
        return None
    lhs, rhs = s.split("=")
    pl, pr = polynomial(lhs), polynomial(rhs)
    if pl is None or pr is None:
        return None
    (l, dl), (r, dr) = pl, pr
    f = poly_add(l, {m: -c for m, c in r.items()})  # L - R
    if not any(m for m in f):
        return None  # no variable left ("1 = 1", "x = x + 1"): not an equation in its variables
    return f, dl or dr


def _match_equations(a, b) -> bool | None:
    (fa, da), (fb, db) = a, b
    if set(fa) != set(fb):
        same = False
    else:
        m0 = next(iter(fb))
        c = fa[m0] / fb[m0]
        same = all(fa[m] == c * fb[m] for m in fb)
    if same:
        return True
    return None if (da or db) else False  # a decimal coefficient may be a rounding: not decided here


# ------------------------------------------------------------------------------------- entry


def decide_structure(a: str, b: str, float_rounding: int, strict: bool = True) -> bool | None:
    """True/False when the canonical answers ``a`` and ``b`` are the same kind of structure of
    plain numbers (or polynomial equations) and compare exactly; ``None`` when this cannot decide.
    With ``strict=False`` math-verify matches variables by position: equations are left to it."""
    if "=" in a or "=" in b:
        if not strict:
            return None
        ea, eb = _as_equation(a), _as_equation(b)
        return _match_equations(ea, eb) if ea is not None and eb is not None else None
    if a.startswith("\\begin") or b.startswith("\\begin"):
        ma, mb = _as_matrix(a), _as_matrix(b)
        return _match_matrices(ma, mb, float_rounding) if ma is not None and mb is not None else None
    sa, sb = _as_set(a), _as_set(b)
    if sa is not None and sb is not None:
        return _match_sets(sa, sb, float_rounding)
    if sa is None and sb is None:
        ia, ib = _as_intervals(a), _as_intervals(b)
        if ia is not None and ib is not None:
            return _match_intervals(ia, ib, float_rounding)
    return None
