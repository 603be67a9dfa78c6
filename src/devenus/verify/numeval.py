"""A tiny, safe numeric evaluator that settles the easy symbolic checks without math-verify.

Most symbolic checks in a vote compare answers that are plainly unequal (``2\\sqrt{3}`` vs
``\\sqrt{45}``, ``(x+1)^2`` vs ``(x+2)^2``). Evaluating both sides at one fixed point settles
those: if the values differ clearly, the expressions cannot be equal (:func:`decide` -> False).
Equal values prove equality only for *constant* expressions of moderate size, where math-verify
itself compares numerically (6-decimal rounding) and would say True as well (:func:`decide` ->
True). Everything else (variables with equal values, huge magnitudes) is left to math-verify.

This is a hand-written recursive-descent reader for a small LaTeX subset (numbers, ``+ - * /``,
``\\cdot``, ``\\times``, ``^``, ``\\frac``, ``\\sqrt``, ``\\pi``, parentheses/braces and single-letter
variables). Nothing is ever passed to ``eval``/``sympify``. :func:`safe_eval` reads in floats, so no
input can make it compute a giant integer; inputs longer than 256 characters or nested deeper than
64 are not evaluated. Anything outside the subset, or anything ambiguous (``1/2x``, ``e``, ``i``,
``2\\frac{1}{6}``: a mixed number in answers), returns ``None``.

The same reader also reads a side of an equation as an exact polynomial with rational coefficients
(:func:`polynomial`, for the structural comparison of :mod:`.structure`), bounded in degree, terms
and coefficient size; roots, ``\\pi`` and divisions by a variable are outside it.
"""

from __future__ import annotations

import math
import operator
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

__all__ = ["safe_eval", "decide", "polynomial", "poly_add"]

_MAX_LEN = 256
_MAX_DEPTH = 64
_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[A-Za-z]+|[A-Za-z]|[-+*/^(){}\[\]])")
# Letters math-verify reads as constants (e, i) are left to math-verify. Variables are keyed by
# lower case because math-verify folds the case of single-letter symbols.
_CONSTANT_LETTERS = frozenset("eEiIjJ")
_MULT_CMDS = frozenset({"\\cdot", "\\times"})
_ATOM_START_CMDS = frozenset({"\\frac", "\\sqrt", "\\pi"})


class _Unsupported(Exception):
    pass


def _var_value(name: str) -> float:
    # A fixed, irrational-looking point per variable (no two letters share a value).
    k = ord(name.lower()) - ord("a")
    return 1.3247179572447 + 0.7548776662467 * k + math.sqrt(2 + k) / 10.0


class _FloatAlgebra:
    """Values of the reader as floats at the fixed variable point."""

    number = staticmethod(float)
    add = staticmethod(operator.add)
    sub = staticmethod(operator.sub)
    neg = staticmethod(operator.neg)
    mul = staticmethod(operator.mul)

    def __init__(self) -> None:
        self.has_vars = False

    def var(self, name: str) -> float:
        self.has_vars = True
        return _var_value(name)

    def pi(self) -> float:
        return math.pi

    def div(self, a: float, b: float) -> float:
        if b == 0:
            raise _Unsupported
        return a / b

    def power(self, base: float, exp: float) -> float:
        if (base < 0 and exp != int(exp)) or abs(exp) > 1e4:
            raise _Unsupported
        try:
            return math.pow(base, exp)
        except (OverflowError, ValueError, ZeroDivisionError):
            raise _Unsupported from None

    def root(self, radicand: float, index: float) -> float:
        if index <= 0 or index != int(index) or radicand < 0:
            raise _Unsupported
        return math.pow(radicand, 1.0 / index)


# A polynomial: {monomial: coefficient}, a monomial being a sorted tuple of (variable, exponent).
Poly = dict[tuple[tuple[str, int], ...], Fraction]
_POLY_MAX_TERMS = 64
_POLY_MAX_DEGREE = 12
_POLY_MAX_BITS = 256


def poly_add(a: Poly, b: Poly) -> Poly:
    """``a + b``, zero coefficients dropped (no size bound: :class:`_PolyAlgebra` checks its own)."""
    out = dict(a)
    for m, c in b.items():
        s = out.get(m, 0) + c
        if s:
            out[m] = s
        else:
            out.pop(m, None)
    return out


class _PolyAlgebra:
    """Values of the reader as exact polynomials with rational coefficients (variables folded to
    lower case, as math-verify folds them). Anything that is not such a polynomial (a root, pi, a
    division by a variable, a large or fractional power) is unsupported. ``decimal`` records that a
    decimal point was read: such a value is as written, not necessarily the value meant."""

    def __init__(self) -> None:
        self.decimal = False

    def number(self, t: str) -> Poly:
        self.decimal = self.decimal or "." in t
        c = Fraction(t)
        return self._check({(): c} if c else {})

    def var(self, name: str) -> Poly:
        return {((name.lower(), 1),): Fraction(1)}

    def pi(self) -> Poly:
        raise _Unsupported

    def root(self, radicand: Poly, index: Poly) -> Poly:
        raise _Unsupported

    @staticmethod
    def _check(p: Poly) -> Poly:
        if len(p) > _POLY_MAX_TERMS:
            raise _Unsupported
        for c in p.values():
            if c.numerator.bit_length() > _POLY_MAX_BITS or c.denominator.bit_length() > _POLY_MAX_BITS:
                raise _Unsupported
        return p

    def add(self, a: Poly, b: Poly) -> Poly:
        return self._check(poly_add(a, b))

    def neg(self, a: Poly) -> Poly:
        return {m: -c for m, c in a.items()}

    def sub(self, a: Poly, b: Poly) -> Poly:
        return self.add(a, self.neg(b))

    def mul(self, a: Poly, b: Poly) -> Poly:
        out: Poly = {}
        for ma, ca in a.items():
            for mb, cb in b.items():
                exps = dict(ma)
                for v, e in mb:
                    exps[v] = exps.get(v, 0) + e
                if sum(exps.values()) > _POLY_MAX_DEGREE:
                    raise _Unsupported
                m = tuple(sorted(exps.items()))
                s = out.get(m, 0) + ca * cb
                if s:
                    out[m] = s
                else:
                    out.pop(m, None)
        return self._check(out)

    def div(self, a: Poly, b: Poly) -> Poly:
        if len(b) != 1 or () not in b:
            raise _Unsupported  # only division by a non-zero constant stays a polynomial
        return {m: c / b[()] for m, c in a.items()}

    def power(self, base: Poly, exp: Poly) -> Poly:
        if not exp:
            e = 0
        elif len(exp) == 1 and () in exp and exp[()].denominator == 1 and 0 <= exp[()] <= _POLY_MAX_DEGREE:
            e = int(exp[()])
        else:
            raise _Unsupported
        out: Poly = {(): Fraction(1)}
        for _ in range(e):
            out = self.mul(out, base)
        return out


class _Reader:
    def __init__(self, s: str, alg: Any) -> None:
        toks: list[str] = []
        pos = 0
        while pos < len(s):
            m = _TOKEN.match(s, pos)
            if m is None or m.end() == pos:
                if s[pos:].strip() == "":
                    break
                raise _Unsupported
            toks.append(m.group(1))
            pos = m.end()
        self.toks = toks
        self.i = 0
        self.depth = 0
        self.alg = alg

    def peek(self) -> str | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        t = self.peek()
        if t is None or (expected is not None and t != expected):
            raise _Unsupported
        self.i += 1
        return t

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Unsupported

    def _starts_atom(self, t: str | None) -> bool:
        if t is None:
            return False
        return t[0].isdigit() or t[0] == "." or t.isalpha() or t in ("(", "{") or t in _ATOM_START_CMDS

    def expr(self) -> Any:
        self._enter()
        v = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            w = self.term()
            v = self.alg.add(v, w) if op == "+" else self.alg.sub(v, w)
        self.depth -= 1
        return v

    def term(self) -> Any:
        v = self.unary()
        while True:
            t = self.peek()
            if t == "*" or t in _MULT_CMDS:
                self.take()
                v = self.alg.mul(v, self.unary())
            elif t == "/":
                self.take()
                d = self.unary()
                if self._starts_atom(self.peek()):
                    raise _Unsupported  # "1/2x": ambiguous
                v = self.alg.div(v, d)
            elif self._starts_atom(t):
                if t == "\\frac" and self.toks[self.i - 1][0].isdigit():
                    raise _Unsupported  # "2\\frac{1}{6}" is the mixed number 13/6 in answers, not a product
                v = self.alg.mul(v, self.power())  # implicit multiplication: 2\\sqrt{3}, 3x, x(x+1)
            else:
                return v

    def unary(self) -> Any:
        t = self.peek()
        if t == "-":
            self.take()
            self._enter()
            v = self.alg.neg(self.unary())
            self.depth -= 1
            return v
        if t == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Any:
        base = self.atom()
        if self.peek() != "^":
            return base
        self.take()
        t = self.peek()
        if t != "{" and not (t is not None and len(t) == 1 and (t.isdigit() or t.isalpha())):
            raise _Unsupported  # x^23 (LaTeX means x^2 * 3), x^-1, ...
        exp = self.atom()
        if self.peek() == "^":
            raise _Unsupported  # a^b^c is not valid LaTeX
        return self.alg.power(base, exp)

    def braced(self) -> Any:
        self.take("{")
        v = self.expr()
        self.take("}")
        return v

    def atom(self) -> Any:
        t = self.take()
        if t[0].isdigit() or t[0] == ".":
            return self.alg.number(t)
        if t in ("(", "{"):
            v = self.expr()
            self.take(")" if t == "(" else "}")
            return v
        if t == "\\frac":
            num = self.braced()
            den = self.braced()
            return self.alg.div(num, den)
        if t == "\\sqrt":
            index = None
            if self.peek() == "[":
                self.take()
                index = self.expr()
                self.take("]")
            radicand = self.braced()
            return self.alg.root(radicand, 2.0 if index is None else index)
        if t == "\\pi":
            return self.alg.pi()
        if len(t) == 1 and t.isalpha() and t not in _CONSTANT_LETTERS:
            return self.alg.var(t)
        raise _Unsupported


def _read(s: str, alg: Any) -> Any:
    """The whole of ``s`` read in the algebra ``alg``, or ``None`` (outside the subset or bounds)."""
    if not s or len(s) > _MAX_LEN:
        return None
    try:
        r = _Reader(s, alg)
        v = r.expr()
        return None if r.peek() is not None else v
    except (_Unsupported, RecursionError, OverflowError, ValueError, ZeroDivisionError):
        return None


@lru_cache(maxsize=65536)
def safe_eval(s: str) -> tuple[float, bool] | None:
    """``(value at the fixed variable point, has variables)`` of a normalised answer, or ``None``
    if it is outside the supported subset."""
    alg = _FloatAlgebra()
    v = _read(s, alg)
    if v is None or not math.isfinite(v):
        return None
    return v, alg.has_vars


@lru_cache(maxsize=65536)
def polynomial(s: str) -> tuple[Poly, bool] | None:
    """``(exact polynomial, a decimal point was read)`` of a normalised expression with rational
    coefficients, or ``None`` if it is not one (or is outside the reader's subset or size bounds)."""
    alg = _PolyAlgebra()
    p = _read(s, alg)
    return None if p is None else (p, alg.decimal)


# Constant values above this are left to math-verify: it compares large integers exactly
# (10^{20} != 10^{20}+1), which doubles cannot.
_EQUAL_MAX_MAGNITUDE = 1e6


def decide(a: str, b: str, rel_tol: float = 1e-6, strict: bool = True) -> bool | None:
    """True/False when the point evaluation settles ``a`` ~ ``b``; ``None`` when it cannot.

    ``rel_tol`` is the verifier's ``10 ** -float_rounding``: a side written with a decimal point
    matches a constant expression within that relative tolerance (never at a fixed number of decimal
    places, which would make ``0.0000149`` equal ``1.5 \\cdot 10^{-5}``). With ``strict=False``
    math-verify matches variables by position, which one fixed point cannot, so expressions with
    variables are left to it.
    """
    ea, eb = safe_eval(a), safe_eval(b)
    if ea is None or eb is None:
        return None
    (x, xv), (y, yv) = ea, eb
    if xv or yv:
        if not strict:
            return None
        scale = max(1.0, abs(x), abs(y))
        if abs(x - y) > max(1e-4, 10.0 * rel_tol) * scale:
            return False  # well beyond math-verify's numeric tolerance
        return None
    mag = max(abs(x), abs(y))
    if mag == 0.0:
        return True
    rel = abs(x - y) / mag
    da, db = "." in a, "." in b
    if da and db:
        # Both written with decimals: the written values are compared, not rounded ones.
        if rel <= 1e-12 and mag < _EQUAL_MAX_MAGNITUDE:
            return True
        return False if rel > 1e-9 else None
    if da or db:
        if rel <= rel_tol * (1 + 1e-9):
            return True if mag < _EQUAL_MAX_MAGNITUDE else None
        return False
    if rel <= 1e-9 and mag < _EQUAL_MAX_MAGNITUDE:
        return True
    if rel > max(1e-6, 10.0 * rel_tol):
        return False
    return None
