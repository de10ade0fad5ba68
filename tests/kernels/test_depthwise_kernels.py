"""Depthwise convolution paths (``hetvm/kernels/depthwise.py``) against a
straightforward reference, over random geometries: kernels 1-5, strides 1-3,
symmetric and asymmetric padding, dilation, channel multipliers, batches,
float32/float64, with and without a fused bias and relu."""

import numpy as np
import pytest

from hetvm.kernels import depthwise
from hetvm.kernels.conv import Geometry, convolve
from hetvm.kernels.registry import get_kernel


def reference(x, w, strides, dilation, pads, bias=None):
    """Per output channel and tap, a multiply-add of a strided window (float64)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    pt, pl, pb, pr = pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dilation[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pl + pr - dilation[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow))
    for oc in range(o):
        ic = oc // (o // c)
        for i in range(kh):
            for j in range(kw):
                y0, x0 = i * dilation[0], j * dilation[1]
                win = xp[:, ic, y0 : y0 + strides[0] * (oh - 1) + 1 : strides[0],
                         x0 : x0 + strides[1] * (ow - 1) + 1 : strides[1]]  # fmt: skip
                out[:, oc] += w[oc, 0, i, j] * win
    if bias is not None:
        out += bias.reshape(1, -1, 1, 1)
    return out


def random_case(rng):
    """A random depthwise geometry with a non-empty output; half of them "same"
    (the output as wide as the input over the stride: the phased path)."""
    while True:
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        s = tuple(int(v) for v in rng.integers(1, 4, 2))
        d = tuple(int(v) for v in rng.integers(1, 3, 2)) if rng.random() < 0.3 else (1, 1)
        if rng.random() < 0.5:  # "same": pads that make OH = H / s0, OW = W / s1
            h, w = int(rng.integers(1, 6)) * s[0], int(rng.integers(1, 6)) * s[1]
            total = [max(0, (h // s[0] - 1) * s[0] + d[0] * (kh - 1) + 1 - h),
                     max(0, (w // s[1] - 1) * s[1] + d[1] * (kw - 1) + 1 - w)]  # fmt: skip
            before = [int(rng.integers(0, t + 1)) for t in total]
            pads = (before[0], before[1], total[0] - before[0], total[1] - before[1])
        else:
            h, w = (int(v) for v in rng.integers(1, 12, 2))
            pads = tuple(int(v) for v in rng.integers(0, 3, 4))
        if h + pads[0] + pads[2] >= d[0] * (kh - 1) + 1 and w + pads[1] + pads[3] >= d[1] * (kw - 1) + 1:
            break
    n, c, mult = int(rng.integers(1, 4)), int(rng.integers(2, 7)), int(rng.choice([1, 1, 2, 3]))
    return (n, c, h, w), (c * mult, 1, kh, kw), s, d, pads


@pytest.mark.parametrize("blocked", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_depthwise_random_geometries(monkeypatch, blocked, dtype):
    if blocked:  # one channel per block
        monkeypatch.setattr(depthwise, "_DEPTHWISE_COLS_BYTES", 1)
        monkeypatch.setattr(depthwise, "_PHASED_BYTES", 1)
    rng = np.random.default_rng(7 + blocked)
    phased = 0
    for _ in range(150):
        x_shape, w_shape, s, d, pads = random_case(rng)
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        bias = rng.standard_normal(w_shape[0]).astype(dtype) if rng.random() < 0.5 else None
        want = reference(x, w, s, d, pads, bias)
        out = np.full(want.shape, np.nan, dtype)
        if not convolve(np, Geometry(s, d, pads, x_shape[1]), x, w, out, bias) and bias is not None:
            out += bias.reshape(1, -1, 1, 1)
        tol = 1e-4 if dtype == "float32" else 1e-10
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol, err_msg=f"{x_shape} {w_shape} {s} {d} {pads}")
        if s != (1, 1) and depthwise._phase_plan(x_shape[2:], w_shape[2:], want.shape[2:], s, d, pads):
            phased += 1
    assert phased >= 20  # the phased path was exercised


@pytest.mark.parametrize("shape,stride", [((1, 272, 14, 14), 1), ((2, 24, 56, 56), 2), ((1, 12, 14, 14), 2)])
@pytest.mark.parametrize("activation", ["none", "relu"])
def test_depthwise_fused_shufflenet_shapes(shape, stride, activation):
    """ShuffleNet's 3x3 depthwise layers through ``nn.conv2d_bias_act``."""
    rng = np.random.default_rng(0)
    c = shape[1]
    x, w, b = (rng.standard_normal(s).astype("float32") for s in (shape, (c, 1, 3, 3), (c,)))
    attrs = {"strides": (stride, stride), "padding": (1, 1, 1, 1), "dilation": (1, 1), "groups": c,
             "activation": activation}  # fmt: skip
    want = reference(x, w, (stride, stride), (1, 1), (1, 1, 1, 1), b)
    want = np.maximum(want, 0) if activation == "relu" else want
    out = np.empty(want.shape, "float32")
    get_kernel("nn.conv2d_bias_act", "cpu")(np, attrs, x, w, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    if stride == 2:
        assert depthwise._phase_plan(shape[2:], (3, 3), want.shape[2:], (2, 2), (1, 1), (1, 1, 1, 1)) is not None


def test_phased_path_ignores_garbage_in_its_scratch():
    """The phase images and columns live in reused scratch buffers: a call after
    one that filled them with NaN must not read any of it."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 8, 8))
    w = rng.standard_normal((10, 1, 3, 3))
    geo = Geometry((2, 2), (1, 1), (0, 0, 1, 1), 5)
    out = np.empty((2, 10, 4, 4))
    convolve(np, geo, np.full_like(x, np.nan), w, out)
    convolve(np, geo, x, w, out)
    np.testing.assert_allclose(out, reference(x, w, (2, 2), (1, 1), (0, 0, 1, 1)), rtol=1e-10, atol=1e-10)
