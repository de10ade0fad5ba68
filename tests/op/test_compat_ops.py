"""Struct-info inference and errors of the ops added for TVM's test modules
(hetvm/op/compat.py, hetvm/op/nn/compat_nn.py, hetvm/op/debug.py), and the
run-time helpers R.print / R.assert_op / R.call_pure_packed end to end."""

import numpy as np
import pytest

import hetvm
import hetvm.op as op
from hetvm.errors import StructInfoError
from hetvm.ir import Var
from hetvm.ir import prim as P
from hetvm.ir import struct_info as S
from hetvm.script import from_source

n = P.PrimVar("n")


def t(shape, dtype="float32", name="x"):
    return Var(name, S.TensorStructInfo(shape, dtype))


def _dims(call):
    return [P.to_str(d) for d in call.struct_info.shape]


def test_shapes():
    x = t((n, 3))
    assert _dims(op.tile(x, (2, 1, 2))) == ["2", "n", "6"]
    assert _dims(op.tile(x, 2)) == ["n", "6"]
    assert _dims(op.repeat(x, 2)) == ["n * 6"]
    assert _dims(op.repeat(x, 2, axis=-1)) == ["n", "6"]
    assert _dims(op.variance(x, 1, keepdims=True)) == ["n", "1"]
    assert _dims(op.nn.conv1d(t((1, 4, 10)), t((8, 2, 3), name="w"), 2, 1, groups=2)) == ["1", "8", "5"]
    assert op.flip(x, 0).struct_info == x.struct_info
    assert op.print(x, format="{}").struct_info == S.TupleStructInfo([])


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: op.tile(t((2,)), (-1,)), "non-negative"),
        (lambda: op.flip(t((2,)), 1), "axis"),
        (lambda: op.scatter_elements(t((2,)), t((1,), "float32", "i"), t((1,), name="u")), "indices must be integers"),
        (lambda: op.scatter_elements(t((2,)), t((1,), "int64", "i"), t((1,), "float16", "u")), "updates are float16"),
        (lambda: op.scatter_elements(t((2,)), t((1,), "int64", "i"), t((1,), name="u"), reduction="sum"), "reduction"),
        (lambda: op.variance(t((2,), "int32")), "floating-point"),
        (lambda: op.nn.conv1d(t((1, 3, 8)), t((4, 2, 3), name="w")), "channels 3"),
        (lambda: op.nn.group_norm(t((1, 3, 4)), t((3,), name="g"), t((3,), name="b"), 2, 1, [2]), "not divisible"),
        (lambda: op.nn.rms_norm(t((2, 3)), t((2,), name="g")), "weight has shape"),
        (lambda: op.assert_op(t((2,), "bool")), "bool scalar"),
        (lambda: op.call_pure_packed("f", t((2,))), "needs sinfo_args"),
    ],
)
def test_errors_name_the_op_and_what_is_wrong(make, message):
    with pytest.raises(StructInfoError, match=message):
        make()


def _vm(src: str):
    mod = from_source(src)
    return hetvm.VirtualMachine(hetvm.build(mod), [hetvm.cpu(0)])["main"]


def test_print_and_assert_run(capsys):
    main = _vm(
        """
@R.function(pure=False)
def main(x: R.Tensor((2,), "float32"), ok: R.Tensor((), "bool")):
    R.print(x, format="x: {}")
    R.print(format="done")
    R.assert_op(ok, x, format="x was {}")
    return x
"""
    )
    main(np.array([1.0, 2.0], "float32"), np.array(True))
    assert capsys.readouterr().out == "x: [1. 2.]\ndone\n"
    with pytest.raises(AssertionError, match=r"x was \[1\. 2\.\]") as info:
        main(np.array([1.0, 2.0], "float32"), np.array(False))
    assert isinstance(info.value, hetvm.HetvmError)


def test_call_pure_packed_and_vm_builtin_copy():
    main = _vm(
        """
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        y = R.call_pure_packed("vm.builtin.copy", x, ty_args=(R.Tensor((2,), "float32"),))
        z = R.exp(y)
        R.output(z)
    return z
"""
    )
    x = np.array([0.0, 1.0], "float32")
    np.testing.assert_allclose(main(x).numpy(), np.exp(x), rtol=1e-6)


def test_unread_pure_packed_call_is_dropped_and_print_is_kept():
    from hetvm.transform import DeadCodeElimination

    mod = from_source(
        """
@R.function(pure=False)
def main(x: R.Tensor((2,), "float32")):
    y = R.call_pure_packed("my_func", x, ty_args=(R.Tensor((2,), "float32"),))
    R.print(x, format="{}")
    return x
"""
    )
    kept = [b.value.op.name for b in DeadCodeElimination()(mod)["main"].body.blocks[0].bindings]
    assert kept == ["print"]
