"""Interoperability with TVM (apache-tvm 0.27), the reference for the language.

Skipped cleanly where TVM is not installed. hetvm never imports TVM; only
these tests do. For modules using ops both know:
- what hetvm prints, TVM parses into a module that TVM prints the same way;
- what TVM prints, hetvm parses, and hetvm prints it back in a form TVM reads
  into the same module.
"""

import pytest

try:  # any failure to import (missing package, broken native library) skips
    import tvm
    from tvm.script import from_source as tvm_from_source
except Exception as exc:  # noqa: BLE001
    pytest.skip(f"apache-tvm is not usable here: {exc}", allow_module_level=True)

import hetvm.op as op
from hetvm.ir import BlockBuilder, TensorStructInfo, Var, assert_structural_equal, prim
from hetvm.script import ParseError, from_source, print_module

pytestmark = pytest.mark.tvm

AXIS = "# from tvm.tirx.layout import Axis\n"


def tvm_text(text: str) -> str:
    return tvm_from_source(text).script(show_meta=False)


def _dyn():
    n, m = prim.PrimVar("n"), prim.PrimVar("m")
    x = Var("x", struct_info=TensorStructInfo((n, 4), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(op.add(x, x))
            c = bb.match_cast(y, TensorStructInfo((m, 4), "float32"))
            z = bb.emit_output(op.exp(c))
        bb.emit_func_output(z)
    return bb.get()


def _calls():
    bb = BlockBuilder()
    x = Var("x", struct_info=TensorStructInfo((2, 2), "float32"))
    with bb.function("helper", [x], private=True):
        bb.emit_func_output(bb.emit(op.exp(x)))
    gv = bb.module.get_global_var("helper")
    x2 = Var("x", struct_info=TensorStructInfo((2, 2), "float32"))
    from hetvm.ir import Call

    with bb.function("main", [x2]):
        a = bb.emit(Call(gv, (x2,)))
        bb.emit_func_output(bb.emit(op.multiply(a, a)))
    return bb.get()


HETVM_SCRIPTS = {
    "seed": '''
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor([16, 32], "float32")):
        storage = R.memory.alloc_storage(R.shape([2048]), 0, "global", "uint8")
        y = R.memory.alloc_tensor(storage, 0, R.shape([16, 32]), "float32")
        _ = R.memory.kill_storage(storage)
        _dummy = R.call_packed("add_tensors", [x, y], sinfo_args=(R.Tensor((16, 32), "float32"),))
        z = R.add(x, y)
        _ = R.memory.kill_tensor(y)
        return z
''',
    "if_and_tuples": '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4,), "float32"), c: R.Tensor((), "bool")):
        R.func_attr({"relax.force_pure": True})
        t = (x, x)
        a = t[1]
        if c:
            r = R.exp(a)
        else:
            r = R.negative(a)
        s = R.shape([4, 2])
        k = R.const(2.5, "float32")
        return R.add(r, k)
''',
}


@pytest.mark.parametrize("build", [_dyn, _calls], ids=["dyn", "calls"])
def test_hetvm_print_is_what_tvm_prints(build):
    text = print_module(build())
    assert tvm_text(text).replace(AXIS, "") == text.replace(AXIS, "")


@pytest.mark.parametrize(
    "name",
    sorted(HETVM_SCRIPTS),
)
def test_hetvm_print_reads_back_from_tvm(name):
    mod = from_source(HETVM_SCRIPTS[name])
    text = print_module(mod)
    again = from_source(tvm_text(text))
    assert_structural_equal(again, mod)


TVM_SCRIPTS = {
    "vdevices": '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("cuda", 0), I.vdevice("cuda", 1)]})
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor((4,), "float32", "cuda:1")):
        n = T.int64()
        with R.dataflow():
            a = R.to_vdevice(y, "llvm")
            b = R.add(x, a)
            gv = R.nn.relu(b)
            R.output(gv)
        return gv
''',
    "ops_with_attrs": '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3, 4), "float32")):
        a = R.permute_dims(x, [2, 0, 1])
        b = R.sum(a, axis=[1], keepdims=True)
        c = R.reshape(b, R.shape([4, 3]))
        d = R.astype(c, "float16")
        e = R.nn.softmax(x, axis=-1)
        f = R.matmul(e, R.permute_dims(e, [0, 2, 1]))
        return (d, f)
''',
}


@pytest.mark.parametrize("name", sorted(TVM_SCRIPTS))
def test_what_tvm_prints_hetvm_parses_and_prints_back(name):
    printed_by_tvm = tvm_text(TVM_SCRIPTS[name])
    mod = from_source(printed_by_tvm)
    ours = print_module(mod)
    assert tvm_text(ours) == printed_by_tvm
    assert_structural_equal(from_source(ours), mod)


def test_tvm_metadata_constants_get_an_explanation():
    text = tvm_text(
        "@I.ir_module\nclass Module:\n    @R.function\n    def main():\n"
        '        return R.const([1, 2], "int32")\n'
    )
    assert "metadata[" in text  # TVM 0.27 prints arrays only as metadata references
    with pytest.raises(ParseError, match="write the constant inline"):
        from_source(text)


def test_tvm_version_is_the_reference():
    assert tvm.__version__.startswith("0.27")
