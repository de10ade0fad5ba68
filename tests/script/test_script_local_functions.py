"""Local functions (a ``def`` inside an ``@R.function``), which the parser lifts
to private module functions (hetvm/script/_local_functions.py): calls pass the
captured values, uses as a value become closures the VM calls. Written from
TVM's documented semantics (LambdaLift binds captured values last)."""

import numpy as np
import pytest

import hetvm
from hetvm.errors import ParseError
from hetvm.ir import expr as E
from hetvm.ir import struct_info as S
from hetvm.script import from_source, print_module
from hetvm.script.parser import parse_function_source


def _roundtrip(src: str):
    mod = from_source(src)
    text = print_module(mod)
    again = from_source(text)
    assert print_module(again) == text
    return mod


def _run(mod, *args):
    vm = hetvm.VirtualMachine(hetvm.build(mod))
    return vm["main"](*args).numpy()


CAPTURE = """
@R.function
def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")):
    @R.function
    def g(a: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
        b = R.subtract(a, x)
        return b

    z = g(y)
    return z
"""


def test_captured_variable_becomes_a_trailing_parameter():
    mod = _roundtrip(CAPTURE)
    assert sorted(mod.functions) == ["main", "main_g"]
    lifted = mod["main_g"]
    assert [p.name_hint for p in lifted.params] == ["a", "x"]
    assert lifted.attrs.get("private") is True
    assert "cls.main_g(y, x)" in print_module(mod)
    x = np.ones((2, 3), "float32")
    y = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(_run(mod, x, y), y - x)


CLOSURE = """
@R.function
def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
    @R.function
    def outer(c: R.Tensor((2, 3), "float32")) -> R.Callable((R.Tensor((2, 3), "float32"),), R.Tensor((2, 3), "float32")):
        @R.function
        def inner(v: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            s = R.subtract(v, c)
            return s

        return inner

    f = outer(x)
    r = f(y)
    return r
"""


def test_a_returned_local_function_is_a_closure():
    mod = _roundtrip(CLOSURE)
    text = print_module(mod)
    assert "R.make_closure(cls.main_outer_inner, (c,))" in text
    make = mod["main_outer"].body.blocks[0].bindings[0].value
    # what is left to pass once c is bound
    assert make.struct_info == S.FuncStructInfo(
        [S.TensorStructInfo((2, 3), "float32")], S.TensorStructInfo((2, 3), "float32")
    )
    x = np.full((2, 3), 2.0, "float32")
    y = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(_run(mod, x, y), y - x)


RECURSIVE = """
@R.function
def main(x: R.Tensor((2,), "float32"), n: R.Tensor((), "int32")) -> R.Tensor((2,), "float32"):
    one = R.const(1, "int32")

    @R.function
    def loop(i: R.Tensor((), "int32"), s: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        cond = R.less(i, n)
        if cond:
            j = R.add(i, one)
            t = R.add(s, x)
            r = loop(j, t)
        else:
            r = s
        return r

    zero = R.multiply(x, R.const(0.0, "float32"))
    gv = loop(R.const(0, "int32"), zero)
    return gv
"""


def test_recursive_local_function_captures_its_environment():
    mod = _roundtrip(RECURSIVE)
    assert [p.name_hint for p in mod["main_loop"].params] == ["i", "s", "n", "one", "x"]
    x = np.array([1.5, -2.0], "float32")
    for n in (0, 1, 4):
        np.testing.assert_allclose(_run(mod, x, np.array(n, "int32")), x * n)


def test_a_local_function_calling_another_captures_what_it_captures():
    mod = _roundtrip(
        """
@R.function
def main(x: R.Tensor((3,), "float32")):
    @R.function
    def g(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        b = R.multiply(a, x)
        return b

    @R.function
    def h(a: R.Tensor((3,), "float32")) -> R.Tensor((3,), "float32"):
        c = g(a)
        d = R.add(c, a)
        return d

    y = h(x)
    return y
"""
    )
    assert [p.name_hint for p in mod["main_h"].params] == ["a", "x"]
    x = np.array([1.0, 2.0, 3.0], "float32")
    np.testing.assert_allclose(_run(mod, x), x * x + x)


def test_local_function_in_a_dataflow_block_listed_as_output():
    mod = _roundtrip(
        """
@I.ir_module
class Module:
    @R.function(pure=False)
    def main(x: R.Tensor((2,), "float32")):
        with R.dataflow():
            @R.function(pure=False)
            def show(v: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
                R.print(v, format="v: {}")
                return v

            w = R.add(x, x)
            R.output(show, w)
        q = show(w)
        return q
"""
    )
    assert not mod["main_show"].is_pure
    x = np.array([1.0, 2.0], "float32")
    np.testing.assert_allclose(_run(mod, x), x + x)


def test_a_closure_keeps_its_captured_tensor_alive():
    """The closure holds c after c's last direct use: the memory planner must not
    give c's bytes to the tensors computed before the closure runs."""
    mod = _roundtrip(
        """
@R.function
def main(x: R.Tensor((4,), "float32")):
    c = R.exp(x)

    @R.function
    def g(a: R.Tensor((4,), "float32")) -> R.Tensor((4,), "float32"):
        b = R.add(a, c)
        return b

    f = g
    e = R.add(x, x)
    k = R.negative(e)
    m = R.multiply(k, k)
    r = f(m)
    return r
"""
    )
    x = np.linspace(-1, 1, 4).astype("float32")
    np.testing.assert_allclose(_run(mod, x), (2 * x) ** 2 + np.exp(x), rtol=1e-6)


def test_calling_a_function_valued_parameter_runs():
    mod = _roundtrip(
        """
@I.ir_module
class Module:
    @R.function
    def twice(f: R.Callable((R.Tensor((2,), "float32"),), R.Tensor((2,), "float32")), x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = f(x)
        z = f(y)
        return z

    @R.function
    def main(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        @R.function
        def inc(v: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            w = R.add(v, R.const(1.0, "float32"))
            return w

        cls = Module
        r = cls.twice(inc, x)
        return r
"""
    )
    assert isinstance(mod["main"].body.blocks[0].bindings[0].value.args[0], E.GlobalVar)
    np.testing.assert_allclose(_run(mod, np.array([0.0, 5.0], "float32")), [2.0, 7.0])


def test_invoke_closure_spelling_runs():
    mod = _roundtrip(
        """
@I.ir_module
class Module:
    @R.function(private=True)
    def lifted(x: R.Tensor((2,), "float32"), env: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        y = R.subtract(x, env)
        return y

    @R.function
    def main(x: R.Tensor((2,), "float32"), y: R.Tensor((2,), "float32")):
        cls = Module
        clo = R.make_closure(cls.lifted, (x,))
        res = R.invoke_pure_closure(clo, (y,), ty_args=(R.Tensor((2,), "float32"),))
        return res
"""
    )
    vm = hetvm.VirtualMachine(hetvm.build(mod))
    x, y = np.array([1.0, 2.0], "float32"), np.array([10.0, 20.0], "float32")
    np.testing.assert_allclose(vm["main"](x, y).numpy(), y - x)  # captured values go last


def test_make_closure_checks_what_it_binds():
    with pytest.raises(ParseError, match="captures 2 value"):
        from_source(
            """
@I.ir_module
class Module:
    @R.function(private=True)
    def f(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        cls = Module
        clo = R.make_closure(cls.f, (x, x))
        return x
"""
        )


def test_lifted_names_do_not_clash_with_module_functions():
    mod = from_source(
        """
@I.ir_module
class Module:
    @R.function
    def main_g(x: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
        return x

    @R.function
    def main(x: R.Tensor((2,), "float32")):
        @R.function
        def g(v: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            return v

        y = g(x)
        return y
"""
    )
    assert sorted(mod.functions) == ["main", "main_g", "main_g_1"]


def test_a_captured_name_that_is_not_visible_at_the_call_is_an_error():
    with pytest.raises(ParseError, match="reads 'lv0', which is not visible"):
        from_source(
            """
@R.function
def main(x: R.Tensor((2,), "float32")):
    with R.dataflow():
        lv0 = R.add(x, x)

        @R.function
        def g(v: R.Tensor((2,), "float32")) -> R.Tensor((2,), "float32"):
            w = R.add(v, lv0)
            return w

        gv = R.multiply(x, x)
        R.output(g, gv)
    y = g(gv)
    return y
"""
        )


def test_a_function_object_with_local_functions_needs_a_module():
    src = CAPTURE.strip()
    with pytest.raises(ParseError, match="lifts to module functions"):
        parse_function_source(src)
