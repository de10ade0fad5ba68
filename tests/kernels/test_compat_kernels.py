"""Kernels of the ops TVM's test modules use (hetvm/op/compat.py,
hetvm/op/nn/compat_nn.py), against NumPy references, on cpu and sim."""

import numpy as np
import pytest

import hetvm
from hetvm.script import from_source

RNG = np.random.default_rng(3)


def _run(body: str, params: str, *args, sim: bool = False):
    mod = from_source(f"@R.function\ndef main({params}):\n" + "".join(f"    {line}\n" for line in body.splitlines()))
    exe = hetvm.build(mod, target="sim" if sim else "llvm")
    out = hetvm.VirtualMachine(exe, [hetvm.device("sim", 0)] if sim else [hetvm.cpu(0)])["main"](*args)
    return out.numpy()


X = RNG.standard_normal((2, 3)).astype("float32")
XP = 'x: R.Tensor((2, 3), "float32")'


@pytest.mark.parametrize("sim", [False, True])
@pytest.mark.parametrize(
    "line, want",
    [
        ("y = R.tile(x, (2, 1, 2))", np.tile(X, (2, 1, 2))),
        ("y = R.tile(x, 2)", np.tile(X, 2)),
        ("y = R.flip(x, axis=1)", X[:, ::-1]),
        ("y = R.flip(x, axis=-2)", X[::-1]),
        ("y = R.repeat(x, 2)", np.repeat(X, 2)),
        ("y = R.repeat(x, 3, axis=1)", np.repeat(X, 3, axis=1)),
        ("y = R.variance(x, axis=[1], keepdims=True)", X.var(axis=1, keepdims=True)),
        ("y = R.std(x)", X.std()),
    ],
)
def test_manipulation_and_moments(sim, line, want):
    got = _run(f"{line}\nreturn y", XP, X, sim=sim)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _scatter_ref(data, idx, upd, axis, reduction):
    out = data.astype("float64").copy()
    count = np.ones_like(out)
    for pos in np.ndindex(idx.shape):
        target = list(pos)
        target[axis] = idx[pos] % data.shape[axis]
        t = tuple(target)
        if reduction == "update":
            out[t] = upd[pos]
        elif reduction == "add":
            out[t] += upd[pos]
        elif reduction == "mul":
            out[t] *= upd[pos]
        elif reduction == "max":
            out[t] = max(out[t], upd[pos])
        elif reduction == "min":
            out[t] = min(out[t], upd[pos])
        elif reduction == "mean":
            out[t] += upd[pos]
            count[t] += 1
    return (out / count if reduction == "mean" else out).astype(data.dtype)


@pytest.mark.parametrize("sim", [False, True])
@pytest.mark.parametrize("reduction", ["update", "add", "mul", "mean", "max", "min"])
def test_scatter_elements(sim, reduction):
    data = RNG.standard_normal((3, 4)).astype("float32")
    idx = np.array([[0, 2, -1, 1], [1, 0, 2, 2]], "int64")
    if reduction == "update":
        idx = np.array([[0, 2, -1, 1], [1, 0, 0, 2]], "int64")  # distinct targets: order-free
    upd = RNG.standard_normal((2, 4)).astype("float32")
    params = 'd: R.Tensor((3, 4), "float32"), i: R.Tensor((2, 4), "int64"), u: R.Tensor((2, 4), "float32")'
    body = f'y = R.scatter_elements(d, i, u, axis=0, reduction="{reduction}")\nreturn y'
    got = _run(body, params, data, idx, upd, sim=sim)
    np.testing.assert_allclose(got, _scatter_ref(data, idx, upd, 0, reduction), rtol=1e-5, atol=1e-6)


def test_scatter_elements_index_out_of_range_is_an_error():
    params = 'd: R.Tensor((3,), "float32"), i: R.Tensor((1,), "int64"), u: R.Tensor((1,), "float32")'
    with pytest.raises(hetvm.HetvmError, match="outside"):
        _run("y = R.scatter_elements(d, i, u)\nreturn y", params, np.zeros(3, "float32"),
             np.array([3], "int64"), np.ones(1, "float32"))


def _conv1d_ref(x, w, stride, pads, dilation, groups):
    n, c, width = x.shape
    o, i, k = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pads))
    ow = (width + sum(pads) - dilation * (k - 1) - 1) // stride + 1
    out = np.zeros((n, o, ow))
    per = o // groups
    for oc in range(o):
        g = oc // per
        for t in range(ow):
            taps = xp[:, g * i:(g + 1) * i, t * stride: t * stride + dilation * (k - 1) + 1: dilation]
            out[:, oc, t] = (taps * w[oc]).sum(axis=(1, 2))
    return out


@pytest.mark.parametrize("sim", [False, True])
@pytest.mark.parametrize("stride, pads, dilation, groups", [(1, (0, 0), 1, 1), (2, (1, 2), 2, 2)])
def test_conv1d(sim, stride, pads, dilation, groups):
    x = RNG.standard_normal((2, 4, 9)).astype("float32")
    w = RNG.standard_normal((6, 4 // groups, 3)).astype("float32")
    want = _conv1d_ref(x, w, stride, pads, dilation, groups)
    params = f'x: R.Tensor((2, 4, 9), "float32"), w: R.Tensor({tuple(w.shape)}, "float32")'
    body = f"y = R.nn.conv1d(x, w, strides={stride}, padding={list(pads)}, dilation={dilation}, groups={groups})\nreturn y"
    got = _run(body, params, x, w, sim=sim)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv1d_nwc_layout():
    x = RNG.standard_normal((1, 4, 7)).astype("float32")
    w = RNG.standard_normal((5, 4, 3)).astype("float32")
    params = 'x: R.Tensor((1, 7, 4), "float32"), w: R.Tensor((5, 4, 3), "float32")'
    got = _run('y = R.nn.conv1d(x, w, data_layout="NWC")\nreturn y', params, x.transpose(0, 2, 1).copy(), w)
    np.testing.assert_allclose(got, _conv1d_ref(x, w, 1, (0, 0), 1, 1).transpose(0, 2, 1), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sim", [False, True])
def test_rms_norm(sim):
    x = RNG.standard_normal((2, 3, 4)).astype("float32")
    g = RNG.standard_normal((3, 4)).astype("float32")
    want = x / np.sqrt((x.astype("float64") ** 2).mean(axis=(1, 2), keepdims=True) + 1e-5) * g
    params = 'x: R.Tensor((2, 3, 4), "float32"), g: R.Tensor((3, 4), "float32")'
    got = _run("y = R.nn.rms_norm(x, g, axes=[1, 2])\nreturn y", params, x, g, sim=sim)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sim", [False, True])
def test_group_norm(sim):
    x = RNG.standard_normal((2, 4, 3, 5)).astype("float32")
    gamma = RNG.standard_normal(4).astype("float32")
    beta = RNG.standard_normal(4).astype("float32")
    grouped = x.astype("float64").reshape(2, 2, 2, 3, 5)
    mean = grouped.mean(axis=(2, 3, 4), keepdims=True)
    var = grouped.var(axis=(2, 3, 4), keepdims=True)
    want = ((grouped - mean) / np.sqrt(var + 1e-5)).reshape(x.shape) * gamma.reshape(1, 4, 1, 1) + beta.reshape(1, 4, 1, 1)
    params = 'x: R.Tensor((2, 4, 3, 5), "float32"), g: R.Tensor((4,), "float32"), b: R.Tensor((4,), "float32")'
    body = "y = R.nn.group_norm(x, g, b, num_groups=2, channel_axis=1, axes=[2, 3])\nreturn y"
    np.testing.assert_allclose(_run(body, params, x, gamma, beta, sim=sim), want, rtol=1e-5, atol=1e-5)
