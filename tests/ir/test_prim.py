"""Symbolic shape arithmetic: canonical forms, proofs, bounds, substitution."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetvm.errors import HetvmError, StructInfoError
from hetvm.ir import prim as P

n = P.PrimVar("n")
m = P.PrimVar("m")


def test_linear_terms_cancel():
    assert P.prove_equal(2 * n + 1 - n, n + 1)
    assert P.const_value(n - n) == 0
    assert P.const_value(3 * n - 2 * n - n + 7) == 7


def test_products_expand():
    assert P.prove_equal((n + 1) * (n + 1), n * n + 2 * n + 1)
    assert P.prove_equal((n + m) * 2, 2 * m + 2 * n)
    assert not P.prove_equal(n * m, n + m)


def test_canonical_form_is_order_independent():
    assert repr(n + m) == repr(m + n)
    assert repr(n * m * 2) == repr(2 * m * n)


def test_constants_fold():
    assert P.add(2, 3) == P.IntImm(5)
    assert P.mul(4, 5) == P.IntImm(20)
    assert P.floordiv(7, 2) == P.IntImm(3)
    assert P.floormod(-7, 2) == P.IntImm(1)  # floor semantics, like Python
    assert P.floordiv(-7, 2) == P.IntImm(-4)


def test_floordiv_simplifies():
    assert P.floordiv(n, 1) is n
    assert P.prove_equal(P.floordiv(4 * n + 8, 4), n + 2)
    assert P.prove_equal(P.floordiv(n, n), 1)
    # the part divisible by the divisor comes out
    assert P.prove_equal(P.floordiv(4 * n + 3, 2), 2 * n + 1)
    assert P.prove_equal(P.floordiv(4 * n + m, 2), 2 * n + P.floordiv(m, 2))
    # the opaque remainder stays a floordiv node
    assert isinstance(P.floordiv(n, 2), P.FloorDiv)


def test_floormod_simplifies():
    assert P.const_value(P.floormod(4 * n, 2)) == 0
    assert P.const_value(P.floormod(4 * n + 3, 2)) == 1
    assert P.const_value(P.floormod(n, n)) == 0
    assert P.prove_equal(P.floormod(6 * n + m, 3), P.floormod(m, 3))
    assert isinstance(P.floormod(n, 3), P.FloorMod)


def test_division_by_zero_names_the_expression():
    with pytest.raises(StructInfoError, match="division by zero"):
        P.floordiv(n, 0)
    with pytest.raises(StructInfoError, match="modulo by zero"):
        P.floormod(n, 0)


def test_min_max_use_bounds():
    assert P.min_(n, n + 1) is n or P.prove_equal(P.min_(n, n + 1), n)
    assert P.prove_equal(P.max_(n, n + 1), n + 1)
    assert P.prove_equal(P.max_(n, 0), n)  # shape variables are never negative
    assert P.const_value(P.min_(n, 0)) == 0
    assert P.prove_equal(P.min_(3, 5), 3)
    undecided = P.min_(n, m)
    assert isinstance(undecided, P.Min)
    assert repr(P.min_(n, m)) == repr(P.min_(m, n))


def test_bounds_from_declared_upper_bounds():
    assert P.bounds(n) == (0, None)
    assert P.upper_bound(2 * n + 1, {n: (0, 10)}) == 21
    assert P.bounds(n * m, {n: (1, 4), m: (2, 3)}) == (2, 12)
    assert P.bounds(n - m, {n: (0, 5), m: (0, 3)}) == (-3, 5)
    assert P.upper_bound(P.floordiv(n, 4), {n: (0, 16)}) == 4
    assert P.bounds(P.floormod(n, 4)) == (0, 3)
    assert P.upper_bound(P.min_(n, m), {n: (0, 7)}) == 7
    assert P.upper_bound(P.max_(n, m), {n: (0, 7)}) is None
    assert P.upper_bound(n * m) is None


def test_substitute_recanonicalises():
    e = 2 * n + m
    assert P.prove_equal(P.substitute(e, {m: n}), 3 * n)
    assert P.const_value(P.substitute(e, {n: 2, m: 1})) == 5
    assert P.const_value(P.substitute(P.floordiv(n, 2), {n: 9})) == 4
    assert P.substitute(e, {}) == e


def test_evaluate():
    e = P.max_(P.floordiv(n + 3, 2), P.floormod(m, 5))
    assert P.evaluate(e, {n: 7, m: 9}) == 5
    assert P.evaluate(P.min_(n, m) * 2, {n: 3, m: 4}) == 6
    with pytest.raises(StructInfoError, match="'n' has no value"):
        P.evaluate(n + 1, {})


def test_free_vars_in_order():
    assert P.free_vars(m * 2 + n * m) == [m, n] or P.free_vars(m * 2 + n * m) == [n, m]
    assert set(map(id, P.free_vars(P.floordiv(n, m + 1)))) == {id(n), id(m)}
    assert P.free_vars(P.IntImm(3)) == []


def test_variables_are_compared_by_identity():
    other_n = P.PrimVar("n")
    assert not P.prove_equal(n, other_n)
    assert P.prove_equal(n + other_n - n, other_n)


def test_to_str_prints_python_syntax():
    assert P.to_str(n + 1) == "n + 1"
    assert P.to_str(n - 1) == "n - 1"
    assert P.to_str(P.floordiv(n, 2) * 3) in ("n // 2 * 3", "(n // 2) * 3")
    assert P.to_str(P.min_(n, m)).startswith("T.min(")
    assert P.to_str(P.IntImm(-2)) == "-2"


def test_as_prim_rejects_non_integers():
    assert P.as_prim(3) == P.IntImm(3)
    assert P.as_prim(True) == P.IntImm(1)
    with pytest.raises(HetvmError):
        P.as_prim("n")


@given(
    st.lists(st.integers(-5, 5), min_size=3, max_size=3),
    st.lists(st.integers(-5, 5), min_size=3, max_size=3),
    st.integers(0, 20),
    st.integers(0, 20),
)
def test_canonical_form_agrees_with_evaluation(ca, cb, vn, vm):
    a = ca[0] * n + ca[1] * m + ca[2]
    b = cb[0] * n * m + cb[1] * n + cb[2]
    env = {n: vn, m: vm}
    assert P.evaluate(a + b, env) == P.evaluate(a, env) + P.evaluate(b, env)
    assert P.evaluate(a * b, env) == P.evaluate(a, env) * P.evaluate(b, env)
    assert P.evaluate(a - b, env) == P.evaluate(a, env) - P.evaluate(b, env)
    for d in (1, 2, 3, 4):
        assert P.evaluate(P.floordiv(a, d), env) == P.evaluate(a, env) // d
        assert P.evaluate(P.floormod(a, d), env) == P.evaluate(a, env) % d
    assert P.evaluate(P.min_(a, b), env) == min(P.evaluate(a, env), P.evaluate(b, env))
    assert P.evaluate(P.max_(a, b), env) == max(P.evaluate(a, env), P.evaluate(b, env))


def test_same_named_variables_canonicalise_independently_of_order():
    n1, n2 = P.PrimVar("n"), P.PrimVar("n")
    a, b = P.floordiv(n1, 2), P.floordiv(n2, 2)
    assert P.prove_equal(a * b, b * a)
    assert P.prove_equal(a * b + a, b * a + a)
    assert P.prove_equal(P.min_(n1, n2), P.min_(n2, n1))


def test_nested_min_max_that_bounds_decide_collapse():
    """Broadcasting n against min(n, 64) (position ids sliced from a 64-row table)
    gave max(n, min(n, 64)) * min(1, min(n, min(n, 64))): kept, it nested once more
    per layer (DeBERTa's import took minutes). Each rule is checked by evaluation."""
    n, m = P.PrimVar("n"), P.PrimVar("m")
    capped = P.min_(n, 64)
    cases = {
        P.max_(n, capped): n,
        P.max_(capped, n): n,
        P.min_(n, P.max_(n, m)): n,
        P.min_(n, capped): capped,
        P.max_(n, P.max_(n, m)): P.max_(n, m),
        P.min_(1, capped): P.min_(1, n),
        P.max_(64, P.max_(n, 3)): P.max_(n, 64),
        P.mul(n, P.min_(1, n)): n,
        P.mul(P.max_(n, capped), P.min_(1, P.min_(n, capped))): n,
    }
    for expr, want in cases.items():
        assert P.prove_equal(expr, want) and P.to_str(expr) == P.to_str(want), (P.to_str(expr), P.to_str(want))
        for nv in (0, 1, 5, 64, 100):
            for mv in (0, 3, 70):
                env = {n: nv, m: mv}
                assert P.evaluate(expr, env) == P.evaluate(want, env)


def test_min_max_that_bounds_cannot_decide_are_kept():
    n, m = P.PrimVar("n"), P.PrimVar("m")
    assert isinstance(P.max_(n, P.min_(m, 64)), P.Max)
    assert isinstance(P.min_(1, P.min_(n, m)), P.Min)
    assert not P.prove_equal(P.mul(n, P.min_(1, m)), n)


def test_comparisons_are_bool_expressions_that_fold_when_decided():
    n = P.PrimVar("n")
    eq = P.compare("==", P.floormod(n, 16), 0)
    assert isinstance(eq, P.EQ) and eq.dtype == "bool"
    assert P.to_str(eq) == "n % 16 == 0"
    assert [P.evaluate(eq, {n: v}) for v in (0, 8, 16, 33)] == [1, 0, 1, 0]
    assert P.substitute(eq, {n: 32}) == P.IntImm(1, "bool")
    # decided by the difference of the sides alone
    assert P.compare(">", n + 1, n) == P.IntImm(1, "bool")
    assert P.compare("!=", n * 2, n + n) == P.IntImm(0, "bool")
    assert isinstance(P.compare("<=", n, 4), P.LE)
    for symbol, want in (("<", [1, 0, 0]), ("<=", [1, 1, 0]), (">", [0, 0, 1]), (">=", [0, 1, 1]), ("!=", [1, 0, 1])):
        e = P.compare(symbol, n, 4)
        assert [P.evaluate(e, {n: v}) for v in (3, 4, 5)] == want, symbol
    with pytest.raises(StructInfoError, match="integer expressions"):
        P.compare("==", eq, 1)
    with pytest.raises(StructInfoError, match="unknown comparison"):
        P.compare("<>", n, 1)
