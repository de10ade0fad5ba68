"""The seed modules of the text-form issue, with only the import line changed."""

from hetvm.ir import (
    Call,
    DataTypeImm,
    ExternFunc,
    IRModule,
    ObjectStructInfo,
    PrimValue,
    ShapeExpr,
    StringImm,
    TensorStructInfo,
    Tuple,
    TupleStructInfo,
    VarBinding,
    assert_structural_equal,
    prim,
)
from hetvm.script import from_source, print_module
from hetvm.script import ir as I
from hetvm.script import relax as R


@I.ir_module
class Before:
    @R.function(pure=False)
    def main(x: R.Tensor([16, 32], "float32")):
        storage = R.memory.alloc_storage(R.shape([2048]), 0, "global", "uint8")
        y = R.memory.alloc_tensor(storage, 0, R.shape([16, 32]), "float32")
        _dummy = R.call_packed("add_tensors", [x, y], sinfo_args=(R.Tuple,))
        z = R.add(x, y)
        return z


@I.ir_module
class Expected:
    @R.function(pure=False)
    def main(x: R.Tensor([16, 32], "float32")):
        storage = R.memory.alloc_storage(R.shape([2048]), 0, "global", "uint8")
        y = R.memory.alloc_tensor(storage, 0, R.shape([16, 32]), "float32")
        _ = R.memory.kill_storage(storage)
        _dummy = R.call_packed("add_tensors", [x, y], sinfo_args=(R.Tuple,))
        z = R.add(x, y)
        _ = R.memory.kill_tensor(y)
        return z


T1632 = TensorStructInfo((16, 32), "float32")


def _ints(shape_expr):
    assert isinstance(shape_expr, ShapeExpr)
    return [prim.const_value(v) for v in shape_expr.values]


def _check_alloc(storage_b, tensor_b, x):
    s = storage_b.value
    assert storage_b.var.name_hint == "storage" and s.op.name == "memory.alloc_storage"
    assert _ints(s.args[0]) == [2048]
    assert isinstance(s.args[1], PrimValue) and prim.const_value(s.args[1].value) == 0
    assert isinstance(s.args[2], StringImm) and s.args[2].value == "global"
    assert isinstance(s.args[3], DataTypeImm) and s.args[3].value == "uint8"
    assert storage_b.var.struct_info == ObjectStructInfo()
    a = tensor_b.value
    assert tensor_b.var.name_hint == "y" and a.op.name == "memory.alloc_tensor"
    assert a.args[0] is storage_b.var
    assert prim.const_value(a.args[1].value) == 0 and _ints(a.args[2]) == [16, 32]
    assert isinstance(a.args[3], DataTypeImm) and a.args[3].value == "float32"
    assert tensor_b.var.struct_info == T1632


def _check_packed(b, x, y):
    call = b.value
    assert b.var.name_hint == "_dummy"
    assert isinstance(call, Call) and isinstance(call.op, ExternFunc)
    assert call.op.global_symbol == "add_tensors"
    assert len(call.args) == 1 and isinstance(call.args[0], Tuple)
    assert call.args[0].fields == (x, y)
    assert call.sinfo_args == (TupleStructInfo([]),)
    assert b.var.struct_info == TupleStructInfo([])


def _check_add(b, x, y):
    assert b.var.name_hint == "z" and b.value.op.name == "add" and b.value.args == (x, y)
    assert b.var.struct_info == T1632


def test_before_structure():
    assert isinstance(Before, IRModule) and list(Before.functions) == ["main"]
    f = Before["main"]
    assert not f.is_pure and dict(f.attrs) == {}
    (x,) = f.params
    assert x.name_hint == "x" and x.struct_info == T1632
    assert len(f.body.blocks) == 1
    b = f.body.blocks[0].bindings
    assert len(b) == 4 and all(isinstance(i, VarBinding) for i in b)
    _check_alloc(b[0], b[1], x)
    _check_packed(b[2], x, b[1].var)
    _check_add(b[3], x, b[1].var)
    assert f.body.body is b[3].var
    assert f.ret_struct_info == T1632


def test_expected_structure():
    f = Expected["main"]
    (x,) = f.params
    b = f.body.blocks[0].bindings
    assert len(b) == 6
    _check_alloc(b[0], b[1], x)
    storage, y = b[0].var, b[1].var
    assert b[2].var.name_hint == "_" and b[2].value.op.name == "memory.kill_storage"
    assert b[2].value.args == (storage,) and b[2].var.struct_info == TupleStructInfo([])
    _check_packed(b[3], x, y)
    _check_add(b[4], x, y)
    assert b[5].var.name_hint == "_" and b[5].value.op.name == "memory.kill_tensor"
    assert b[5].value.args == (y,)
    assert b[5].var is not b[2].var  # a second '_' is a new variable
    assert f.body.body is b[4].var


def test_seed_from_source_with_tvm_import_lines():
    text = '''
from tvm.script import ir as I
from tvm.script import relax as R

@I.ir_module
class Before:
    @R.function(pure=False)
    def main(x: R.Tensor([16, 32], "float32")):
        storage = R.memory.alloc_storage(R.shape([2048]), 0, "global", "uint8")
        y = R.memory.alloc_tensor(storage, 0, R.shape([16, 32]), "float32")
        _dummy = R.call_packed("add_tensors", [x, y], sinfo_args=(R.Tuple,))
        z = R.add(x, y)
        return z
'''
    assert_structural_equal(from_source(text), Before)


def test_seed_prints_kills_as_bare_calls_and_round_trips():
    text = print_module(Expected)
    assert "        R.memory.kill_storage(storage)\n" in text
    assert "        R.memory.kill_tensor(y)\n" in text
    assert '        R.call_packed("add_tensors", (x, y), ty_args=(R.Tuple,))\n' in text
    assert (
        '        storage: R.Any = R.memory.alloc_storage(R.shape([2048]), 0, R.str("global"), '
        'R.dtype("uint8"))\n' in text
    )
    again = from_source(text)
    assert_structural_equal(again, Expected)
    assert print_module(again) == text


def test_spans_point_at_the_source_lines():
    b = Expected["main"].body.blocks[0].bindings
    span = b[5].span
    assert span.source_name.endswith("test_script_seed.py")
    with open(span.source_name) as fh:
        line = fh.read().splitlines()[span.line - 1]
    assert line.strip() == "_ = R.memory.kill_tensor(y)"
    assert line[span.column :].startswith("_ = R.memory")
    assert b[1].value.span.line == b[1].span.line
