import hetvm.op as op
from hetvm.ir import BlockBuilder, TensorStructInfo, Var, prim, structural_equal


def _build(name_a: str = "x"):
    n = prim.PrimVar("n")
    x = Var(name_a, struct_info=TensorStructInfo((n, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.add(x, x))
            z = bb.emit_output(op.exp(y))
        bb.emit_func_output(z)
    return bb.get()


def test_builder_infers_symbolic_shapes():
    mod = _build()
    ret = mod["main"].ret_struct_info
    assert ret.dtype == "float32" and ret.ndim == 2
    assert prim.const_value(ret.shape[1]) == 4


def test_alpha_equivalent_modules_are_equal():
    assert structural_equal(_build("x"), _build("renamed"))
