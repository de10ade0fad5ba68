"""The separable pooling bodies against the NumPy kernels.

Each test compiles one segment (about a second) and writes its own source.
"""

import numpy as np
import pytest

from hetvm.kernels.registry import bind_kernel
from hetvm.kernels.segment_emit import Arr, emitter
from hetvm.kernels.segment_emit import pool as seg_pool
from hetvm.testing.segment_check import assert_segment_matches, compiled_calls, run_both, segment_of

pytest.importorskip("numba")

RNG = np.random.default_rng(5)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def attrs_of(k, s, p, d=(1, 1), ceil=False, include_pad=False, activation=None):
    attrs = {"pool_size": list(k), "strides": list(s), "padding": list(p), "dilation": list(d), "ceil_mode": ceil,
             "count_include_pad": include_pad, "layout": "NCHW", "out_layout": "NCHW"}  # fmt: skip
    if activation is not None:
        attrs["activation"] = activation
    return attrs


def _side(size, k, s, d, lo, hi, ceil):
    span = size + lo + hi - d * (k - 1) - 1
    return (-(-span // s) if ceil else span // s) + 1


def pool_call(op, x, k, s, p, d=(1, 1), ceil=False, include_pad=False, activation="relu"):
    n, c, h, w = x.shape
    out = np.empty((n, c, _side(h, k[0], s[0], d[0], p[0], p[2], ceil), _side(w, k[1], s[1], d[1], p[1], p[3], ceil)),
                   x.dtype)  # fmt: skip
    if op == "nn.max_pool2d_bias_act":
        return op, attrs_of(k, s, p, d, ceil, include_pad, activation), [x, rand(c, dtype=x.dtype), out]
    return op, attrs_of(k, s, p, d, ceil, include_pad), [x, out]


def test_the_specialised_body_takes_the_pools():
    specs = [Arr("float32", 4, (1, 3, 8, 8)), Arr("float32", 4, (1, 3, 4, 4))]
    attrs = attrs_of((3, 3), (2, 2), (1, 1, 1, 1))
    for op in ("nn.max_pool2d", "nn.avg_pool2d"):
        lines = seg_pool._pool(op, attrs, specs, ["a0", "a1"])
        assert lines is not None and any("vrow" in ln for ln in lines)
        assert emitter(op)(attrs, specs, ["a0", "a1"]) == lines
    biased = [specs[0], Arr("float32", 1, (3,)), specs[1]]
    assert emitter("nn.max_pool2d_bias_act")({**attrs, "activation": "relu"}, biased, ["a0", "a1", "a2"]) is not None
    assert seg_pool._pool("nn.max_pool2d_bias_act", {**attrs, "activation": "tanh"}, biased, ["a0", "a1", "a2"]) is None
    assert seg_pool._pool("nn.max_pool2d", {**attrs, "layout": "NHWC"}, specs, ["a0", "a1"]) is None
    ints = [Arr("int32", 4, (1, 3, 8, 8)), Arr("int32", 4, (1, 3, 4, 4))]
    assert seg_pool._pool("nn.max_pool2d", attrs, ints, ["a0", "a1"]) is None


@pytest.mark.parametrize("op", ["nn.max_pool2d", "nn.avg_pool2d", "nn.max_pool2d_bias_act"])
def test_pool_geometries_match_the_numpy_kernels(numba_on, op):
    x = rand(2, 5, 13, 12)  # a batch, odd channels, non-square
    x[0, 1, 2, 3] = np.nan
    x[1, 4, 6, 6] = -np.inf
    x[1, 0, 0, 0] = np.inf
    calls = [
        pool_call(op, x, (3, 3), (2, 2), (1, 1, 1, 1)),  # ShuffleNet's
        pool_call(op, x, (3, 3), (2, 2), (0, 0, 0, 0), ceil=True),  # SqueezeNet's: an overhanging last window
        pool_call(op, x, (2, 3), (1, 2), (1, 0, 0, 1), include_pad=True, activation="none"),
        pool_call(op, x, (3, 2), (3, 1), (1, 1, 2, 0), d=(2, 1), ceil=True, include_pad=True),
        pool_call(op, x, (2, 2), (2, 2), (3, 3, 3, 3)),  # windows wholly in padding
        pool_call(op, x, (13, 12), (1, 1), (0, 0, 0, 0)),  # one window, the whole image
        pool_call(op, x, (1, 1), (1, 1), (0, 0, 0, 0)),
    ]
    _, want, _ = run_both(calls[4:5])
    if op == "nn.max_pool2d":
        assert np.isneginf(want[-1][:, :, 0]).all()
    assert_segment_matches(calls)


def test_float64_an_empty_batch_and_non_contiguous_inputs(numba_on):
    base = rand(2, 6, 20, 18, dtype=np.float64)
    x = base[:, ::2, 1::2, ::2]  # (2, 3, 10, 9), strided in every axis
    calls = [pool_call("nn.max_pool2d_bias_act", x, (3, 3), (2, 2), (1, 1, 1, 1)),
             pool_call("nn.avg_pool2d", x, (3, 3), (1, 1), (1, 1, 1, 1)),
             pool_call("nn.max_pool2d", rand(0, 3, 9, 9, dtype=np.float64), (3, 3), (2, 2), (0, 0, 0, 0))]  # fmt: skip
    assert_segment_matches(calls, rtol=1e-12, atol=1e-12)


def test_an_output_inside_the_inputs_bytes_gets_the_pool_of_the_input(numba_on):
    x = rand(1, 2, 8, 8)
    out = x.reshape(-1)[64:96].reshape(1, 2, 4, 4)  # over channel 1 (the planner never plans it; a caller may)
    attrs = attrs_of((3, 3), (2, 2), (1, 1, 1, 1))
    want = np.empty((1, 2, 4, 4), np.float32)
    bind_kernel("nn.max_pool2d", "cpu", np, dict(attrs))(x.copy(), want)
    seg, arrays = segment_of([("nn.max_pool2d", attrs, [x, out])])
    seg(*arrays)
    assert compiled_calls(seg) == 1
    np.testing.assert_array_equal(out, want)
