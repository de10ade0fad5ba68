"""Round trip over generated programs: dataflow and plain blocks, tuples, If,
match_cast with fresh shape variables, constants and symbolic shapes."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetvm.op as op
from hetvm.ir import (
    BlockBuilder,
    If,
    TensorStructInfo,
    Tuple,
    TupleGetItem,
    Var,
    assert_structural_equal,
    const,
    prim,
)
from hetvm.script import from_source, print_module

UNARY = ["exp", "negative", "tanh", "sigmoid", "abs"]
BINARY = ["add", "multiply", "subtract", "maximum"]


def _bindings(draw, bb, live, width):
    made = []
    for _ in range(draw(st.integers(1, 4))):
        choice = draw(st.sampled_from(["unary", "binary", "tuple", "cast", "const"]))
        a = draw(st.sampled_from(live + made))
        if choice == "unary":
            v = bb.emit(getattr(op, draw(st.sampled_from(UNARY)))(a))
        elif choice == "binary":
            b = draw(st.sampled_from(live + made))
            v = bb.emit(getattr(op, draw(st.sampled_from(BINARY)))(a, b))
        elif choice == "tuple":
            tup = bb.emit(Tuple((a, a)))
            v = bb.emit(TupleGetItem(tup, draw(st.integers(0, 1))))
        elif choice == "cast":
            v = bb.match_cast(a, TensorStructInfo((prim.PrimVar("m"), width), "float32"))
        else:
            value = draw(st.floats(-1e6, 1e6, allow_nan=False, width=32))
            v = bb.emit(op.add(a, const(np.float32(value), "float32")))
        made.append(v)
    return made


@st.composite
def programs(draw):
    n = prim.PrimVar("n")
    width = draw(st.integers(1, 4))
    shape = (n, width)
    x = Var("x", struct_info=TensorStructInfo(shape, "float32"))
    y = Var("y", struct_info=TensorStructInfo(shape, "float32"))
    c = Var("c", struct_info=TensorStructInfo((), "bool"))
    bb = BlockBuilder()
    with bb.function("main", [x, y, c], pure=draw(st.booleans())):
        live = [x, y]
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["dataflow", "plain", "if"]))
            if kind == "if":
                a = draw(st.sampled_from(live))
                bb.begin_scope()
                t = bb.emit(getattr(op, draw(st.sampled_from(UNARY)))(a))
                tb = bb.end_scope(t)
                bb.begin_scope()
                f = bb.emit(getattr(op, draw(st.sampled_from(UNARY)))(a))
                fb = bb.end_scope(f)
                live.append(bb.emit(If(c, tb, fb)))
                continue
            if kind == "dataflow":
                with bb.dataflow():
                    made = _bindings(draw, bb, live, width)
                    live.append(bb.emit_output(made[-1]))
            else:
                live.extend(_bindings(draw, bb, live, width))
        bb.emit_func_output(live[-1])
    return bb.get()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_generated_programs_round_trip(mod):
    text = print_module(mod)
    parsed = from_source(text)
    assert_structural_equal(mod, parsed)
    assert print_module(parsed) == text
