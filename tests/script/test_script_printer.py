"""The printer's spellings: those TVM 0.27 prints (checked by hand against it)."""

import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    DataflowVar,
    ShapeExpr,
    TensorStructInfo,
    TupleStructInfo,
    Var,
    VarBinding,
    VDevice,
    const,
    prim,
)
from hetvm.script.printer import print_module, print_node


def _dyn_module():
    n, m = prim.PrimVar("n"), prim.PrimVar("m")
    x = Var("x", struct_info=TensorStructInfo((n, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.add(x, x))
            bb.match_cast(y, TensorStructInfo((m, 4), "float32"))
            z = bb.emit_output(op.exp(y))
        bb.emit(ShapeExpr((n * 2 + 1, prim.min_(n, 4))))
        bb.emit(op.memory.kill_tensor(z))
        bb.emit_func_output(z)
    return bb.get()


def test_module_text_matches_tvm_layout():
    text = print_module(_dyn_module())
    lines = text.splitlines()
    assert lines[:5] == [
        "# from typing import TypeVar",
        "# from tvm.script import ir as I",
        "# from tvm.script import tirx as T",
        "# from tvm.tirx.layout import Axis",
        "# from tvm.script import relax as R",
    ]
    assert 'n = TypeVar("n")' in lines
    assert (
        '    def main(x: R.Tensor((n, 4), dtype="float32")) -> R.Tensor((n, 4), dtype="float32"):'
        in lines
    )
    assert "        m = T.int64()" in lines
    assert '            lv: R.Tensor((n, 4), dtype="float32") = R.add(x, x)' in lines
    assert (
        '            lv1: R.Tensor((m, 4), dtype="float32") = '
        'R.match_cast(lv, R.Tensor((m, 4), dtype="float32"))' in lines
    )
    assert "            R.output(gv)" in lines
    assert "        lv2: R.Shape([n * 2 + 1, T.min(n, 4)]) = R.shape([n * 2 + 1, T.min(n, 4)])" in lines
    # an unused result of empty-tuple struct info prints as a bare call
    assert "        R.memory.kill_tensor(gv)" in lines
    assert lines[-1] == "        return gv"


def test_print_is_deterministic_and_names_are_unique():
    sinfo = TensorStructInfo((2,), "float32")
    x1 = Var("x", struct_info=sinfo)
    a, b = Var("x", struct_info=sinfo), Var("x", struct_info=sinfo)  # same name hints
    bb = BlockBuilder()
    with bb.function("f", [x1]):
        bb.emit_binding(VarBinding(a, op.add(x1, x1)))
        bb.emit_binding(VarBinding(b, op.add(a, a)))
        bb.emit_func_output(b)
    mod = bb.get()
    text = print_module(mod)
    assert text == print_module(mod)
    assert 'x_1: R.Tensor((2,), dtype="float32") = R.add(x, x)' in text
    assert 'x_2: R.Tensor((2,), dtype="float32") = R.add(x_1, x_1)' in text
    assert text.rstrip().endswith("return x_2")


def test_print_node_on_leaves_and_struct_info():
    n = prim.PrimVar("n")
    assert print_node(TensorStructInfo((n, 4), "float32")) == 'R.Tensor((n, 4), dtype="float32")'
    assert print_node(TensorStructInfo(None, "int8", ndim=3)) == 'R.Tensor(dtype="int8", ndim=3)'
    assert print_node(TupleStructInfo([])) == "R.Tuple"
    assert print_node(const(1.5, "float32")) == 'R.const(1.5, "float32")'
    assert print_node(const([[1, 2], [3, 4]], "int32")) == 'R.const([[1, 2], [3, 4]], "int32")'
    assert print_node(const(float("nan"), "float32")) == 'R.const("nan", "float32")'
    v = DataflowVar("lv", struct_info=TensorStructInfo((2,), "float32"))
    assert print_node(op.add(v, v)) == "R.add(lv, lv)"
    assert print_node(VDevice("cuda", 1)) == 'I.vdevice("cuda", 1, "global")'


def test_vdevice_prints_by_kind_and_position():
    devs = [VDevice("llvm"), VDevice("cuda", 0), VDevice("cuda", 1)]
    x = Var("x", struct_info=TensorStructInfo((2,), "float32", vdevice=devs[2]))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(op.to_vdevice(x, devs[0]))
        bb.emit_func_output(y)
    mod = bb.get().with_global_infos(vdevice=devs)
    text = print_module(mod)
    assert (
        '    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), '
        'I.vdevice("cuda", 0, "global"), I.vdevice("cuda", 1, "global")]})' in text
    )
    assert 'x: R.Tensor((2,), dtype="float32", vdevice="cuda:1:global")' in text
    assert 'R.to_vdevice(x, dst_vdevice="llvm:0:global")' in text
