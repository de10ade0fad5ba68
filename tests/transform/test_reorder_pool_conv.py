"""ReorderPoolConv: an average pool and a 1x1 convolution swap places where the
other order costs less, with the same result."""

import numpy as np
import pytest

import hetvm.op as op
from hetvm.ir import const
from hetvm.ir.structural import assert_structural_equal
from hetvm.pipeline import default_pipeline, target_vdevice
from hetvm.testing.ir_query import bindings, build_and_run, one_input_module, op_calls, op_names
from hetvm.transform import ReorderPoolConv

RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _reordered(mod):
    out = ReorderPoolConv()(mod)
    assert_structural_equal(ReorderPoolConv()(out), out)  # idempotent: never swaps back
    return out


def _same_result(mod, x):
    got = build_and_run(mod, x)
    want = build_and_run(mod, x, disabled=["ReorderPoolConv"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_pool_moves_before_a_convolution_it_shrinks():
    """DenseNet's transition: 1x1 conv at full size, then a 2x2 stride-2 pool."""
    w = _rand(64, 128, 1, 1)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        return op.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2))

    mod = one_input_module(body, (2, 128, 16, 16))
    out = _reordered(mod)
    assert op_names(out) == ["nn.avg_pool2d", "nn.conv2d"]
    pool, conv = op_calls(out)
    assert pool.struct_info.shape[1].value == 128 and conv.args[0] is bindings(out)[0].var
    assert conv.struct_info.shape == op_calls(mod)[-1].struct_info.shape
    assert bindings(out)[-1].var.name_hint == bindings(mod)[-1].var.name_hint
    _same_result(mod, _rand(2, 128, 16, 16))


@pytest.mark.parametrize("count_include_pad", [False, True])
@pytest.mark.parametrize("ceil_mode", [False, True])
def test_convolution_moves_before_a_pool_of_more_channels(count_include_pad, ceil_mode):
    """Inception's pool branch: a 3x3 "same" pool of many channels, then a 1x1
    projection to few, then bias and relu (which stay after the pair). The
    borders (padding counted or not, ceil_mode's overhang) give the same result."""
    w, b = _rand(4, 24, 1, 1), _rand(1, 4, 1, 1)

    def body(bb, x):
        p = bb.emit(op.nn.avg_pool2d(x, pool_size=(3, 3), strides=(2, 2) if ceil_mode else (1, 1), padding=1,
                                     ceil_mode=ceil_mode, count_include_pad=count_include_pad))  # fmt: skip
        y = bb.emit(op.nn.conv2d(p, const(w)))
        z = bb.emit(op.add(y, const(b)))
        return op.nn.relu(z)

    mod = one_input_module(body, (1, 24, 8, 8))
    out = _reordered(mod)
    assert op_names(out) == ["nn.conv2d", "nn.avg_pool2d", "add", "nn.relu"]
    assert op_calls(out)[1].attrs["count_include_pad"] == count_include_pad
    _same_result(mod, _rand(1, 24, 8, 8))


def test_grouped_convolution_is_swapped_too():
    w = _rand(128, 128, 1, 1)  # 2 groups of 128 -> 64

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), groups=2))
        return op.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2))

    mod = one_input_module(body, (1, 256, 16, 16))
    assert op_names(_reordered(mod)) == ["nn.avg_pool2d", "nn.conv2d"]
    _same_result(mod, _rand(1, 256, 16, 16))


def _kept(mod):
    out = ReorderPoolConv()(mod)
    assert_structural_equal(out, mod)


@pytest.mark.parametrize("w_shape,kwargs", [
    ((8, 16, 3, 3), {"padding": 1}),  # not 1x1
    ((8, 16, 1, 1), {"strides": (2, 2)}),  # strided
    ((8, 16, 1, 1), {"padding": 1}),  # padded
    ((8, 16, 1, 1), {"dilation": (2, 2)}),  # dilated: moot at 1x1, but left alone
])  # fmt: skip
def test_only_pointwise_convolutions_commute(w_shape, kwargs):
    w = _rand(*w_shape)

    def body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w), **kwargs))
        return op.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2))

    _kept(one_input_module(body, (1, 16, 12, 12)))


def test_a_max_pool_or_a_shared_intermediate_is_kept():
    w = _rand(8, 16, 1, 1)

    def max_body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        return op.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2))

    def shared_body(bb, x):
        y = bb.emit(op.nn.conv2d(x, const(w)))
        z = bb.emit(op.nn.avg_pool2d(y, pool_size=(2, 2), strides=(2, 2)))
        return op.add(z, op.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2)))

    _kept(one_input_module(max_body, (1, 16, 12, 12)))
    _kept(one_input_module(shared_body, (1, 16, 12, 12)))


def test_the_cheaper_order_is_kept():
    """A stride-1 pool of 4 channels before a 1x1 expansion to 32: convolving first
    would pool 8x the channels at the same size."""
    w = _rand(32, 4, 1, 1)

    def body(bb, x):
        p = bb.emit(op.nn.avg_pool2d(x, pool_size=(3, 3), padding=1))
        return op.nn.conv2d(p, const(w))

    _kept(one_input_module(body, (1, 4, 16, 16)))


def test_in_default_pipeline_before_fusion():
    host = target_vdevice("llvm")
    names = [p.name for p in default_pipeline(host, host).passes]
    assert names.index("FoldScaleAxis") < names.index("ReorderPoolConv") < names.index("FuseConvEpilogue")


@pytest.mark.parametrize("seed", range(12))
def test_any_swapped_pair_computes_the_same(monkeypatch, seed):
    """Every pool geometry (kernel, stride, padding, dilation, ceil_mode, counted
    padding), batch and group count, both orders, with the swap forced."""
    from hetvm.transform import reorder_pool_conv

    monkeypatch.setattr(reorder_pool_conv, "_GAIN", 1e18)  # always swap a matching pair
    rng = np.random.default_rng(seed)
    groups = int(rng.choice([1, 2]))
    c, o = 4 * groups, 2 * groups * int(rng.integers(1, 4))
    n, h, w_ = int(rng.integers(1, 3)), int(rng.integers(3, 9)), int(rng.integers(3, 9))
    k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    pool = dict(pool_size=k, strides=(int(rng.integers(1, 3)), int(rng.integers(1, 3))),
                padding=tuple(int(rng.integers(0, min(k) // 2 + 1)) for _ in range(4)),
                dilation=(int(rng.integers(1, 3)), 1), ceil_mode=bool(rng.integers(0, 2)),
                count_include_pad=bool(rng.integers(0, 2)))  # fmt: skip
    weight = _rand(o, c // groups, 1, 1)
    conv_first = bool(seed % 2)

    def body(bb, x):
        if conv_first:
            y = bb.emit(op.nn.conv2d(x, const(weight), groups=groups))
            return op.nn.avg_pool2d(y, **pool)
        p = bb.emit(op.nn.avg_pool2d(x, **pool))
        return op.nn.conv2d(p, const(weight), groups=groups)

    mod = one_input_module(body, (n, c, h, w_))
    swapped = ReorderPoolConv()(mod)
    assert op_names(swapped) == (["nn.avg_pool2d", "nn.conv2d"] if conv_first else ["nn.conv2d", "nn.avg_pool2d"])
    _same_result(mod, _rand(n, c, h, w_))
