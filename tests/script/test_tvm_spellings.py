"""TVM 0.27's spellings of calls whose defaults or argument forms differ from
hetvm's constructors. The TVM texts below were printed by TVM 0.27; the same
checks run against TVM itself in test_tvm_interop.py. These run without it."""

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    FuncStructInfo,
    ObjectStructInfo,
    ShapeExpr,
    TensorStructInfo,
    Tuple,
    Var,
    VDevice,
    assert_structural_equal,
)
from hetvm.script import from_source, print_module
from hetvm.script.printer import print_node
from hetvm.transform.device_planning import check_device_plan
from hetvm.transform.plan_devices import PlanDevices

F32 = "float32"


def _module(make_body, *params):
    """A one-function module: ``make_body(bb, *vars)`` emits and returns the result."""
    vs = [Var(name, struct_info=s) for name, s in params]
    bb = BlockBuilder()
    with bb.function("main", vs):
        bb.emit_func_output(make_body(bb, *vs))
    return bb.get()


def _only_binding_text(mod) -> str:
    lines = print_module(mod).splitlines()
    return next(line.strip() for line in lines if " = R." in line)


# ---------------------------------------------------------------------------
# conv2d / pooling: out_layout None is stored as the data layout (TVM's form)
# ---------------------------------------------------------------------------
TVM_CONV = (
    'R.nn.conv2d(x, w, strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1, '
    'data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype=None)'
)
TVM_MAX_POOL = (
    "R.nn.max_pool2d(x, pool_size=[1, 1], strides=[1, 1], dilation=[1, 1], padding=[0, 0, 0, 0], "
    'ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW")'
)
TVM_ADAPTIVE = 'R.nn.adaptive_avg_pool2d(x, output_size=None, layout="NCHW", out_layout="NCHW")'


def _script(binding: str, params: str = 'x: R.Tensor((1, 3, 8, 8), dtype="float32")') -> str:
    return (
        "@I.ir_module\nclass Module:\n    @R.function\n"
        f"    def main({params}):\n        y = {binding}\n        return y\n"
    )


@pytest.mark.parametrize(
    ("build", "tvm_text", "short"),
    [
        (lambda x, w: op.nn.conv2d(x, w), TVM_CONV, "R.nn.conv2d(x, w)"),
        (lambda x, w: op.nn.max_pool2d(x), TVM_MAX_POOL, "R.nn.max_pool2d(x)"),
        (lambda x, w: op.nn.adaptive_avg_pool2d(x), TVM_ADAPTIVE, "R.nn.adaptive_avg_pool2d(x)"),
    ],
    ids=["conv2d", "max_pool2d", "adaptive_avg_pool2d"],
)
def test_default_out_layout_is_the_data_layout(build, tvm_text, short):
    x_s, w_s = TensorStructInfo((1, 3, 8, 8), F32), TensorStructInfo((4, 3, 3, 3), F32)
    built = _module(lambda bb, x, w: bb.emit(build(x, w)), ("x", x_s), ("w", w_s))
    params = 'x: R.Tensor((1, 3, 8, 8), dtype="float32"), w: R.Tensor((4, 3, 3, 3), dtype="float32")'
    for written in (tvm_text, short, tvm_text.replace('out_layout="NCHW"', "out_layout=None")):
        assert_structural_equal(from_source(_script(written, params)), built)
    assert _only_binding_text(built).endswith(" = " + tvm_text)


def test_explicit_out_layout_is_kept_and_kernels_run():
    x = Var("x", struct_info=TensorStructInfo((1, 1, 4, 4), F32))
    w = Var("w", struct_info=TensorStructInfo((1, 1, 1, 1), F32))
    assert op.nn.conv2d(x, w, out_layout="NCHW").attrs["out_layout"] == "NCHW"
    assert op.nn.avg_pool2d(x, layout="NCHW").attrs["out_layout"] == "NCHW"
    mod = _module(lambda bb, x, w: bb.emit(op.nn.max_pool2d(op.nn.conv2d(x, w), (2, 2), (2, 2))),
                  ("x", x.struct_info), ("w", w.struct_info))  # fmt: skip
    vm = hetvm.VirtualMachine(hetvm.build(mod))
    data = np.arange(16, dtype=F32).reshape(1, 1, 4, 4)
    out = vm["main"](data, np.full((1, 1, 1, 1), 2, F32)).numpy()
    np.testing.assert_array_equal(out, [[[[10, 14], [26, 30]]]])


# ---------------------------------------------------------------------------
# hint_on_device: R.device(device_type=code, index=i), "scope"
# ---------------------------------------------------------------------------
def _hint_module(vdev: VDevice, declared: list[VDevice]):
    mod = _module(
        lambda bb, x: bb.emit(op.hint_on_device(x, vdev)), ("x", TensorStructInfo((2,), F32))
    )
    return mod.with_global_infos(vdevice=declared) if declared else mod


@pytest.mark.parametrize(
    ("vdev", "declared", "spelled"),
    [
        (VDevice("cuda", 0), [], 'R.device(device_type=2, index=0), "global"'),
        (VDevice("cuda", 1, "texture"), [], 'R.device(device_type=2, index=1), "texture"'),
        (VDevice("rocm", 0), [], 'R.device(device_type=10, index=0), "global"'),
        (VDevice("sim", 0), [], 'R.device("sim", 0)'),
        (VDevice("sim", 1, "texture"), [], 'R.device("sim", 1), "texture"'),
        (VDevice("llvm", 0), [VDevice("llvm", 0), VDevice("sim", 0)], 'R.device(device_type=1, index=0), "global"'),
        (VDevice("llvm", 0), [], 'R.device("llvm", 0)'),  # device type 1 alone reads as "cpu"
        (VDevice("sim", 0, "global", (("arch", "v2"),)), [VDevice("sim", 0, "global", (("arch", "v2"),))], 'R.device("sim", 0)'),
    ],
)  # fmt: skip
def test_hint_on_device_prints_a_device_that_reads_back(vdev, declared, spelled):
    mod = _hint_module(vdev, declared)
    line = _only_binding_text(mod)
    assert line.endswith(f"R.hint_on_device(x, {spelled})")
    assert_structural_equal(from_source(print_module(mod)), mod)


@pytest.mark.parametrize(
    "spelled",
    [
        'R.device(device_type=2, index=1), "global"',
        "R.device(2, 1)",
        'R.device("cuda", 1)',
        'R.device(dev_type=2, dev_id=1), R.str("global")',
    ],
)
def test_tvm_device_spellings_name_the_declared_vdevice(spelled):
    declared = [
        VDevice("llvm", 0, "global", (("keys", ("cpu",)), ("tag", ""))),
        VDevice("cuda", 0, "global", (("arch", "sm_50"),)),
        VDevice("cuda", 1, "global", (("arch", "sm_80"),)),
    ]
    mod = from_source(
        "@I.ir_module\nclass Module:\n"
        '    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global"), '
        'I.vdevice({"arch": "sm_50", "kind": "cuda"}, 0, "global"), I.vdevice({"arch": "sm_80", "kind": "cuda"}, 1, "global")]})\n'
        "    @R.function\n"
        '    def main(x: R.Tensor((2,), dtype="float32")):\n'
        f"        y = R.hint_on_device(x, {spelled})\n"
        "        return y\n"
    )
    assert mod.vdevices == declared
    assert mod["main"].body.blocks[0].bindings[0].value.attrs["dst_vdevice"] == declared[2]
    assert "R.hint_on_device(x, R.device(device_type=2, index=1), \"global\")" in print_module(mod)


# ---------------------------------------------------------------------------
# vdevices TVM prints as target dicts plan as the plain ones
# ---------------------------------------------------------------------------
PLANNED = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [%s, I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((2, 3), dtype="float32", vdevice="sim:0:global")) -> R.Tensor((2, 3), dtype="float32"):
        a: R.Tensor((2, 3), dtype="float32") = R.exp(x)
        b: R.Tensor((2, 3), dtype="float32") = R.hint_on_device(a, R.device(device_type=1, index=0), "global")
        c: R.Tensor((2, 3), dtype="float32", vdevice="sim:0") = R.to_vdevice(b, "sim")
        d: R.Tensor((2, 3), dtype="float32", vdevice="llvm") = R.to_vdevice(c, "llvm")
        return d
'''
TVM_LLVM = (
    'I.vdevice({"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-conda-linux-gnu", "tag": ""}, '
    '0, "global")'
)


def test_target_dict_vdevices_plan_and_run_as_plain_ones():
    texts, outs = [], []
    x = np.linspace(-1, 1, 6, dtype=F32).reshape(2, 3)
    for decl in (TVM_LLVM, 'I.vdevice("llvm")'):
        mod = from_source(PLANNED % decl)
        host = mod.vdevices[0]
        assert (host.kind, host.vdevice_id, host.target) == ("cpu", 0, "llvm")
        assert mod["main"].body.blocks[0].bindings[1].value.attrs["dst_vdevice"] is host
        planned = PlanDevices()(mod)
        check_device_plan(planned)
        texts.append([ln for ln in print_module(planned).splitlines() if "module_global_infos" not in ln])
        outs.append(hetvm.VirtualMachine(hetvm.build(mod))["main"](x).numpy())
    assert texts[0] == texts[1]
    np.testing.assert_array_equal(outs[0], outs[1])
    # the extra target keys are kept for printing
    assert TVM_LLVM in print_module(from_source(PLANNED % TVM_LLVM))


# ---------------------------------------------------------------------------
# other calls TVM prints with its defaults or as positional Relax arguments
# ---------------------------------------------------------------------------
def test_memory_ops_print_tvm_default_arguments():
    sv = Var("s", struct_info=ObjectStructInfo())
    calls = {
        'R.memory.alloc_tensor(s, 0, R.shape([4]), R.dtype("float32"), 0)':
            op.memory.alloc_tensor(sv, 0, (4,), F32),
        'R.vm.alloc_tensor(s, 0, R.shape([4]), R.dtype("float32"), 0)':
            op.vm.alloc_tensor(sv, 0, (4,), F32),
        'R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), 0, R.str("global"))':
            op.builtin.alloc_tensor((4,), F32, 0),
        'R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), 0, R.str("texture"))':
            op.builtin.alloc_tensor((4,), F32, 0, "texture"),
        'R.vm.alloc_tensor(s, 0, R.shape([4]), R.dtype("float32"), 1)':
            op.vm.alloc_tensor(sv, 0, (4,), F32, 1),
    }  # fmt: skip
    for text, call in calls.items():
        assert print_node(call) == text


def test_call_dps_packed_binding_has_no_annotation_when_derived():
    x_s = TensorStructInfo((2, 2), F32)

    def body(bb, x):
        a = bb.emit(op.call_dps_packed("f", Tuple((x,)), x_s))
        return bb.emit(op.call_dps_packed("g", Tuple((a,)), [x_s, x_s]))

    mod = _module(body, ("x", x_s))
    text = print_module(mod)
    assert '        lv = R.call_dps_packed("f", (x,), out_ty=R.Tensor((2, 2), dtype="float32"))' in text
    assert "        lv1 = R.call_dps_packed(" in text
    assert_structural_equal(from_source(text), mod)


def test_clip_and_strided_slice_take_tvm_positional_arguments():
    x_s = TensorStructInfo((4, 4), F32)
    mod = _module(
        lambda bb, x: bb.emit(Tuple((
            bb.emit(op.clip(x, 0.1, 6)),
            bb.emit(op.strided_slice(x, [1], [0], [2])),
            bb.emit(op.strided_slice(x, [0, 1], [0, 1], [4, 4], [2, 1])),
        ))),
        ("x", x_s),
    )  # fmt: skip
    text = print_module(mod)
    assert "R.clip(x, T.float64(0.10000000000000001), T.float64(6.0))" in text
    assert "R.strided_slice(x, (1,), (0,), (2,), assume_inbound=False)" in text
    assert "R.strided_slice(x, (0, 1), (0, 1), (4, 4), (2, 1), assume_inbound=False)" in text
    assert_structural_equal(from_source(text), mod)
    # the keyword spelling and TVM's "6" for an integer bound read the same
    again = text.replace("T.float64(6.0)", "6").replace("(x, (1,), (0,), (2,),", "(x, axes=[1], begin=[0], end=[2],")
    assert_structural_equal(from_source(again), mod)


def test_float_attrs_print_as_tvm_does():
    x = Var("x", struct_info=TensorStructInfo((2,), F32))
    assert print_node(op.nn.leakyrelu(x, 0.1)) == "R.nn.leakyrelu(x, alpha=0.10000000000000001)"
    assert print_node(op.nn.leakyrelu(x, 1e20)) == "R.nn.leakyrelu(x, alpha=100000000000000000000.0)"
    assert print_node(op.nn.leakyrelu(x, 2.5)) == "R.nn.leakyrelu(x, alpha=2.5)"
    assert print_node(op.nn.pad(x, [1, 1])) == (
        'R.nn.pad(x, pad_width=[1, 1], pad_value=0.0, pad_mode="constant")'
    )
    for value in (0.1, 1e-5, 1 / 3, 1e20, 1e-300, 12345.678, -0.0):
        mod = _module(lambda bb, x, v=value: bb.emit(op.nn.leakyrelu(x, v)), ("x", x.struct_info))
        assert_structural_equal(from_source(print_module(mod)), mod)


def test_opaque_callables_use_tvm_keyword_form():
    t = TensorStructInfo((2,), F32)
    cases = {
        "R.Callable": FuncStructInfo(None, ObjectStructInfo(), False),
        "R.Callable(purity=True)": FuncStructInfo(None, ObjectStructInfo(), True),
        'R.Callable(ret=R.Tensor((2,), dtype="float32"))': FuncStructInfo(None, t, False),
        'R.Callable(ret=R.Tensor((2,), dtype="float32"), purity=True)': FuncStructInfo(None, t, True),
    }
    for text, sinfo in cases.items():
        assert print_node(sinfo) == text
        mod = from_source(
            f"@I.ir_module\nclass Module:\n    @R.function\n    def main(f: {text}):\n        return f\n"
        )
        assert mod["main"].params[0].struct_info == sinfo
    # with parameters, TVM's default purity is True
    mod = from_source(
        "@I.ir_module\nclass Module:\n    @R.function\n"
        "    def main(f: R.Callable((), R.Any)):\n        return f\n"
    )
    assert mod["main"].params[0].struct_info == FuncStructInfo([], ObjectStructInfo(), True)


def test_functions_and_typevars_print_sorted_by_name_and_attrs_first():
    text = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global")]})
    I.module_attrs({"k": 1})
    @R.function
    def zeta(x: R.Tensor(("n", "b"), "float32")):
        return x
    @R.function
    def Alpha(x: R.Tensor(("a1",), "float32")):
        return x
    @R.function(private=True)
    def beta(x: R.Tensor((4,), "float32")):
        return x
'''
    lines = print_module(from_source(text)).splitlines()
    assert [ln for ln in lines if "TypeVar(" in ln] == [
        'a1 = TypeVar("a1")', 'b = TypeVar("b")', 'n = TypeVar("n")',
    ]  # fmt: skip
    defs = [ln.split("(")[0].strip() for ln in lines if ln.strip().startswith("def ")]
    assert defs == ["def Alpha", "def beta", "def zeta"]
    body = [ln.strip().split("(")[0] for ln in lines if ln.startswith("    I.")]
    assert body == ["I.module_attrs", "I.module_global_infos"]


def test_builtin_alloc_tensor_shape_expr_argument_is_unchanged():
    call = op.builtin.alloc_tensor(ShapeExpr([2]), F32, 0, "global")
    assert len(call.args) == 3


def test_hint_no_device_names_exactly_prints_its_vdevice():
    plain, declared = VDevice("sim", 0), [VDevice("sim", 0, "global", (("arch", "v2"),))]
    mod = _hint_module(plain, declared)
    line = _only_binding_text(mod)
    assert line.endswith('R.hint_on_device(x, dst_vdevice=I.vdevice("sim", 0, "global"))')
    parsed = from_source(print_module(mod))
    assert parsed["main"].body.blocks[0].bindings[0].value.attrs["dst_vdevice"] == plain


# ---------------------------------------------------------------------------
# prim values and strings as TVM prints them
# ---------------------------------------------------------------------------
TVM_PRIM_VALUES = '''# from typing import TypeVar
# from tvm.script import ir as I
# from tvm.script import tirx as T
# from tvm.tirx.layout import Axis
# from tvm.script import relax as R

n = TypeVar("n")
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((n,), dtype="float32")) -> R.Tensor((n,), dtype="float32"):
        a: T.int64 = n * 2
        b: T.float32 = T.float32(1.5)
        c: T.int32 = 3
        e: T.int64 = 5
        f: T.bool = True
        s: I.StringType() = R.str("hello")
        k: R.Any = R.call_packed("f", a, T.float32(2.5), R.prim_value(T.int32(4)), ty_args=(R.Any,))
        return x'''  # printed by TVM 0.27, but for `R.prim_value(T.int32(4))`, which TVM prints `4`


def test_prim_values_print_bare_and_keep_their_values():
    mod = from_source(TVM_PRIM_VALUES)
    assert print_module(mod) == TVM_PRIM_VALUES
    b = {binding.var.name_hint: binding for binding in mod["main"].body.blocks[0].bindings}
    # `T.int64` annotations leave out the value; the variable gets it from the value
    assert b["a"].var.struct_info == b["a"].value.struct_info
    assert b["a"].var.struct_info.value is not None
    assert b["c"].value.value.dtype == "int32" and b["f"].value.value.dtype == "bool"
    assert b["s"].var.struct_info == ObjectStructInfo()
    assert b["k"].value.args[2].value.dtype == "int32"
    assert_structural_equal(from_source(print_module(mod)), mod)


def test_prim_annotation_that_differs_from_the_value_is_kept():
    mod = from_source(
        "@I.ir_module\nclass Module:\n    @R.function\n    def main(x: R.Tensor((2,), \"float32\")):\n"
        "        p: R.Prim(\"int64\") = R.prim_value(7)\n        q = R.prim_value(7)\n        return x\n"
    )
    p, q = mod["main"].body.blocks[0].bindings
    assert p.var.struct_info == q.var.struct_info  # `R.Prim("int64")` is `T.int64`: value kept
    text = print_module(mod)
    assert "        p: T.int64 = 7" in text and "        q: T.int64 = 7" in text


def test_module_reference_follows_shape_variables():
    text = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        m = T.int64()
        cls = Module
        y = R.match_cast(x, R.Tensor((m,), "float32"))
        return cls.f(y)
    @R.function
    def f(x: R.Tensor(("k",), "float32")):
        return x
'''
    lines = print_module(from_source(text)).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("    def main("))
    assert lines[start + 1 : start + 3] == ["        m = T.int64()", "        cls = Module"]


def test_packed_call_attrs_and_maps_print_as_tvm():
    x = Var("x", struct_info=TensorStructInfo((2,), F32))
    call = op.call_packed("k", x, op_attrs={"z": 1, "a": [1, 2]}, device_index=0)
    assert print_node(call) == (
        'R.call_packed("k", x, attrs_type_key="ir.DictAttrs", device_index=0, '
        'op_attrs={"a": [1, 2], "z": 1})'
    )
    assert print_node(op.call_packed("k", x)) == 'R.call_packed("k", x)'
    mod = _module(lambda bb, x: x, ("x", x.struct_info))
    mod = type(mod)(dict(mod.functions), attrs={"plan": {"version": 1, "functions": {}}})
    assert 'I.module_attrs({"plan": {"functions": {}, "version": 1}})' in print_module(mod)
    assert_structural_equal(from_source(print_module(mod)), mod)
