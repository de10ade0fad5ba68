"""Every path of ``conv.py`` (and the fused kernels around it) against a direct
float64 reference, over randomized geometries: kernels 1-7, strides 1-3,
asymmetric padding, dilation, groups (depthwise included), batches, float32 and
float64, small column blocks, stride-2 columns copied by item pairs."""

import numpy as np
import pytest

from hetvm.kernels import conv
from hetvm.kernels.registry import bind_kernel


def reference(x, w, strides, dilation, pads, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (s0, s1), (d0, d1), (pt, pl, pb, pr) = strides, dilation, pads
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (kh - 1) * d0 - 1) // s0 + 1
    ow = (wd + pl + pr - (kw - 1) * d1 - 1) // s1 + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs, ws = xp[:, g * cg : (g + 1) * cg], w[g * og : (g + 1) * og].astype(np.float64)
        for i in range(kh):
            for j in range(kw):
                win = xs[:, :, i * d0 : i * d0 + (oh - 1) * s0 + 1 : s0, j * d1 : j * d1 + (ow - 1) * s1 + 1 : s1]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", win, ws[:, :, i, j])
    return out


def random_geometry(rng):
    kh, kw = (int(v) for v in rng.integers(1, 8, 2)) if rng.random() < 0.3 else (int(rng.integers(1, 8)),) * 2
    s = (int(rng.integers(1, 4)),) * 2 if rng.random() < 0.8 else tuple(int(v) for v in rng.integers(1, 4, 2))
    d = (1, 1) if rng.random() < 0.7 else tuple(int(v) for v in rng.integers(1, 3, 2))
    if rng.random() < 0.5:  # "same"-like symmetric padding, else random asymmetric
        pads = (kh // 2 * d[0], kw // 2 * d[1], kh // 2 * d[0], kw // 2 * d[1])
    else:
        pads = tuple(int(v) for v in rng.integers(0, 4, 4))
    groups = int(rng.choice([1, 1, 1, 2, 3]))
    cg = int(rng.integers(1, 6))
    og = int(rng.integers(1, 6))
    depthwise = rng.random() < 0.15
    if depthwise:
        cg, groups = 1, int(rng.integers(2, 6))
    n = int(rng.choice([1, 1, 2, 3]))
    h = int(rng.integers(max(1, (kh - 1) * d[0] + 1 - pads[0] - pads[2]), 16))
    wd = int(rng.integers(max(1, (kw - 1) * d[1] + 1 - pads[1] - pads[3]), 16))
    return (n, groups * cg, h, wd), (groups * og, cg, kh, kw), s, d, pads, groups


def _check(x, w, b, r, geo, out_shape, dtype, relu):
    strides, dilation, pads, groups = geo
    ref = reference(x, w, strides, dilation, pads, groups)
    assert ref.shape == out_shape
    tol = 1e-4 if dtype == "float32" else 1e-10
    out = np.full(out_shape, np.nan, dtype)
    bind_kernel("nn.conv2d", "cpu", np, {"strides": strides, "dilation": dilation, "padding": pads,
                                          "groups": groups})(x, w, out)  # fmt: skip
    np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
    attrs = {"strides": strides, "dilation": dilation, "padding": pads, "groups": groups,
             "activation": "relu" if relu else "none"}  # fmt: skip
    want = ref + b.reshape(-1, 1, 1)
    out = np.full(out_shape, np.nan, dtype)
    bind_kernel("nn.conv2d_bias_act", "cpu", np, attrs)(x, w, b, out)
    np.testing.assert_allclose(out, np.maximum(want, 0) if relu else want, rtol=tol, atol=tol)
    want = want + r
    out = np.full(out_shape, np.nan, dtype)
    bind_kernel("nn.conv2d_bias_add_act", "cpu", np, attrs)(x, w, b, r, out)
    np.testing.assert_allclose(out, np.maximum(want, 0) if relu else want, rtol=tol, atol=tol)


@pytest.mark.parametrize("small_blocks", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_random_geometries(monkeypatch, seed, small_blocks):
    monkeypatch.setattr(conv, "_PAIRED_MIN_ROW", 1 if seed % 2 else 64)
    if small_blocks:  # several blocks of rows per image, uneven last block
        monkeypatch.setattr(conv, "_COLS_BYTES", 256)
        monkeypatch.setattr(conv, "_MIN_COLS", 5)
    rng = np.random.default_rng(seed)
    for _ in range(25):
        x_shape, w_shape, strides, dilation, pads, groups = random_geometry(rng)
        dtype = str(rng.choice(["float32", "float64"]))
        x = rng.standard_normal(x_shape).astype(dtype)
        w = rng.standard_normal(w_shape).astype(dtype)
        b = rng.standard_normal(w_shape[0]).astype(dtype)
        oh = (x_shape[2] + pads[0] + pads[2] - (w_shape[2] - 1) * dilation[0] - 1) // strides[0] + 1
        ow = (x_shape[3] + pads[1] + pads[3] - (w_shape[3] - 1) * dilation[1] - 1) // strides[1] + 1
        out_shape = (x_shape[0], w_shape[0], oh, ow)
        r = rng.standard_normal(out_shape).astype(dtype)
        _check(x, w, b, r, (strides, dilation, pads, groups), out_shape, dtype, bool(rng.random() < 0.7))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("hw", [7, 8])
def test_stride_2_columns_up_to_the_last_item(monkeypatch, dtype, hw):
    """Stride 2 without padding on an odd width: the last window ends on the
    image's last item (the paired copy must not read past it)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, hw, hw)).astype(dtype)
    w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    oh = (hw - 3) // 2 + 1
    out = np.full((2, 4, oh, oh), np.nan, dtype)
    monkeypatch.setattr(conv, "_PAIRED_MIN_ROW", 1)
    bind_kernel("nn.conv2d", "cpu", np, {"strides": (2, 2), "padding": (0, 0, 0, 0)})(x, w, out)
    tol = {"float16": 2e-2, "float32": 1e-4, "float64": 1e-10}[dtype]
    np.testing.assert_allclose(out, reference(x, w, (2, 2), (1, 1), (0, 0, 0, 0), 1), rtol=tol, atol=tol)


def test_strided_output_view():
    """A destination that is not C-contiguous goes through a scratch result."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((1, 4, 9, 9)).astype("float32"), rng.standard_normal((6, 4, 3, 3)).astype("float32")
    full = np.full((1, 12, 5, 5), np.nan, "float32")
    bind_kernel("nn.conv2d", "cpu", np, {"strides": (2, 2), "padding": (1, 1, 1, 1)})(x, w, full[:, ::2])
    np.testing.assert_allclose(full[:, ::2], reference(x, w, (2, 2), (1, 1), (1, 1, 1, 1), 1), rtol=1e-4, atol=1e-4)
    assert np.isnan(full[:, 1::2]).all()
