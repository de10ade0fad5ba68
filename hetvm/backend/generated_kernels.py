"""Ahead-of-run compilation of the generated kernels a lowered module calls.

Why: Numba compiles on a kernel's first call; a build that compiles (or loads
from the disk cache) every ``fused_elementwise`` kernel whose shapes are known
keeps that time out of the first run and can say how long it took. Kernels of
symbolic shapes compile on their first call instead. The direct loops
(depthwise convolution, pooling, convolution epilogue: see
:mod:`.direct_kernels`) a module's calls take are compiled here too, once per
dtype, and counted in the same report.
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
from . import direct_kernels

__all__ = ["compile_generated_kernels"]

log = logging.getLogger("hetvm.codegen")
_SYMBOL = "kernel.fused_elementwise"


class _Calls(ExprVisitor):
    def __init__(self) -> None:
        self.found: list[E.Call] = []
        self.direct: list[E.Call] = []

    def visit_call(self, call: E.Call) -> None:
        if isinstance(call.op, E.ExternFunc):
            if call.op.global_symbol == _SYMBOL:
                self.found.append(call)
            elif call.op.global_symbol in direct_kernels.SYMBOLS:
                self.direct.append(call)
        super().visit_call(call)


def _static(sinfo: Any) -> tuple[tuple[int, ...], str] | None:
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None or sinfo.dtype is None:
        return None
    dims = tuple(P.const_value(d) for d in sinfo.shape)
    return None if any(d is None for d in dims) else (dims, sinfo.dtype)  # type: ignore[return-value]


def _on_cpu(call: E.Call, vdevs: Any) -> bool:
    dev = int(call.attrs.get("device_index", 0))
    return not vdevs or (dev < len(vdevs) and vdevs[dev].kind == "cpu")


def compile_generated_kernels(mod: IRModule) -> dict | None:
    """Compiles the module's fused kernels and the direct loops its calls take, on
    CPU devices; ``{"generator", "kernels", "compile_seconds", "direct",
    "interpreted"}`` (``kernels``: compiled units, one interpreter per dtype
    counted once; ``direct``: the loops, e.g. ``"depthwise float32"``;
    ``interpreted``: programs the interpreter of small programs runs, see
    :mod:`hetvm.kernels.program_interp`) or None when there are none or no Numba."""
    from ..kernels import codegen_numba as cg
    from ..kernels import depthwise_direct

    calls = _Calls()
    for func in mod.functions.values():
        if isinstance(func, E.Function):
            calls.visit_expr(func)
    vdevs = mod.vdevices
    todo = []
    for call in calls.found:
        if not _on_cpu(call, vdevs):
            continue
        args = [_static(a.struct_info) for a in call.args]
        if any(a is None for a in args):
            continue
        todo.append((call, args))
    if not (todo or calls.direct) or not cg.available():
        return None
    threaded = cg._numba.config.NUMBA_NUM_THREADS > 1
    loops: dict[direct_kernels.Loop, None] = {}
    for call in calls.direct:
        if _on_cpu(call, vdevs):
            attrs = call.attrs.get("op_attrs") or {}
            for loop in direct_kernels.loops_of(call.op.global_symbol, attrs, call.args,  # type: ignore[union-attr]
                                                depthwise_direct.PARALLEL_MIN, threaded):  # fmt: skip
                loops[loop] = None
    start = time.perf_counter()
    total = len(todo) + len(loops)
    done = set()
    interpreted: dict[str, int] = {}  # interpreter dtype -> programs it runs
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
        interp = kernel.interpreted([s for s, _ in inputs], out[0])
        if interp is not None:
            interpreted[interp] = interpreted.get(interp, 0) + 1
        log.info("generated kernel %d/%d %s in %.2f s", n, total,
                 f"runs on the {interp} interpreter, loaded" if interp else "compiled", took)  # fmt: skip
    direct = []
    for n, loop in enumerate(loops, len(todo) + 1):
        t0 = time.perf_counter()
        count = direct_kernels.precompile(loop)
        took = time.perf_counter() - t0
        cg.count_compiled(count, took)
        name = direct_kernels.describe(loop)
        direct.append(name)
        log.info("direct loop %d/%d (%s) compiled in %.2f s", n, total, name, took)
    if not done and not direct:
        return None
    own = len(done) - sum(interpreted.values())
    return {"generator": "numba", "kernels": own + len(interpreted) + len(direct),
            "compile_seconds": round(time.perf_counter() - start, 3), "direct": direct,
            "interpreted": sum(interpreted.values())}  # fmt: skip
