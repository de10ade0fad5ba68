"""called_ops / calls_any: the ops a function calls, and the passes that skip a
function calling none of the ops they rewrite around."""

from hetvm.analysis.called_ops import called_ops, calls_any
from hetvm.pipeline import lower
from hetvm.script import from_source
from hetvm.transform.pass_infra import FunctionPass

SRC = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((2, 3), "float32"), c: R.Tensor((), "bool")):
        if c:
            y = R.exp(x)
        else:
            y = R.nn.relu(x)
        z = R.add(y, x)
        return z
'''


def test_ops_of_both_branches_and_the_body():
    func = from_source(SRC)["main"]
    assert {"exp", "nn.relu", "add"} <= called_ops(func)
    assert "nn.conv2d" not in called_ops(func)
    assert calls_any(func, frozenset({"nn.relu", "nn.conv2d"}))
    assert not calls_any(func, frozenset({"nn.conv2d"}))


def test_extern_functions_by_their_symbol():
    lowered = lower(from_source(SRC))
    names = called_ops(lowered["main"])
    assert any(name.startswith("kernel.") for name in names), names


def test_the_answer_is_remembered_per_function():
    func = from_source(SRC)["main"]
    assert called_ops(func) is called_ops(func)
    other = from_source(SRC.replace("R.exp", "R.tanh"))["main"]
    assert "tanh" in called_ops(other) and "tanh" not in called_ops(func)


class _Counting(FunctionPass):
    required_ops = frozenset({"nn.conv2d"})

    def __init__(self):
        super().__init__("Counting")
        self.visited = 0

    def transform_function(self, func, mod, ctx):
        self.visited += 1
        return func


def test_a_function_pass_skips_functions_without_its_ops():
    mod = from_source(SRC)
    counting = _Counting()
    assert counting(mod) is mod and counting.visited == 0
    conv = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 2, 4, 4), "float32"), w: R.Tensor((3, 2, 1, 1), "float32")):
        y = R.nn.conv2d(x, w)
        return y
'''
    counting(from_source(conv))
    assert counting.visited == 1


def test_a_build_lets_the_remembered_functions_go():
    from hetvm.analysis import called_ops as cache
    from hetvm.pipeline import lower

    lower(from_source(SRC))
    assert not cache._CACHE
