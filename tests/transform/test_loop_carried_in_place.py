"""LoopCarriedInPlace: a loop's row-by-row writes into a carried buffer happen
in place when no one can see the old buffer; otherwise the loop first gets a
fresh copy of it (once), and results never change."""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
from hetvm.pipeline import lower
from hetvm.script import from_source
from hetvm.testing.interpreter import interpret

ROWS = 8


def _program(init: str = "fresh", read_after: bool = False, read_in_body: bool = False) -> str:
    """``main(trips, x, b)``: ``acc`` starts as zeros (``init="fresh"``), as
    ``main``'s parameter ``b`` (``"param"``), and the loop writes ``x * i``
    into row ``i``. ``read_after``: main also adds the initial buffer to the
    result; ``read_in_body``: the iteration reads the old ``acc`` after
    writing the new one (and adds its column sums to ``x``)."""
    buf = {"fresh": 'R.zeros(R.shape([8, 4]), "float32")', "param": "b"}[init]
    # the old acc read after the write (and passed on through x)
    use = "x2 = R.add(x, R.sum(acc, axis=[0], keepdims=True))" if read_in_body else "x2 = x"
    tail = "z = R.add(y, buf)\n        return z" if read_after else "return y"
    return f'''
@I.ir_module
class Module:
    @R.function
    def loop(i: R.Tensor((), "int64"), trips: R.Tensor((), "int64"), acc: R.Tensor((8, 4), "float32"), x: R.Tensor((1, 4), "float32")) -> R.Tensor((8, 4), "float32"):
        cls = Module
        go = R.less(i, trips)
        if go:
            y = R.multiply(x, R.astype(i, "float32"))
            at = R.reshape(i, R.shape([1, 1]))
            a = R.scatter_nd(acc, at, y, reduction="update")
            {use}
            j = R.add(i, R.const(1, "int64"))
            r = cls.loop(j, trips, a, x2)
            out = r
        else:
            out = acc
        return out

    @R.function
    def main(trips: R.Tensor((), "int64"), x: R.Tensor((1, 4), "float32"), b: R.Tensor((8, 4), "float32")) -> R.Tensor((8, 4), "float32"):
        cls = Module
        buf = {buf}
        y = cls.loop(R.const(0, "int64"), trips, buf, x)
        {tail}
'''


def _inputs(trips: int = 5):
    rng = np.random.default_rng(0)
    return [np.array(trips), rng.standard_normal((1, 4)).astype("float32"), rng.standard_normal((ROWS, 4)).astype("float32")]


def _check(src: str, inputs) -> None:
    """Two calls (5 trips, then 2: rows a wrongly shared buffer kept from the
    first would show) match the reference interpreter, and leave the
    arguments as they were."""
    exe = hetvm.build(from_source(src), target="llvm")
    vm = hetvm.VirtualMachine(exe)
    for trips in (5, 2):
        args = [np.array(trips)] + [a.copy() for a in inputs[1:]]
        kept = [a.copy() for a in args]
        got = vm["main"](*[hetvm.nd.array(a) for a in args]).numpy()
        np.testing.assert_allclose(got, _reference(src, kept), rtol=1e-6)
        assert all(np.array_equal(a, b) for a, b in zip(args, kept))


def _reference(src: str, inputs):
    return np.asarray(interpret(from_source(src), *[a.copy() for a in inputs]))


def _rewrites(src: str) -> dict:
    return lower(from_source(src), target="llvm").attrs.get("loop_carried_in_place", {})


def test_a_fresh_buffer_is_written_row_by_row_in_place():
    src = _program()
    assert _rewrites(src) == {"loop": 1}
    low = lower(from_source(src), target="llvm")
    assert "vm.builtin.view_at" in low.script()
    _check(src, _inputs())


@pytest.mark.parametrize("case", ["param", "read_after"])
def test_a_buffer_someone_else_holds_is_copied_once_before_the_loop(case):
    """main's parameter, or a buffer main reads after the loop: the loop gets a
    fresh copy (else it would write over the caller's bytes)."""
    src = _program(init="param") if case == "param" else _program(read_after=True)
    assert _rewrites(src) == {"loop": 1}
    assert "vm.builtin.copy_to" in lower(from_source(src), target="llvm").script()
    _check(src, _inputs())


def test_a_buffer_read_again_after_the_write_is_not_written_in_place():
    src = _program(read_in_body=True)
    assert _rewrites(src) == {}
    _check(src, _inputs())
