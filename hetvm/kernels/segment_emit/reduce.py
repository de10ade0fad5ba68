"""Segment bodies of ``sum`` and ``mean`` over a contiguous run of axes, at any size.

Why: the general reduction body (``norm.py``) folds one element at a time into
one float64 accumulator, a chain of dependent adds that LLVM may not reorder,
so above :data:`norm.REDUCE_MAX` elements it lost to NumPy's SIMD passes and
the call left the segment: SqueezeNet's global average pool (a ``mean`` over
(1, 1000, 13, 13)) ran NumPy's 45 us where ONNX Runtime takes 19. Here the
input is read as ``(outer, R, inner)``, the reduced axes being the middle run:

* ``inner`` = 1 (the reduced axes trailing, global pooling): each row of R
  contiguous elements is summed by :func:`_row_sum`, compiled with
  ``fastmath={"reassoc"}`` (only reassociation: NaN and inf behave as IEEE
  says) so LLVM vectorises it: float64 lanes over blocks of 128 elements, the
  block sums added pairwise (a binary counter of partial sums), so the error
  stays within NumPy's pairwise bound for float64 inputs too; float32 inputs
  are summed in float64 (as the general body), far inside it.
* ``inner`` > 1 (a middle axis, e.g. channels): every output of a row is its
  own float64 accumulator, the R rows added element-wise in order (a loop over
  ``inner`` that vectorises without reassociation; NumPy sums that way too).

Integers sum in int64 / uint64 as NumPy (wrapping alike), a mean of integers
in float64. One rounding at the store. A non-contiguous input is read through
``ravel`` (a copy, C order). ``max``, ``min`` and ``prod``, reductions over
axes that are not one run, and the dtypes this emitter does not take go to
the general body (``norm._reduction``), which keeps its size rule: its scalar
folds still lose to NumPy there (see :data:`norm.REDUCE_MAX`).

Measured one thread, CPU time, float32 ``mean`` over (2, 3), a row loop /
NumPy: (1, 1000, 13, 13) 13 / 43 us, (1, 2048, 7, 7) 9 / 46, (1, 16, 64, 64)
3.5 / 13.
"""

from __future__ import annotations

from typing import Any, Sequence

from . import FLOATS, INTS, Arg, Arr, Body, Lines, index, specialise
from .norm import _nest, _numpy_axes, _reduction_plan

__all__: list[str] = []

_OPS = ("sum", "mean")

#: the helper the row bodies call (see the module's docstring); the levels
#: array holds the partial sums of 2^l blocks, one per set bit of ``k``
_ROW_SUM = '''\
@numba.njit(cache=True, error_model="numpy", nogil=True, fastmath={"reassoc"})
def _row_sum(a, start, n, levels):
    row = a[start:start + n]
    k = 0
    for b in range(n // 128):
        block = row[b * 128:b * 128 + 128]
        s = 0.0
        for j in range(128):
            s += block[j]
        lv = 0
        kk = k
        while kk & 1:
            s = levels[lv] + s
            kk >>= 1
            lv += 1
        levels[lv] = s
        k += 1
    tail = row[n // 128 * 128:]
    s = 0.0
    for j in range(tail.shape[0]):
        s += tail[j]
    lv = 0
    while k:
        if k & 1:
            s = levels[lv] + s
        k >>= 1
        lv += 1
    return s
'''


def _contiguous(axes: tuple[int, ...]) -> bool:
    return bool(axes) and axes == tuple(range(axes[0], axes[-1] + 1))


def _emit(op: str, attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if op not in _OPS or len(args) != 2 or not all(isinstance(a, Arr) for a in args):
        return None
    x, out = args
    X, O = names
    nd = x.ndim  # type: ignore[union-attr]
    keep = bool(attrs.get("keepdims", False))
    axes = _numpy_axes(attrs.get("axis"), nd)
    if axes is None or not _contiguous(axes) or x.dtype not in FLOATS | INTS | {"bool"}:  # type: ignore[union-attr]
        return None
    if out.ndim != (nd if keep else nd - len(axes)):  # type: ignore[union-attr]
        return None
    plan = _reduction_plan(op, x.dtype, out.dtype)  # type: ignore[union-attr]
    if plan is None:
        return None
    init, fold, _ = plan
    first, last = axes[0], axes[-1]
    outer, inner = list(range(first)), list(range(last + 1, nd))
    want = [("1" if d in axes else f"{X}.shape[{d}]") for d in range(nd)] if keep else [
        f"{X}.shape[{d}]" for d in outer + inner]
    lines: Lines = []
    if want:
        cond = " or ".join(f"{O}.shape[{k}] != {w}" for k, w in enumerate(want))
        lines += [f"if {cond}:", f"    raise ValueError('{op}: the output shape does not match the reduction')"]

    def prod(dims: Sequence[int]) -> str:
        return " * ".join(f"{X}.shape[{d}]" for d in dims) if dims else "1"

    lines += [f"R = {prod(axes)}", f"inner = {prod(inner)}", f"flat = {X}.ravel()", "base = 0"]

    def out_at(kept_inner: bool) -> str:
        idx = [f"i{d}" for d in outer] + (["0"] * len(axes) if keep else [])
        idx += [f"i{d}" for d in inner] if kept_inner else []
        return index(O, idx)

    def result(acc: str) -> str:
        return f"{acc} / R" if op == "mean" else acc

    floats = x.dtype in FLOATS  # type: ignore[union-attr]
    if not inner:
        if floats:
            lines.append("levels = np.empty(64, np.float64)")
            row = [f"{out_at(False)} = {result('_row_sum(flat, base, R, levels)')}"]
        else:
            row = ["part = flat[base:base + R]", f"acc = {init}", "for j in range(R):"]
            row += ["    " + line for line in fold("part[j]")] + [f"{out_at(False)} = {result('acc')}"]
        body = _nest(outer, X, row + ["base += R"])
        return Body(lines + body, _ROW_SUM) if floats else lines + body
    start = "0.0" if floats or op == "mean" else init
    acc_dtype = "np.float64" if floats or op == "mean" else init.split("(")[0]
    lines.append(f"accs = np.empty(inner, {acc_dtype})")
    row = ["for i in range(inner):", f"    accs[i] = {start}",
           "for r in range(R):", "    part = flat[base + r * inner:base + r * inner + inner]",
           "    for i in range(inner):"]
    row += ["        " + line for line in (
        ["accs[i] += part[i]"] if floats or op == "mean" else ["acc = accs[i]", *fold("part[i]"), "accs[i] = acc"])]
    row += ["base += R * inner", "j = 0"]
    row += _nest(inner, X, [f"{out_at(True)} = {result('accs[j]')}", "j += 1"])
    return lines + _nest(outer, X, row)


for _op in _OPS:
    specialise(_op)(lambda attrs, args, names, _op=_op: _emit(_op, attrs, args, names))

