"""Round trip: parse(print(m)) is structurally equal to m and prints the same text."""

import numpy as np
import pytest

import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    FuncStructInfo,
    If,
    IRModule,
    ObjectStructInfo,
    PrimStructInfo,
    PrimValue,
    SeqExpr,
    ShapeExpr,
    ShapeStructInfo,
    StringImm,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    TupleStructInfo,
    Var,
    VDevice,
    assert_structural_equal,
    const,
    prim,
)
from hetvm.ir import expr as E
from hetvm.script import from_source, print_module

F32 = "float32"


def roundtrip(mod: IRModule) -> str:
    text = print_module(mod)
    parsed = from_source(text)
    assert_structural_equal(mod, parsed)
    assert print_module(parsed) == text
    return text


def t(shape, dtype=F32, vdevice=None):
    return TensorStructInfo(shape, dtype, vdevice=vdevice)


# --------------------------------------------------------------------------
# modules built with the BlockBuilder
# --------------------------------------------------------------------------


def mod_dataflow_symbolic():
    n = prim.PrimVar("n")
    m = prim.PrimVar("m")
    x = Var("x", struct_info=t((n, 4)))
    w = Var("w", struct_info=t((4, 8)))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(op.matmul(x, w))
            z = bb.emit(op.nn.relu(y))
            c = bb.match_cast(z, t((m, 8)))
            s = bb.emit(op.sum(c, axis=[1], keepdims=True))
            out = bb.emit_output(op.add(s, const(1.0, F32)))
        bb.emit(ShapeExpr((n * 2 + 1, prim.min_(n, m), prim.floordiv(n, 2), prim.floormod(n, 3))))
        bb.emit_func_output(out)
    return bb.get()


def mod_tuples():
    x = Var("x", struct_info=t((6, 4)))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            parts = bb.emit(op.split(x, 3, axis=0))
            a = bb.emit(TupleGetItem(parts, 0))
            b = bb.emit(TupleGetItem(parts, 2))
            cat = bb.emit(op.concat(Tuple((a, b)), axis=0))
            pair = bb.emit(Tuple((cat, a)))
            one = bb.emit(Tuple((a,)))
            empty = bb.emit(Tuple(()))
            gv = bb.emit_output(Tuple((pair, one, empty)))
        bb.emit_func_output(gv)
    return bb.get()


def mod_if():
    x = Var("x", struct_info=t((3,)))
    c = Var("c", struct_info=t((), "bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, c]):
        bb.begin_scope()
        a = bb.emit(op.exp(x), "a")
        tb = bb.end_scope(a)
        bb.begin_scope()
        b = bb.emit(op.negative(x), "b")
        fb = bb.end_scope(b)
        r = bb.emit(If(c, tb, fb), "r")
        out = bb.emit(op.add(r, x))
        bb.emit_func_output(out)
    return bb.get()


def mod_calls():
    """Functions calling each other through GlobalVars, private and impure ones."""
    bb = BlockBuilder()
    x = Var("x", struct_info=t((2, 2)))
    with bb.function("helper", [x], attrs={"tir_var_upper_bound": {"n": 16}}, private=True):
        y = bb.emit(op.exp(x))
        bb.emit_func_output(y)
    helper = bb.module.get_global_var("helper")
    x2 = Var("x", struct_info=t((2, 2)))
    with bb.function("main", [x2], pure=False):
        a = bb.emit(E.Call(helper, (x2,)))
        bb.emit(op.call_packed("print_tensor", a, sinfo_args=[TupleStructInfo([])]))
        bb.emit_func_output(a)
    return bb.get()


def mod_vdevices():
    devs = [VDevice("llvm"), VDevice("cuda", 0), VDevice("sim", 0), VDevice("cuda", 1, "global", (("arch", "sm_80"),))]
    x = Var("x", struct_info=t((4,), vdevice=devs[1]))
    y = Var("y", struct_info=t((4,), vdevice=devs[0]))
    bb = BlockBuilder()
    with bb.function("main", [x, y]):
        a = bb.emit(op.to_vdevice(y, devs[1]))
        b = bb.emit(op.add(x, a))
        c = bb.emit(op.hint_on_device(b, devs[2]))
        d = bb.emit(op.to_vdevice(c, devs[3]))
        bb.emit_func_output(d)
    return bb.get().with_global_infos(vdevice=devs)


def mod_memory():
    x = Var("x", struct_info=t((16, 32)))
    bb = BlockBuilder()
    with bb.function("main", [x], pure=False):
        st = bb.emit(op.memory.alloc_storage(ShapeExpr([2048]), 0, "global", "uint8"), "storage")
        y = bb.emit(op.memory.alloc_tensor(st, 0, ShapeExpr([16, 32]), F32), "y")
        bb.emit(op.call_packed("kernel:add", x, x, y, op_attrs={"axis": 1}, device_index=0))
        z = bb.emit(op.builtin.alloc_tensor(ShapeExpr([16, 32]), F32, 0))
        d = bb.emit(op.call_dps_packed("add", Tuple((x, y)), t((16, 32)), op_attrs={"k": (1, 2)}))
        d2 = bb.emit(op.call_dps_packed("split2", Tuple((d,)), [t((8, 32)), t((8, 32))]))
        vs = bb.emit(op.vm.alloc_storage(ShapeExpr([64]), 0, "uint8"))
        bb.emit(op.vm.kill_object(vs))
        bb.emit(op.memory.kill_tensor(y))
        bb.emit(op.memory.kill_storage(st))
        out = bb.emit(Tuple((z, d2)))
        bb.emit_func_output(out)
    return bb.get()


def mod_constants_and_leaves():
    x = Var("x", struct_info=t((2, 3)))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit(const(np.array([[1.5, np.nan, -np.inf], [0.1, -0.0, 3e38]], dtype="float32")))
        bb.emit(const(np.arange(6, dtype="int64").reshape(2, 3)))
        bb.emit(const(True, "bool"))
        bb.emit(const(np.array([True, False])))
        bb.emit(const(7, "int32"))
        bb.emit(const(np.zeros((2, 0), dtype="float64")))
        bb.emit(PrimValue(5))
        bb.emit(PrimValue(prim.IntImm(5, "int32")))
        bb.emit(PrimValue(2.5))
        bb.emit(StringImm("hello \"world\"\n"))
        bb.emit(E.DataTypeImm("float16"))
        bb.emit(op.astype(x, "float16"))
        bb.emit(op.reshape(x, (3, 2)))
        bb.emit(op.permute_dims(x, [1, 0]))
        bb.emit(op.clip(x, 0.0, 6.0))
        bb.emit(op.strided_slice(x, axes=[1], begin=[0], end=[2]))
        bb.emit(op.nn.softmax(x, axis=-1))
        bb.emit(op.full((2, 2), const(0.5, F32), F32))
        bb.emit(op.null_value())
        bb.emit_func_output(x)
    return bb.get()


def mod_conv():
    x = Var("x", struct_info=t((1, 3, 8, 8)))
    w = Var("w", struct_info=t((4, 3, 3, 3)))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(op.nn.conv2d(x, w, strides=(1, 1), padding=(1, 1)))
            z = bb.emit(op.nn.max_pool2d(y, pool_size=(2, 2), strides=(2, 2)))
            gv = bb.emit_output(op.nn.adaptive_avg_pool2d(z, output_size=(1, 1)))
        bb.emit_func_output(gv)
    return bb.get()


def mod_params_of_every_kind():
    n = prim.PrimVar("n")
    k = prim.PrimVar("k", "int32")
    params = [
        Var("s", struct_info=ShapeStructInfo([n, 4])),
        Var("s2", struct_info=ShapeStructInfo(ndim=2)),
        Var("s3", struct_info=ShapeStructInfo()),
        Var("o", struct_info=ObjectStructInfo()),
        Var("p", struct_info=PrimStructInfo("int64")),
        Var("q", struct_info=PrimStructInfo("int64", n * 2)),
        Var("r", struct_info=PrimStructInfo("int32", k)),
        Var("u", struct_info=TensorStructInfo(None, None, ndim=3)),
        Var("v", struct_info=TensorStructInfo()),
        Var("w", struct_info=TensorStructInfo((n,), None)),
        Var("tu", struct_info=TupleStructInfo([t((n,)), ShapeStructInfo(ndim=1)])),
        Var("f", struct_info=FuncStructInfo([t((2,))], t((2,)), False)),
        Var("g", struct_info=FuncStructInfo(None, ObjectStructInfo())),
    ]
    bb = BlockBuilder()
    with bb.function("main", params):
        a = bb.emit(E.Call(params[11], (const(np.zeros(2, dtype="float32")),)))
        bb.emit(TupleGetItem(params[10], 1))
        bb.emit_func_output(a)
    return bb.get()


def mod_module_infos():
    x = Var("x", struct_info=t((1,)))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(x)
    return IRModule(bb.get().functions, {"vdevice": [VDevice("llvm")]}, {"system_lib_prefix": "hetvm_"})


def mod_clashing_names():
    sinfo = t((2,))
    x = Var("x", struct_info=sinfo)
    bb = BlockBuilder()
    n1 = Var("R", struct_info=sinfo)
    n2 = Var("if", struct_info=sinfo)
    n3 = Var("a.b", struct_info=sinfo)
    n4 = Var("x", struct_info=sinfo)
    with bb.function("main", [x]):
        bb.emit_binding(E.VarBinding(n1, op.add(x, x)))
        bb.emit_binding(E.VarBinding(n2, op.add(n1, n1)))
        bb.emit_binding(E.VarBinding(n3, op.add(n2, n2)))
        bb.emit_binding(E.VarBinding(n4, op.add(n3, n3)))
        bb.emit_func_output(n4)
    return bb.get()


def mod_two_functions_same_symbol():
    bb = BlockBuilder()
    for name in ("f", "g"):
        n = prim.PrimVar("n")
        x = Var("x", struct_info=t((n,)))
        with bb.function(name, [x]):
            y = bb.emit(op.exp(x))
            bb.emit_func_output(y)
    return bb.get()


BUILT = [
    mod_dataflow_symbolic,
    mod_tuples,
    mod_if,
    mod_calls,
    mod_vdevices,
    mod_memory,
    mod_constants_and_leaves,
    mod_conv,
    mod_params_of_every_kind,
    mod_module_infos,
    mod_clashing_names,
    mod_two_functions_same_symbol,
]


@pytest.mark.parametrize("build", BUILT, ids=[b.__name__ for b in BUILT])
def test_roundtrip_of_built_modules(build):
    roundtrip(build())


def test_clashing_names_are_renamed_to_valid_identifiers():
    text = roundtrip(mod_clashing_names())
    assert "R_1: R.Tensor" in text and "if_: R.Tensor" in text and "a_b: R.Tensor" in text
    assert "x_1: R.Tensor" in text


def test_if_binding_text():
    text = roundtrip(mod_if())
    assert "        if c:\n" in text and "        else:\n" in text
    assert '            r: R.Tensor((3,), dtype="float32") = a\n' in text
    assert '            r: R.Tensor((3,), dtype="float32") = b\n' in text


def test_call_packed_and_dps_text():
    text = roundtrip(mod_memory())
    assert (
        'R.call_packed("kernel:add", x, x, y, attrs_type_key="ir.DictAttrs", device_index=0, '
        'op_attrs={"axis": 1})' in text
    )
    assert (
        'R.call_dps_packed("add", (x, y), out_ty=R.Tensor((16, 32), dtype="float32"), '
        'op_attrs={"k": [1, 2]})' in text
    )
    assert 'out_ty=[R.Tensor((8, 32), dtype="float32"), R.Tensor((8, 32), dtype="float32")]' in text
    assert "        R.memory.kill_storage(storage)\n" in text


# --------------------------------------------------------------------------
# modules written as scripts
# --------------------------------------------------------------------------

SCRIPTS = {
    "dataflow_and_match_cast": '''
from hetvm.script import ir as I, relax as R, tir as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(ndim=2, dtype="float32"):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            lv = R.add(x, x)
            lv1 = R.match_cast(lv, R.Tensor((m, 4), "float32"))
            gv = R.multiply(lv1, R.const(2.0, "float32"))
            R.output(gv)
        return gv
''',
    "calls_by_class_name": '''
@I.ir_module
class Mod:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        y = Mod.helper(x)
        cls = Mod
        z = cls.helper(y)
        return (y, z)

    @R.function(private=True)
    def helper(x: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        return R.exp(x)
''',
    "nested_calls_are_flattened": '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32")):
        y = R.add(R.exp(R.negative(x)), x)
        return R.multiply(y, y)
''',
    "if_in_the_middle": '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), c: R.Prim("bool")):
        a = R.exp(x)
        if c:
            b = R.add(a, a)
            r: R.Tensor((4,), "float32") = b
        else:
            r: R.Tensor((4,), "float32") = R.multiply(a, a)
        return r
''',
    "typevar_at_module_level": '''
# from typing import TypeVar
# from tvm.script import ir as I
# from tvm.script import relax as R

n = TypeVar("n")
k = TypeVar("k")
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((n, k), dtype="float32")) -> R.Tensor((n, k), dtype="float32"):
        return x

    @R.function
    def g(x: R.Tensor((n,), dtype="float32"), s: R.Shape([n, 2])) -> R.Tensor((n,), dtype="float32"):
        y: R.Tensor((n,), dtype="float32") = R.exp(x)
        return y
''',
    "tvm_printed_spellings": '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm", "tag": ""}, 0, "global"), I.vdevice("cuda", 0, "global")]})
    @R.function(pure=False)
    def main(x: R.Tensor((16, 32), dtype="float32", vdevice="cuda:0:global")) -> R.Tensor((16, 32), dtype="float32"):
        storage: R.Any = R.memory.alloc_storage(R.shape([2048]), 0, R.str("global"), R.dtype("uint8"))
        y: R.Tensor((16, 32), dtype="float32") = R.memory.alloc_tensor(storage, 0, R.shape([16, 32]), R.dtype("float32"))
        R.memory.kill_storage(storage)
        _dummy: R.Object = R.call_packed("add_tensors", (x, y), attrs_type_key="ir.DictAttrs", ty_args=(R.Object,))
        h: R.Tensor((16, 32), dtype="float32", vdevice="cuda:0:global") = R.hint_on_device(y, R.device(device_type=2, index=0), "global")
        z: R.Tensor((16, 32), dtype="float32") = R.add(x, y)
        p: T.int64 = 5
        return z
''',
    "sim_device_and_shape_arithmetic": '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("sim", 0), I.vdevice("sim", 1)]})
    @R.function
    def main(x: R.Tensor(("n", 4), "float32", "sim:0"), y: R.Tensor(("n", 4), "float32", "sim:1")):
        n = T.int64()
        a = R.to_vdevice(y, "sim:0")
        b = R.add(x, a)
        s = R.shape([n - 1, T.max(n, 8), (n + 1) * (n - 1), n * n // 4])
        c = R.to_vdevice(b, "llvm")
        return c
''',
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_roundtrip_of_scripts(name):
    mod = from_source(SCRIPTS[name])
    roundtrip(mod)


def test_nested_calls_are_bound_in_order():
    mod = from_source(SCRIPTS["nested_calls_are_flattened"])
    bindings = mod["main"].body.blocks[0].bindings
    ops = [b.value.op.name for b in bindings]
    assert ops == ["negative", "exp", "add", "multiply"]
    assert [b.var.name_hint for b in bindings] == ["lv", "lv1", "y", "gv"]
    assert mod["main"].body.body is bindings[-1].var


def test_if_branch_results_follow_tvm():
    mod = from_source(SCRIPTS["if_in_the_middle"])
    node = mod["main"].body.blocks[0].bindings[1].value
    assert isinstance(node, If)
    assert isinstance(node.true_branch, SeqExpr) and node.true_branch.body.name_hint == "b"
    # a non-leaf branch result is bound to <name>_else, as TVM's parser does
    assert node.false_branch.blocks[0].bindings[0].var.name_hint == "r_else"
    assert node.false_branch.body is node.false_branch.blocks[0].bindings[0].var


def test_module_level_typevars_are_per_function():
    mod = from_source(SCRIPTS["typevar_at_module_level"])
    nf = mod["f"].params[0].struct_info.shape[0]
    ng = mod["g"].params[0].struct_info.shape[0]
    assert isinstance(nf, prim.PrimVar) and isinstance(ng, prim.PrimVar)
    assert nf is not ng and nf.name == ng.name == "n"
    assert mod["g"].params[1].struct_info.values[0] is ng


def test_tvm_spellings_parse_to_the_same_ir():
    mod = from_source(SCRIPTS["tvm_printed_spellings"])
    cuda = mod.vdevices[1]
    assert mod.vdevices[0].target == "llvm"
    assert dict(mod.vdevices[0].target_attrs) == {"keys": ("cpu",), "tag": ""}
    main = mod["main"]
    assert main.params[0].struct_info.vdevice == cuda
    b = main.body.blocks[0].bindings
    assert isinstance(b[0].value.args[2], StringImm) and b[0].value.args[2].value == "global"
    assert isinstance(b[3].value.op, E.ExternFunc) and dict(b[3].value.attrs) == {}
    assert b[3].value.sinfo_args == (ObjectStructInfo(),)
    assert b[4].value.attrs["dst_vdevice"] == VDevice("cuda", 0)
    # TVM's `p: T.int64 = 5` leaves out the value; the variable gets it back from 5
    assert isinstance(b[6].value, PrimValue) and b[6].var.struct_info == b[6].value.struct_info
    assert b[6].var.struct_info.dtype == "int64" and b[6].var.struct_info.value is not None


def test_sim_vdevices_resolve_by_kind_and_position():
    mod = from_source(SCRIPTS["sim_device_and_shape_arithmetic"])
    sim0, sim1 = mod.vdevices[1], mod.vdevices[2]
    x, y = mod["main"].params
    assert x.struct_info.vdevice == sim0 and y.struct_info.vdevice == sim1
    b = mod["main"].body.blocks[0].bindings
    assert b[0].value.attrs["dst_vdevice"] == sim0 and b[1].var.struct_info.vdevice == sim0
    assert b[3].var.struct_info.vdevice == mod.vdevices[0]
    n = x.struct_info.shape[0]
    assert prim.prove_equal(b[2].value.values[2], n * n - 1)


@pytest.mark.parametrize("body_device", [None, "sim"])
def test_a_loop_round_trips_before_and_after_lowering(body_device):
    from hetvm.pipeline import lower
    from hetvm.testing.loop_programs import counting_loop

    mod = from_source(counting_loop(8, body_device=body_device))
    text = roundtrip(mod)
    # the self-call TVM writes for a loop (a tail-recursive function)
    assert "            r: R.Tensor((1, 8), dtype=\"float32\"" in text and "= cls.loop(j, trips, a, e)" in text
    roundtrip(lower(mod, target="llvm"))
