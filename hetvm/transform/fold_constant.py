"""FoldConstant: evaluate, once at compile time, op calls whose inputs are constants.

Imported models build weights from constant subgraphs; folding them means a
run does not recompute them. Only pure compute ops (``FOLLOW_INPUTS``) with
static result shapes are folded, using the host CPU kernels; results larger
than ``max_bytes`` stay as computations so constants do not balloon.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import DeviceBehavior, op_info
from ..ir.visitor import ExprMutator
from .pass_infra import FunctionPass, PassContext

DEFAULT_MAX_BYTES = 64 << 20


def _np_dtype(dtype: str) -> np.dtype:
    return np.dtype("bool" if dtype == "bool" else dtype)


def allocate_outputs(sinfo: S.StructInfo) -> list[np.ndarray] | None:
    """NumPy buffers for a static result struct info (None when not static)."""
    if isinstance(sinfo, S.TensorStructInfo):
        shape = sinfo.static_shape
        if shape is None or sinfo.dtype is None:
            return None
        return [np.empty(shape, dtype=_np_dtype(sinfo.dtype))]
    if isinstance(sinfo, S.TupleStructInfo):
        outs: list[np.ndarray] = []
        for f in sinfo.fields:
            part = allocate_outputs(f)
            if part is None or not isinstance(f, S.TensorStructInfo):
                return None
            outs.extend(part)
        return outs
    return None


def evaluate_op(op_name: str, attrs: dict, args: Sequence[Any], out_sinfo: S.StructInfo) -> Any:
    """Runs the CPU kernel of ``op_name`` on evaluated args.

    ``args`` are NumPy arrays, tuples of ints (shapes), Python numbers or
    lists of arrays, as kernels take them. Returns an array or a tuple of
    arrays, following ``out_sinfo``.
    """
    from ..kernels import get_kernel

    outs = allocate_outputs(out_sinfo)
    if outs is None:
        raise ValueError(f"cannot evaluate '{op_name}': result {S.describe(out_sinfo)} is not static")
    kernel = get_kernel(op_name, "cpu")
    kernel(np, dict(attrs), *args, *outs)
    if isinstance(out_sinfo, S.TupleStructInfo):
        return tuple(outs)
    return outs[0]


def _const_arg(expr: E.Expr) -> tuple[bool, Any]:
    if isinstance(expr, E.Constant):
        return True, expr.data
    if isinstance(expr, E.ShapeExpr):
        dims = [P.const_value(v) for v in expr.values]
        return (all(d is not None for d in dims), tuple(dims))
    if isinstance(expr, E.PrimValue):
        if isinstance(expr.value, P.FloatImm):
            return True, expr.value.value
        c = P.const_value(expr.value)
        return (c is not None, c)
    if isinstance(expr, E.Tuple):
        parts = [_const_arg(f) for f in expr.fields]
        return all(ok for ok, _ in parts), [v for _, v in parts]
    return False, None


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, max_bytes: int) -> None:
        super().__init__(mod)
        self.max_bytes = max_bytes

    def visit_call(self, call: E.Call) -> E.Expr:
        call = super().visit_call(call)  # type: ignore[assignment]
        if not isinstance(call, E.Call) or not isinstance(call.op, E.Op):
            return call
        info = op_info(call.op)
        if not info.pure or info.device_behavior is not DeviceBehavior.FOLLOW_INPUTS:
            return call
        parts = [_const_arg(a) for a in call.args]
        if not all(ok for ok, _ in parts):
            return call
        # a call with no tensor input (zeros, full) folds only if small
        sinfo = call.struct_info
        if not isinstance(sinfo, S.TensorStructInfo) or sinfo.static_shape is None or sinfo.dtype is None:
            return call
        nbytes = int(np.prod(sinfo.static_shape, dtype=np.int64)) * S.dtype_nbytes(sinfo.dtype)
        if nbytes > self.max_bytes:
            return call
        try:
            from ..kernels import has_kernel

            if not has_kernel(info.name, "cpu"):
                return call
            value = evaluate_op(info.name, dict(call.attrs), [v for _, v in parts], sinfo)
        except (ValueError, ArithmeticError, FloatingPointError):
            return call
        return E.Constant(value, struct_info=sinfo, span=call.span)


class FoldConstant(FunctionPass):
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__("FoldConstant")
        self.max_bytes = max_bytes

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _Folder(mod, self.max_bytes).visit_expr(func)  # type: ignore[return-value]
