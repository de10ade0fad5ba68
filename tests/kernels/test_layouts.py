"""Convolution and pooling in layouts other than NCHW/OIHW (TVM's NHWC, OHWI,
HWIO spellings) run as the canonical kernels between transposes, on every
device kind; the reference is the NCHW program on transposed inputs."""

import numpy as np
import pytest

import hetvm
from hetvm.script import from_source

RNG = np.random.default_rng(7)


def _run(src: str, *args, sim: bool = False):
    mod = from_source(src)
    exe = hetvm.build(mod, target="sim" if sim else "llvm")
    devices = [hetvm.device("sim", 0)] if sim else [hetvm.cpu(0)]
    out = hetvm.VirtualMachine(exe, devices)["main"](*args)
    assert out.device.kind == ("sim" if sim else "cpu")
    return out.numpy()


@pytest.mark.parametrize("sim", [False, True])
@pytest.mark.parametrize("kernel_layout, to_oihw", [("OHWI", (0, 3, 1, 2)), ("HWIO", (3, 2, 0, 1))])
def test_nhwc_conv2d_matches_nchw(sim, kernel_layout, to_oihw):
    x = RNG.standard_normal((1, 5, 6, 2)).astype("float32")  # NHWC
    w_oihw = RNG.standard_normal((3, 2, 3, 3)).astype("float32")
    w = w_oihw.transpose(np.argsort(to_oihw)).copy()
    assert np.array_equal(w.transpose(to_oihw), w_oihw)
    wshape = tuple(w.shape)
    want = _run(
        """
@R.function
def main(x: R.Tensor((1, 2, 5, 6), "float32"), w: R.Tensor((3, 2, 3, 3), "float32")):
    y = R.nn.conv2d(x, w, strides=[2, 1], padding=[1, 1, 1, 1])
    return y
""",
        x.transpose(0, 3, 1, 2).copy(), w_oihw,
    )
    got = _run(
        f"""
@R.function
def main(x: R.Tensor((1, 5, 6, 2), "float32"), w: R.Tensor({wshape}, "float32")):
    y = R.nn.conv2d(x, w, strides=[2, 1], padding=[1, 1, 1, 1], data_layout="NHWC", kernel_layout="{kernel_layout}")
    return y
""",
        x, w, sim=sim,
    )
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)


def test_nhwc_conv2d_with_nchw_output():
    x = RNG.standard_normal((1, 4, 4, 2)).astype("float32")
    w = RNG.standard_normal((3, 2, 1, 1)).astype("float32")
    want = _run(
        """
@R.function
def main(x: R.Tensor((1, 2, 4, 4), "float32"), w: R.Tensor((3, 2, 1, 1), "float32")):
    y = R.nn.conv2d(x, w)
    return y
""",
        x.transpose(0, 3, 1, 2).copy(), w,
    )
    got = _run(
        """
@R.function
def main(x: R.Tensor((1, 4, 4, 2), "float32"), w: R.Tensor((3, 2, 1, 1), "float32")):
    y = R.nn.conv2d(x, w, data_layout="NHWC", out_layout="NCHW")
    return y
""",
        x, w,
    )
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sim", [False, True])
@pytest.mark.parametrize("pool", ["max_pool2d", "avg_pool2d"])
def test_nhwc_pooling_matches_nchw(sim, pool):
    x = RNG.standard_normal((2, 5, 6, 3)).astype("float32")
    attrs = "pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 1, 1]"
    want = _run(
        f"""
@R.function
def main(x: R.Tensor((2, 3, 5, 6), "float32")):
    y = R.nn.{pool}(x, {attrs})
    return y
""",
        x.transpose(0, 3, 1, 2).copy(),
    )
    got = _run(
        f"""
@R.function
def main(x: R.Tensor((2, 5, 6, 3), "float32")):
    y = R.nn.{pool}(x, {attrs}, layout="NHWC")
    return y
""",
        x, sim=sim,
    )
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 1), rtol=1e-6)


def test_nhwc_adaptive_avg_pool():
    x = RNG.standard_normal((1, 4, 4, 3)).astype("float32")
    got = _run(
        """
@R.function
def main(x: R.Tensor((1, 4, 4, 3), "float32")):
    y = R.nn.adaptive_avg_pool2d(x, output_size=[1, 1], layout="NHWC")
    return y
""",
        x,
    )
    np.testing.assert_allclose(got, x.mean(axis=(1, 2), keepdims=True), rtol=1e-6)
