"""Pooling kernels against the direct reference on many random geometries: the
flat folds (stride 1 and strided) handle windows at every edge separately, so
kernel sizes, strides, paddings, dilation, ceil_mode's overhang, odd and even
sizes, blocks of planes, integer dtypes and non-contiguous buffers all meet."""

import numpy as np
import pytest

from hetvm.kernels import get_kernel

from .test_kernels_numpy import pool_reference


def _out_len(n, k, s, p0, p1, d, ceil):
    num = n + p0 + p1 - (d * (k - 1) + 1) + (s - 1 if ceil else 0)
    return num // s + 1


def _case(rng):
    """A random geometry with at least one output position per axis."""
    while True:
        k = tuple(int(v) for v in rng.integers(1, 5, 2))
        s = tuple(int(v) for v in rng.integers(1, 4, 2))
        d = tuple(int(v) for v in rng.choice([1, 1, 2], 2))
        p = tuple(int(v) for v in rng.integers(0, 3, 4))
        h, w = (int(v) for v in rng.integers(1, 14, 2))
        ceil = bool(rng.integers(0, 2))
        oh = _out_len(h, k[0], s[0], p[0], p[2], d[0], ceil)
        ow = _out_len(w, k[1], s[1], p[1], p[3], d[1], ceil)
        if oh >= 1 and ow >= 1:
            return k, s, d, p, h, w, ceil, oh, ow


def _attrs(k, s, d, p, ceil, include=False):
    return {"pool_size": k, "strides": s, "padding": p, "dilation": d, "ceil_mode": ceil,
            "count_include_pad": include, "layout": "NCHW", "out_layout": None}  # fmt: skip


def _lowest(dtype):
    dt = np.dtype(dtype)
    return -np.inf if dt.kind == "f" else np.iinfo(dt).min


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_random_geometries(kind, seed):
    rng = np.random.default_rng(1000 * seed + (kind == "avg"))
    for _ in range(5):
        k, s, d, p, h, w, ceil, oh, ow = _case(rng)
        n, c = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        include = bool(rng.integers(0, 2))
        x = rng.standard_normal((n, c, h, w)).astype("float32")
        out = np.full((n, c, oh, ow), 7, dtype="float32")
        get_kernel(f"nn.{kind}_pool2d", "cpu")(np, _attrs(k, s, d, p, ceil, include), x, out)
        ref = pool_reference(x, k, s, p, d, oh, ow, kind, include)
        geometry = (k, s, d, p, h, w, ceil, include)
        if kind == "max":
            np.testing.assert_array_equal(out, ref.astype("float32"), err_msg=str(geometry))
        else:
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6, err_msg=str(geometry))


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64", "float64", "float16"])
def test_random_geometries_max_dtypes(dtype):
    rng = np.random.default_rng(7)
    for _ in range(30):
        k, s, d, p, h, w, ceil, oh, ow = _case(rng)
        x = rng.integers(-100, 100, (2, 3, h, w)).astype(dtype) if np.dtype(dtype).kind != "u" else (
            rng.integers(0, 200, (2, 3, h, w)).astype(dtype))  # fmt: skip
        out = np.zeros((2, 3, oh, ow), dtype=dtype)
        get_kernel("nn.max_pool2d", "cpu")(np, _attrs(k, s, d, p, ceil), x, out)
        ref = pool_reference(x.astype("float64"), k, s, p, d, oh, ow, "max", False)
        ref[np.isinf(ref)] = _lowest(dtype)
        np.testing.assert_array_equal(out, ref.astype(dtype), err_msg=str((k, s, d, p, h, w, ceil)))


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("block_bytes", [1, 300, 1 << 30])
def test_blocks_of_planes(monkeypatch, kind, block_bytes):
    """Strided pools run a block of (image, channel) planes at a time."""
    from hetvm.kernels import pool

    monkeypatch.setattr(pool, "_POOL_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(block_bytes)
    for k, s, d, p, h, w in [((3, 3), (2, 2), (1, 1), (0, 0, 1, 1), 12, 12), ((3, 3), (2, 2), (1, 1), (0, 0, 0, 0), 11, 11),
                             ((2, 3), (3, 2), (2, 1), (1, 2, 0, 1), 9, 10)]:  # fmt: skip
        x = rng.standard_normal((3, 5, h, w)).astype("float32")
        oh, ow = _out_len(h, k[0], s[0], p[0], p[2], d[0], True), _out_len(w, k[1], s[1], p[1], p[3], d[1], True)
        out = np.empty((3, 5, oh, ow), dtype="float32")
        get_kernel(f"nn.{kind}_pool2d", "cpu")(np, _attrs(k, s, d, p, True), x, out)
        np.testing.assert_allclose(out, pool_reference(x, k, s, p, d, oh, ow, kind, False), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("stride", [1, 2])
def test_non_contiguous_input_and_output(kind, stride):
    rng = np.random.default_rng(stride)
    base = rng.standard_normal((2, 6, 11, 13)).astype("float32")
    x = base[:, ::2, :, 1:]  # strided channels, offset columns
    k, s, d, p = (3, 3), (stride, stride), (1, 1), (1, 1, 1, 1)
    oh, ow = _out_len(11, 3, stride, 1, 1, 1, False), _out_len(12, 3, stride, 1, 1, 1, False)
    big = np.full((2, 3, oh, ow + 2), 7, dtype="float32")
    out = big[:, :, :, 1:-1]
    get_kernel(f"nn.{kind}_pool2d", "cpu")(np, _attrs(k, s, d, p, False), x, out)
    np.testing.assert_allclose(out, pool_reference(x, k, s, p, d, oh, ow, kind, False), rtol=1e-5, atol=1e-6)
    assert (big[..., 0] == 7).all() and (big[..., -1] == 7).all()
