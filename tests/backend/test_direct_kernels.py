"""The build compiles the direct Numba loops its calls take (``hetvm/backend/
direct_kernels.py``, ``generated_kernels.py``) before any call."""

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.ir import expr as E
from hetvm.kernels import codegen_numba
from hetvm.testing.ir_query import one_input_module

RNG = np.random.default_rng(0)
W = RNG.standard_normal((8, 1, 3, 3)).astype("float32")
B = RNG.standard_normal((8,)).astype("float32")


@pytest.fixture
def cold_numba_cache(monkeypatch, tmp_path):
    """Numba on, and every loop loaded afresh from this test's own (empty) kernel
    cache directory; tests/conftest.py puts the switch back after the test."""
    pytest.importorskip("numba")
    monkeypatch.setenv("HETVM_NUMBA", "1")
    monkeypatch.setenv("HETVM_KERNEL_CACHE", str(tmp_path))
    codegen_numba._checked = False
    monkeypatch.setattr(codegen_numba, "_MODULES", {})
    monkeypatch.setattr(codegen_numba, "_PACKAGE_MODULES", {})
    return tmp_path


def _module(pool: str = "max"):
    """Depthwise 3x3 convolution, bias, ReLU, then a 2x2/2 pool."""

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, E.const(W), padding=(1, 1), groups=8))
        y = bb.emit(op.nn.relu(bb.emit(op.add(y, E.const(B.reshape(1, 8, 1, 1))))))
        pooled = op.nn.max_pool2d if pool == "max" else op.nn.avg_pool2d
        return bb.emit(pooled(y, pool_size=(2, 2), strides=(2, 2)))

    return one_input_module(body, (1, 8, 16, 16))


def _reference(x, pool: str):
    pad = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    y = np.zeros_like(x)
    for ky in range(3):
        for kx in range(3):
            y += W[None, :, 0, ky, kx, None, None] * pad[:, :, ky : ky + 16, kx : kx + 16]
    y = np.maximum(y + B[None, :, None, None], 0)
    windows = y.reshape(1, 8, 8, 2, 8, 2)
    return windows.max(axis=(3, 5)) if pool == "max" else windows.mean(axis=(3, 5))


# each case compiles the two loops cold (about 3 s): the average's is slow
@pytest.mark.parametrize("pool", ["max", pytest.param("avg", marks=pytest.mark.slow)])
def test_a_build_compiles_the_direct_loops_before_any_call(cold_numba_cache, pool):
    from hetvm.kernels import depthwise_direct, pool_direct

    before = codegen_numba.compile_stats()
    exe = hetvm.build(_module(pool))
    info = exe.metadata["generated_kernels"]
    assert info["direct"] == ["depthwise float32", f"{pool}_pool float32"]
    assert info["kernels"] == 2 and info["compile_seconds"] > 0
    after = codegen_numba.compile_stats()
    assert after["kernels"] - before["kernels"] == 2
    assert after["compile_seconds"] > before["compile_seconds"]
    # compiled with the argument types the run passes: the call adds no signature
    conv, pooling = depthwise_direct._loops().serial, pool_direct._loops().pool
    signatures = (len(conv.signatures), len(pooling.signatures))
    assert min(signatures) >= 1
    x = RNG.standard_normal((1, 8, 16, 16)).astype("float32")
    got = hetvm.VirtualMachine(exe)["main"](x).numpy()
    np.testing.assert_allclose(got, _reference(x, pool), rtol=1e-5, atol=1e-5)
    assert (len(conv.signatures), len(pooling.signatures)) == signatures
    # Numba's cache of the loops lies in HETVM_KERNEL_CACHE
    assert any(p.suffix == ".nbi" for p in (cold_numba_cache / "__pycache__").iterdir())


def test_with_numba_off_a_build_compiles_nothing(monkeypatch):
    monkeypatch.setenv("HETVM_NUMBA", "0")
    codegen_numba._checked = False
    before = codegen_numba.compile_stats()
    exe = hetvm.build(_module())
    assert "generated_kernels" not in exe.metadata
    assert codegen_numba.compile_stats() == before
    x = RNG.standard_normal((1, 8, 16, 16)).astype("float32")
    np.testing.assert_allclose(hetvm.VirtualMachine(exe)["main"](x).numpy(), _reference(x, "max"),
                               rtol=1e-5, atol=1e-5)  # fmt: skip


def _arg(shape, dtype="float32"):
    from hetvm.ir import struct_info as S

    return E.Var("t", struct_info=S.TensorStructInfo(shape, dtype))


def test_which_loops_a_call_takes():
    from hetvm.backend.direct_kernels import loops_of

    x, w, b, out = _arg((1, 8, 16, 16)), _arg((8, 1, 3, 3)), _arg((8,)), _arg((1, 8, 16, 16))
    depthwise = {"groups": 8, "padding": [1, 1, 1, 1]}
    assert loops_of("kernel.nn.conv2d", depthwise, [x, w, out], 1 << 15, True) == [("depthwise", "float32", False)]
    assert loops_of("kernel.nn.conv2d", depthwise, [x, w, out], 64, True) == [("depthwise", "float32", True)]
    assert loops_of("kernel.nn.conv2d", depthwise, [x, w, out], 64, False) == [("depthwise", "float32", False)]
    # the bias and activation fused into the depthwise loop; a residual adds the epilogue
    assert loops_of("kernel.nn.conv2d_bias_act", depthwise, [x, w, b, out], 1 << 15, True) == [
        ("depthwise", "float32", False)
    ]
    assert loops_of("kernel.nn.conv2d_bias_add_act", depthwise, [x, w, b, out, out], 1 << 15, True) == [
        ("depthwise", "float32", False),
        ("epilogue", "float32", False),
    ]
    dense = _arg((8, 8, 3, 3))
    assert loops_of("kernel.nn.conv2d", {"padding": [1, 1, 1, 1]}, [x, dense, out], 64, True) == []
    assert loops_of("kernel.nn.conv2d_bias_act", {}, [x, dense, b, out], 64, True) == [("epilogue", "float32", False)]
    pointwise = _arg((8, 1, 1, 1))
    assert loops_of("kernel.nn.conv2d", {"groups": 8}, [x, pointwise, out], 64, True) == []
    assert loops_of("kernel.nn.avg_pool2d", {}, [x, out], 64, True) == [("pool", "float32", False)]
    assert loops_of("kernel.nn.max_pool2d", {}, [_arg((1, 8, 16, 16), "float64"), _arg((1, 8, 8, 8), "float64")],
                    64, True) == [("pool", "float64", True)]  # fmt: skip
    # one window over the whole input is a reduction, not the loop (a global average)
    whole = {"pool_size": [16, 16]}
    assert loops_of("kernel.nn.avg_pool2d", whole, [x, _arg((1, 8, 1, 1))], 64, True) == []
    assert loops_of("kernel.nn.avg_pool2d", {**whole, "padding": [1, 1, 1, 1]}, [x, _arg((1, 8, 3, 3))],
                    64, True) == [("pool", "float32", False)]  # fmt: skip
    ints = _arg((1, 8, 16, 16), "int32")
    assert loops_of("kernel.nn.max_pool2d", {}, [ints, ints], 64, True) == []
    assert loops_of("kernel.nn.conv2d", depthwise, [ints, _arg((8, 1, 3, 3), "int32"), ints], 64, True) == []


G = RNG.standard_normal(64).astype("float32")


def _norm_module(shape=(2, 9, 64)):
    """Layer norm over the last axis (constant gamma / beta), then a softmax."""

    def body(bb, x):
        y = bb.emit(op.nn.layer_norm(x, E.const(G), E.const(G[::-1].copy()), axes=-1))
        return bb.emit(op.nn.softmax(y, axis=-1))

    return one_input_module(body, shape)


def test_a_build_compiles_the_layer_norm_and_softmax_loops(cold_numba_cache):
    from hetvm.kernels import norm_direct

    exe = hetvm.build(_norm_module())
    assert exe.metadata["generated_kernels"]["direct"] == ["layer_norm float32", "softmax float32"]
    loops = norm_direct._loops()
    signatures = (len(loops.layer_norm32.signatures), len(loops.softmax32.signatures))
    assert signatures == (1, 1)
    x = RNG.standard_normal((2, 9, 64)).astype("float32")
    got = hetvm.VirtualMachine(exe)["main"](x).numpy()
    m = x.mean(-1, keepdims=True)
    y = (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * G + G[::-1]
    e = np.exp(y - y.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert (len(loops.layer_norm32.signatures), len(loops.softmax32.signatures)) == signatures


def test_a_build_compiles_the_threaded_norm_loops_of_large_float32_calls(cold_numba_cache):
    """A float32 call of a parallel loop's size: both loops, so the run compiles
    neither (serial when the budget says so, parallel otherwise)."""
    from hetvm.kernels import codegen_numba, norm_direct

    exe = hetvm.build(_norm_module((2, 512, 64)))
    threaded = codegen_numba._numba.config.NUMBA_NUM_THREADS > 1
    want = ["layer_norm+parallel float32", "softmax+parallel float32"] if threaded else [
        "layer_norm float32", "softmax float32"]
    assert exe.metadata["generated_kernels"]["direct"] == want
    loops = norm_direct._loops()
    fns = (loops.layer_norm32, loops.softmax32, loops.layer_norm32_parallel, loops.softmax32_parallel)
    counts = [len(f.signatures) for f in fns]
    assert counts == ([1, 1, 1, 1] if threaded else [1, 1, 0, 0])
    x = RNG.standard_normal((2, 512, 64)).astype("float32")
    hetvm.VirtualMachine(exe)["main"](x)
    assert [len(f.signatures) for f in fns] == counts


def test_a_large_float64_call_keeps_numpy_kernels(cold_numba_cache):
    def body(bb, x):
        return bb.emit(op.nn.softmax(x, axis=-1))

    assert "generated_kernels" not in hetvm.build(one_input_module(body, (2, 64, 64), "float64")).metadata


def test_which_norm_loops_a_call_takes():
    from hetvm.backend.direct_kernels import loops_of

    x, g = _arg((2, 9, 64)), _arg((64,))
    ln = "kernel.nn.layer_norm"
    assert loops_of(ln, {"axes": (2,)}, [x, g, g, x], 64, True) == [("layer_norm", "float32", False)]
    assert loops_of(ln, {"axes": (-1,)}, [x, g, g, x], 64, True) == [("layer_norm", "float32", False)]
    assert loops_of(ln, {"axes": (1, 2)}, [x, _arg((9, 64)), _arg((9, 64)), x], 64, True) == [
        ("layer_norm", "float32", False)
    ]
    assert loops_of(ln, {"axes": (1,)}, [x, _arg((9,)), _arg((9,)), x], 64, True) == []
    g64 = _arg((64,), "float64")
    assert loops_of(ln, {"axes": (2,)}, [x, g64, g, x], 64, True) == []
    assert loops_of(ln, {"axes": (2,), "scale": False}, [x, g64, g, x], 64, True) == [
        ("layer_norm", "float32", False)
    ]
    half = _arg((2, 9, 64), "float16")
    assert loops_of(ln, {"axes": (2,)}, [half, _arg((64,), "float16"), _arg((64,), "float16"), half], 64, True) == []
    sm = "kernel.nn.softmax"
    x64 = _arg((2, 9, 64), "float64")
    assert loops_of(sm, {"axis": -1}, [x64, x64], 64, True) == [("softmax", "float64", False)]
    assert loops_of(sm, {"axis": 1}, [x, x], 64, True) == []
    big64 = _arg((2, 64, 64), "float64")  # float64 above norm_direct.SMALL: NumPy's passes
    assert loops_of(sm, {"axis": -1}, [big64, big64], 64, True) == []
    big = _arg((2, 128, 128))  # float32 at any size, threaded from norm_direct.parallel_min(kind)
    assert loops_of(sm, {"axis": -1}, [big, big], 64, True) == [("softmax", "float32", True)]
    assert loops_of(sm, {"axis": -1}, [big, big], 64, False) == [("softmax", "float32", False)]
    assert loops_of(ln, {"axes": (-1,)}, [big, _arg((128,)), _arg((128,)), big], 64, True) == [
        ("layer_norm", "float32", True)]
    mid = _arg((2, 64, 192))  # 24,576 elements: softmax threads, layer norm not yet
    assert loops_of(sm, {"axis": -1}, [mid, mid], 64, True) == [("softmax", "float32", True)]
    assert loops_of(ln, {"axes": (-1,)}, [mid, _arg((192,)), _arg((192,)), mid], 64, True) == [
        ("layer_norm", "float32", False)]
    from hetvm.ir import prim as P

    seq = _arg((1, P.PrimVar("seq", "int64"), 64))  # a symbolic length may be small or large: both
    assert loops_of(sm, {"axis": -1}, [seq, seq], 64, True) == [("softmax", "float32", True)]
    seq64 = _arg((1, P.PrimVar("seq", "int64"), 64), "float64")  # float64: serial only
    assert loops_of(sm, {"axis": -1}, [seq64, seq64], 64, True) == [("softmax", "float64", False)]
