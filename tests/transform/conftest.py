import pytest

from hetvm.ir import BlockBuilder, TensorStructInfo, Var


@pytest.fixture
def two_inputs():
    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32"))
    y = Var("y", struct_info=TensorStructInfo((4, 8), "float32"))
    return x, y


def _build_main(params, body_fn, dataflow=True):
    """Builds `main(params)` whose bindings body_fn(bb, *params) emits; returns the module."""
    bb = BlockBuilder()
    with bb.function("main", list(params)):
        if dataflow:
            with bb.dataflow():
                out = body_fn(bb, *params)
                out = bb.emit_output(out)
        else:
            out = body_fn(bb, *params)
        bb.emit_func_output(out)
    return bb.get()


@pytest.fixture
def build_main():
    return _build_main
