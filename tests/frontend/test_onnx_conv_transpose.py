"""ONNX ConvTranspose imported as nn.conv2d_transpose / nn.conv1d_transpose and run
end to end against onnx.reference, and against ONNX Runtime where the reference
cannot answer (groups other than depthwise: it slices the weight wrongly; an
output_shape shorter than the full result: it rejects it)."""

from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from hetvm.errors import FrontendError  # noqa: E402
from hetvm.frontend import from_onnx  # noqa: E402
from hetvm.ir import prim  # noqa: E402
from hetvm.script import print_module  # noqa: E402
from hetvm.testing.oracle import onnxruntime_or_fail  # noqa: E402


@pytest.fixture
def rng(request):
    """Data per test, the same however tests are distributed over workers."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def ct_model(kit, rng, x_shape, w_shape, *, bias=False, opset=17, dtype="float32", x_dims=None, **attrs):
    """One ConvTranspose node: X a graph input (``x_dims`` may name dims), W (and B) initializers."""
    np_dtype = np.dtype(dtype)
    inits = {"w": rng.standard_normal(w_shape).astype(np_dtype)}
    if bias:
        inits["b"] = rng.standard_normal(w_shape[1] * attrs.get("group", 1)).astype(np_dtype)
    return kit.node_model("ConvTranspose", {"x": (dtype, list(x_dims or x_shape))}, inits, {"y": dtype}, opset,
                          **attrs)  # fmt: skip


def _ops(mod) -> list[str]:
    return [line.split("= R.")[1].split("(")[0] for line in print_module(mod).splitlines() if "= R." in line]


CASES = {
    "defaults": ((1, 2, 3, 3), (2, 3, 3, 3), {}),
    "strides-pads-output-padding": ((2, 3, 4, 5), (3, 2, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                                     output_padding=[1, 1])),
    "uneven": ((1, 2, 4, 3), (2, 3, 3, 2), dict(strides=[3, 2], pads=[2, 0, 1, 1], output_padding=[2, 1])),
    "dilations": ((1, 2, 4, 4), (2, 2, 3, 2), dict(dilations=[2, 3], pads=[1, 0, 0, 2])),
    "valid": ((1, 2, 3, 4), (2, 2, 2, 3), dict(auto_pad="VALID", strides=[2, 1])),
    "same-upper": ((1, 2, 3, 4), (2, 2, 3, 3), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    "same-lower": ((1, 2, 3, 4), (2, 2, 4, 3), dict(auto_pad="SAME_LOWER", strides=[2, 3])),
    # total padding 1 - 3 < 0: the window starts before the full result (zeros, then nn.pad)
    "same-upper-stride-past-kernel": ((1, 2, 3, 4), (2, 2, 1, 1), dict(auto_pad="SAME_UPPER", strides=[3, 3])),
    "same-lower-stride-past-kernel": ((1, 2, 3, 4), (2, 2, 1, 2), dict(auto_pad="SAME_LOWER", strides=[3, 4])),
    "output-shape-longer": ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8])),
    "output-shape-longer-by-two": ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[3, 3], output_shape=[11, 11])),
    "output-shape-with-padding": ((1, 2, 3, 3), (2, 2, 3, 3), dict(strides=[3, 2], output_shape=[10, 8],
                                                                   output_padding=[1, 1], kernel_shape=[3, 3])),
    "output-shape-same-upper": ((1, 2, 3, 4), (2, 2, 3, 2), dict(auto_pad="SAME_UPPER", strides=[2, 2],
                                                                 output_shape=[5, 9])),
    "output-shape-same-lower": ((1, 2, 3, 4), (2, 2, 3, 2), dict(auto_pad="SAME_LOWER", strides=[2, 2],
                                                                 output_shape=[5, 7])),
    "1d": ((2, 3, 5), (3, 2, 3), dict(strides=[2], pads=[1, 0], output_padding=[1])),
    "1d-same-upper": ((1, 2, 6), (2, 3, 4), dict(auto_pad="SAME_UPPER", strides=[3], dilations=[2])),
    "1d-output-shape": ((1, 2, 5), (2, 1, 3), dict(strides=[2], output_shape=[12])),
}  # fmt: skip


@pytest.mark.parametrize("bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_the_reference(kit, rng, name, bias):
    x_shape, w_shape, attrs = CASES[name]
    model = ct_model(kit, rng, x_shape, w_shape, bias=bias, **attrs)
    mod = kit.check(model, {"x": rng.standard_normal(x_shape).astype(np.float32)}, rtol=1e-5, atol=1e-5)
    ops = _ops(mod)
    assert ops[0] == ("nn.conv1d_transpose" if len(x_shape) == 3 else "nn.conv2d_transpose")
    assert ("add" in ops) == bias


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_every_opset_and_float64(kit, rng, opset):
    dtype = "float64" if opset >= 11 else "float32"
    model = ct_model(kit, rng, (1, 2, 3, 3), (2, 2, 2, 2), bias=True, opset=opset, dtype=dtype, strides=[2, 2])
    kit.check(model, {"x": rng.standard_normal((1, 2, 3, 3)).astype(dtype)}, rtol=1e-6, atol=1e-6)


def test_ir_keeps_onnx_pads_and_output_padding(kit, rng):
    model = ct_model(kit, rng, (1, 2, 3, 3), (2, 2, 3, 3), strides=[2, 2], pads=[1, 0, 1, 2],
                     output_padding=[1, 1], dilations=[1, 2])  # fmt: skip
    text = print_module(from_onnx(model))
    assert "strides=[2, 2], padding=[1, 0, 1, 2], output_padding=[1, 1], dilation=[1, 2], groups=1" in text
    assert "R.nn.pad" not in text


def test_output_padding_past_the_stride_goes_through_nn_pad(kit, rng):
    """output_padding >= stride (allowed below the dilation, as PyTorch does): the
    result is the full one with zero rows and columns after it, by the specification's
    shape formula (the reference and ONNX Runtime's kernel compute only less than the
    stride, so the oracle is the reference's full result, padded)."""
    model = ct_model(kit, rng, (1, 2, 3, 3), (2, 2, 3, 3), dilations=[2, 3], output_padding=[1, 2])
    text = print_module(from_onnx(model))
    assert "output_padding=[0, 0]" in text and "R.nn.pad(" in text and "pad_width=[0, 0, 0, 0, 0, 1, 0, 2]" in text
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    del plain.graph.node[0].attribute[:]
    plain.graph.node[0].attribute.extend([onnx.helper.make_attribute("dilations", [2, 3])])
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    expected = np.pad(kit.reference(plain, {"x": x})[0], ((0, 0), (0, 0), (0, 1), (0, 2)))
    np.testing.assert_allclose(kit.run(from_onnx(model), [x])[0], expected, rtol=1e-5, atol=1e-5)


def test_symbolic_batch(kit, rng):
    model = ct_model(kit, rng, (2, 3, 4, 5), (3, 2, 3, 3), bias=True, x_dims=("batch", 3, 4, 5), strides=[2, 2],
                     auto_pad="SAME_LOWER")  # fmt: skip
    ret = from_onnx(model)["main"].ret_struct_info
    assert isinstance(ret.shape[0], prim.PrimVar) and ret.shape[0].name == "batch"
    assert [prim.const_value(d) for d in ret.shape[1:]] == [2, 8, 10]
    x = rng.standard_normal((3, 3, 4, 5)).astype(np.float32)
    np.testing.assert_allclose(kit.run(from_onnx(model), [x])[0], kit.reference(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# against ONNX Runtime: groups, and output_shape shorter than the full result
# ---------------------------------------------------------------------------
ORT_CASES = {
    "groups": ((2, 4, 3, 4), (4, 3, 3, 2), dict(group=2, strides=[2, 1], pads=[1, 0, 0, 1], output_padding=[1, 0])),
    "groups-dilated": ((1, 6, 3, 3), (6, 1, 2, 3), dict(group=3, dilations=[2, 1], auto_pad="SAME_UPPER")),
    "output-shape-shorter-even": ((1, 2, 4, 5), (2, 3, 3, 3), dict(strides=[3, 2], output_shape=[8, 7])),
    "output-shape-shorter-odd": ((1, 2, 4, 5), (2, 3, 3, 3), dict(strides=[3, 2], output_shape=[9, 8])),
    "depthwise": ((1, 3, 3, 4), (3, 1, 3, 3), dict(group=3, strides=[2, 1], pads=[1, 1, 0, 0])),
    "output-shape-recomputes-pads": ((1, 2, 4, 5), (2, 3, 3, 3), dict(strides=[3, 2], pads=[0, 0, 2, 2],
                                                                      output_shape=[10, 9])),
}  # fmt: skip


@pytest.mark.parametrize("name", list(ORT_CASES))
def test_matches_onnx_runtime(kit, rng, name):
    ort = onnxruntime_or_fail()
    x_shape, w_shape, attrs = ORT_CASES[name]
    model = ct_model(kit, rng, x_shape, w_shape, bias=True, **attrs)
    x = rng.standard_normal(x_shape).astype(np.float32)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = kit.run(from_onnx(model), [x])[0]
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------
# rejected
# ---------------------------------------------------------------------------
def _error(kit, rng, x_shape, w_shape, x_dims=None, **attrs) -> str:
    with pytest.raises(FrontendError) as err:
        from_onnx(ct_model(kit, rng, x_shape, w_shape, x_dims=x_dims, **attrs))
    return str(err.value)


def test_3d_is_rejected_naming_node_and_cause(kit, rng):
    message = _error(kit, rng, (1, 1, 3, 4, 5), (1, 2, 3, 3, 3))
    assert message == ("<model>: ConvTranspose node 'the_convtranspose' (opset 17): only 1-D and 2-D spatial inputs "
                       "are supported, got a rank-5 input")  # fmt: skip


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "x_dims", "attrs", "message"),
    [
        ((1, 2, 3, 3), (2, 2, 3, 3), None, dict(strides=[3, 3], output_shape=[12, 9]),
         r"'output_shape' \[12, 9\] does not fit the input \[3, 3\]: with auto_pad=NOTSET axis 0 can be at most 11 long"),
        ((1, 2, 3, 3), (2, 2, 3, 3), ("n", 2, "h", 3), dict(strides=[2, 2], output_shape=[7, 7]),
         "'output_shape' needs static spatial dims"),
        ((1, 2, 3, 3), (2, 2, 3, 3), None, dict(kernel_shape=[2, 2]), r"'kernel_shape' \[2, 2\] differs from W's \[3, 3\]"),
        ((1, 2, 3, 3), (2, 2, 3, 3), None, dict(strides=[2]), r"'strides' needs 2 values for a 2-D input, got \[2\]"),
        ((1, 2, 3, 3), (2, 2, 3, 3), None, dict(pads=[1, 1]), r"'pads' needs 4 values, got \[1, 1\]"),
        ((1, 2, 3, 3), (2, 2, 3, 3), None, dict(strides=[2, 2], dilations=[1, 3], output_padding=[1, 3]),
         r"'output_padding' \[1, 3\] must be non-negative and smaller than max\(stride, dilation\) per axis "
         r"\(strides \[2, 2\], dilations \[1, 3\]\)"),
        ((1, 4, 3, 3), (4, 2, 3, 3), None, dict(group=3),
         "op 'nn.conv2d_transpose': weight in-channels 4 are not divisible by groups 3"),
    ],
)  # fmt: skip
def test_bad_attributes_name_the_node(kit, rng, x_shape, w_shape, x_dims, attrs, message):
    text = _error(kit, rng, x_shape, w_shape, x_dims=x_dims, **attrs)
    assert text.startswith("<model>: ConvTranspose node 'the_convtranspose' (opset 17): ")
    assert re.search(message, text), text
