"""Symbolic integer expressions for shapes (the ``n``, ``2*n+1`` of Relax).

Expressions are kept in a canonical form as they are built: sums of products
are a polynomial with integer coefficients over *atoms* (variables and the
opaque ``floordiv``/``floormod``/``min``/``max`` nodes). Two expressions are
provably equal when their difference canonicalises to zero; bounds come from
interval arithmetic over declared variable ranges (shape variables are never
negative).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Mapping, Union

from ..errors import StructInfoError

IntLike = Union["PrimExpr", int]


class PrimExpr:
    """Base of symbolic integer (and float immediate) expressions."""

    __slots__ = ()
    dtype: str = "int64"

    # Arithmetic builds canonical expressions through the smart constructors.
    def __add__(self, other: IntLike) -> PrimExpr:
        return add(self, other)

    def __radd__(self, other: IntLike) -> PrimExpr:
        return add(other, self)

    def __sub__(self, other: IntLike) -> PrimExpr:
        return sub(self, other)

    def __rsub__(self, other: IntLike) -> PrimExpr:
        return sub(other, self)

    def __mul__(self, other: IntLike) -> PrimExpr:
        return mul(self, other)

    def __rmul__(self, other: IntLike) -> PrimExpr:
        return mul(other, self)

    def __floordiv__(self, other: IntLike) -> PrimExpr:
        return floordiv(self, other)

    def __rfloordiv__(self, other: IntLike) -> PrimExpr:
        return floordiv(other, self)

    def __mod__(self, other: IntLike) -> PrimExpr:
        return floormod(self, other)

    def __rmod__(self, other: IntLike) -> PrimExpr:
        return floormod(other, self)

    def __neg__(self) -> PrimExpr:
        return mul(self, -1)


@dataclass(frozen=True, slots=True)
class IntImm(PrimExpr):
    value: int
    dtype: str = "int64"

    def __repr__(self) -> str:
        return str(self.value)


@dataclass(frozen=True, slots=True)
class FloatImm(PrimExpr):
    value: float
    dtype: str = "float32"

    def __repr__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True, slots=True, eq=False)
class PrimVar(PrimExpr):
    """A symbolic dimension. Compared by identity, like every variable."""

    name: str
    dtype: str = "int64"

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class _Binary(PrimExpr):
    a: PrimExpr
    b: PrimExpr
    dtype: str = "int64"


class Add(_Binary):
    __slots__ = ()


class Mul(_Binary):
    __slots__ = ()


class FloorDiv(_Binary):
    __slots__ = ()


class FloorMod(_Binary):
    __slots__ = ()


class Min(_Binary):
    __slots__ = ()


class Max(_Binary):
    __slots__ = ()


class _Compare(_Binary):
    """A comparison of two integer expressions: a ``bool`` value (``N % 16 == 0``),
    TVM's ``tir.EQ`` ... ``tir.GE``; built through ``compare`` with ``dtype="bool"``."""

    __slots__ = ()
    symbol = ""


class EQ(_Compare):
    __slots__ = ()
    symbol = "=="


class NE(_Compare):
    __slots__ = ()
    symbol = "!="


class LT(_Compare):
    __slots__ = ()
    symbol = "<"


class LE(_Compare):
    __slots__ = ()
    symbol = "<="


class GT(_Compare):
    __slots__ = ()
    symbol = ">"


class GE(_Compare):
    __slots__ = ()
    symbol = ">="


COMPARE_OF_SYMBOL: dict[str, type[_Compare]] = {c.symbol: c for c in (EQ, NE, LT, LE, GT, GE)}
_COMPARE_FN = {
    "==": lambda x, y: x == y, "!=": lambda x, y: x != y, "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y, ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,
}  # fmt: skip


# --------------------------------------------------------------------------
# canonical polynomial form
# --------------------------------------------------------------------------
# A monomial is a sorted tuple of atoms; a polynomial maps monomials to
# coefficients. The empty monomial is the constant term.
Monomial = tuple
Poly = dict


_atom_order: dict[int, int] = {}
_atom_counter = itertools.count()


def _atom_key(atom: PrimExpr) -> tuple:
    """A deterministic order for atoms so canonical forms print stably."""
    if isinstance(atom, PrimVar):
        return (0, atom.name, _var_order(atom))
    hit = _atom_keys.get(id(atom))
    if hit is not None and hit[0] is atom:
        return hit[1]
    # same-named variables print alike; their creation order breaks the tie
    key = (1, type(atom).__name__, repr(atom), tuple(_var_order(v) for v in free_vars(atom)))
    if len(_atom_keys) > 50_000:
        _atom_keys.clear()
    _atom_keys[id(atom)] = (atom, key)  # holds the atom: its id cannot be reused
    return key


_atom_keys: dict[int, tuple[PrimExpr, tuple]] = {}  # id -> (atom, key): repr of a nested atom is costly


def _var_order(var: PrimVar) -> int:
    return _atom_order.setdefault(id(var), next(_atom_counter))


def _as_expr(value: IntLike) -> PrimExpr:
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, bool):
        return IntImm(int(value))
    if isinstance(value, int):
        return IntImm(value)
    try:
        import numpy as np

        if isinstance(value, np.integer):
            return IntImm(int(value))
    except ImportError:  # pragma: no cover - numpy is a hard dependency
        pass
    raise StructInfoError(f"expected an integer or symbolic expression, got {value!r}")


def as_prim(value: IntLike) -> PrimExpr:
    """Turns a Python int (or PrimExpr) into a PrimExpr."""
    return _as_expr(value)


def _to_poly(e: PrimExpr) -> Poly:
    if isinstance(e, IntImm):
        return {(): e.value} if e.value else {}
    if isinstance(e, Add):
        return _poly_add(_to_poly(e.a), _to_poly(e.b))
    if isinstance(e, Mul):
        return _poly_mul(_to_poly(e.a), _to_poly(e.b))
    return {(e,): 1}


def _poly_add(p: Poly, q: Poly, scale: int = 1) -> Poly:
    out = dict(p)
    for mono, c in q.items():
        v = out.get(mono, 0) + scale * c
        if v:
            out[mono] = v
        else:
            out.pop(mono, None)
    return out


def _poly_mul(p: Poly, q: Poly) -> Poly:
    out: Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            mono = tuple(sorted(m1 + m2, key=_atom_key))
            v = out.get(mono, 0) + c1 * c2
            if v:
                out[mono] = v
            else:
                out.pop(mono, None)
    return out


def _from_poly(p: Poly) -> PrimExpr:
    if not p:
        return IntImm(0)
    terms = sorted(p.items(), key=lambda kv: (len(kv[0]) == 0, [_atom_key(a) for a in kv[0]]))
    result: PrimExpr | None = None
    for mono, coeff in terms:
        term: PrimExpr | None = None
        for atom in mono:
            term = atom if term is None else Mul(term, atom)
        if term is None:
            term = IntImm(coeff)
        elif coeff != 1:
            term = Mul(term, IntImm(coeff))
        result = term if result is None else Add(result, term)
    assert result is not None
    return result


def _const(p: Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return None


# --------------------------------------------------------------------------
# smart constructors
# --------------------------------------------------------------------------


def add(a: IntLike, b: IntLike) -> PrimExpr:
    a, b = _as_expr(a), _as_expr(b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value + b.value)
    return _from_poly(_poly_add(_to_poly(a), _to_poly(b)))


def sub(a: IntLike, b: IntLike) -> PrimExpr:
    a, b = _as_expr(a), _as_expr(b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value - b.value)
    return _from_poly(_poly_add(_to_poly(a), _to_poly(b), -1))


def mul(a: IntLike, b: IntLike) -> PrimExpr:
    a, b = _as_expr(a), _as_expr(b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return IntImm(a.value * b.value)
    for x, y in ((a, b), (b, a)):
        if _is_min_one_of(y, x):
            return x  # n * min(1, n) == n for n >= 0 (the broadcast of n with n)
    return _from_poly(_poly_mul(_to_poly(a), _to_poly(b)))


def _is_min_one_of(e: PrimExpr, n: PrimExpr) -> bool:
    """``e`` is ``min(1, n)`` (either order), ``n`` a non-negative expression."""
    if not isinstance(e, Min):
        return False
    for one, other in ((e.a, e.b), (e.b, e.a)):
        if isinstance(one, IntImm) and one.value == 1 and prove_equal(other, n):
            lo = bounds(n)[0]
            return lo is not None and lo >= 0
    return False


def floordiv(a: IntLike, b: IntLike) -> PrimExpr:
    a, b = _as_expr(a), _as_expr(b)
    pa, pb = _to_poly(a), _to_poly(b)
    ca, cb = _const(pa), _const(pb)
    if cb == 0:
        raise StructInfoError(f"division by zero in shape expression {a!r} // {b!r}")
    if ca is not None and cb is not None:
        return IntImm(ca // cb)
    if cb == 1:
        return _from_poly(pa)
    if cb is not None and cb > 0:
        # (cb*q + r) // cb == q + r // cb for integer q: pull the divisible part out
        q, r = _split_by(pa, cb)
        return _from_poly(_poly_add(q, _to_poly(_small_div(r, cb, want_mod=False))))
    if pa and pa == pb:
        return IntImm(1)
    return FloorDiv(_from_poly(pa), _from_poly(pb))


def _split_by(p: Poly, c: int) -> tuple[Poly, Poly]:
    """``p == c*q + r`` with every coefficient of ``r`` in [0, c)."""
    q = {mono: k // c for mono, k in p.items() if k // c}
    r = {mono: k % c for mono, k in p.items() if k % c}
    return q, r


def _small_div(r: Poly, c: int, *, want_mod: bool) -> PrimExpr:
    """``r // c`` or ``r % c`` for a remainder polynomial ``r`` (c > 0)."""
    rc = _const(r)
    if rc is not None:
        return IntImm(rc % c if want_mod else rc // c)
    lo, hi = bounds(_from_poly(r))
    if lo is not None and hi is not None and 0 <= lo and hi < c:
        return _from_poly(r) if want_mod else IntImm(0)
    return (FloorMod if want_mod else FloorDiv)(_from_poly(r), IntImm(c))


def floormod(a: IntLike, b: IntLike) -> PrimExpr:
    a, b = _as_expr(a), _as_expr(b)
    pa, pb = _to_poly(a), _to_poly(b)
    ca, cb = _const(pa), _const(pb)
    if cb == 0:
        raise StructInfoError(f"modulo by zero in shape expression {a!r} % {b!r}")
    if ca is not None and cb is not None:
        return IntImm(ca % cb)
    if cb is not None and cb > 0:
        # (cb*q + r) % cb == r % cb for integer q
        return _small_div(_split_by(pa, cb)[1], cb, want_mod=True)
    if pa and pa == pb:
        return IntImm(0)
    return FloorMod(_from_poly(pa), _from_poly(pb))


def min_(a: IntLike, b: IntLike) -> PrimExpr:
    return _minmax(a, b, is_min=True)


def max_(a: IntLike, b: IntLike) -> PrimExpr:
    return _minmax(a, b, is_min=False)


def compare(symbol: str, a: IntLike, b: IntLike) -> PrimExpr:
    """``a <symbol> b`` as a ``bool`` expression; a constant when the difference
    of the two sides is one (``n + 1 > n`` is ``True``)."""
    cls = COMPARE_OF_SYMBOL.get(symbol)
    if cls is None:
        raise StructInfoError(f"unknown comparison {symbol!r} (known: {', '.join(COMPARE_OF_SYMBOL)})")
    x, y = simplify(_as_expr(a)), simplify(_as_expr(b))
    if x.dtype == "bool" or y.dtype == "bool" or isinstance(x, FloatImm) or isinstance(y, FloatImm):
        raise StructInfoError(f"a comparison takes integer expressions, got {x!r} {symbol} {y!r}")
    diff = const_value(sub(x, y))
    if diff is not None:
        return IntImm(int(_COMPARE_FN[symbol](diff, 0)), "bool")
    return cls(x, y, "bool")


def _minmax(a: IntLike, b: IntLike, *, is_min: bool) -> PrimExpr:
    a, b = simplify(_as_expr(a)), simplify(_as_expr(b))
    diff = sub(a, b)
    lo, hi = bounds(diff)
    if hi is not None and hi <= 0:  # a <= b
        return a if is_min else b
    if lo is not None and lo >= 0:  # a >= b
        return b if is_min else a
    nested = _absorb(a, b, is_min=is_min)
    if nested is not None:
        return nested
    first, second = sorted((a, b), key=_atom_key)
    return Min(first, second) if is_min else Max(first, second)


def _le(u: PrimExpr, v: PrimExpr) -> bool:
    """``u <= v`` provably (by the bounds of ``u - v``)."""
    hi = bounds(sub(u, v))[1]
    return hi is not None and hi <= 0


def _absorb(a: PrimExpr, b: PrimExpr, *, is_min: bool) -> PrimExpr | None:
    """min/max against a nested min/max that bounds decide: ``max(n, min(n, 64))``
    is ``n``, ``min(1, min(n, 64))`` is ``min(1, n)``. Without these, broadcasting
    ``n`` against ``min(n, 64)`` (BERT-style position ids sliced from a table) nests
    a larger expression at every layer. None when nothing simplifies."""
    for x, y in ((a, b), (b, a)):
        if not isinstance(y, (Min, Max)):
            continue
        p, q = y.a, y.b
        if is_min:
            if isinstance(y, Max) and (_le(x, p) or _le(x, q)):
                return x  # x <= max(p, q)
            if isinstance(y, Min):
                if _le(p, x) or _le(q, x):
                    return y  # min(p, q) <= x
                if _le(x, q):
                    return _minmax(x, p, is_min=True)  # q is never the least
                if _le(x, p):
                    return _minmax(x, q, is_min=True)
        else:
            if isinstance(y, Min) and (_le(p, x) or _le(q, x)):
                return x  # min(p, q) <= x
            if isinstance(y, Max):
                if _le(x, p) or _le(x, q):
                    return y  # x <= max(p, q)
                if _le(q, x):
                    return _minmax(x, p, is_min=False)
                if _le(p, x):
                    return _minmax(x, q, is_min=False)
    return None


def simplify(e: IntLike) -> PrimExpr:
    """Canonicalises an expression (idempotent)."""
    e = _as_expr(e)
    if isinstance(e, (IntImm, PrimVar, FloatImm)):
        return e
    if isinstance(e, (Add, Mul)):
        return _from_poly(_to_poly(_rebuild_atoms(e)))
    if isinstance(e, FloorDiv):
        return floordiv(simplify(e.a), simplify(e.b))
    if isinstance(e, FloorMod):
        return floormod(simplify(e.a), simplify(e.b))
    if isinstance(e, Min):
        return min_(e.a, e.b)
    if isinstance(e, Max):
        return max_(e.a, e.b)
    if isinstance(e, _Compare):
        return compare(e.symbol, e.a, e.b)
    return e


def _rebuild_atoms(e: PrimExpr) -> PrimExpr:
    if isinstance(e, Add):
        return Add(_rebuild_atoms(e.a), _rebuild_atoms(e.b))
    if isinstance(e, Mul):
        return Mul(_rebuild_atoms(e.a), _rebuild_atoms(e.b))
    return simplify(e)


def prove_equal(a: IntLike, b: IntLike) -> bool:
    """True when ``a == b`` for every value of the variables."""
    return _const(_to_poly(sub(simplify(_as_expr(a)), simplify(_as_expr(b))))) == 0


def const_value(e: IntLike) -> int | None:
    """The integer value of ``e`` if it is a constant, else None."""
    e = _as_expr(e)
    if isinstance(e, IntImm):
        return e.value
    return _const(_to_poly(simplify(e)))


# --------------------------------------------------------------------------
# bounds
# --------------------------------------------------------------------------
Bound = tuple  # (lo: int | None, hi: int | None); None means unbounded


def bounds(e: IntLike, var_bounds: Mapping[PrimVar, Bound] | None = None) -> Bound:
    """Interval (lo, hi) of ``e``; shape variables are >= 0 unless told otherwise.

    ``var_bounds`` maps a variable to its (lo, hi); hi None means no upper bound.
    """
    var_bounds = var_bounds or {}
    return _bounds(_as_expr(e), var_bounds)


def _bounds(e: PrimExpr, vb: Mapping[PrimVar, Bound]) -> Bound:
    if isinstance(e, IntImm):
        return (e.value, e.value)
    if isinstance(e, PrimVar):
        lo, hi = vb.get(e, (0, None))
        return (0 if lo is None else lo, hi)
    if isinstance(e, Add):
        (l1, h1), (l2, h2) = _bounds(e.a, vb), _bounds(e.b, vb)
        return (_opt(l1, l2, lambda x, y: x + y), _opt(h1, h2, lambda x, y: x + y))
    if isinstance(e, Mul):
        return _mul_bounds(_bounds(e.a, vb), _bounds(e.b, vb))
    if isinstance(e, FloorDiv):
        (l1, h1), (l2, h2) = _bounds(e.a, vb), _bounds(e.b, vb)
        if l2 is not None and l2 > 0 and l1 is not None and l1 >= 0:
            hi = None if h1 is None else h1 // l2
            lo = 0 if h2 is None else l1 // h2
            return (lo, hi)
        return (None, None)
    if isinstance(e, FloorMod):
        l2, h2 = _bounds(e.b, vb)
        if l2 is not None and l2 > 0:
            return (0, None if h2 is None else h2 - 1)
        return (None, None)
    if isinstance(e, (Min, Max)):
        (l1, h1), (l2, h2) = _bounds(e.a, vb), _bounds(e.b, vb)
        if isinstance(e, Min):
            lo = _opt(l1, l2, min)
            hi = h2 if h1 is None else (h1 if h2 is None else min(h1, h2))
        else:
            hi = _opt(h1, h2, max)
            lo = l2 if l1 is None else (l1 if l2 is None else max(l1, l2))
        return (lo, hi)
    if isinstance(e, _Compare):
        return (0, 1)
    return (None, None)


def _opt(a: int | None, b: int | None, f) -> int | None:
    return None if a is None or b is None else f(a, b)


def _mul_bounds(x: Bound, y: Bound) -> Bound:
    inf = math.inf
    lo1 = -inf if x[0] is None else x[0]
    hi1 = inf if x[1] is None else x[1]
    lo2 = -inf if y[0] is None else y[0]
    hi2 = inf if y[1] is None else y[1]
    products = []
    for p in (lo1, hi1):
        for q in (lo2, hi2):
            if (p == 0 and abs(q) == inf) or (q == 0 and abs(p) == inf):
                products.append(0)
            else:
                products.append(p * q)
    lo, hi = min(products), max(products)
    return (None if lo == -inf else int(lo), None if hi == inf else int(hi))


def upper_bound(e: IntLike, var_bounds: Mapping[PrimVar, Bound] | None = None) -> int | None:
    """The least known upper bound of ``e`` (None when unbounded)."""
    return bounds(e, var_bounds)[1]


def free_vars(e: PrimExpr) -> list[PrimVar]:
    """Variables of ``e`` in first-occurrence order."""
    out: list[PrimVar] = []
    seen: set[int] = set()

    def walk(x: PrimExpr) -> None:
        if isinstance(x, PrimVar):
            if id(x) not in seen:
                seen.add(id(x))
                out.append(x)
        elif isinstance(x, _Binary):
            walk(x.a)
            walk(x.b)

    walk(e)
    return out


def substitute(e: PrimExpr, mapping: Mapping[PrimVar, IntLike]) -> PrimExpr:
    """Replaces variables and re-canonicalises."""
    if isinstance(e, PrimVar):
        return _as_expr(mapping[e]) if e in mapping else e
    if isinstance(e, _Compare):
        return compare(e.symbol, substitute(e.a, mapping), substitute(e.b, mapping))
    if isinstance(e, _Binary):
        a, b = substitute(e.a, mapping), substitute(e.b, mapping)
        ctor = {Add: add, Mul: mul, FloorDiv: floordiv, FloorMod: floormod, Min: min_, Max: max_}
        return ctor[type(e)](a, b)
    return e


def evaluate(e: PrimExpr, env: Mapping[PrimVar, int]) -> int:
    """Evaluates ``e`` with concrete variable values; unbound variables raise."""
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, PrimVar):
        if e not in env:
            raise StructInfoError(f"symbolic variable '{e.name}' has no value")
        return int(env[e])
    if isinstance(e, _Binary):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if isinstance(e, _Compare):
            return int(_COMPARE_FN[e.symbol](a, b))
        if isinstance(e, Add):
            return a + b
        if isinstance(e, Mul):
            return a * b
        if isinstance(e, FloorDiv):
            return a // b
        if isinstance(e, FloorMod):
            return a % b
        if isinstance(e, Min):
            return min(a, b)
        return max(a, b)
    if isinstance(e, FloatImm):
        raise StructInfoError("float immediate where an integer is required")
    raise StructInfoError(f"cannot evaluate {e!r}")


def to_str(e: PrimExpr) -> str:
    """Python-syntax text of an expression (as TVMScript prints shapes)."""
    return _str(e, 0)


_PREC = {Add: 1, Mul: 2, FloorDiv: 2, FloorMod: 2}


def _str(e: PrimExpr, parent_prec: int) -> str:
    if isinstance(e, IntImm):
        return str(e.value) if e.value >= 0 or parent_prec == 0 else f"({e.value})"
    if isinstance(e, FloatImm):
        return repr(e.value)
    if isinstance(e, PrimVar):
        return e.name
    if isinstance(e, Add):
        b = e.b
        if isinstance(b, IntImm) and b.value < 0:
            text = f"{_str(e.a, 1)} - {-b.value}"
        elif isinstance(b, Mul) and isinstance(b.b, IntImm) and b.b.value < 0:
            text = f"{_str(e.a, 1)} - {_str(mul(b.a, -b.b.value), 2)}"
        else:
            text = f"{_str(e.a, 1)} + {_str(b, 1)}"
        return f"({text})" if parent_prec > 1 else text
    if isinstance(e, Mul):
        if isinstance(e.b, IntImm) and not isinstance(e.a, IntImm):
            text = f"{_str(e.a, 2)} * {_str(e.b, 3)}"
        else:
            text = f"{_str(e.a, 2)} * {_str(e.b, 3)}"
        return f"({text})" if parent_prec > 2 else text
    if isinstance(e, FloorDiv):
        text = f"{_str(e.a, 2)} // {_str(e.b, 3)}"
        return f"({text})" if parent_prec > 2 else text
    if isinstance(e, FloorMod):
        text = f"{_str(e.a, 2)} % {_str(e.b, 3)}"
        return f"({text})" if parent_prec > 2 else text
    if isinstance(e, Min):
        return f"T.min({_str(e.a, 0)}, {_str(e.b, 0)})"
    if isinstance(e, Max):
        return f"T.max({_str(e.a, 0)}, {_str(e.b, 0)})"
    if isinstance(e, _Compare):
        text = f"{_str(e.a, 1)} {e.symbol} {_str(e.b, 1)}"
        return f"({text})" if parent_prec > 0 else text
    return repr(e)


def _repr_binary(self: _Binary) -> str:
    return to_str(self)


for _cls in (Add, Mul, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE):
    _cls.__repr__ = _repr_binary  # type: ignore[method-assign]


__all__ = [
    "PrimExpr",
    "IntImm",
    "FloatImm",
    "PrimVar",
    "Add",
    "Mul",
    "FloorDiv",
    "FloorMod",
    "Min",
    "Max",
    "EQ",
    "NE",
    "LT",
    "LE",
    "GT",
    "GE",
    "COMPARE_OF_SYMBOL",
    "compare",
    "add",
    "sub",
    "mul",
    "floordiv",
    "floormod",
    "min_",
    "max_",
    "as_prim",
    "simplify",
    "prove_equal",
    "const_value",
    "bounds",
    "upper_bound",
    "free_vars",
    "substitute",
    "evaluate",
    "to_str",
]
