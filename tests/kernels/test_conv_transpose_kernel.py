"""The nn.conv2d_transpose / nn.conv1d_transpose kernels against a direct NumPy
scatter (every input pixel times the kernel, added at ``pixel * stride + tap *
dilation``, then cropped) and against onnx.reference's ConvTranspose, over
strides, pads, output_padding, dilation, groups, dtypes and destinations.

onnx.reference is used for one group only: with groups (onnx 1.23) it slices the
weight by output channels and keeps one channel per group, so it is right only
when in, out and groups are equal."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from hetvm.kernels import conv_transpose as ct
from hetvm.kernels import get_kernel


@pytest.fixture
def rng(request):
    """Data per test, the same however tests are distributed over workers."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def scatter_reference(x, w, strides, padding, output_padding, dilation, groups):
    """The definition, in float64: each input pixel adds ``x * w[c, o]`` over its
    kernel window of the full result; the output is the window after the crop."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    fh = (h - 1) * strides[0] + dilation[0] * (kh - 1) + 1
    fw = (wd - 1) * strides[1] + dilation[1] * (kw - 1) + 1
    oh = fh - padding[0] - padding[2] + output_padding[0]
    ow = fw - padding[1] - padding[3] + output_padding[1]
    full = np.zeros((n, og * groups, max(fh, padding[0] + oh), max(fw, padding[1] + ow)))
    for g in range(groups):
        xg = x[:, g * cg : (g + 1) * cg].astype(np.float64)
        wg = w[g * cg : (g + 1) * cg].astype(np.float64)
        for y in range(h):
            for xx in range(wd):
                # (N, Og, KH, KW) contribution of pixel (y, xx)
                patch = np.einsum("nc,cokl->nokl", xg[:, :, y, xx], wg)
                rows = slice(y * strides[0], y * strides[0] + dilation[0] * (kh - 1) + 1, dilation[0])
                cols = slice(xx * strides[1], xx * strides[1] + dilation[1] * (kw - 1) + 1, dilation[1])
                full[:, g * og : (g + 1) * og, rows, cols] += patch
    return full[:, :, padding[0] : padding[0] + oh, padding[1] : padding[1] + ow]


def onnx_reference(x, w, strides, padding, output_padding, dilation):
    """ONNX's reference ConvTranspose (its pads are hetvm's padding order)."""
    pytest.importorskip("onnx")
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=list(strides), pads=list(padding),
                            output_padding=list(output_padding), dilations=list(dilation))  # fmt: skip
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, x.shape)],
                              [helper.make_tensor_value_info("y", elem, None)], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


def attrs2(strides=(1, 1), padding=(0, 0, 0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1):
    return {"strides": strides, "padding": padding, "output_padding": output_padding, "dilation": dilation,
            "groups": groups, "data_layout": "NCHW", "kernel_layout": "IOHW", "out_layout": "NCHW",
            "out_dtype": None}  # fmt: skip


def run2(x, w, out_dtype=None, **kw):
    a = attrs2(**kw)
    ref = scatter_reference(x, w, a["strides"], a["padding"], a["output_padding"], a["dilation"], a["groups"])
    out = np.full(ref.shape, 7, out_dtype or np.result_type(x, w))
    get_kernel("nn.conv2d_transpose", "cpu")(np, a, x, w, out)
    return out, ref


CASES = [
    # x shape, w shape, strides, padding (t, l, b, r), output_padding, dilation, groups
    ((1, 3, 4, 5), (3, 2, 3, 3), (1, 1), (0, 0, 0, 0), (0, 0), (1, 1), 1),
    ((2, 3, 4, 5), (3, 4, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),  # the usual 2x upsampling
    ((2, 4, 5, 3), (4, 2, 2, 2), (2, 2), (0, 0, 0, 0), (0, 0), (1, 1), 1),  # stride = kernel: no overlap
    ((1, 2, 3, 4), (2, 3, 3, 2), (3, 2), (2, 0, 1, 1), (2, 1), (1, 1), 1),  # uneven pads and strides
    ((1, 2, 4, 4), (2, 2, 3, 3), (1, 2), (0, 2, 0, 1), (0, 1), (2, 3), 1),  # dilated
    ((2, 6, 4, 3), (6, 2, 3, 2), (2, 1), (1, 0, 0, 1), (1, 0), (1, 2), 3),  # groups
    ((1, 4, 3, 3), (4, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 4),  # depthwise
    ((1, 2, 2, 2), (2, 3, 1, 1), (3, 3), (0, 0, 0, 0), (2, 2), (1, 1), 1),  # 1x1, rows no tap reaches
    ((1, 2, 3, 3), (2, 2, 5, 5), (1, 1), (4, 4, 3, 3), (0, 0), (1, 1), 1),  # pads crop whole taps away
]  # fmt: skip


@pytest.mark.parametrize("x_shape,w_shape,strides,padding,output_padding,dilation,groups", CASES)
@pytest.mark.parametrize("blocked", [False, True])
def test_matches_the_scatter_reference(rng, monkeypatch, x_shape, w_shape, strides, padding, output_padding,
                                       dilation, groups, blocked):  # fmt: skip
    if blocked:  # one image per block of columns
        monkeypatch.setattr(ct, "_COLS_BYTES", 1)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    got, ref = run2(x, w, strides=strides, padding=padding, output_padding=output_padding, dilation=dilation,
                    groups=groups)  # fmt: skip
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("x_shape,w_shape,strides,padding,output_padding,dilation,groups",
                         [c for c in CASES if c[-1] == 1])  # fmt: skip
def test_matches_onnx_reference(rng, x_shape, w_shape, strides, padding, output_padding, dilation, groups):
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    got, _ = run2(x, w, strides=strides, padding=padding, output_padding=output_padding, dilation=dilation)
    ref = onnx_reference(x, w, strides, padding, output_padding, dilation)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_conv1d_transpose(rng):
    x = rng.standard_normal((2, 4, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3)).astype(np.float32)
    attrs = {"strides": (2,), "padding": (1, 2), "output_padding": (1,), "dilation": (2,), "groups": 2,
             "data_layout": "NCW", "kernel_layout": "IOW", "out_layout": "NCW", "out_dtype": None}  # fmt: skip
    ref = scatter_reference(x[:, :, None], w[:, :, None], (1, 2), (0, 1, 0, 2), (0, 1), (1, 2), 2)[:, :, 0]
    out = np.full(ref.shape, 7, np.float32)
    get_kernel("nn.conv1d_transpose", "cpu")(np, attrs, x, w, out)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    one_group = dict(attrs, groups=1)
    w1 = rng.standard_normal((4, 2, 3)).astype(np.float32)
    out1 = np.full((2, 2, 13), 7, np.float32)  # (6 - 1) * 2 - 3 + 2 * 2 + 1 + 1
    get_kernel("nn.conv1d_transpose", "sim")(np, one_group, x, w1, out1)
    np.testing.assert_allclose(out1, onnx_reference(x, w1, (2,), (1, 2), (1,), (2,)), rtol=1e-5, atol=1e-5)


def test_dtypes_and_destinations(rng):
    x = rng.standard_normal((2, 4, 3, 3))
    w = rng.standard_normal((4, 2, 3, 3))
    kw = {"strides": (2, 2), "padding": (1, 0, 0, 1), "output_padding": (1, 0)}
    got, ref = run2(x, w, **kw)  # float64 throughout
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    got, ref = run2(x32, w32, out_dtype=np.float64, **kw)  # accumulated in float32, stored in float64
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    strided = np.zeros(ref.shape[::-1], np.float32).transpose(3, 2, 1, 0)  # not C-contiguous
    get_kernel("nn.conv2d_transpose", "cpu")(np, attrs2(**kw), x32, w32, strided)
    np.testing.assert_allclose(strided, ref, rtol=1e-5, atol=1e-5)
    xi, wi = rng.integers(-3, 4, (1, 2, 3, 3)), rng.integers(-3, 4, (2, 2, 2, 2))
    got, ref = run2(xi, wi, strides=(2, 1))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, ref.astype(np.int64))


def test_an_output_buffer_of_another_shape_is_an_error(rng):
    x, w = rng.standard_normal((1, 2, 3, 3)), rng.standard_normal((2, 3, 3, 3))
    with pytest.raises(ValueError, match=r"give \(1, 3, 5, 5\), output buffer \(1, 3, 5, 6\)"):
        get_kernel("nn.conv2d_transpose", "cpu")(np, attrs2(), x, w, np.zeros((1, 3, 5, 6)))
    one_d = {"strides": (1,), "padding": (0, 0), "output_padding": (0,), "dilation": (1,), "groups": 1}
    with pytest.raises(ValueError, match=r"conv1d_transpose: data \(1, 2, 3\), weight \(2, 3, 3\) and groups 1 "
                                         r"give \(1, 3, 5\), output buffer \(1, 3, 4\)"):
        get_kernel("nn.conv1d_transpose", "cpu")(np, one_d, x[:, :, 0], w[:, :, 0], np.zeros((1, 3, 4)))
    with pytest.raises(ValueError, match="kernel supports kernel_layout=IOHW, got OIHW"):
        get_kernel("nn.conv2d_transpose", "cpu")(np, dict(attrs2(), kernel_layout="OIHW"), x, w, np.zeros((1, 3, 5, 5)))
