"""Generated fused_elementwise kernels (Numba) against the NumPy runner, which
calls the unfused ops' kernels: NaN, inf, empty, broadcasting, integer and bool
dtypes, non-contiguous inputs. Skipped where Numba is not installed."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg
from hetvm.kernels.fused_program import run_numpy

from .fused_cases import F32, F64, FLOAT_PROGRAMS, special

pytest.importorskip("numba")
# compiling ~25 kernels takes 10-20 s: the slow suite (CI installs Numba for it)
pytestmark = pytest.mark.slow



@pytest.fixture(autouse=True)
def _numba_on(monkeypatch, tmp_path_factory):
    """The suite turns generated kernels off (compile time); these tests turn them on,
    with a kernel cache shared by the tests of one run."""
    monkeypatch.setenv("HETVM_NUMBA", "1")
    monkeypatch.setenv("HETVM_KERNEL_CACHE", str(tmp_path_factory.getbasetemp() / "kernels"))
    cg._checked = False  # not monkeypatched: undoing it could restore a stale "checked"
    yield
    cg._checked = False


def _kernel(program):
    k = cg.generated_kernel(np, tuple(tuple(s) for s in program))
    assert k is not None
    return k


def _check(program, *inputs, out_shape=None, out_dtype=None, exact=False):
    program = tuple(tuple(s) for s in program)
    shape = out_shape if out_shape is not None else np.broadcast_shapes(*(a.shape for a in inputs))
    dtype = out_dtype or program[-1][1]
    got, want = np.empty(shape, dtype), np.empty(shape, dtype)
    _kernel(program)(*inputs, got)
    with np.errstate(all="ignore"):
        run_numpy(np, program, inputs, want)
    if exact or np.dtype(dtype).kind in "biu":
        np.testing.assert_array_equal(got, want)
    else:
        # the NumPy erf is an approximation good to 1.5e-7 (absolute), the generated one libm's
        atol = 1e-5 if any(s[0] in ("erf", "nn.gelu") for s in program) else 1e-7
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=atol, equal_nan=True)
    return got




@pytest.mark.parametrize("program", FLOAT_PROGRAMS, ids=lambda p: "+".join(s[0] for s in p))
def test_float_programs_match_numpy_on_special_values(program):
    _check(program, special())


def test_float64_programs_match():
    _check([("sigmoid", F64, "x0"), ("multiply", F64, "t0", "x0"), ("nn.gelu", F64, "t1")], special(F64))


def test_broadcasting_and_scalars():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(F32)
    g = rng.standard_normal((1, 3, 1, 1)).astype(F32)  # a per-channel gate
    row = rng.standard_normal((5,)).astype(F32)
    s = np.array(2.5, F32)  # 0-d
    program = [("sigmoid", F32, "x1"), ("multiply", F32, "x0", "t0"), ("add", F32, "t1", "x2"),
               ("multiply", F32, "t2", "x3")]  # fmt: skip
    _check(program, x, g, row, s)
    # the output broadcast from inputs that are all smaller than it
    _check([("add", F32, "x0", "x1")], rng.standard_normal((3, 1)).astype(F32), row)


def test_non_contiguous_inputs_and_output():
    rng = np.random.default_rng(2)
    base = rng.standard_normal((6, 8)).astype(F32)
    x = base.T  # Fortran order
    y = base[::2, ::2]  # strided
    got = np.empty((8, 6), F32)[:, :]
    _kernel([("nn.silu", F32, "x0")])(x, got)
    np.testing.assert_allclose(got, x / (1 + np.exp(-x)), rtol=1e-6)
    _check([("add", F32, "x0", "x1")], y, y.T.copy().T)
    out = np.zeros((3, 8), F32)[:, ::2]
    _kernel([("multiply", F32, "x0", "x0")])(y, out)
    np.testing.assert_allclose(out, y * y)


def test_empty_tensors():
    _check([("nn.silu", F32, "x0")], np.zeros((0, 3), F32))
    _check([("add", F32, "x0", "x1")], np.zeros((0, 3), F32), np.ones((1, 3), F32))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_programs_wrap_as_numpy_does(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, -1 if info.min else 2, info.max, info.min, 7, 100 % (info.max + 1)], dtype)
    program = [("multiply", dtype, "x0", "x0"), ("const", dtype, 3), ("add", dtype, "t0", "t1"),
               ("maximum", dtype, "t2", "x0"), ("abs", dtype, "t3"), ("greater", "bool", "t4", "x0"),
               ("logical_not", "bool", "t5"), ("astype", dtype, "t6"), ("subtract", dtype, "t7", "x0")]  # fmt: skip
    _check(program, x)


@pytest.mark.parametrize("dtype", ["int16", "int32", "int64"])
def test_a_compare_of_a_wrapped_signed_result_is_not_folded(dtype):
    # LLVM may fold ``x + 1 > x`` to true, ``-x < 0`` to ``x > 0`` and ``a * b == 0`` with a, b
    # nonzero to false for signed arithmetic it is told never overflows; NumPy wraps
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, -2, 0, 5, info.min + 1, info.max - 1], dtype)
    y = np.array([1, -2, info.min, 3, -1, -1, 2], dtype)
    for op in ("add", "subtract", "multiply"):
        _check([(op, dtype, "x0", "x1"), ("greater", "bool", "t0", "x0")], x, y)
        _check([(op, dtype, "x0", "x1"), ("logical_not", "bool", "t0")], x, y)
        _check([(op, dtype, "x0", "x1"), ("less", "bool", "t0", "x1")], x, y)
    _check([("negative", dtype, "x0"), ("less", "bool", "t0", "x0")], x)
    _check([("negative", dtype, "x0"), ("const", dtype, 0), ("less", "bool", "t0", "t1")], x)
    mixed = x.astype(np.int64)  # an int64 operand of a narrower step: NumPy's promotion decides the dtype
    _check([("add", "int64", "x0", "x1"), ("greater", "bool", "t0", "x0")], mixed, y.astype(np.int64))


def test_casts_and_bool_logic():
    x = special()
    program = [("astype", F64, "x0"), ("astype", F32, "t0"), ("greater", "bool", "t1", "x0"),
               ("equal", "bool", "x0", "x0"), ("logical_or", "bool", "t2", "t3"),
               ("logical_and", "bool", "t4", "t3"), ("astype", "int32", "t5")]  # fmt: skip
    _check(program, x)
    ints = np.arange(-5, 5, dtype=np.int64)
    _check([("astype", F32, "x0"), ("nn.silu", F32, "t0")], ints)


def test_uncovered_steps_run_on_the_numpy_runner():
    ints = np.array([7, -7, 3, 0], np.int32)
    div = [("divide", "int32", "x0", "x1")]  # truncating integer division: not generated
    assert not cg.covers(div, ["int32", "int32"])
    got = _check(div, ints, np.array([2, 2, -2, 5], np.int32))
    np.testing.assert_array_equal(got, [3, -3, -1, 0])
    to_int = [("astype", "int32", "x0")]  # float to int: not generated
    assert not cg.covers(to_int, [F32])
    _check(to_int, np.array([1.5, -2.5, 3.0], F32))


def test_integer_clip_casts_of_steps_to_int_and_bool_match_the_numpy_runner():
    if cg.float_to_int("v", "int64") is None:
        pytest.skip("NumPy's invalid cast gives several values on this machine: not generated")
    big = np.array([2**53 + 1, -(2**53) - 3, -7, 0, 3, 2**62 + 511, -(2**63), 2**63 - 1], np.int64)
    _check([("clip", "int64", "x0", -9.3e18, 9.3e18)], big)  # in float64, as NumPy's clip by floats
    _check([("negative", "int32", "x0"), ("clip", "int32", "t0", -1.5, 2.5)], np.arange(-4, 5, dtype=np.int32))
    x = special()
    _check([("log", F32, "x0"), ("astype", "int64", "t0")], x)  # -inf, NaN and out of range
    _check([("astype", F64, "x0"), ("astype", "int32", "t0")], x * np.float32(1e9))
    _check([("sqrt", F32, "x0"), ("astype", "bool", "t0")], x)


def test_mismatched_shapes_are_an_error_not_a_broadcast_into_the_output():
    k = _kernel([("add", F32, "x0", "x1")])
    with pytest.raises(ValueError, match="could not be broadcast"):
        k(np.ones((2, 2), F32), np.ones((3, 2), F32), np.empty((3, 2), F32))
    with pytest.raises(ValueError, match="could not be broadcast"):
        k(np.ones((3, 1), F32), np.ones((1, 2), F32), np.empty((3, 3), F32))


def test_large_outputs_take_the_parallel_variant():
    x = np.linspace(-8, 8, cg.PARALLEL_MIN + 3, dtype=F32).reshape(1, -1)
    _check([("nn.silu", F32, "x0")], x)


def test_the_source_is_generated_from_the_table_only():
    src = cg.kernel_source([("const", F32, 0.25), ("multiply", F32, "x0", "t0"), ("clip", F32, "t1", -1.0, 1.0)],
                           1, 1, [[False]])  # fmt: skip
    assert "np.float32(0.25)" in src and "np.float32(-1.0)" in src
    assert "def serial(a0, out):" in src and "numba.prange" in src


def test_a_compiler_failure_falls_back_to_the_numpy_runner(monkeypatch):
    k = _kernel([("add", F32, "x0", "x1"), ("nn.silu", F32, "t0")])

    class Broken:
        def serial(self, *args):
            raise cg._numba.core.errors.TypingError("injected")

        parallel = serial

    monkeypatch.setattr(k, "plan", lambda shapes, out_shape, dtypes=(): ((2,), [(2,), (2,)], Broken()))
    x = np.array([1.0, -2.0], F32)
    got = np.empty(2, F32)
    k(x, x, got)
    np.testing.assert_allclose(got, 2 * x / (1 + np.exp(-2 * x)), rtol=1e-6)


def test_a_build_compiles_its_kernels_and_says_how_long():
    import hetvm
    import hetvm.op as op
    from hetvm.testing.ir_query import one_input_module

    def body(bb, x):
        return bb.emit(op.multiply(x, bb.emit(op.sigmoid(x))))

    exe = hetvm.build(one_input_module(body, (4, 5)))
    info = exe.metadata["generated_kernels"]
    assert info["generator"] == "numba" and info["kernels"] == 1 and info["compile_seconds"] >= 0
    x = np.linspace(-3, 3, 20, dtype=F32).reshape(4, 5)
    np.testing.assert_allclose(hetvm.VirtualMachine(exe)["main"](x).numpy(), x / (1 + np.exp(-x)), rtol=1e-6)
