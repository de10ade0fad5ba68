"""Byte counts that are expressions in shape variables, and maxima of them.

Why a separate "max of sums" form: a plan's offsets, its arena and the peak of
a program with a dynamic batch and sequence are maxima of polynomials that
are not comparable for every value (``seq * seq`` against ``seq * hidden``).
:class:`ByteMax` keeps such a maximum as its non-dominated candidates: a
candidate is dropped only when interval arithmetic proves another is at least
as large for every value of the variables (all of them are >= 0), so the
maximum of the candidates equals the true maximum everywhere. Evaluated at
given sizes it is exact; printed it is a formula ("802,816 x batch").

The serialised form (``serialize``) is the VM's
prim JSON (int, ``["var", name]``, ``[op, a, b]``), one list of candidates
per figure, so an executable can answer "how much at batch = 4" without the IR.
"""

from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from ..errors import HetvmError
from ..ir import prim as P

__all__ = [
    "ByteMax",
    "MAX_CANDIDATES",
    "align_bytes",
    "candidates_of",
    "format_bytes_expr",
    "is_nonnegative",
    "provably_le",
    "serialize",
]

#: above this many candidates a maximum is replaced by a bound (see ``_merge``)
MAX_CANDIDATES = 12


_LE_CACHE: dict[tuple[P.PrimExpr, P.PrimExpr, int], bool] = {}


def provably_le(a: P.PrimExpr, b: P.PrimExpr, least: int = 0) -> bool:
    """``a <= b`` for every value of the variables (all >= ``least``; the
    planner's proofs use 0, which covers every value a dim can take)."""
    key = (a, b, least)
    got = _LE_CACHE.get(key)
    if got is None:
        if len(_LE_CACHE) > 200_000:
            _LE_CACHE.clear()
        got = _LE_CACHE[key] = _provably_le(a, b, least)
    return got


_SAMPLE_VALUES = ((0,), (1,), (3,), (250,), (2, 41), (41, 2), (7, 1, 90))
_SAMPLES: dict[P.PrimExpr, tuple[int, ...]] = {}


def _samples(e: P.PrimExpr) -> tuple[int, ...]:
    """``e`` at a few points (a counterexample there refutes ``<=`` at once)."""
    got = _SAMPLES.get(e)
    if got is None:
        values = []
        for pattern in _SAMPLE_VALUES:  # a variable's value depends on its name only: one point for all
            env = {v: pattern[sum(map(ord, v.name)) % len(pattern)] for v in P.free_vars(e)}
            values.append(P.evaluate(e, env))
        if len(_SAMPLES) > 200_000:
            _SAMPLES.clear()
        got = _SAMPLES[e] = tuple(values)
    return got


def _provably_le(a: P.PrimExpr, b: P.PrimExpr, least: int) -> bool:
    try:
        if any(x > y for x, y, pattern in zip(_samples(a), _samples(b), _SAMPLE_VALUES) if min(pattern) >= least):
            return False
    except Exception:  # noqa: BLE001 - an expression that cannot be evaluated is only not refuted
        pass
    diff = P.sub(a, b)
    vb = {v: (least, None) for v in P.free_vars(diff)} if least else None
    hi = P.bounds(diff, vb)[1]
    if hi is not None and hi <= 0:
        return True
    if not any(isinstance(x, P.FloorDiv) for mono in P._to_poly(diff) for x in mono):
        return False
    for sign in (-1, 1):  # lower bounds of subtracted floor divisions first, then upper bounds of added ones
        for _ in range(4):
            relaxed = _relax_floordiv(diff, sign)
            if relaxed is None:
                break
            diff = relaxed
            hi = P.bounds(diff, vb)[1]
            if hi is not None and hi <= 0:
                return True
    return False


def _relax_floordiv(e: P.PrimExpr, sign: int) -> P.PrimExpr | None:
    """An expression at least ``e`` for every value, with each linear
    ``c x (num // k)`` term (``k`` dividing ``c``) replaced by its bound from
    ``num - (k - 1) <= k x (num // k) <= num``: what proves an aligned size
    ``(n + 63) // 64 x 64`` at least ``n``. Only terms whose coefficient has
    ``sign`` are relaxed. None when no term applies."""
    poly = P._to_poly(e)
    out: dict = {}
    changed = False
    for mono, c in poly.items():
        atom = mono[0] if len(mono) == 1 else None
        k = P.const_value(atom.b) if isinstance(atom, P.FloorDiv) else None
        if atom is None or k is None or k <= 0 or c % k or (c > 0) != (sign > 0):
            out = P._poly_add(out, {mono: c})
            continue
        num = P._to_poly(atom.a)
        if c < 0:
            num = P._poly_add(num, {(): -(k - 1)})
        out = P._poly_add(out, {m: v * (c // k) for m, v in num.items()})
        changed = True
    return P._from_poly(out) if changed else None


def is_nonnegative(e: P.PrimExpr) -> bool:
    """``e >= 0`` for every value of its (non-negative) shape variables at which
    it is defined: by interval bounds, or by its form -- sums, products, minima
    and floor divisions of non-negative parts. Why the form: a legacy export's
    ``batch * seq * 2 // (batch * 2)`` (a head count worked out from shapes) has
    no interval bound, since ``batch * 2`` may be 0; where it is 0 the size is
    not defined at all (the shape's own division fails first), and elsewhere
    the quotient is >= 0. Without this, such tensors stayed out of the arena,
    each in a storage of its own."""
    lo = P.bounds(e)[0]
    return (lo is not None and lo >= 0) or _nonnegative_form(e)


def _nonnegative_form(e: P.PrimExpr) -> bool:
    if isinstance(e, P.IntImm):
        return e.value >= 0
    if isinstance(e, P.PrimVar):
        return True  # a shape variable
    if isinstance(e, (P.Add, P.Mul, P.Min, P.FloorDiv, P.FloorMod)):
        return is_nonnegative(e.a) and is_nonnegative(e.b)
    if isinstance(e, P.Max):
        return is_nonnegative(e.a) or is_nonnegative(e.b)
    return False


def align_bytes(size: P.PrimExpr, alignment: int) -> P.PrimExpr:
    """``size`` rounded up to a multiple of ``alignment`` for every value.

    A size ``c x F`` (``c`` the gcd of its coefficients) becomes
    ``align(c) x F`` when that wastes at most 1/8 (a CNN's ``802,816 x batch``
    stays as it is); a small ``c`` (an int64 mask's 8 bytes a token) is
    rounded exactly instead, with a floor division."""
    c = P.const_value(size)
    if c is not None:
        return P.IntImm(-(-c // alignment) * alignment)
    poly = P._to_poly(size)
    content = 0
    for k in poly.values():
        content = math.gcd(content, k)
    if content > 0:
        up = -(-content // alignment) * alignment
        if (up - content) * 8 <= content:
            return P._from_poly({m: k // content * up for m, k in poly.items()})
    return P.mul(P.floordiv(P.add(size, alignment - 1), alignment), alignment)


def candidates_of(e: P.PrimExpr) -> list[P.PrimExpr]:
    """``e`` as a list of max-free terms whose maximum is ``e`` (max distributed
    over sums and non-negative constant factors; other uses stay atoms)."""
    if isinstance(e, P.Max):
        return candidates_of(e.a) + candidates_of(e.b)
    if isinstance(e, P.Add):
        return [P.add(x, y) for x in candidates_of(e.a) for y in candidates_of(e.b)]
    if isinstance(e, P.Mul):
        for k, other in ((e.b, e.a), (e.a, e.b)):
            c = P.const_value(k)
            if c is not None and c >= 0:
                return [P.mul(x, c) for x in candidates_of(other)]
    return [e]


class ByteMax:
    """The maximum of byte-count expressions, kept as non-dominated candidates.

    ``cap``: above this many candidates they are replaced by one polynomial
    at least as large (``merged`` is then True: an upper bound, no longer
    exact); None keeps every candidate (a lower bound must stay exact).
    """

    __slots__ = ("terms", "cap", "merged")

    def __init__(self, terms: Iterable[P.IntLike] = (), cap: int | None = MAX_CANDIDATES) -> None:
        self.terms: tuple[P.PrimExpr, ...] = ()
        self.cap = cap
        self.merged = False
        for t in terms:
            self._push_all(P.as_prim(t))

    # -- building -----------------------------------------------------------------
    def _push_all(self, term: P.PrimExpr) -> None:
        """Pushes the candidates of ``term`` (a maximum inside is distributed)."""
        term = P.simplify(term)
        if not isinstance(term, (P.Max, P.Add, P.Mul)) or not _has_max(term):
            self._push(term)
            return
        for t in candidates_of(term):
            self._push(P.simplify(t))

    def _push(self, term: P.PrimExpr) -> None:
        kept = []
        for old in self.terms:
            if provably_le(term, old):
                return
            if not provably_le(old, term):
                kept.append(old)
        kept.append(term)
        self.terms = tuple(kept)
        if self.cap is not None and len(self.terms) > self.cap and _mergeable(self.terms):
            self.terms = (_merge(self.terms),)
            self.merged = True

    def copy(self) -> ByteMax:
        out = ByteMax(cap=self.cap)
        out.terms = self.terms
        out.merged = self.merged
        return out

    def include(self, other: P.IntLike | ByteMax) -> ByteMax:
        """The maximum of ``self`` and ``other`` (a new object)."""
        out = self.copy()
        if isinstance(other, ByteMax):
            out.merged |= other.merged
            terms: Iterable[P.PrimExpr] = other.terms
        else:
            terms = (P.as_prim(other),)
        for t in terms:
            out._push_all(t)
        return out

    def plus(self, other: P.IntLike | ByteMax) -> ByteMax:
        """``self + other`` (sums of every pair of candidates)."""
        rhs = other.terms if isinstance(other, ByteMax) else (P.as_prim(other),)
        lhs = self.terms or (P.IntImm(0),)
        out = ByteMax((P.add(a, b) for a in lhs for b in rhs), cap=self.cap)
        out.merged |= self.merged or (isinstance(other, ByteMax) and other.merged)
        return out

    # -- reading ------------------------------------------------------------------
    @property
    def constant(self) -> int | None:
        """The value when it does not depend on any variable."""
        if not self.terms:
            return 0
        if len(self.terms) == 1:
            return P.const_value(self.terms[0])
        return None

    def free_vars(self) -> list[P.PrimVar]:
        out: dict[int, P.PrimVar] = {}
        for t in self.terms:
            for v in P.free_vars(t):
                out.setdefault(id(v), v)
        return list(out.values())

    def to_prim(self) -> P.PrimExpr:
        """One PrimExpr (nested ``max``) for the IR."""
        if not self.terms:
            return P.IntImm(0)
        # what P.max_ folds to: no candidate is provably below another, so
        # only its sorting applies (built directly: max_ would re-prove it all)
        out = self.terms[0]
        for t in self.terms[1:]:
            first, second = sorted((out, t), key=P._atom_key)
            out = P.Max(first, second)
        return out

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The value with variables given by name (every one must be given)."""
        return max((_eval_named(t, env) for t in self.terms), default=0)

    def serialize(self) -> list:
        return [serialize(t) for t in self.terms] or [0]

    def formula(self) -> str:
        """The maximum as text, for dims >= 1 (a candidate that only matters
        when a dim is 0 is not shown; evaluation keeps every candidate)."""
        if not self.terms:
            return "0"
        shown = [
            t for i, t in enumerate(self.terms)
            if not any(j != i and provably_le(t, u, 1) and not (provably_le(u, t, 1) and j > i)
                       for j, u in enumerate(self.terms))
        ]  # fmt: skip
        texts = [format_bytes_expr(t) for t in shown or self.terms]
        return texts[0] if len(texts) == 1 else "max(" + ", ".join(texts) + ")"

    def __repr__(self) -> str:
        return f"ByteMax({self.formula()})"


def _has_max(e: P.PrimExpr) -> bool:
    if isinstance(e, P.Max):
        return True
    if isinstance(e, (P.Add, P.Mul)):
        return _has_max(e.a) or _has_max(e.b)
    return False


def _mergeable(terms: Sequence[P.PrimExpr]) -> bool:
    """Every monomial of every term is >= 0 (then a coefficient-wise maximum
    bounds each term from above)."""
    for t in terms:
        for mono, coeff in P._to_poly(t).items():
            if coeff < 0 or not all(is_nonnegative(a) for a in mono):
                return False
    return True


def _merge(terms: Sequence[P.PrimExpr]) -> P.PrimExpr:
    """A polynomial at least as large as each of ``terms`` for every value."""
    poly: dict = {}
    for t in terms:
        for mono, coeff in P._to_poly(t).items():
            poly[mono] = max(poly.get(mono, 0), coeff)
    return P._from_poly(poly)


def _eval_named(e: P.PrimExpr, env: Mapping[str, int]) -> int:
    by_var = {}
    for v in P.free_vars(e):
        if v.name not in env:
            raise HetvmError(f"the size of dim '{v.name}' is needed (give it, e.g. dims={{'{v.name}': 4}})")
        by_var[v] = int(env[v.name])
    return P.evaluate(e, by_var)


def serialize(e: P.PrimExpr) -> Any:
    """A PrimExpr as the VM's prim JSON."""
    if isinstance(e, P.IntImm):
        return e.value
    if isinstance(e, P.PrimVar):
        return ["var", e.name]
    names = {P.Add: "add", P.Mul: "mul", P.FloorDiv: "floordiv", P.FloorMod: "floormod", P.Min: "min", P.Max: "max"}
    for cls, name in names.items():
        if isinstance(e, cls):
            return [name, serialize(e.a), serialize(e.b)]  # type: ignore[attr-defined]
    raise HetvmError(f"cannot serialise the byte count {e!r}")


def format_bytes_expr(e: P.PrimExpr) -> str:
    """A byte count for people: ``802,816 x batch``, ``3,072 x batch x seq + 64``."""
    c = P.const_value(e)
    if c is not None:
        return f"{c:,}"
    poly = P._to_poly(e)
    terms = sorted(poly.items(), key=lambda kv: (len(kv[0]) == 0, -len(kv[0]), [P._atom_key(a) for a in kv[0]]))
    parts: list[str] = []
    for mono, coeff in terms:
        factors: list[str] = []
        i = 0
        while i < len(mono):
            j = i
            while j < len(mono) and mono[j] == mono[i]:
                j += 1
            atom = mono[i] if isinstance(mono[i], P.PrimVar) else f"({P.to_str(mono[i])})"
            factors.append(str(atom) if j - i == 1 else f"{atom}^{j - i}")
            i = j
        mag = abs(coeff)
        text = " x ".join(([f"{mag:,}"] if mag != 1 or not factors else []) + factors)
        parts.append(("- " if coeff < 0 else "+ ") + text)
    out = " ".join(parts)
    return out[2:] if out.startswith("+ ") else "-" + out[2:]
