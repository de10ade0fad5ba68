"""IRModule: lookup, functional updates, global infos."""

import pytest

import hetvm.op as op
from hetvm.errors import WellFormedError
from hetvm.ir import (
    BlockBuilder,
    FuncStructInfo,
    GlobalVar,
    IRModule,
    TensorStructInfo,
    Var,
    VDevice,
)


def make_func(name="x"):
    x = Var(name, struct_info=TensorStructInfo((2,), "float32"))
    bb = BlockBuilder()
    with bb.function("f", [x]):
        bb.emit_func_output(bb.emit(op.exp(x)))
    return bb.get()["f"]


def test_lookup_by_name_or_global_var():
    f = make_func()
    mod = IRModule({"main": f, GlobalVar("g"): f})
    assert mod["main"] is f and mod[GlobalVar("g")] is f
    assert "main" in mod and GlobalVar("g") in mod and "h" not in mod
    assert list(mod) == ["main", "g"] and len(mod) == 2
    assert dict(mod.items()) == {"main": f, "g": f}
    with pytest.raises(WellFormedError, match="no function 'h'.*main, g"):
        mod["h"]


def test_global_vars_carry_the_signature():
    f = make_func()
    mod = IRModule({"main": f})
    gv = mod.get_global_var("main")
    assert gv == GlobalVar("main") and isinstance(gv.struct_info, FuncStructInfo)
    assert gv.struct_info == f.struct_info
    assert mod.get_global_vars() == [gv]
    with pytest.raises(WellFormedError, match="no function 'nope'"):
        mod.get_global_var("nope")


def test_functional_updates_leave_the_original_alone():
    f, g = make_func(), make_func("y")
    mod = IRModule({"main": f}, {"vdevice": (VDevice("llvm"),)}, {"note": 1})
    assert mod.global_infos["vdevice"] == [VDevice("llvm")]  # tuples become lists
    added = mod.with_function("g", g)
    assert set(added.functions) == {"main", "g"} and set(mod.functions) == {"main"}
    assert added.attrs == {"note": 1}
    removed = added.without_function("main")
    assert set(removed.functions) == {"g"} and "main" in added
    replaced = mod.with_functions({"other": g})
    assert set(replaced.functions) == {"other"} and replaced.global_infos == mod.global_infos
    cuda = VDevice("cuda", 0)
    infos = mod.with_global_infos(vdevice=[VDevice("llvm"), cuda])
    assert infos.vdevices == [VDevice("llvm"), cuda] and mod.vdevices == [VDevice("llvm")]
    copy = mod.copy()
    copy["x"] = g
    assert "x" not in mod


def test_repr_names_functions():
    assert repr(IRModule({"main": make_func()})) == "IRModule(main)"
