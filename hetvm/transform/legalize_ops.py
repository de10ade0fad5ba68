"""LegalizeOps: high-level op calls become calls of the op's kernel.

``lv = R.add(x, y)`` becomes ``lv = R.call_dps_packed("kernel.add", (x, y),
out_sinfo=...)`` with the op's attributes kept in ``attrs["op_attrs"]``; the
kernel for the device of the result is chosen at code generation. Ops whose
result is a view of their input (those declaring ``effects=VIEW``:
``reshape``, ``expand_dims``, ``squeeze``, ``flatten``) become
``vm.builtin.reshape`` calls that share bytes, so no copy is made and the
memory planner treats them as aliases; an op whose calls are views only
sometimes registers ``lower_to_view=fn`` (``fn(call)``: the view builtin call,
or None for its kernel). ``hint_on_device``
is only an annotation and becomes a plain re-binding of its input.
"""

from __future__ import annotations

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import DeviceBehavior, get_op, op_info
from ..ir.visitor import ExprMutator
from ..op.effects import RESHAPE_BUILTIN, is_view_op, kernel_symbol
from .pass_infra import FunctionPass, PassContext

# a view allocates nothing and writes nothing: a pure packed function
PURE_RESHAPE = E.ExternFunc(
    RESHAPE_BUILTIN, struct_info=S.FuncStructInfo(None, S.ObjectStructInfo(), purity=True)
)


def _require_shapes(sinfo: S.StructInfo, op: str, span: object) -> None:
    if isinstance(sinfo, S.TensorStructInfo):
        if sinfo.shape is None or sinfo.dtype is None:
            where = f" at {span}" if span is not None else ""
            raise StructInfoError(
                f"cannot legalize '{op}'{where}: its result {S.describe(sinfo)} has no known "
                "shape and dtype to allocate"
            )
    elif isinstance(sinfo, S.TupleStructInfo):
        for f in sinfo.fields:
            _require_shapes(f, op, span)
    else:
        raise StructInfoError(f"cannot legalize '{op}': result is not a tensor ({S.describe(sinfo)})")


class _Legalizer(ExprMutator):
    def visit_call(self, call: E.Call) -> E.Expr:
        call = super().visit_call(call)  # type: ignore[assignment]
        if not isinstance(call, E.Call) or not isinstance(call.op, E.Op):
            return call
        info = op_info(call.op)
        name = info.name
        if info.device_behavior is DeviceBehavior.ANNOTATION:
            return call.args[0]
        computes_tensor_on_host = info.device_behavior is DeviceBehavior.HOST_ONLY and isinstance(
            call.struct_info, S.TensorStructInfo
        )
        if info.device_behavior is not DeviceBehavior.FOLLOW_INPUTS and not computes_tensor_on_host:
            return call
        sinfo = call.struct_info
        assert sinfo is not None
        _require_shapes(sinfo, name, call.span)
        lower_to_view = info.extra.get("lower_to_view")
        if lower_to_view is not None:  # the op's definition says when a call is a view
            view = lower_to_view(call)
            if view is not None:
                return view
        if is_view_op(name):
            assert isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None
            return E.Call(
                PURE_RESHAPE,
                (call.args[0], E.ShapeExpr(sinfo.shape)),
                sinfo_args=(sinfo,),
                struct_info=sinfo,
                span=call.span,
            )
        return E.Call(
            get_op("call_dps_packed"),
            (E.ExternFunc(kernel_symbol(name)), E.Tuple(call.args)),
            E.Attrs({"op_attrs": call.attrs}) if call.attrs else E.Attrs(),
            sinfo_args=(sinfo,),
            struct_info=sinfo,
            span=call.span,
        )


class LegalizeOps(FunctionPass):
    def __init__(self) -> None:
        super().__init__("LegalizeOps")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return _Legalizer(mod).visit_expr(func)  # type: ignore[return-value]
