"""Every kernel against straightforward NumPy on random inputs."""

import math

import numpy as np
import pytest

from hetvm.kernels import get_kernel, has_kernel, kernel_ops

RNG = np.random.default_rng(0)


def run(op, attrs, *args, out_shapes, out_dtype="float32"):
    dtypes = out_dtype if isinstance(out_dtype, (list, tuple)) else [out_dtype] * len(out_shapes)
    outs = [np.full(s, 7, dtype=d) for s, d in zip(out_shapes, dtypes)]
    get_kernel(op, "cpu")(np, attrs, *args, *outs)
    return outs[0] if len(outs) == 1 else outs


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def test_registry_covers_kinds():
    assert has_kernel("add", "sim") and has_kernel("nn.conv2d", "cuda") and has_kernel("add", "rocm")
    assert not has_kernel("nn.nonexistent", "cpu")
    assert "nn.softmax" in kernel_ops("sim")


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": lambda a, b: np.power(np.abs(a), b), "maximum": np.maximum, "minimum": np.minimum,
    "floor_divide": lambda a, b: np.floor(a / b),
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_broadcasting(op):
    a, b = rand(3, 1, 4), rand(5, 1) + 3.0
    if op == "power":
        a = np.abs(a)
    got = run(op, {}, a, b, out_shapes=[(3, 5, 4)])
    np.testing.assert_allclose(got, BINARY[op](a, b), rtol=1e-5, atol=1e-6)


def test_integer_division_truncates_and_floor_divide_floors():
    a, b = np.array([7, -7, 6], "int32"), np.array([2, 2, -4], "int32")
    np.testing.assert_array_equal(run("divide", {}, a, b, out_shapes=[(3,)], out_dtype="int32"), [3, -3, -1])
    np.testing.assert_array_equal(run("floor_divide", {}, a, b, out_shapes=[(3,)], out_dtype="int32"), [3, -4, -2])


@pytest.mark.parametrize("op,ref", [
    ("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
    ("less_equal", np.less_equal), ("greater", np.greater), ("greater_equal", np.greater_equal),
])  # fmt: skip
def test_comparisons(op, ref):
    a, b = RNG.integers(0, 3, (4, 3)).astype("float32"), RNG.integers(0, 3, (3,)).astype("float32")
    np.testing.assert_array_equal(run(op, {}, a, b, out_shapes=[(4, 3)], out_dtype="bool"), ref(a, b))


def test_logical():
    a, b = RNG.integers(0, 2, 6).astype(bool), RNG.integers(0, 2, 6).astype(bool)
    np.testing.assert_array_equal(run("logical_and", {}, a, b, out_shapes=[(6,)], out_dtype="bool"), a & b)
    np.testing.assert_array_equal(run("logical_or", {}, a, b, out_shapes=[(6,)], out_dtype="bool"), a | b)
    np.testing.assert_array_equal(run("logical_not", {}, a, out_shapes=[(6,)], out_dtype="bool"), ~a)


UNARY = {
    "exp": np.exp, "log": lambda x: np.log(np.abs(x) + 0.1), "sqrt": lambda x: np.sqrt(np.abs(x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 0.1), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "negative": np.negative, "abs": np.abs,
    "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "sign": np.sign, "reciprocal": lambda x: 1 / x,
    "erf": np.vectorize(math.erf),
}  # fmt: skip
PREP = {"log": lambda x: np.abs(x) + 0.1, "sqrt": np.abs, "rsqrt": lambda x: np.abs(x) + 0.1}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op):
    x = rand(4, 5) * 3
    ref = UNARY[op](x)
    x = PREP.get(op, lambda v: v)(x)
    got = run(op, {}, x, out_shapes=[x.shape])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_erf_accuracy_and_sigmoid_extremes():
    x = np.linspace(-6, 6, 2001)
    got = run("erf", {}, x, out_shapes=[x.shape], out_dtype="float64")
    assert np.max(np.abs(got - np.vectorize(math.erf)(x))) < 1e-6
    s = run("sigmoid", {}, np.array([-1000.0, 1000.0], "float32"), out_shapes=[(2,)])
    np.testing.assert_array_equal(s, [0.0, 1.0])


def test_clip_and_activations():
    x = rand(3, 7) * 3
    np.testing.assert_allclose(run("clip", {"min": -1.0, "max": 0.5}, x, out_shapes=[x.shape]), np.clip(x, -1, 0.5))
    np.testing.assert_allclose(run("nn.relu", {}, x, out_shapes=[x.shape]), np.maximum(x, 0))
    gelu = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(run("nn.gelu", {}, x, out_shapes=[x.shape]), gelu, rtol=1e-5, atol=1e-6)
    silu = x / (1 + np.exp(-x))
    np.testing.assert_allclose(run("nn.silu", {}, x, out_shapes=[x.shape]), silu, rtol=1e-5, atol=1e-6)
    leaky = np.where(x > 0, x, 0.2 * x)
    np.testing.assert_allclose(run("nn.leakyrelu", {"alpha": 0.2}, x, out_shapes=[x.shape]), leaky, rtol=1e-6)
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    np.testing.assert_allclose(run("nn.gelu_tanh", {}, x, out_shapes=[x.shape]), tanh_gelu, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(axis):
    x = rand(3, 4, 5) * 10
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    sm = e / e.sum(axis=axis, keepdims=True)
    np.testing.assert_allclose(run("nn.softmax", {"axis": axis}, x, out_shapes=[x.shape]), sm, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(run("nn.log_softmax", {"axis": axis}, x, out_shapes=[x.shape]), np.log(sm), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["nn.softmax", "nn.log_softmax"])
@pytest.mark.parametrize("shape,axis", [((3, 0), -1), ((0, 4), -1), ((2, 0, 3), 1)])
def test_softmax_of_an_empty_tensor_is_empty(op, shape, axis):
    """Found by the long fuzz run: the max of an empty axis raised inside the kernel."""
    got = run(op, {"axis": axis}, np.zeros(shape, "float32"), out_shapes=[shape])
    assert got.shape == shape


def test_matmul_batched_and_broadcast():
    a, b = rand(2, 3, 4), rand(4, 5)
    np.testing.assert_allclose(run("matmul", {}, a, b, out_shapes=[(2, 3, 5)]), a @ b, rtol=1e-5)
    v = rand(4)
    np.testing.assert_allclose(run("matmul", {}, v, b, out_shapes=[(5,)]), v @ b, rtol=1e-5)


def conv_reference(x, w, strides, padding, dilation, groups):
    pt, pl, pb, pr = padding
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd - dilation[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(kh):
            for j in range(kw):
                hs, ws = i * dilation[0], j * dilation[1]
                patch = x[:, g * cg:(g + 1) * cg, hs:hs + strides[0] * (oh - 1) + 1:strides[0],
                          ws:ws + strides[1] * (ow - 1) + 1:strides[1]]  # fmt: skip
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, i, j])
    return out


@pytest.mark.parametrize("strides,padding,dilation,groups", [
    ((1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 1), (1, 2, 0, 1), (1, 1), 1),
    ((1, 2), (2, 2, 2, 2), (2, 1), 2),
    ((1, 1), (1, 1, 1, 1), (1, 1), 6),  # depthwise
])  # fmt: skip
def test_conv2d(strides, padding, dilation, groups):
    x = rand(2, 6, 9, 8)
    w = rand(6, 6 // groups, 3, 2)
    ref = conv_reference(x, w, strides, padding, dilation, groups)
    got = run("nn.conv2d", conv_attrs(strides, padding, dilation, groups), x, w, out_shapes=[ref.shape])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def conv_attrs(strides=(1, 1), padding=(0, 0, 0, 0), dilation=(1, 1), groups=1):
    return {"strides": strides, "padding": padding, "dilation": dilation, "groups": groups,
            "data_layout": "NCHW", "kernel_layout": "OIHW", "out_layout": "NCHW", "out_dtype": None}  # fmt: skip


# each path of the kernel: pointwise (1x1, with strides and groups), depthwise
# (with a channel multiplier, strides, dilation), kn2row, im2col (groups, odd shapes)
@pytest.mark.parametrize("x_shape,w_shape,strides,padding,dilation,groups", [
    ((2, 6, 7, 9), (4, 6, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # pointwise
    ((2, 6, 7, 9), (9, 2, 1, 1), (2, 3), (0, 0, 0, 0), (1, 1), 3),  # grouped pointwise, strided
    ((1, 4, 5, 5), (8, 4, 1, 1), (1, 1), (1, 0, 2, 1), (1, 1), 1),  # 1x1 with padding
    ((2, 5, 9, 8), (5, 1, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 5),  # depthwise, stride 2
    ((2, 4, 9, 8), (8, 1, 3, 2), (1, 2), (0, 2, 1, 0), (2, 2), 4),  # depthwise x2, dilated
    ((2, 4, 9, 8), (8, 1, 3, 2), (1, 1), (0, 2, 1, 0), (2, 2), 4),  # stride 1, same width
    ((2, 3, 3, 2), (3, 1, 3, 5), (1, 1), (1, 2, 1, 2), (1, 1), 3),  # taps wider than the image
    ((1, 2, 6, 5), (4, 1, 3, 3), (1, 1), (2, 1, 0, 1), (1, 1), 2),  # uneven rows, same width
    ((1, 3, 5, 7), (3, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 3),  # flat, unpadded
    ((1, 2, 4, 3), (2, 1, 1, 3), (1, 1), (1, 1, 0, 2), (1, 2), 2),  # flat, 1xK, dilated
    ((1, 6, 10, 11), (6, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3),  # grouped 3x3, same width
    ((2, 5, 7, 9), (4, 5, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # same width, batch 2
    ((1, 4, 6, 5), (6, 4, 3, 5), (1, 1), (2, 2, 0, 2), (1, 1), 1),  # same width, uneven rows
    ((1, 4, 8, 6), (8, 2, 3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 2),  # same width, dilated
    ((1, 2, 3, 2), (4, 2, 3, 5), (1, 1), (1, 2, 1, 2), (1, 1), 1),  # kernel wider than the image
    ((3, 3, 13, 12), (5, 3, 7, 5), (2, 3), (3, 2, 3, 2), (1, 2), 1),  # big kernel, strides
    ((1, 1, 6, 6), (2, 1, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # one input channel
    ((2, 3, 15, 14), (4, 3, 7, 7), (2, 2), (3, 3, 3, 3), (1, 1), 1),  # 7x7/2 stem: by phases
    ((1, 4, 11, 13), (6, 2, 5, 5), (2, 3), (2, 1, 0, 2), (1, 1), 2),  # phases, uneven, grouped
    ((2, 8, 7, 9), (3, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # kn2row (few outputs)
    ((1, 10, 9, 8), (4, 10, 3, 2), (1, 1), (0, 2, 1, 0), (2, 2), 1),  # kn2row, dilated
])  # fmt: skip
@pytest.mark.parametrize("blocked", [False, True])
def test_conv2d_paths(monkeypatch, x_shape, w_shape, strides, padding, dilation, groups, blocked):
    from hetvm.kernels import conv, depthwise

    if blocked:  # one output row per im2col block, one group per depthwise block
        monkeypatch.setattr(conv, "_COLS_BYTES", 1)
        monkeypatch.setattr(conv, "_MIN_COLS", 1)
        monkeypatch.setattr(depthwise, "_DEPTHWISE_COLS_BYTES", 1)
    x, w = rand(*x_shape), rand(*w_shape)
    ref = conv_reference(x, w, strides, padding, dilation, groups)
    got = run("nn.conv2d", conv_attrs(strides, padding, dilation, groups), x, w, out_shapes=[ref.shape])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_conv2d_dtypes_and_destinations():
    x, w = rand(2, 4, 6, 6, dtype="float64"), rand(4, 4, 3, 3, dtype="float64")
    ref = conv_reference(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    attrs = conv_attrs(padding=(1, 1, 1, 1))
    got = run("nn.conv2d", attrs, x, w, out_shapes=[ref.shape], out_dtype="float64")
    # atol too: a sum that cancels to ~1e-3 keeps only ~1e-15 absolute accuracy
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # float32 inputs into a float64 buffer, and into a non-contiguous one
    x32, w32 = x.astype("float32"), w.astype("float32")
    got = run("nn.conv2d", attrs, x32, w32, out_shapes=[ref.shape], out_dtype="float64")
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    out = np.zeros((6, 6, 4, 2), "float32").transpose(3, 2, 0, 1)
    get_kernel("nn.conv2d", "cpu")(np, attrs, x32, w32, out)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
    xi, wi = RNG.integers(-3, 4, (1, 2, 5, 5)), RNG.integers(-3, 4, (3, 2, 2, 2))
    got = run("nn.conv2d", conv_attrs(), xi, wi, out_shapes=[(1, 3, 4, 4)], out_dtype="int64")
    np.testing.assert_array_equal(got, conv_reference(xi, wi, (1, 1), (0,) * 4, (1, 1), 1))


def test_conv2d_output_that_does_not_fit_is_an_error():
    with pytest.raises(ValueError, match="does not fit"):
        run("nn.conv2d", conv_attrs(), rand(1, 2, 5, 5), rand(3, 2, 3, 3), out_shapes=[(1, 3, 4, 3)])


def pool_reference(x, k, s, p, d, oh, ow, kind, include_pad):
    pt, pl, pb, pr = p
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            vals, count = [], 0
            for a in range(k[0]):
                for b in range(k[1]):
                    r, q = i * s[0] + a * d[0] - pt, j * s[1] + b * d[1] - pl
                    inside = 0 <= r < h and 0 <= q < w
                    in_pad = -pt <= r < h + pb and -pl <= q < w + pr
                    if inside:
                        vals.append(x[:, :, r, q])
                    if inside or (include_pad and in_pad):
                        count += 1
            if not vals:  # a window wholly in padding
                out[:, :, i, j] = -np.inf if kind == "max" else 0.0
                continue
            stack = np.stack(vals)
            out[:, :, i, j] = stack.max(0) if kind == "max" else stack.sum(0) / max(count, 1)
    return out


def out_len(n, k, s, p0, p1, d, ceil):
    num = n + p0 + p1 - (d * (k - 1) + 1) + (s - 1 if ceil else 0)
    return num // s + 1


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,p,d,ceil,include", [
    ((2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False, False),
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, False),
    ((3, 2), (2, 3), (1, 0, 1, 1), (1, 1), True, True),
    ((2, 2), (1, 1), (1, 1, 0, 0), (2, 2), False, True),
    ((3, 3), (2, 2), (0, 0, 0, 0), (1, 1), True, False),  # SqueezeNet's ceil_mode pools
    ((3, 3), (3, 2), (2, 0, 2, 1), (2, 1), True, True),  # a window wholly in overhang
    ((1, 1), (2, 2), (0, 0, 0, 0), (1, 1), False, False),
    ((7, 8), (1, 1), (0, 0, 0, 0), (1, 1), False, False),  # global
    # stride 1 folds the whole flattened tensor: Inception's "same" pools, uneven
    # padding, dilation, a one-column kernel
    ((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, False),
    ((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, True),
    ((2, 3), (1, 1), (0, 2, 1, 0), (2, 1), True, False),
    ((3, 1), (1, 1), (0, 0, 2, 0), (1, 1), False, True),
    # strided max pools read the unpadded input: taps that miss the first rows or
    # columns, a window left of the input, a dilated tap past its end
    ((3, 3), (2, 2), (2, 3, 0, 0), (1, 1), False, False),
    ((2, 3), (3, 2), (1, 2, 1, 2), (2, 2), True, False),
])  # fmt: skip
def test_pooling(kind, k, s, p, d, ceil, include):
    x = rand(2, 3, 7, 8)
    oh = out_len(7, k[0], s[0], p[0], p[2], d[0], ceil)
    ow = out_len(8, k[1], s[1], p[1], p[3], d[1], ceil)
    ref = pool_reference(x, k, s, p, d, oh, ow, kind, include)
    attrs = {"pool_size": k, "strides": s, "padding": p, "dilation": d, "ceil_mode": ceil,
             "count_include_pad": include, "layout": "NCHW", "out_layout": None}  # fmt: skip
    got = run(f"nn.{kind}_pool2d", attrs, x, out_shapes=[(2, 3, oh, ow)])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("block_bytes", [1, 200, 1 << 30])
def test_strided_max_pool_in_blocks_of_planes(monkeypatch, block_bytes):
    """Large inputs are pooled a block of (image, channel) planes at a time."""
    from hetvm.kernels import pool

    monkeypatch.setattr(pool, "_POOL_BLOCK_BYTES", block_bytes)
    x = rand(3, 5, 9, 8)
    k, s, p, d = (3, 3), (2, 2), (0, 1, 1, 0), (1, 1)
    oh, ow = out_len(9, 3, 2, 0, 1, 1, True), out_len(8, 3, 2, 1, 0, 1, True)
    attrs = {"pool_size": k, "strides": s, "padding": p, "dilation": d, "ceil_mode": True,
             "count_include_pad": False, "layout": "NCHW", "out_layout": None}  # fmt: skip
    got = run("nn.max_pool2d", attrs, x, out_shapes=[(3, 5, oh, ow)])
    np.testing.assert_array_equal(got, pool_reference(x, k, s, p, d, oh, ow, "max", False))


def test_max_pool2d_integers():
    x = RNG.integers(-100, 100, (1, 2, 5, 5)).astype("int32")
    attrs = {"pool_size": (2, 2), "strides": (2, 2), "padding": (1, 1, 1, 1), "dilation": (1, 1),
             "ceil_mode": False, "count_include_pad": False, "layout": "NCHW", "out_layout": "NCHW"}  # fmt: skip
    ref = pool_reference(x, (2, 2), (2, 2), (1, 1, 1, 1), (1, 1), 3, 3, "max", False)
    got = run("nn.max_pool2d", attrs, x, out_shapes=[(1, 2, 3, 3)], out_dtype="int32")
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (7, 8), (7, 4), (2, 3)])
def test_adaptive_avg_pool2d(size):
    x = rand(2, 3, 7, 8)
    ref = np.zeros((2, 3) + size)
    for i in range(size[0]):
        for j in range(size[1]):
            a, b = (i * 7) // size[0], -(-((i + 1) * 7) // size[0])
            c, e = (j * 8) // size[1], -(-((j + 1) * 8) // size[1])
            ref[:, :, i, j] = x[:, :, a:b, c:e].mean(axis=(2, 3))
    got = run("nn.adaptive_avg_pool2d", {"output_size": size, "layout": "NCHW"}, x, out_shapes=[(2, 3) + size])
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_batch_norm_inference_and_training():
    x = rand(4, 3, 5, 5)
    g, b, m, v = rand(3), rand(3), rand(3), np.abs(rand(3)) + 0.5
    attrs = {"axis": 1, "epsilon": 1e-5, "center": True, "scale": True, "momentum": 0.1, "training": False}
    y, mm, mv = run("nn.batch_norm", attrs, x, g, b, m, v, out_shapes=[x.shape, (3,), (3,)])
    c = lambda t: t.reshape(1, 3, 1, 1)  # noqa: E731
    np.testing.assert_allclose(y, (x - c(m)) / np.sqrt(c(v) + 1e-5) * c(g) + c(b), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mm, m)
    np.testing.assert_allclose(mv, v)
    attrs["training"] = True
    y, mm, mv = run("nn.batch_norm", attrs, x, g, b, m, v, out_shapes=[x.shape, (3,), (3,)])
    bm, bv = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    np.testing.assert_allclose(y, (x - c(bm)) / np.sqrt(c(bv) + 1e-5) * c(g) + c(b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mm, 0.9 * m + 0.1 * bm, rtol=1e-5, atol=1e-6)


def test_layer_norm():
    x = rand(2, 3, 4)
    g, b = rand(3, 4), rand(3, 4)
    mu = x.mean(axis=(1, 2), keepdims=True)
    var = x.var(axis=(1, 2), keepdims=True)
    ref = (x - mu) / np.sqrt(var + 1e-5) * g + b
    attrs = {"axes": (-2, -1), "epsilon": 1e-5, "center": True, "scale": True}
    np.testing.assert_allclose(run("nn.layer_norm", attrs, x, g, b, out_shapes=[x.shape]), ref, rtol=1e-4, atol=1e-5)


def test_layer_norm_in_float16_and_of_empty_rows():
    x = rand(2, 5, dtype="float16")
    g, b = rand(5), rand(5)
    x32 = x.astype("float32")
    ref = (x32 - x32.mean(-1, keepdims=True)) / np.sqrt(x32.var(-1, keepdims=True) + 1e-5) * g + b
    got = run("nn.layer_norm", {"axes": (-1,)}, x, g, b, out_shapes=[x.shape], out_dtype="float16")
    np.testing.assert_allclose(got.astype("float32"), ref, rtol=2e-2, atol=2e-2)
    empty = np.zeros((3, 0), "float32")  # no element to normalise: nothing written, no error
    assert run("nn.layer_norm", {"axes": (-1,)}, empty, np.zeros(0, "float32"), np.zeros(0, "float32"),
               out_shapes=[(3, 0)]).shape == (3, 0)  # fmt: skip


def test_manipulation():
    x = rand(2, 3, 4)
    np.testing.assert_array_equal(run("reshape", {}, x, (4, -1), out_shapes=[(4, 6)]), x.reshape(4, 6))
    np.testing.assert_array_equal(run("permute_dims", {"axes": (1, 2, 0)}, x, out_shapes=[(3, 4, 2)]), x.transpose(1, 2, 0))
    np.testing.assert_array_equal(run("permute_dims", {"axes": None}, x, out_shapes=[(4, 3, 2)]), x.T)
    np.testing.assert_array_equal(run("expand_dims", {"axis": (0, 3)}, x, out_shapes=[(1, 2, 3, 1, 4)]), x[None, :, :, None])
    np.testing.assert_array_equal(run("squeeze", {"axis": None}, x[:, :1], out_shapes=[(2, 4)]), x[:, 0])
    np.testing.assert_array_equal(run("flatten", {}, x, out_shapes=[(24,)]), x.ravel())
    np.testing.assert_array_equal(run("broadcast_to", {}, x[:1], (5, 3, 4), out_shapes=[(5, 3, 4)]), np.broadcast_to(x[:1], (5, 3, 4)))
    y = rand(2, 2, 4)
    np.testing.assert_array_equal(run("concat", {"axis": 1}, [x, y], out_shapes=[(2, 5, 4)]), np.concatenate([x, y], 1))
    np.testing.assert_array_equal(run("concat", {"axis": None}, [x, y], out_shapes=[(40,)]), np.concatenate([x.ravel(), y.ravel()]))
    a, b, c = run("split", {"indices_or_sections": (1, 3), "axis": 2}, x, out_shapes=[(2, 3, 1), (2, 3, 2), (2, 3, 1)])
    np.testing.assert_array_equal(b, x[:, :, 1:3])
    p, q = run("split", {"indices_or_sections": 2, "axis": 0}, x, out_shapes=[(1, 3, 4), (1, 3, 4)])
    np.testing.assert_array_equal(q, x[1:])


@pytest.mark.parametrize("dim,n", [(7, 3), (6, 4), (5, 2), (10, 4), (4, 4), (3, 1)])
def test_split_uneven_sections_match_the_op(dim, n):
    from hetvm.ir import prim as P
    from hetvm.op.manipulate import split_sizes

    sizes = [P.const_value(s) for s in split_sizes(P.IntImm(dim), n)]
    x = rand(2, dim, 3)
    pieces = run("split", {"indices_or_sections": n, "axis": -2}, x,
                 out_shapes=[(2, s, 3) for s in sizes])  # fmt: skip
    pieces = pieces if n > 1 else [pieces]
    np.testing.assert_array_equal(np.concatenate(pieces, axis=1), x)
    chunk = -(-dim // n)
    for k, p in enumerate(pieces):
        np.testing.assert_array_equal(p, x[:, k * chunk : (k + 1) * chunk])


def test_split_indices_clamp_and_wrong_count():
    x = rand(5, 2)
    a, b, c = run("split", {"indices_or_sections": (2, 9), "axis": 0}, x, out_shapes=[(2, 2), (3, 2), (0, 2)])
    np.testing.assert_array_equal(b, x[2:])
    with pytest.raises(ValueError, match="pieces"):
        run("split", {"indices_or_sections": 3, "axis": 0}, x, out_shapes=[(2, 2), (3, 2)])


def test_matmul_stack_times_matrix_and_dtypes():
    a, b = rand(2, 3, 4, 5), rand(5, 6)
    np.testing.assert_allclose(run("matmul", {}, a, b, out_shapes=[(2, 3, 4, 6)]), a @ b, rtol=1e-5)
    at = rand(2, 5, 4).transpose(0, 2, 1)  # not contiguous: the batched path
    np.testing.assert_allclose(run("matmul", {}, at, b, out_shapes=[(2, 4, 6)]), at @ b, rtol=1e-5)
    got = run("matmul", {}, a, b, out_shapes=[(2, 3, 4, 6)], out_dtype="float64")
    np.testing.assert_allclose(got, a @ b, rtol=1e-5)
    ai, bi = RNG.integers(-5, 5, (3, 4)), RNG.integers(-5, 5, (4,))
    np.testing.assert_array_equal(run("matmul", {}, ai, bi, out_shapes=[(3,)], out_dtype="int64"), ai @ bi)


def test_indexing():
    x = rand(4, 5)
    idx = np.array([[0, 3], [4, 1]], "int64")
    np.testing.assert_array_equal(run("take", {"axis": 1, "mode": "fast"}, x, idx, out_shapes=[(4, 2, 2)]), np.take(x, idx, axis=1))
    np.testing.assert_array_equal(run("take", {"axis": None, "mode": "wrap"}, x, idx + 20, out_shapes=[(2, 2)]), np.take(x, idx, mode="wrap"))
    attrs = {"axes": (0, 1), "begin": (1, 4), "end": (100, 0), "strides": (2, -2), "assume_inbound": False}
    np.testing.assert_array_equal(run("strided_slice", attrs, x, out_shapes=[(2, 2)]), x[1:100:2, 4:0:-2])


def test_strided_slice_symbolic_bound_takes_the_output_extent():
    """Regression (ONNX composition fuzz): an ONNX Slice ending at Shape(y)[0]
    reaches the kernel with a serialized symbolic end (["var", "N"]), which it
    could not read (TypeError); the window now follows the output buffer's extent."""
    x = np.arange(6, dtype="float32")
    sym = ["var", "N"]
    for begin, end, stride, expect in [(1, sym, 1, x[1:4]), (-5, sym, 2, x[-5:6:2]), (4, sym, -1, x[4:0:-1]),
                                       (sym, 5, 1, x[2:5]), (sym, -5, -1, x[4:-5:-1]), (2, sym, 1, x[2:2])]:
        attrs = {"axes": (0,), "begin": (begin,), "end": (end,), "strides": (stride,), "assume_inbound": False}
        got = run("strided_slice", attrs, x, out_shapes=[expect.shape])
        np.testing.assert_array_equal(got, expect)


@pytest.mark.parametrize("op,ref", [("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min), ("prod", np.prod)])
def test_reductions(op, ref):
    x = rand(3, 4, 5)
    for axis, keep in [(None, False), ((1,), True), ((0, 2), False)]:
        want = ref(x, axis=axis, keepdims=keep)
        got = run(op, {"axis": axis, "keepdims": keep}, x, out_shapes=[np.shape(want)])
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_argmax_argmin():
    x = rand(3, 4)
    got = run("argmax", {"axis": 1, "keepdims": True}, x, out_shapes=[(3, 1)], out_dtype="int64")
    np.testing.assert_array_equal(got, x.argmax(1)[:, None])
    got = run("argmin", {"axis": None, "keepdims": False}, x, out_shapes=[()], out_dtype="int64")
    assert got == x.argmin()


def test_creation_dtype_and_where():
    np.testing.assert_array_equal(run("zeros", {"dtype": "float32"}, (2, 3), out_shapes=[(2, 3)]), np.zeros((2, 3)))
    np.testing.assert_array_equal(run("ones", {"dtype": "int32"}, (2,), out_shapes=[(2,)], out_dtype="int32"), [1, 1])
    np.testing.assert_array_equal(run("full", {"dtype": "float32"}, (2,), np.array(2.5, "float32"), out_shapes=[(2,)]), [2.5, 2.5])
    x = rand(2, 2)
    np.testing.assert_array_equal(run("full_like", {"dtype": None}, x, np.array(3.0), out_shapes=[(2, 2)]), np.full((2, 2), 3.0))
    np.testing.assert_array_equal(run("astype", {"dtype": "int32"}, x * 10, out_shapes=[(2, 2)], out_dtype="int32"), (x * 10).astype("int32"))
    c = x > 0
    np.testing.assert_array_equal(run("where", {}, c, x, -x, out_shapes=[(2, 2)]), np.abs(x))
    d, m = run("nn.dropout", {"rate": 0.5}, x, out_shapes=[(2, 2), (2, 2)])
    np.testing.assert_array_equal(d, x)
    np.testing.assert_array_equal(run("nn.pad", {"pad_width": (1, 0, 0, 2), "pad_mode": "constant", "pad_value": 9.0}, x, out_shapes=[(3, 4)]),
                                  np.pad(x, ((1, 0), (0, 2)), constant_values=9.0))  # fmt: skip


def test_result_shape_mismatch_is_an_error_not_a_broadcast():
    with pytest.raises(ValueError, match="output buffer"):
        run("nn.relu", {}, rand(3), out_shapes=[(2, 3)])


@pytest.mark.parametrize("out_channels,kn2row", [(4, True), (5, False)])
def test_conv2d_kn2row_only_with_few_output_channels(monkeypatch, out_channels, kn2row):
    from hetvm.kernels import conv

    taken = []
    real = conv._kn2row
    monkeypatch.setattr(conv, "_kn2row", lambda *a: (taken.append(1), real(*a)))
    x, w = rand(1, 8, 6, 6), rand(out_channels, 8, 3, 3)
    ref = conv_reference(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    got = run("nn.conv2d", conv_attrs(padding=(1, 1, 1, 1)), x, w, out_shapes=[ref.shape])
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    assert bool(taken) == kn2row
