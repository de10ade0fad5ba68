"""Which calls are in tail position (what the VM runs after the caller's frame is gone)."""

from hetvm.analysis.tail_calls import self_recursive, tail_calls
from hetvm.script import from_source
from hetvm.testing.loop_programs import counting_loop

SRC = '''
@I.ir_module
class Module:
    @R.function
    def f(x: R.Tensor((2,), dtype="float32"), c: R.Tensor((), dtype="bool")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        if c:
            a = cls.f(x, c)
            b = a
        else:
            b = cls.g(x)
        return b

    @R.function
    def g(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        cls = Module
        y = cls.h(x)
        z = R.add(y, x)
        return z

    @R.function
    def h(x: R.Tensor((2,), dtype="float32")) -> R.Tensor((2,), dtype="float32"):
        y = R.exp(x)
        return y
'''


def test_tail_position_reaches_through_branches_and_names():
    mod = from_source(SRC)
    assert sorted(v.name_hint for v in tail_calls(mod["f"])) == ["a", "b_else"]  # (the parser names the else branch's binding)
    assert self_recursive(mod["f"], "f")
    # a call whose result is computed with afterwards is an ordinary call
    assert tail_calls(mod["g"]) == {}
    assert not self_recursive(mod["g"], "g") and not self_recursive(mod["h"], "h")


def test_a_loop_is_a_function_calling_itself_in_tail_position():
    mod = from_source(counting_loop(4))
    assert [v.name_hint for v in tail_calls(mod["loop"])] == ["r"]
    assert self_recursive(mod["loop"], "loop") and not self_recursive(mod["main"], "main")
    # main ends in a call of the loop: a tail call too (what main passes lives in the loop)
    assert [v.name_hint for v in tail_calls(mod["main"])] == ["y"]
