"""nn.conv2d_transpose / nn.conv1d_transpose: struct-info inference, attr
normalisation and validation (errors name the op), TVM's text form, legalisation,
and a run on cpu and sim."""

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.errors import HetvmError, StructInfoError
from hetvm.ir import BlockBuilder, Var, VDevice, assert_structural_equal, op_info, prim
from hetvm.ir import struct_info as S
from hetvm.ir.op_registry import DeviceBehavior
from hetvm.kernels import has_kernel
from hetvm.script import from_source, print_module
from hetvm.transform import LegalizeOps

n = prim.PrimVar("n")
m = prim.PrimVar("m")
F32 = "float32"


def t(shape, dtype=F32, name="x", vdevice=None):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype, vdevice=vdevice))


def _module(make, *params):
    bb = BlockBuilder()
    with bb.function("main", list(params)):
        y = bb.emit(make(*params))
        bb.emit_func_output(y)
    return bb.get()


def _binding(mod) -> str:
    return next(line.strip() for line in print_module(mod).splitlines() if "_transpose(" in line)


# ---------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("x", "w", "kwargs", "shape"),
    [
        ((1, 4, 5, 5), (4, 3, 3, 3), {}, (1, 3, 7, 7)),
        # (5 - 1) * 2 - 1 - 1 + 1 * 2 + 1 + 1 = 10; channels 3 * 2 groups
        ((1, 4, 5, 5), (4, 3, 3, 3), {"strides": 2, "padding": 1, "output_padding": 1, "groups": 2}, (1, 6, 10, 10)),
        # H: 3 * 3 - 0 - 2 + 2 * 1 + 1 + 1 = 11 ; W: 4 * 1 - 1 - 0 + 1 * 2 + 0 + 1 = 6
        ((2, 2, 4, 5), (2, 1, 2, 3), {"strides": (3, 1), "padding": (0, 1, 2, 0), "output_padding": (1, 0),
                                      "dilation": (2, 1)}, (2, 1, 11, 6)),
        ((2, 4, 5, 4), (4, 3, 2, 2), {"data_layout": "NHWC", "strides": 2}, (2, 8, 10, 3)),
        ((1, 4, 5, 5), (2, 3, 4, 3), {"kernel_layout": "HWIO"}, (1, 3, 6, 7)),
        ((1, 4, 5, 5), (4, 3, 3, 3), {"out_layout": "NHWC"}, (1, 7, 7, 3)),
    ],
)  # fmt: skip
def test_conv2d_transpose_output_shapes(x, w, kwargs, shape):
    assert op.nn.conv2d_transpose(t(x), t(w, name="w"), **kwargs).struct_info.static_shape == shape


def test_conv1d_transpose_output_shapes():
    # (7 - 1) * 2 - 1 - 2 + 2 * 2 + 1 + 1 = 15
    call = op.nn.conv1d_transpose(t((2, 4, 7)), t((4, 3, 3), name="w"), 2, (1, 2), 1, 2, groups=2)
    assert call.struct_info.static_shape == (2, 6, 15)
    nwc = op.nn.conv1d_transpose(t((2, 7, 4)), t((4, 3, 3), name="w"), data_layout="NWC")
    assert nwc.struct_info.static_shape == (2, 9, 3)


def test_symbolic_dims():
    call = op.nn.conv2d_transpose(t((n, 3, m, m + 1)), t((3, 5, 4, 4), name="w"), strides=2, padding=1)
    shape = call.struct_info.shape
    assert shape[0] is n and prim.const_value(shape[1]) == 5
    assert prim.prove_equal(shape[2], m * 2) and prim.prove_equal(shape[3], m * 2 + 2)
    one = op.nn.conv1d_transpose(t((n, 3, m)), t((3, 2, 3), name="w"), strides=3).struct_info
    assert prim.prove_equal(one.shape[2], m * 3)


def test_dtypes_vdevice_and_unknown_shapes():
    gpu = VDevice("cuda", 0)
    call = op.nn.conv2d_transpose(t((1, 2, 3, 3), "int8", vdevice=gpu), t((2, 2, 1, 1), "int8", "w", gpu),
                                  out_dtype="int32")  # fmt: skip
    assert (call.struct_info.dtype, call.struct_info.vdevice) == ("int32", gpu)
    unknown = op.nn.conv2d_transpose(Var("x", struct_info=S.TensorStructInfo(None, F32, 4)), t((2, 2, 1, 1), name="w"))
    assert unknown.struct_info.shape is None and unknown.struct_info.ndim == 4 and unknown.struct_info.dtype == F32
    any_rank = op.nn.conv1d_transpose(Var("x", struct_info=S.TensorStructInfo(None, None, -1)), t((2, 2, 1), name="w"))
    assert any_rank.struct_info.ndim == 3


def test_op_properties():
    for name in ("nn.conv2d_transpose", "nn.conv1d_transpose"):
        info = op_info(name)
        assert info.pure and info.device_behavior is DeviceBehavior.FOLLOW_INPUTS and info.num_inputs == 2
        assert all(has_kernel(name, kind) for kind in ("cpu", "sim", "cuda"))


# ---------------------------------------------------------------------------
# attrs
# ---------------------------------------------------------------------------
def test_attrs_are_normalised_as_tvm_stores_them():
    x, w = t((1, 4, 5, 5)), t((4, 3, 3, 3), name="w")
    at = op.nn.conv2d_transpose(x, w, strides=2, padding=(1, 2), output_padding=1, dilation=[2]).attrs
    assert (at["strides"], at["padding"], at["output_padding"], at["dilation"]) == ((2, 2), (1, 2, 1, 2), (1, 1), (2, 2))
    assert (at["groups"], at["data_layout"], at["kernel_layout"], at["out_layout"], at["out_dtype"]) == (
        1, "NCHW", "IOHW", "NCHW", None)  # fmt: skip
    one = op.nn.conv1d_transpose(t((1, 4, 5)), t((4, 3, 3), name="w"), padding=2, out_dtype="void").attrs
    assert (one["strides"], one["padding"], one["output_padding"], one["dilation"]) == ((1,), (2, 2), (0,), (1,))
    assert (one["kernel_layout"], one["out_layout"], one["out_dtype"]) == ("IOW", "NCW", None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"groups": 0}, "groups must be positive, got 0"),
        ({"strides": (0, 1)}, r"strides and dilation must be positive, got strides \(0, 1\), dilation \(1, 1\)"),
        ({"dilation": -1}, "strides and dilation must be positive"),
        ({"padding": (1, -1)}, r"padding and output_padding must be non-negative, got padding \(1, -1, 1, -1\)"),
        ({"strides": 2, "output_padding": 2}, r"output_padding \(2, 2\) must be smaller than strides \(2, 2\)"),
        ({"output_padding": (0, 1)}, r"output_padding \(0, 1\) must be smaller than strides \(1, 1\)"),
        ({"padding": (1, 2, 3)}, "padding' needs 1, 2 or 4 values"),
        ({"output_padding": (1, 1, 1)}, "'output_padding' needs 2 values"),
        ({"data_layout": "NCHX"}, "attribute 'data_layout' must be a permutation of 'NCHW', got 'NCHX'"),
        ({"kernel_layout": "OIHWX"}, "attribute 'kernel_layout' must be a permutation of 'IOHW'"),
        ({"groups": 3}, "weight in-channels 4 are not divisible by groups 3"),
        ({"padding": 4}, r"output height would be -1: input 5, kernel 3, stride 1, dilation 1, padding \(4, 4\)"),
        ({"out_dtype": object()}, "not a dtype"),
    ],
)
def test_bad_attrs_name_the_op(kwargs, message):
    with pytest.raises(StructInfoError, match=rf"op 'nn.conv2d_transpose': .*{message}"):
        op.nn.conv2d_transpose(t((1, 4, 5, 5)), t((4, 3, 3, 3), name="w"), **kwargs)


def test_bad_shapes_name_the_op_and_the_shapes():
    ct2 = op.nn.conv2d_transpose
    with pytest.raises(StructInfoError, match=r"op 'nn.conv2d_transpose': data channels 3 \(data \(1, 3, 5, 5\)\) "
                                              r"must equal weight in-channels 4 \(weight \(4, 3, 3, 3\), layout IOHW\)"):
        ct2(t((1, 3, 5, 5)), t((4, 3, 3, 3), name="w"))
    with pytest.raises(StructInfoError, match=r"op 'nn.conv2d_transpose': data must be 4-D, got Tensor\(\(3, 5, 5\)"):
        ct2(t((3, 5, 5)), t((3, 3, 3, 3), name="w"))
    with pytest.raises(StructInfoError, match="op 'nn.conv2d_transpose': weight must be 4-D"):
        ct2(t((1, 3, 5, 5)), t((3, 3, 3), name="w"))
    with pytest.raises(StructInfoError, match="op 'nn.conv2d_transpose': data is float32 but weight is float16"):
        ct2(t((1, 3, 5, 5)), t((3, 3, 3, 3), "float16", "w"))
    with pytest.raises(StructInfoError, match="op 'nn.conv2d_transpose': data must be a tensor"):
        ct2(Var("s", struct_info=S.ShapeStructInfo(ndim=4)), t((3, 3, 3, 3), name="w"))
    with pytest.raises(StructInfoError, match="op 'nn.conv1d_transpose': data must be 3-D"):
        op.nn.conv1d_transpose(t((1, 3, 5, 5)), t((3, 3, 3), name="w"))
    with pytest.raises(StructInfoError, match=r"op 'nn.conv1d_transpose': output width would be 0"):
        op.nn.conv1d_transpose(t((1, 3, 1)), t((3, 3, 1), name="w"), padding=(1, 0))
    with pytest.raises(StructInfoError, match=r"op 'nn.conv1d_transpose': .*'padding' needs 2 values"):
        op.nn.conv1d_transpose(t((1, 3, 5)), t((3, 3, 3), name="w"), padding=(1, 2, 3))


# ---------------------------------------------------------------------------
# text form
# ---------------------------------------------------------------------------
#: TVM 0.27's form of R.nn.conv2d_transpose(x, w) (attrs in Conv2DTransposeAttrs order)
TVM_TEXT = (
    "R.nn.conv2d_transpose(x, w, strides=[1, 1], padding=[0, 0, 0, 0], output_padding=[0, 0], "
    'dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="IOHW", out_layout="NCHW", out_dtype=None)'
)
TVM_TEXT_1D = (
    "R.nn.conv1d_transpose(x, w, strides=[1], padding=[0, 0], output_padding=[0], dilation=[1], groups=1, "
    'data_layout="NCW", kernel_layout="IOW", out_layout="NCW", out_dtype=None)'
)


def _script(binding: str, x: str, w: str) -> str:
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        f'    def main(x: R.Tensor({x}, dtype="float32"), w: R.Tensor({w}, dtype="float32")):\n'
        f"        y = {binding}\n        return y\n"
    )


@pytest.mark.parametrize(
    ("ctor", "x", "w", "tvm_text", "short"),
    [
        (op.nn.conv2d_transpose, (1, 4, 5, 5), (4, 3, 3, 3), TVM_TEXT, "R.nn.conv2d_transpose(x, w)"),
        (op.nn.conv1d_transpose, (1, 4, 5), (4, 3, 3), TVM_TEXT_1D, "R.nn.conv1d_transpose(x, w, 1, 0)"),
    ],
    ids=["2d", "1d"],
)
def test_prints_as_tvm_and_reads_its_spellings(ctor, x, w, tvm_text, short):
    built = _module(ctor, t(x), t(w, name="w"))
    assert _binding(built).endswith(" = " + tvm_text)
    for written in (tvm_text, short, tvm_text.replace("out_dtype=None", 'out_dtype="void"')):
        assert_structural_equal(from_source(_script(written, str(x), str(w))), built)


def test_attrs_round_trip_through_text():
    x, w = t((n, 4, 5, 6)), t((4, 3, 3, 2), name="w")
    mod = _module(lambda a, b: op.nn.conv2d_transpose(a, b, (2, 3), (1, 0, 2, 1), (1, 2), (2, 1), 2, out_dtype="float64"),
                  x, w)  # fmt: skip
    text = print_module(mod)
    assert "output_padding=[1, 2]" in text and 'out_dtype="float64"' in text
    assert_structural_equal(from_source(text), mod)
    assert print_module(from_source(text)) == text


def test_parse_errors_name_the_op():
    with pytest.raises(HetvmError, match=r"nn.conv2d_transpose.*output_padding \(3, 3\) must be smaller than strides"):
        from_source(_script("R.nn.conv2d_transpose(x, w, strides=[2, 2], output_padding=[3, 3])",
                            "(1, 4, 5, 5)", "(4, 3, 3, 3)"))  # fmt: skip


# ---------------------------------------------------------------------------
# lowering and running
# ---------------------------------------------------------------------------
def test_legalizes_to_its_kernel():
    mod = LegalizeOps()(_module(lambda a, b: op.nn.conv2d_transpose(a, b, strides=2, output_padding=1),
                                t((1, 4, 5, 5)), t((4, 3, 3, 3), name="w")))  # fmt: skip
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "call_dps_packed" and call.args[0].global_symbol == "kernel.nn.conv2d_transpose"
    assert call.attrs["op_attrs"]["output_padding"] == (1, 1)
    assert call.struct_info.static_shape == (1, 3, 12, 12)


SIM_MODULE = """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("sim", 0)]})

    @R.function
    def main(x: R.Tensor((1, 1, 2, 2), "float32", "llvm"), w: R.Tensor((1, 1, 2, 2), "float32", "llvm"),
             v: R.Tensor((1, 1, 3), "float32", "llvm"), k: R.Tensor((1, 2, 2), "float32", "llvm")
             ) -> R.Tuple(R.Tensor((1, 1, 4, 4), "float32", "llvm"), R.Tensor((1, 2, 5), "float32", "llvm")):
        with R.dataflow():
            y: R.Tensor((1, 1, 4, 4), "float32", "sim") = R.nn.conv2d_transpose(x, w, strides=[2, 2])
            z: R.Tensor((1, 2, 5), "float32", "sim") = R.nn.conv1d_transpose(v, k, strides=[2], padding=[1, 1],
                                                                               output_padding=[1])
            R.output(y, z)
        return (y, z)
"""


def test_builds_and_runs_on_cpu_and_on_sim():
    x = np.array([[[[1, 2], [3, 4]]]], F32)
    w = np.array([[[[1, 10], [100, 1000]]]], F32)
    # stride 2 = kernel size: every input pixel writes its own 2x2 block
    expected = np.array([[[[1, 10, 2, 20], [100, 1000, 200, 2000], [3, 30, 4, 40], [300, 3000, 400, 4000]]]], F32)
    v = np.array([[[1, 2, 3]]], F32)
    k = np.array([[[1, 2], [3, 4]]], F32)
    # full results: channel 0 [1, 2, 2, 4, 3, 6], channel 1 [3, 4, 6, 8, 9, 12]; padding 1 on each
    # side and output_padding 1 give its positions 1..5
    expected_1d = np.array([[[2, 2, 4, 3, 6], [4, 6, 8, 9, 12]]], F32)
    mod = from_source(SIM_MODULE)
    exe = hetvm.build(mod)
    y, z = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)])["main"](x, w, v, k)
    np.testing.assert_array_equal(y.numpy(), expected)
    np.testing.assert_array_equal(z.numpy(), expected_1d)
    kernels = [i for i in exe.functions["main"].instructions if type(i).__name__ == "KernelCall"]
    assert sorted((k.op, k.device) for k in kernels if "transpose" in k.op) == [
        ("nn.conv1d_transpose", 1), ("nn.conv2d_transpose", 1)]  # fmt: skip
