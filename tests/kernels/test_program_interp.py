"""The interpreter of small fused programs (hetvm/kernels/program_interp.py):
which calls take it, and that each op computes what the NumPy runner and the
program's own generated kernel compute (NaN, inf, broadcasting, strided
inputs and outputs, empty outputs)."""

import numpy as np
import pytest

from hetvm.kernels import codegen_numba as cg
from hetvm.kernels import program_interp as pi
from hetvm.kernels.fused_program import STEP_OPS, run_numpy

F32, F64 = "float32", "float64"
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e30, 88.0, -104.0, 0.5, -2.5]


def _step(op, dtype, *refs):
    n_refs, n_params, _ = STEP_OPS[op]
    params = {"clip": (-1.5, 2.0), "nn.leakyrelu": (0.1,), "const": (3.25,)}.get(op, ())
    return (op, dtype, *(refs[:n_refs] if op != "const" else ()), *params)


def test_covers_one_float_dtype_without_compares_casts_or_where():
    assert pi.covers(((("add", F32, "x0", "x1")),), [F32, F32])
    assert pi.covers((("const", F64, 2.0), ("multiply", F64, "x0", "t0")), [F64])
    assert not pi.covers((("add", F32, "x0", "x1"),), [F32, F64])  # mixed inputs
    assert not pi.covers((("add", "int32", "x0", "x1"),), ["int32", "int32"])
    assert not pi.covers((("less", "bool", "x0", "x1"),), [F32, F32])
    assert not pi.covers((("astype", F64, "x0"),), [F32])
    assert not pi.covers((("where", F32, "x0", "x1", "x2"),), ["bool", F32, F32])
    assert not pi.covers((("add", F32, "x0", "x0"),), [])


def test_encode_numbers_rows_inputs_first_then_steps():
    program = (("clip", F32, "x1", -1.0, 6.0), ("const", F32, 0.5), ("multiply", F32, "t0", "t1"))
    codes, params = pi.encode(program, 2)
    ops = [pi.OPS[c] for c in codes[:, 0]]
    assert ops == ["clip", "const", "multiply"]
    assert codes[0, 1] == 1 and codes[2, 1] == 2 and codes[2, 2] == 3
    np.testing.assert_array_equal(params, [[-1.0, 6.0], [0.5, 0.0], [0.0, 0.0]])


def test_every_op_has_a_branch_in_the_source():
    text = pi.interpreter_source(F64)
    for code, op in enumerate(pi.OPS):
        assert f"op == {code}:  # {op}" in text


pytest.importorskip("numba")


@pytest.fixture
def auto_mode(monkeypatch, tmp_path_factory):
    """``auto``, the default users get (the suite turns generated kernels off)."""
    monkeypatch.setenv("HETVM_NUMBA", "auto")
    monkeypatch.setenv("HETVM_KERNEL_CACHE", str(tmp_path_factory.getbasetemp() / "kernels"))
    cg._checked = False
    yield
    cg._checked = False


def _special(dtype, n=48, seed=0):
    x = (np.random.default_rng(seed).standard_normal(n) * 3).astype(dtype)
    x[: len(SPECIAL)] = SPECIAL
    return x


def _run(program, *inputs, out=None):
    program = tuple(tuple(s) for s in program)
    shape = np.broadcast_shapes(*(a.shape for a in inputs))
    got = np.empty(shape, program[-1][1]) if out is None else out
    kernel = cg.generated_kernel(np, program)
    assert kernel is not None
    kernel(*inputs, got)
    return kernel, got


def _numpy(program, *inputs):
    want = np.empty(np.broadcast_shapes(*(a.shape for a in inputs)), program[-1][1])
    with np.errstate(all="ignore"):
        run_numpy(np, tuple(tuple(s) for s in program), inputs, want)
    return want


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("op", pi.OPS)
def test_each_op_matches_the_numpy_runner(auto_mode, op, dtype):
    x, y = _special(dtype), _special(dtype, seed=1)[::-1].copy()
    program = (_step(op, dtype, "x0", "x1"), ("add", dtype, "t0", "x1"))
    with np.errstate(all="ignore"):
        kernel, got = _run(program, x, y)
    assert isinstance(next(iter(kernel.plans.values())), cg._Interpreted)
    atol = 1e-5 if op in ("erf", "nn.gelu") else 1e-7
    np.testing.assert_allclose(got, _numpy(program, x, y), rtol=2e-6, atol=atol, equal_nan=True)


def test_broadcast_strided_inputs_and_a_strided_output(auto_mode):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((6, 8)).astype(F32)[:, ::2]  # strided, (6, 4)
    b = rng.standard_normal((1, 4)).astype(F32)
    c = rng.standard_normal((6, 1)).astype(F32)
    program = (("multiply", F32, "x0", "x1"), ("subtract", F32, "t0", "x2"), ("sigmoid", F32, "t1"))
    out = np.zeros((6, 8), F32)[:, 1::2]
    _run(program, a, b, c, out=out)
    np.testing.assert_allclose(out, _numpy(program, a, b, c), rtol=2e-6, atol=1e-7)


def test_an_input_read_twice_and_constants(auto_mode):
    x = _special(F64)
    program = (("const", F64, 2.0), ("multiply", F64, "x0", "x0"), ("divide", F64, "t1", "t0"), ("maximum", F64, "t2", "x0"))
    _, got = _run(program, x)
    np.testing.assert_allclose(got, _numpy(program, x), rtol=1e-15, equal_nan=True)


def test_an_empty_output_is_left_alone(auto_mode):
    x = np.empty((0, 3), F32)
    _, got = _run((("nn.relu", F32, "x0"), ("add", F32, "t0", "x0")), x)
    assert got.shape == (0, 3)


def test_large_outputs_and_other_modes_keep_the_programs_own_kernels(auto_mode, monkeypatch):
    program = (("nn.relu", F32, "x0"), ("multiply", F32, "t0", "x0"))
    big = np.ones(pi.SMALL, F32)
    kernel, _ = _run(program, big)
    assert not isinstance(kernel.plans[((big.shape,), big.shape)], cg._Interpreted)
    monkeypatch.setenv("HETVM_NUMBA", "1")
    kernel = cg._Kernel(program)
    small = np.ones(8, F32)
    kernel(small, np.empty(8, F32))
    assert not isinstance(kernel.plans[((small.shape,), small.shape)], cg._Interpreted)


def test_a_build_loads_one_interpreter_for_its_small_programs(auto_mode):
    import hetvm
    import hetvm.op as op
    from hetvm.testing.ir_query import one_input_module

    def body(bb, x):
        a = bb.emit(op.multiply(x, bb.emit(op.sigmoid(x))))
        b = bb.emit(op.permute_dims(bb.emit(op.add(a, x))))  # not fused: two groups
        c = bb.emit(op.tanh(bb.emit(op.multiply(b, b))))
        return bb.emit(op.subtract(c, b))

    exe = hetvm.build(one_input_module(body, (4, 5)))
    info = exe.metadata["generated_kernels"]
    assert info["generator"] == "numba" and info["kernels"] == 1 and info["interpreted"] == 2
    x = np.linspace(-3, 3, 20, dtype=F32).reshape(4, 5)
    b = (x / (1 + np.exp(-x)) + x).T
    want = np.tanh(b * b) - b
    np.testing.assert_allclose(hetvm.VirtualMachine(exe)["main"](x).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [F32, F64])
def test_every_op_gives_the_bits_of_the_programs_own_kernel(auto_mode, monkeypatch, dtype):
    """The interpreter's branches are written from the generated kernels' templates."""
    x, y = _special(dtype), _special(dtype, seed=1)
    steps, prev = [], "x0"
    for op in pi.OPS:
        steps.append(_step(op, dtype, prev, "x1"))
        # keep values in range: each op reads the previous one squashed by tanh
        steps.append(("tanh", dtype, f"t{len(steps) - 1}"))
        prev = f"t{len(steps) - 1}"
    program = tuple(steps)
    with np.errstate(all="ignore"):
        kernel, interp = _run(program, x, y)
        assert isinstance(next(iter(kernel.plans.values())), cg._Interpreted)
        monkeypatch.setenv("HETVM_NUMBA", "1")
        own = np.empty_like(interp)
        cg._Kernel(program)(x, y, own)
    np.testing.assert_array_equal(interp, own)
