"""The decorators and the import-line variants of ``from_source``."""

from typing import TypeVar

import pytest

from hetvm.ir import Function, IRModule, PrimVar, TensorStructInfo, assert_structural_equal
from hetvm.script import from_source, print_module
from hetvm.script import ir as I
from hetvm.script import relax as R
from hetvm.script import tir as T

n = TypeVar("n")


@R.function
def standalone(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
    y = R.exp(x)
    return y


@I.ir_module
class UsesModuleTypeVar:
    @R.function
    def main(x: R.Tensor((n, 2), "float32")) -> R.Tensor((n, 2), "float32"):
        return x


BODY = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.exp(x)
        return y
'''


def test_standalone_function_is_a_function():
    assert isinstance(standalone, Function)
    (x,) = standalone.params
    dim = x.struct_info.shape[0]
    assert isinstance(dim, PrimVar) and dim.name == "n"
    assert standalone.body.blocks[0].bindings[0].value.op.name == "exp"


def test_module_typevar_is_read_from_the_defining_module():
    dim = UsesModuleTypeVar["main"].params[0].struct_info.shape[0]
    assert isinstance(dim, PrimVar) and dim.name == "n"


def test_decorators_inside_a_function_see_local_names():
    m = T.int64()

    @I.ir_module
    class Local:
        @R.function
        def main(x: R.Tensor((m,), "float32")):
            return x

    @R.function(pure=False)
    def f(x: R.Tensor((m,), "float32")):
        return x

    assert isinstance(Local, IRModule)
    assert Local["main"].params[0].struct_info.shape[0].name == "m"
    assert isinstance(f, Function) and not f.is_pure


@pytest.mark.parametrize(
    "imports",
    [
        "from hetvm.script import ir as I, relax as R\n",
        "# from tvm.script import ir as I\n# from tvm.script import relax as R\n",
        "",
        "from tvm.script import ir as I\nfrom tvm.script import relax as R\n",
    ],
)
def test_import_lines_present_commented_or_absent(imports):
    mod = from_source(imports + BODY)
    assert mod["main"].ret_struct_info == TensorStructInfo((2,), "float32")


def test_other_aliases_from_imports():
    text = BODY.replace("R.", "rx.").replace("I.", "irm.")
    text = "from tvm.script import relax as rx\nfrom hetvm.script import ir as irm\n" + text
    assert_structural_equal(from_source(text), from_source(BODY))


def test_indented_source_is_accepted():
    indented = "\n".join("        " + line if line else line for line in BODY.splitlines())
    assert_structural_equal(from_source(indented), from_source(BODY))


def test_standalone_function_from_source_gives_a_module():
    text = '''
@R.function(private=True)
def helper(x: R.Tensor((2,), "float32")):
    return x
'''
    mod = from_source(text)
    assert list(mod.functions) == ["helper"] and mod["helper"].attrs["private"] is True
    assert "@R.function(private=True)" in print_module(mod)


def test_vdevice_helper_builds_vdevices():
    v = I.vdevice({"kind": "cuda", "arch": "sm_80"}, 1)
    assert v.target == "cuda" and v.vdevice_id == 1 and dict(v.target_attrs) == {"arch": "sm_80"}
    assert I.vdevice("llvm").target == "llvm"


def test_ir_module_script_uses_the_printer():
    assert UsesModuleTypeVar.script() == print_module(UsesModuleTypeVar)
    assert str(UsesModuleTypeVar).startswith("# from typing import TypeVar")
