"""Segment body of ``matmul``: a loop nest, for the small products of the
exported transformers (a few thousand multiply-adds, where BLAS's call costs
more than the arithmetic). A product above :data:`LOOP_MAX` multiply-adds at
the first call keeps BLAS.

Covered: float operands of one dtype and rank >= 2, the output in that dtype;
batch dimensions broadcast NumPy's way. The loop order (rows, k, column) keeps
the innermost loop contiguous, which LLVM vectorises; :data:`ROWS` rows of A
go through it together, so each element of B loaded serves that many
products (the rows left over go one at a time). Sums run in the output dtype
in k order, as a BLAS kernel's do up to its blocking.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from . import FLOATS, Arg, Arr, Body, Lines, register

#: multiply-adds above which a matmul keeps BLAS (the loop measured at 0.4-1.2x
#: OpenBLAS's single-threaded time up to 16x128x512, 2.4x at 196x256x256)
LOOP_MAX = 1 << 17
#: rows of A whose products share each load of a row of B (the rest of M one at
#: a time): at four, 1.2-2x faster than one row on the corpus's shapes
ROWS = 4


@register("matmul")
def _matmul(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 3 or not all(isinstance(a, Arr) for a in args):
        return None
    a, b, out = args  # type: ignore[misc]
    if a.dtype not in FLOATS or b.dtype != a.dtype or out.dtype != a.dtype:
        return None
    if attrs.get("out_dtype") not in (None, out.dtype):
        return None
    if a.ndim < 2 or b.ndim < 2 or out.ndim != max(a.ndim, b.ndim):
        return None
    if out.shape is not None and a.shape is not None and math.prod(out.shape) * a.shape[-1] > LOOP_MAX:
        return None
    A, B, O = names
    nb = out.ndim - 2
    lines = [
        f"M = {A}.shape[{a.ndim - 2}]",
        f"K = {A}.shape[{a.ndim - 1}]",
        f"N = {B}.shape[{b.ndim - 1}]",
        f"if {B}.shape[{b.ndim - 2}] != K or {O}.shape[{nb}] != M or {O}.shape[{nb + 1}] != N:",
        "    raise ValueError('matmul: shapes do not match')",
    ]
    batch = [f"i{d}" for d in range(nb)]

    def batch_index(x: str, nd: int, tag: str) -> list[str]:
        at = []
        for d in range(nd - 2):
            od = nb - (nd - 2) + d
            lines.append(f"{tag}{d} = 0 if {x}.shape[{d}] == 1 else 1")
            lines.append(f"if {x}.shape[{d}] != 1 and {x}.shape[{d}] != {O}.shape[{od}]:")
            lines.append("    raise ValueError('matmul: batch dimensions do not broadcast')")
            at.append(f"i{od} * {tag}{d}")
        return at

    a_at = batch_index(A, a.ndim, "sa")
    b_at = batch_index(B, b.ndim, "sb")
    pad = ""
    for d in range(nb):
        lines.append(f"{pad}for i{d} in range({O}.shape[{d}]):")
        pad += "    "

    def o(*rest: str) -> str:
        return f"{O}[{', '.join(batch + list(rest))}]"

    def a_(*rest: str) -> str:
        return f"{A}[{', '.join(a_at + list(rest))}]"

    def b_(*rest: str) -> str:
        return f"{B}[{', '.join(b_at + list(rest))}]"

    zero = f"np.{out.dtype}(0)"
    rows = [f"i + {r}" if r else "i" for r in range(ROWS)]
    lines += [
        f"{pad}i = 0",
        f"{pad}while i + {ROWS} <= M:",
        f"{pad}    for j in range(N):",
        *(f"{pad}        {o(r, 'j')} = {zero}" for r in rows),
        f"{pad}    for k in range(K):",
        *(f"{pad}        x{n} = {a_(r, 'k')}" for n, r in enumerate(rows)),
        f"{pad}        for j in range(N):",
        f"{pad}            bv = {b_('k', 'j')}",
        *(f"{pad}            {o(r, 'j')} += x{n} * bv" for n, r in enumerate(rows)),
        f"{pad}    i += {ROWS}",
        f"{pad}for r in range(i, M):",
        f"{pad}    for j in range(N):",
        f"{pad}        {o('r', 'j')} = {zero}",
        f"{pad}    for k in range(K):",
        f"{pad}        xv = {a_('r', 'k')}",
        f"{pad}        for j in range(N):",
        f"{pad}            {o('r', 'j')} += xv * {b_('k', 'j')}",
    ]
    return Body(lines, contract=True)
