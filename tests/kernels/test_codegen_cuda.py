"""Generated CUDA fused_elementwise kernels against the NumPy runner: NaN, inf,
empty, broadcasting, integer wrapping, casts, non-contiguous inputs.

Each test runs on every array module at hand: ``host`` compiles the generated
body with the host's C++ compiler (``hetvm/testing/cuda_host.py``; skipped without one) and
``cupy`` runs it on a GPU through CuPy (skipped without CuPy and a device).
``test_every_body_compiles_for_the_gpu`` compiles the bodies with nvcc where it
is installed, which needs no GPU."""

import numpy as np
import pytest

from hetvm.kernels import codegen_cuda as cc
from hetvm.kernels.fused_program import run_numpy
from hetvm.kernels.registry import bind_kernel
from hetvm.testing.cuda_host import CXX, NVCC, FakeCupy, HostElementwiseKernel, nvcc_check

from .fused_cases import F32, F64, FLOAT_PROGRAMS, SPECIAL, special


@pytest.fixture
def xp(cuda_xp):
    return cuda_xp


def _to(xp, a):
    return a if isinstance(xp, FakeCupy) else xp.asarray(a)


def _host(xp, a):
    return a if isinstance(a, np.ndarray) else xp.asnumpy(a)


def _run(xp, program, *inputs, out_shape=None):
    """The generated kernel's output and the NumPy runner's, on the host."""
    program = tuple(tuple(s) for s in program)
    shape = out_shape if out_shape is not None else np.broadcast_shapes(*(a.shape for a in inputs))
    dtype = program[-1][1]
    kernel = bind_kernel("fused_elementwise", "cuda", xp, {"program": program})
    got = xp.empty(shape, dtype)
    kernel(*(_to(xp, a) for a in inputs), got)
    want = np.empty(shape, dtype)
    with np.errstate(all="ignore"):
        run_numpy(np, program, inputs, want)
    return _host(xp, got), want, kernel


# steps that round once per operation (exact against NumPy); the rest call libm
ARITHMETIC = {"add", "subtract", "multiply", "divide", "negative", "maximum", "minimum", "floor_divide", "abs",
              "floor", "ceil", "round", "sign", "reciprocal", "nn.relu", "nn.leakyrelu", "clip"}  # fmt: skip


def _check(xp, program, *inputs, out_shape=None, exact=False):
    got, want, kernel = _run(xp, program, *inputs, out_shape=out_shape)
    assert all(k is not None for k in kernel.kernels.values()), "the program should be generated"
    if exact or want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        transcendental = any(s[0] in cc._FLOAT_TEMPLATES and s[0] not in ARITHMETIC for s in program)
        rtol = 4e-6 if transcendental else 0
        atol = 1e-5 if any(s[0] in ("erf", "nn.gelu") for s in program) else (1e-7 if transcendental else 0)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    return got


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("program", FLOAT_PROGRAMS, ids=lambda p: "+".join(s[0] for s in p))
def test_float_programs_match_numpy_on_special_values(xp, program, dtype):
    program = [(s[0], dtype if s[1] == F32 else s[1], *s[2:]) for s in program]
    _check(xp, program, special(dtype))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_floor_divide_of_floats_is_the_floor_of_the_quotient(xp, dtype):
    # the unfused kernel's (and TVM's) rule, which differs from NumPy's divmod for inf // 2
    a = np.array([*SPECIAL, 1.0, -1.0, 0.9999999, 7.0, -7.0, 1e30, 3.0, 0.3] * 2, dtype)
    b = np.resize(np.array([1.0, 2.0, -3.0, np.nan, 0.0, -0.0, 0.1, np.inf, -np.inf, 1e-30, 3.0, -0.5], dtype), a.size)
    for x, y in ((a, b), (b, a)):
        _check(xp, [("floor_divide", dtype, "x0", "x1")], x, y, exact=True)


def test_maximum_minimum_and_relu_propagate_nan_and_keep_numpys_signed_zero(xp):
    a = np.array([np.nan, 1.0, np.nan, -0.0, 0.0, -np.inf, 2.0], F32)
    b = np.array([1.0, np.nan, np.nan, 0.0, -0.0, np.inf, 2.0], F32)
    for op in ("maximum", "minimum"):
        got = _check(xp, [(op, F32, "x0", "x1")], a, b, exact=True)
        want = getattr(np, op)(a, b)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    _check(xp, [("nn.relu", F32, "x0"), ("clip", F32, "x0", -1.0, 1.0), ("add", F32, "t0", "t1")], a, exact=True)


INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", INTS)
def test_integer_arithmetic_wraps_as_numpys(xp, dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, info.max, 0, 1, info.min, 7, info.max // 3], dtype)
    b = np.array([info.max, info.max, 1, info.min, info.max, info.min, 3, 5], dtype)
    program = [("add", dtype, "x0", "x1"), ("subtract", dtype, "x0", "x1"), ("multiply", dtype, "t0", "t1"),
               ("negative", dtype, "t2"), ("abs", dtype, "t3"), ("maximum", dtype, "t4", "x0"),
               ("minimum", dtype, "t5", "x1"), ("sign", dtype, "t3"), ("add", dtype, "t6", "t7"),
               ("nn.relu", dtype, "t8")]  # fmt: skip
    with np.errstate(all="ignore"):
        _check(xp, program, a, b)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_compare_and_logic_give_bool(xp, dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, 0, 1, info.max, 5, 5], dtype)
    b = np.array([0, 0, info.max, info.max, 4, 6], dtype)
    program = [("less", "bool", "x0", "x1"), ("greater_equal", "bool", "x0", "x1"), ("logical_or", "bool", "t0", "t1"),
               ("logical_and", "bool", "x0", "x1"), ("logical_not", "bool", "t3"), ("not_equal", "bool", "t2", "t4"),
               ("equal", "bool", "x0", "x1"), ("logical_or", "bool", "t5", "t6")]  # fmt: skip
    _check(xp, program, a, b)


@pytest.mark.parametrize("dst", ["int32", "int64"])
@pytest.mark.parametrize("src", [F32, F64])
def test_float_to_int_casts_as_numpy_does_here(xp, src, dst):
    x = np.array([*SPECIAL, 2.0**31, -(2.0**31), 2.0**31 - 128, 2.0**63, -(2.0**63), 1e19, -3.9, 3.9], src)
    with np.errstate(invalid="ignore"):
        _check(xp, [("astype", dst, "x0")], x)
        _check(xp, [("exp", src, "x0"), ("astype", dst, "t0")], x)


@pytest.mark.parametrize("dtype", INTS)
def test_integer_clip_by_float_bounds(xp, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 0, 1, 100, info.max - 1], dtype)
    _check(xp, [("clip", dtype, "x0", 0.0, 100.0)], x)
    _check(xp, [("clip", dtype, "x0", 1.5, 99.5)], x)


def test_casts_between_ints_floats_and_bool(xp):
    u = np.array([0, 1, 2**63, 2**64 - 1, 2**53 + 1, 12345678901234567], "uint64")
    _check(xp, [("astype", F32, "x0"), ("astype", F64, "x0"), ("astype", F32, "t1"), ("subtract", F32, "t0", "t2")], u)
    _check(xp, [("astype", "int8", "x0"), ("astype", "uint16", "x0"), ("astype", "int32", "t0"),
                ("astype", "int32", "t1"), ("add", "int32", "t2", "t3")], u)  # fmt: skip
    f = np.array([np.nan, 0.0, -0.0, 1e-45, -2.0], F32)
    _check(xp, [("astype", "bool", "x0"), ("logical_not", "bool", "t0")], f)
    b = np.array([True, False, True])
    _check(xp, [("astype", F32, "x0"), ("const", F32, 2.5), ("multiply", F32, "t0", "t1")], b)
    big = np.array([-(2**63), 2**63 - 1, -1, 0], "int64")
    _check(xp, [("const", "int64", -(2**63)), ("add", "int64", "x0", "t0"), ("astype", F64, "t1")], big)


def test_broadcasting_non_contiguous_inputs_and_empty(xp):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5)).astype(F32)
    bias = rng.standard_normal((4, 1)).astype(F32)
    strided = rng.standard_normal((5, 8)).astype(F32)[:, ::2].T  # (4, 5), not contiguous
    program = [("add", F32, "x0", "x1"), ("multiply", F32, "t0", "x2"), ("nn.silu", F32, "t1")]
    _check(xp, program, x, bias, strided)
    _check(xp, [("multiply", F32, "x0", "x1")], np.float32(3.0) * np.ones((), F32), x)
    _check(xp, [("nn.relu", F32, "x0")], np.zeros((0, 4), F32))


def test_a_program_it_does_not_cover_runs_on_the_numpy_runner(xp):
    # integer divide is not generated: the same answer comes from the unfused kernels
    a = np.array([7, -7, 5, 0], "int32")
    b = np.array([2, 2, -3, 4], "int32")
    program = (("floor_divide", "int32", "x0", "x1"), ("add", "int32", "t0", "x0"))
    assert not cc.covers(program, ["int32", "int32"])
    got, want, kernel = _run(xp, program, a, b)
    np.testing.assert_array_equal(got, want)
    assert kernel.kernels == {("int32", "int32"): None} and kernel.fallback is not None


def test_a_kernel_is_made_once_per_input_dtypes():
    if CXX is None:
        pytest.skip("no host C++ compiler")
    xp = FakeCupy()
    program = (("abs", F32, "x0"), ("astype", F32, "x1"), ("add", F32, "t0", "t1"))
    kernel = bind_kernel("fused_elementwise", "cuda", xp, {"program": program})
    out = np.empty(4, F32)
    for _ in range(3):
        kernel(np.full(4, -1.0, F32), np.arange(4, dtype="int64"), out)
    kernel(np.full(4, -1.0, F32), np.arange(4, dtype="uint8"), out)
    np.testing.assert_array_equal(out, [1, 2, 3, 4])
    made = kernel.kernels
    assert sorted(made) == [(F32, "int64"), (F32, "uint8")]
    assert [k.calls for k in made.values()] == [3, 1]
    assert all(isinstance(k, HostElementwiseKernel) and k.options == cc.FMAD_OFF for k in made.values())


def test_numpy_arrays_keep_the_cpu_kernels():
    assert cc.generated_kernel(np, (("nn.relu", F32, "x0"),)) is None


def test_every_body_compiles_for_the_gpu():
    if NVCC is None:
        pytest.skip("no nvcc")
    cases = [([(s[0], d if s[1] == F32 else s[1], *s[2:]) for s in p], [d]) for p in FLOAT_PROGRAMS for d in (F32, F64)]
    cases += [([("floor_divide", F64, "x0", "x1")], [F64, F64]), ([("clip", "int32", "x0", 0.0, 6.0)], ["int32"]),
              ([("astype", "int64", "x0")], [F32]), ([("astype", "bool", "x0")], ["uint16"]),
              ([("const", "int64", -(2**63)), ("add", "int64", "x0", "t0")], ["int64"]),
              ([("where", "int8", "x0", "x1", "x2")], ["bool", "int8", "int8"])]  # fmt: skip
    bodies = []
    for program, dtypes in cases:
        assert cc.covers(program, dtypes), program
        params = ", ".join(f"{d} x{i}" for i, d in enumerate(dtypes))
        bodies.append((params, f"{program[-1][1]} y", cc.kernel_body(program, dtypes)))
    errors = nvcc_check(bodies, cc.PRELUDE)
    assert errors == "", errors


def test_a_kernel_that_does_not_compile_falls_back_with_a_warning(monkeypatch, caplog):
    if CXX is None:
        pytest.skip("no host C++ compiler")
    monkeypatch.setattr(cc, "kernel_body", lambda program, dtypes: "y = no_such_function(x0);")
    program = (("nn.silu", F32, "x0"),)
    kernel = bind_kernel("fused_elementwise", "cuda", FakeCupy(), {"program": program})
    x = special(F32)
    got = np.empty_like(x)
    with caplog.at_level("WARNING", logger="hetvm.codegen"):
        kernel(x, got)
        kernel(x, got)  # no second try
    want = np.empty_like(x)
    with np.errstate(all="ignore"):
        run_numpy(np, program, [x], want)
    np.testing.assert_array_equal(got, want)
    assert kernel.kernels == {(F32,): None} and kernel.fallback is not None
    assert sum("failed to compile" in r.message for r in caplog.records) == 1
