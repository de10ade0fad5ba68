"""image.resize2d: struct-info inference, attr normalisation and validation, the text
form (TVM 0.27's spelling, hetvm's own attrs only when set), legalisation."""

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.errors import HetvmError, StructInfoError
from hetvm.ir import BlockBuilder, ShapeExpr, Var, VDevice, assert_structural_equal, op_info, prim
from hetvm.ir import struct_info as S
from hetvm.ir.op_registry import DeviceBehavior
from hetvm.kernels import has_kernel
from hetvm.script import from_source, print_module
from hetvm.transform import LegalizeOps

n = prim.PrimVar("n")
F32 = "float32"


def t(shape, dtype=F32, name="x", vdevice=None):
    return Var(name, struct_info=S.TensorStructInfo(shape, dtype, vdevice=vdevice))


def _module(call_of, x):
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(call_of(x))
        bb.emit_func_output(y)
    return bb.get()


def _binding(mod) -> str:
    return next(line.strip() for line in print_module(mod).splitlines() if "R.image" in line)


# ---------------------------------------------------------------------------
# inference
# ---------------------------------------------------------------------------
def test_output_shape_is_size_on_the_layouts_h_and_w():
    shape = op.image.resize2d(t((n, 3, 4, 5)), (8, 10)).struct_info.shape
    assert shape[0] is n and [prim.const_value(d) for d in shape[1:]] == [3, 8, 10]
    nhwc = op.image.resize2d(t((2, 4, 5, 3)), (8, 10), layout="NHWC").struct_info
    assert nhwc.static_shape == (2, 8, 10, 3)
    odd = op.image.resize2d(t((2, 4, 3, 5)), (8, 10), layout="HCNW").struct_info
    assert odd.static_shape == (8, 4, 3, 10)  # H C N W


def test_size_forms_dtype_and_vdevice():
    m = prim.PrimVar("m")
    assert op.image.resize2d(t((1, 3, 4, 5)), 6).struct_info.static_shape == (1, 3, 6, 6)
    assert op.image.resize2d(t((1, 3, 4, 5)), [7]).struct_info.static_shape == (1, 3, 7, 7)
    sym = op.image.resize2d(t((1, 3, 4, 5)), (m, m * 2)).struct_info
    assert sym.shape[2] is m and prim.prove_equal(sym.shape[3], m * 2)
    gpu = VDevice("cuda", 0)
    out = op.image.resize2d(t((1, 3, 4, 5), "uint8", vdevice=gpu), (2, 2), out_dtype="float32").struct_info
    assert (out.dtype, out.vdevice) == ("float32", gpu)
    assert op.image.resize2d(t((1, 3, 4, 5)), (2, 2), out_dtype="void").attrs["out_dtype"] is None


def test_unknown_shapes_give_a_rank_4_result():
    assert op.image.resize2d(Var("x", struct_info=S.TensorStructInfo(None, F32, 4)), (2, 3)).struct_info.ndim == 4
    size = Var("s", struct_info=S.ShapeStructInfo(ndim=2))
    sinfo = op.image.resize2d(t((1, 3, 4, 5)), size).struct_info
    assert sinfo.shape is None and sinfo.ndim == 4 and sinfo.dtype == F32


def test_op_properties():
    info = op_info("image.resize2d")
    assert info.pure and info.device_behavior is DeviceBehavior.FOLLOW_INPUTS and info.num_inputs == 2
    assert all(has_kernel("image.resize2d", kind) for kind in ("cpu", "sim", "cuda"))


# ---------------------------------------------------------------------------
# attrs
# ---------------------------------------------------------------------------
def test_attrs_are_normalised():
    call = op.image.resize2d(t((1, 3, 4, 5)), (8, 10), roi=[0.1, 0, 1, 0.9], cubic_alpha=-1,
                             cubic_exclude=True, extrapolation_value=2, scales=[2, 2.5])  # fmt: skip
    roi = call.attrs["roi"]
    assert all(isinstance(v, prim.FloatImm) and v.dtype == "float32" for v in roi)
    assert [v.value for v in roi] == [float(np.float32(0.1)), 0.0, 1.0, float(np.float32(0.9))]
    assert call.attrs["cubic_alpha"] == -1.0 and isinstance(call.attrs["cubic_alpha"], float)
    assert call.attrs["cubic_exclude"] == 1 and call.attrs["extrapolation_value"] == 2.0
    assert call.attrs["scales"] == (2.0, 2.5) and call.attrs["antialias"] is False
    assert [v.value for v in op.image.resize2d(t((1, 3, 4, 5)), 2, roi=0.5).attrs["roi"]] == [0.5] * 4
    defaults = op.image.resize2d(t((1, 3, 4, 5)), 2).attrs
    assert [v.value for v in defaults["roi"]] == [0.0] * 4
    assert (defaults["method"], defaults["coordinate_transformation_mode"], defaults["rounding_method"]) == (
        "linear", "half_pixel", "round")
    assert (defaults["cubic_alpha"], defaults["scales"]) == (-0.75, None)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "bilinear"}, "method must be one of nearest_neighbor, linear, cubic; got 'bilinear'"),
        ({"coordinate_transformation_mode": "corners"}, "coordinate_transformation_mode must be one of"),
        ({"rounding_method": "nearest"}, "rounding_method must be one of round, round_prefer_floor"),
        ({"cubic_exclude": 2}, "cubic_exclude must be 0 or 1, got 2"),
        ({"method": "nearest_neighbor", "antialias": True}, "antialias applies to the linear and cubic"),
        ({"layout": "NCH"}, "attribute 'layout' must be a permutation of 'NCHW', got 'NCH'"),
        ({"roi": (0, 1)}, r"roi must be None, a float or 4 floats \(start_h, start_w, end_h, end_w\)"),
        ({"scales": (2.0,)}, r"scales must be None or 2 floats \(height, width\)"),
        ({"scales": (2.0, -1.0)}, r"scales must be positive, got \(2.0, -1.0\)"),
    ],
)
def test_bad_attrs_name_the_op_and_the_attr(kwargs, message):
    with pytest.raises(StructInfoError, match=rf"op 'image.resize2d': {message}"):
        op.image.resize2d(t((1, 3, 4, 5)), (8, 10), **kwargs)


def test_bad_arguments():
    x = t((1, 3, 4, 5))
    with pytest.raises(StructInfoError, match=r"size needs 1 or 2 values \(height, width\), got \(1, 2, 3\)"):
        op.image.resize2d(x, (1, 2, 3))
    with pytest.raises(StructInfoError, match=r"data must be 4-D \(NCHW\), got Tensor\(\(3, 4, 5\), float32\)"):
        op.image.resize2d(t((3, 4, 5)), (8, 10))
    with pytest.raises(StructInfoError, match="size must have 2 values"):
        op.image.resize2d(x, Var("s", struct_info=S.ShapeStructInfo(ndim=3)))
    with pytest.raises(StructInfoError, match="size must be a shape of 2 values"):
        op.image.resize2d(x, t((2,), "int64", "s"))
    with pytest.raises(StructInfoError, match=r"output height must be positive, got size \(0, 4\)"):
        op.image.resize2d(x, (0, 4))
    with pytest.raises(StructInfoError, match="data must be a tensor"):
        op.image.resize2d(Var("s", struct_info=S.ShapeStructInfo(ndim=4)), (2, 2))


# ---------------------------------------------------------------------------
# text form
# ---------------------------------------------------------------------------
#: as TVM 0.27 prints R.image.resize2d(x, (8, 10), layout="NHWC", cubic_alpha=-0.5)
TVM_TEXT = (
    'R.image.resize2d(x, R.shape([8, 10]), roi=[T.float32(0.0), T.float32(0.0), T.float32(0.0), '
    'T.float32(0.0)], layout="NHWC", method="linear", coordinate_transformation_mode="half_pixel", '
    'rounding_method="round", cubic_alpha=-0.5, cubic_exclude=0, extrapolation_value=0.0, out_dtype=None)'
)


def _script(binding: str) -> str:
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        '    def main(x: R.Tensor((1, 4, 5, 3), dtype="float32")):\n'
        f"        y = {binding}\n        return y\n"
    )


def test_prints_as_tvm_prints_and_reads_tvms_spellings():
    x = t((1, 4, 5, 3))
    built = _module(lambda v: op.image.resize2d(v, (8, 10), layout="NHWC", cubic_alpha=-0.5), x)
    assert _binding(built).endswith(" = " + TVM_TEXT)
    assert "scales" not in print_module(built) and "antialias" not in print_module(built)
    for written in (
        TVM_TEXT,
        TVM_TEXT.replace("T.float32(0.0)", "T.float32(0)").replace('out_dtype=None', 'out_dtype="void"'),
        'R.image.resize2d(x, size=(8, 10), layout="NHWC", cubic_alpha=-0.5)',
    ):
        assert_structural_equal(from_source(_script(written)), built)


def test_hetvm_attrs_print_when_set_and_round_trip():
    x = t((1, 3, 4, 5))
    for kwargs in (
        {"scales": (0.6, 2.5), "method": "cubic"},
        {"antialias": True, "roi": (0.1, 0.2, 0.9, 0.7), "coordinate_transformation_mode": "tf_crop_and_resize",
         "extrapolation_value": float("inf"), "method": "linear"},
        {"method": "nearest_neighbor", "rounding_method": "floor", "out_dtype": "float16"},
    ):  # fmt: skip
        mod = _module(lambda v, kw=kwargs: op.image.resize2d(v, (n, 7), **kw), x)
        text = print_module(mod)
        assert ("scales=[0.59999999999999998, 2.5]" in text) == ("scales" in kwargs)
        assert ("antialias=True" in text) == ("antialias" in kwargs)
        assert_structural_equal(from_source(text), mod)
        assert print_module(from_source(text)) == text


def test_parse_errors_name_the_op():
    with pytest.raises(HetvmError, match="image.resize2d.*method must be one of"):
        from_source(_script('R.image.resize2d(x, (8, 10), method="area")'))


# ---------------------------------------------------------------------------
# lowering
# ---------------------------------------------------------------------------
def test_legalizes_to_its_kernel_with_the_size_argument():
    mod = LegalizeOps()(_module(lambda v: op.image.resize2d(v, (8, 10), scales=(2.0, 2.0)), t((1, 3, 4, 5))))
    call = mod["main"].body.blocks[0].bindings[0].value
    assert call.op.name == "call_dps_packed" and call.args[0].global_symbol == "kernel.image.resize2d"
    assert isinstance(call.args[1].fields[1], ShapeExpr)
    assert call.attrs["op_attrs"]["scales"] == (2.0, 2.0)
    assert call.struct_info.static_shape == (1, 3, 8, 10)


SIM_MODULE = """
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("sim", 0)]})

    @R.function
    def main(x: R.Tensor((1, 2, 3, 4), "float32", "llvm")) -> R.Tensor((1, 2, 6, 8), "float32", "llvm"):
        with R.dataflow():
            y: R.Tensor((1, 2, 6, 8), "float32", "sim") = R.image.resize2d(
                x, (6, 8), method="nearest_neighbor", coordinate_transformation_mode="asymmetric",
                rounding_method="floor")
            z = R.add(y, y)
            R.output(z)
        return z
"""


def test_builds_and_runs_on_cpu_and_on_sim():
    data = np.arange(24, dtype=F32).reshape(1, 2, 3, 4)
    expected = 2 * data.repeat(2, axis=2).repeat(2, axis=3)
    mod = from_source(SIM_MODULE)
    vm = hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0), hetvm.device("sim", 0)])
    np.testing.assert_array_equal(vm["main"](data).numpy(), expected)
    kernels = [i for i in hetvm.build(mod).functions["main"].instructions if type(i).__name__ == "KernelCall"]
    assert [k.device for k in kernels if k.op == "image.resize2d"] == [1]  # ran on sim:0
    plain = _module(lambda v: op.image.resize2d(v, (6, 8), method="nearest_neighbor",
                                                coordinate_transformation_mode="asymmetric",
                                                rounding_method="floor"), t((1, 2, 3, 4)))  # fmt: skip
    np.testing.assert_array_equal(hetvm.VirtualMachine(hetvm.build(plain))["main"](data).numpy(), expected / 2)
