"""Ahead-of-run compilation of the generated kernels a lowered module calls.

Why: Numba compiles on a kernel's first call; a build that compiles (or loads
from the disk cache) every ``fused_elementwise`` kernel whose shapes are known
keeps that time out of the first run and can say how long it took. Kernels of
symbolic shapes compile on their first call instead.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.visitor import ExprVisitor

__all__ = ["compile_generated_kernels"]

log = logging.getLogger("hetvm.codegen")
_SYMBOL = "kernel.fused_elementwise"


class _Calls(ExprVisitor):
    def __init__(self) -> None:
        self.found: list[E.Call] = []

    def visit_call(self, call: E.Call) -> None:
        if isinstance(call.op, E.ExternFunc) and call.op.global_symbol == _SYMBOL:
            self.found.append(call)
        super().visit_call(call)


def _static(sinfo: Any) -> tuple[tuple[int, ...], str] | None:
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None or sinfo.dtype is None:
        return None
    dims = tuple(P.const_value(d) for d in sinfo.shape)
    return None if any(d is None for d in dims) else (dims, sinfo.dtype)  # type: ignore[return-value]


def compile_generated_kernels(mod: IRModule) -> dict | None:
    """Compiles the module's fused kernels on CPU devices; ``{"generator",
    "kernels", "compile_seconds"}`` or None when there are none or no Numba."""
    from ..kernels import codegen_numba as cg

    calls = _Calls()
    for func in mod.functions.values():
        if isinstance(func, E.Function):
            calls.visit_expr(func)
    vdevs = mod.vdevices
    todo = []
    for call in calls.found:
        dev = int(call.attrs.get("device_index", 0))
        if vdevs and (dev >= len(vdevs) or vdevs[dev].kind != "cpu"):
            continue
        args = [_static(a.struct_info) for a in call.args]
        if any(a is None for a in args):
            continue
        todo.append((call, args))
    if not todo or not cg.available():
        return None
    start = time.perf_counter()
    done = set()
    for n, (call, args) in enumerate(todo, 1):
        program = tuple(tuple(s) for s in call.attrs["op_attrs"]["program"])
        *inputs, out = args
        key = (program, tuple(args))
        if key in done:
            continue
        kernel = cg.generated_kernel(__import__("numpy"), program)
        took = kernel.compile_for([s for s, _ in inputs], [d for _, d in inputs], out[0], out[1])
        if took is None:  # the NumPy runner runs these shapes (see codegen_numba.mode)
            continue
        done.add(key)
        log.info("generated kernel %d/%d compiled in %.2f s", n, len(todo), took)
    if not done:
        return None
    return {"generator": "numba", "kernels": len(done), "compile_seconds": round(time.perf_counter() - start, 3)}
