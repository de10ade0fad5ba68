"""Segment bodies of element-wise ops and matmul against their NumPy kernels."""

import numpy as np
import pytest

from hetvm.testing.segment_check import assert_segment_matches

pytest.importorskip("numba")


def test_a_chain_of_binary_ops_with_broadcasting_compiles_as_one_function(numba_on):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 1)).astype(np.float32)
    t = np.empty((2, 3, 4), np.float32)
    u = np.empty((2, 3, 4), np.float32)
    x[0, 0, 0] = np.nan
    seg = assert_segment_matches([
        ("add", {}, [x, y, t]),
        ("multiply", {}, [t, x, u]),
        ("fused_elementwise", {"program": [["sigmoid", "float32", "x0"], ["multiply", "float32", "t0", "x1"]]},
         [u, y, t]),
        ("isnan", {}, [t, np.empty((2, 3, 4), bool)]),
    ])
    assert [p[0] for p in seg.pieces] == ["g"]


def test_integer_ops_wrap_like_numpy_and_where_selects(numba_on):
    a = np.array([2**31 - 1, -5, 7], np.int32)
    b = np.array([1, 3, -2], np.int32)
    s = np.empty(3, np.int32)
    c = np.array([True, False, True])
    w = np.empty(3, np.int32)
    assert_segment_matches([("add", {}, [a, b, s]), ("where", {}, [c, s, b, w])])


def test_a_shape_that_does_not_broadcast_raises_the_numpy_kernels_error(numba_on):
    from hetvm.testing.segment_check import run_both

    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError):
        run_both([("add", {}, [x, np.ones((4,), np.float32), np.empty((2, 3), np.float32)])])


@pytest.mark.parametrize("shapes", [((5, 8), (8, 3)), ((2, 5, 8), (8, 3)), ((2, 1, 5, 8), (3, 8, 4)),
                                    ((1, 8), (2, 8, 0))])
def test_matmul_matches_numpy_with_broadcast_batches(numba_on, shapes):
    rng = np.random.default_rng(1)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.float32)
    assert_segment_matches([("matmul", {"out_dtype": None}, [a, b, out])])


def test_matmul_of_mixed_dtypes_keeps_its_numpy_kernel(numba_on):
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 2), np.float64)
    assert_segment_matches([("matmul", {}, [a, b, np.empty((2, 2), np.float64)])], compiled=False)


def test_casts_to_bool_and_between_numbers_match_numpy(numba_on):
    x = np.array([0.0, -0.0, 1.5, np.nan, np.inf], np.float32)
    i = np.array([0, 3, -2, 7, 0], np.int64)
    assert_segment_matches([
        ("astype", {"dtype": "bool"}, [x, np.empty(5, bool)]),
        ("astype", {"dtype": "bool"}, [i, np.empty(5, bool)]),
        ("astype", {"dtype": "float32"}, [i, np.empty(5, np.float32)]),
    ])


# floats whose truncation to int32 / int64 is undefined in C, and their neighbours in range
CAST_EDGES = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 3.7, -3.7, 1e30, -1e30, 2.0**63, -(2.0**63),
              2.0**63 * (1 - 2.0**-24), 2.0**31, -(2.0**31), 2.0**31 - 1, -(2.0**31) - 1, 2.0**31 - 128]


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["int32", "int64"])
def test_a_float_to_int_cast_matches_numpy_nan_and_out_of_range_included(numba_on, src, dst):
    from hetvm.kernels.codegen_numba import float_to_int

    if float_to_int("v", dst) is None:
        pytest.skip("NumPy's invalid cast gives several values on this machine: not generated")
    x = np.array(CAST_EDGES, src)
    grid = np.repeat(x[None, :], 3, axis=0).T  # non-contiguous: a transposed view
    assert_segment_matches([
        ("astype", {"dtype": dst}, [x, np.empty(x.shape, dst)]),
        ("astype", {"dtype": dst}, [grid, np.empty(grid.shape, dst)]),
        ("astype", {"dtype": dst}, [np.empty((0, 3), src), np.empty((0, 3), dst)]),
    ])


@pytest.mark.parametrize("dst", ["int8", "int16", "uint8", "uint32", "uint64"])
def test_a_float_cast_to_a_narrow_or_unsigned_int_keeps_its_numpy_kernel(numba_on, dst):
    x = np.array(CAST_EDGES, np.float32)
    assert_segment_matches([("astype", {"dtype": dst}, [x, np.empty(x.shape, dst)])], compiled=False)


def _program(program, *inputs, compiled=True):
    """A program's segment body against the NumPy runner (the fused kernel a
    segment's fallback binds is the generated one where Numba is on)."""
    from hetvm.kernels.fused_program import run_numpy
    from hetvm.testing.segment_check import compiled_calls, run_both

    out = np.empty(np.broadcast_shapes(*(a.shape for a in inputs)), program[-1][1])
    got, _, seg = run_both([("fused_elementwise", {"program": program}, [*inputs, out])])
    assert compiled_calls(seg) == (1 if compiled else 0)
    want = np.empty_like(out)
    with np.errstate(all="ignore"):
        run_numpy(np, tuple(tuple(step) for step in program), inputs, want)
    np.testing.assert_array_equal(got[-1], want)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
def test_an_integer_clip_in_a_program_clips_in_float64_as_numpy_does(numba_on, dtype):
    info = np.iinfo(dtype)
    small = [-3, -1, 0, 1, 2, 7] if info.min else [0, 1, 2, 3, 7]
    x = np.array([info.min, info.min + 1, *small, 100, info.max - 1, info.max], dtype)
    if dtype == "int64":  # above 2**53 float64 rounds: NumPy's result, which the body must match
        x = np.concatenate([x, np.array([2**53 + 1, -(2**53) - 3, 2**62 + 511], dtype)])
    y = x[::-1].reshape(-1, 1)  # broadcast against x: a (n, n) output
    lo, hi = (-1.5, 6.5) if info.min else (0.5, 6.5)
    _program([("add", dtype, "x0", "x1"), ("clip", dtype, "t0", lo, hi)], x, y)
    _program([("clip", dtype, "x0", 5.0, 2.0)], x)  # lo > hi: hi everywhere
    _program([("clip", dtype, "x0", float(info.min), float(info.max))], x)
    _program([("clip", dtype, "x0", 0.0, 15.0)], np.empty((0, 4), dtype))


def test_an_int8_clip_by_bounds_outside_its_range_keeps_the_numpy_runner(numba_on):
    x = np.array([-128, 0, 127], np.int8)
    _program([("clip", "int8", "x0", -1000.0, 1000.0)], x, compiled=False)


def test_casts_of_a_programs_float_steps_to_int_and_of_its_steps_to_bool(numba_on):
    from hetvm.kernels.codegen_numba import float_to_int

    if float_to_int("v", "int64") is None:
        pytest.skip("NumPy's invalid cast gives several values on this machine: not generated")
    x = np.array(CAST_EDGES, np.float32).reshape(-1, 1)
    i = np.array([[0, 3, -2, 7]], np.int64)
    # log of 0, -1, inf: -inf, NaN, inf, cast to int64; bool of a float (NaN is True) and of an int
    _program([("log", "float32", "x0"), ("astype", "int64", "t0"), ("add", "int64", "t1", "x1")], x, i)
    _program([("multiply", "float32", "x0", "x0"), ("astype", "int32", "t0")], x)
    _program([("multiply", "int64", "x0", "x1"), ("astype", "bool", "t0"), ("logical_not", "bool", "t1")], i.T, i)
    _program([("sqrt", "float32", "x0"), ("astype", "bool", "t0")], x)


def test_a_programs_cast_of_a_float_input_to_int_keeps_the_numpy_runner(numba_on):
    # (the generated text names a step's dtype; an input's could be any at a later call)
    _program([("astype", "int64", "x0")], np.array([1.5, np.nan], np.float32), compiled=False)


def test_a_unary_op_refuses_an_input_that_would_broadcast_as_its_numpy_kernel_does(numba_on):
    from hetvm.testing.segment_check import segment_of

    x = np.ones((1, 3), np.float32)
    for op in ("exp", "negative", "isnan"):
        out = np.empty((2, 3), bool if op == "isnan" else np.float32)
        seg, arrays = segment_of([(op, {}, [x, out]), ("exp", {}, [x, np.empty((1, 3), np.float32)])])
        with pytest.raises(ValueError):
            seg(*arrays)


def test_literals_of_nan_and_infinities_are_source_text():
    from hetvm.kernels.segment_emit import literal

    assert literal(float("nan"), "float32") == "np.float32(np.nan)"
    assert literal(float("-inf")) == "-np.inf" and literal(float("inf"), "float64") == "np.float64(np.inf)"
    assert literal(0.5, "float32") == "np.float32(0.5)"


def test_same_shape_operands_in_place_or_not_and_strided_ones_match_the_numpy_kernels(numba_on):
    # operands of the output's shape run one flat loop (a loop of its own where an
    # input is the output's buffer); a strided or broadcast operand the loop nest
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 8, 5)).astype(np.float32) * 4
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    t, u = np.empty_like(x), rng.standard_normal(x.shape).astype(np.float32)
    strided = rng.standard_normal((2, 3, 8, 10)).astype(np.float32)[..., ::2]
    silu = {"program": [["nn.silu", "float32", "x0"]]}
    sig = {"program": [["sigmoid", "float32", "x0"]]}
    fma = {"program": [["multiply", "float32", "x0", "x1"], ["add", "float32", "t0", "x2"]]}
    seg = assert_segment_matches([
        ("fused_elementwise", silu, [x, t]),  # distinct buffers
        ("fused_elementwise", sig, [t, t]),  # in place
        ("add", {}, [u, x, u]),  # the first input is the output
        ("subtract", {}, [x, u, u]),  # the second
        ("fused_elementwise", fma, [x, t, u, u]),  # the third of three
        ("fused_elementwise", silu, [strided, t]),  # strided: the nest
        ("multiply", {}, [strided, x[:1, :, :1], u]),  # broadcast
    ], rtol=2e-6, atol=1e-30)  # fmt: skip
    assert [p[0] for p in seg.pieces] == ["g"]


def test_float32_sigmoid_and_silu_match_numpy_over_their_whole_range(numba_on):
    # the float32 steps compute exp without libm: every magnitude, through the
    # results that underflow to denormals and zero, against the NumPy kernels and
    # against the float64 formula (the fused kernel a reference would run shares
    # the template, so it alone could not tell)
    from hetvm.testing.segment_check import run_both

    x = np.concatenate([np.linspace(-130, 40, 20001, dtype=np.float32), np.linspace(-112, -86, 4004, dtype=np.float32),
                        np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 199.9, -199.9, 200, -200,
                                  200.1, -200.1, 3e38, -3e38], np.float32)]).reshape(4, -1)  # fmt: skip
    calls = [(op, {}, [x, np.empty_like(x)]) for op in ("sigmoid", "nn.silu")]
    assert_segment_matches(calls, rtol=2e-6, atol=1e-37)
    fused = [("fused_elementwise", {"program": [[op, "float32", "x0"]]}, [x, np.empty_like(x)])
             for op in ("sigmoid", "nn.silu")]  # fmt: skip
    got, _, seg = run_both(fused)
    x64 = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        sig = 1 / (1 + np.exp(-x64))
        truth = [sig.astype(np.float32), (x64 * sig).astype(np.float32)]
    assert [p[0] for p in seg.pieces] == ["g"]
    # float32 arithmetic throughout: within 3.2 ulp (a sweep of every 61st float32
    # measured 2.7 for sigmoid, 3.16 for SiLU), and within about one least
    # subnormal where the result is below the normal range
    for g, want in zip(got[1:], truth):
        np.testing.assert_allclose(g, want, rtol=4 * np.finfo(np.float32).eps, atol=2e-45, equal_nan=True)


_GELU_ERF = [["add", "float32", "x0", "x1"], ["const", "float32", 1.4142135381698608], ["divide", "float32", "t0", "t1"],
             ["erf", "float32", "t2"], ["const", "float32", 1.0], ["add", "float32", "t3", "t4"],
             ["multiply", "float32", "t0", "t5"], ["const", "float32", 0.5], ["multiply", "float32", "t6", "t7"]]  # fmt: skip


@pytest.mark.parametrize(("bias_shape", "in_place"), [((7,), True), ((7,), False), ((3, 1), True), ((), False)])
def test_bias_and_gelu_programs_match_with_every_broadcast_and_in_place(numba_on, bias_shape, in_place):
    # the versioned nest: no broadcast along the last axis (plain index, the
    # output's name for an input that is the output) and the general one
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 3, 7)) * 4).astype(np.float32)
    x[0, 0, :5] = [np.nan, np.inf, -np.inf, -0.0, -20.0]
    bias = rng.standard_normal(bias_shape).astype(np.float32)
    programs = (_GELU_ERF, [["add", "float32", "x0", "x1"], ["nn.gelu", "float32", "t0"]],
                [["add", "float32", "x0", "x1"], ["nn.gelu_tanh", "float32", "t0"]],
                [["subtract", "float32", "x0", "x1"], ["exp", "float32", "t0"], ["tanh", "float32", "t1"]])  # fmt: skip
    calls = []
    for program in programs:
        xk = x.copy()
        calls.append(("fused_elementwise", {"program": program}, [xk, bias, xk if in_place else np.empty_like(x)]))
    # the NumPy erf is an approximation good to 1.5e-7 (absolute)
    assert_segment_matches(calls, atol=2e-6)
