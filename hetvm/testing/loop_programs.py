"""Small TVMScript programs with a loop, shared by the tests of every layer.

A loop is a function that calls itself in tail position (as in TVM Relax);
``counting_loop`` is the shape the ONNX importer makes of a ``Loop``: a trip
count, carried values, a value computed before the loop and read in it.
"""

from __future__ import annotations

__all__ = ["counting_loop"]


def counting_loop(n: int = 64, body_device: str | None = None, host: str = "llvm") -> str:
    """``main(trips, x, w)`` with ``x`` of shape (1, n) and ``w`` (n, n):
    ``acc = x``, then ``trips`` times ``acc = tanh(acc @ exp(w)) + acc``;
    returns ``acc``.

    Each iteration makes intermediates (the product at least, planned in the
    loop's arena: the matmul fuses with nothing) and passes on a new counter
    and a new ``acc``. With
    ``body_device`` (e.g. ``"sim"``) the body's ops are pinned there while
    ``main``'s parameters and result stay on ``host``: the values read in the
    loop are then copied before it, once."""
    dev = f', "{body_device}"' if body_device else ""
    vdevices = f'[I.vdevice("{host}"), I.vdevice("{body_device}", 0)]' if body_device else f'[I.vdevice("{host}")]'
    return f'''
@I.ir_module
class Module:
    I.module_global_infos({{"vdevice": {vdevices}}})

    @R.function
    def loop(i: R.Tensor((), "int64"), trips: R.Tensor((), "int64"), acc: R.Tensor((1, {n}), "float32"), e: R.Tensor(({n}, {n}), "float32")) -> R.Tensor((1, {n}), "float32"):
        cls = Module
        go = R.less(i, trips)
        if go:
            t: R.Tensor((1, {n}), "float32"{dev}) = R.matmul(acc, e)
            u: R.Tensor((1, {n}), "float32"{dev}) = R.tanh(t)
            a: R.Tensor((1, {n}), "float32"{dev}) = R.add(u, acc)
            j = R.add(i, R.const(1, "int64"))
            r = cls.loop(j, trips, a, e)
            out = r
        else:
            out = acc
        return out

    @R.function
    def main(trips: R.Tensor((), "int64", "{host}"), x: R.Tensor((1, {n}), "float32", "{host}"), w: R.Tensor(({n}, {n}), "float32", "{host}")) -> R.Tensor((1, {n}), "float32", "{host}"):
        cls = Module
        e = R.exp(w)
        y = cls.loop(R.const(0, "int64"), trips, x, e)
        return y
'''


def counting_loop_reference(trips: int, x, w):  # type: ignore[no-untyped-def]
    """What ``counting_loop``'s ``main`` computes, in NumPy."""
    import numpy as np

    acc = np.asarray(x, dtype=np.float32)
    e = np.exp(np.asarray(w, dtype=np.float32))
    for _ in range(trips):
        acc = np.tanh(acc @ e) + acc
    return acc
