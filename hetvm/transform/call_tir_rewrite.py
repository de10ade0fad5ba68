"""CallTIRRewrite: destination passing made explicit.

``lv = R.call_dps_packed(f, (x, y), out_sinfo=T)`` becomes

    lv = R.builtin.alloc_tensor(R.shape(T.shape), R.dtype(T.dtype), R.prim_value(dev))
    _ = R.call_packed(f, x, y, lv)

(one allocation per output; a tuple result is re-assembled as a Tuple).
``lv = R.to_vdevice(x, d)`` likewise allocates on ``d`` and copies with
``vm.builtin.copy_to`` into that buffer, so copies write into memory the
memory planner owns on the destination device.
"""

from __future__ import annotations

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.device_index import device_index
from ..ir.module import IRModule
from ..ir.op_registry import get_op
from ..ir.visitor import ExprMutator
from ..op.effects import COPY_BUILTIN
from .pass_infra import FunctionPass, PassContext

UNIT = S.TupleStructInfo([])


def alloc_tensor_call(sinfo: S.TensorStructInfo, dev_index: int) -> E.Call:
    """``R.builtin.alloc_tensor(shape, dtype, dev)`` for a tensor struct info."""
    if sinfo.shape is None or sinfo.dtype is None:
        raise StructInfoError(
            f"cannot allocate {S.describe(sinfo)}: its shape and dtype must be known "
            "(MatchJoinedShapes gives joined values a shape; others need a match_cast)"
        )
    return E.Call(
        get_op("builtin.alloc_tensor"),
        (E.ShapeExpr(sinfo.shape), E.DataTypeImm(sinfo.dtype), E.PrimValue(dev_index)),
        struct_info=sinfo,
    )


class _Rewriter(ExprMutator):
    def _unit_var(self) -> E.Var:
        return E.Var("_", struct_info=UNIT)

    def _alloc(self, sinfo: S.TensorStructInfo, name: str) -> E.Var:
        call = alloc_tensor_call(sinfo, device_index(self.mod, sinfo.vdevice))  # type: ignore[arg-type]
        var = E.Var(name, struct_info=sinfo)
        self.emit_binding(E.VarBinding(var, call))
        return var

    def visit_binding(self, binding: E.Binding) -> None:
        if isinstance(binding, E.VarBinding) and isinstance(binding.value, E.Call):
            call = binding.value
            if isinstance(call.op, E.Op) and call.op.name == "call_dps_packed":
                call = self.visit_expr(call)  # type: ignore[assignment]
                self._rewrite_dps(binding, call)  # type: ignore[arg-type]
                return
            if isinstance(call.op, E.Op) and call.op.name == "to_vdevice":
                call = self.visit_expr(call)  # type: ignore[assignment]
                self._rewrite_copy(binding, call)  # type: ignore[arg-type]
                return
        super().visit_binding(binding)

    def _rewrite_dps(self, binding: E.VarBinding, call: E.Call) -> None:
        func, args = call.args
        arg_list = args.fields if isinstance(args, E.Tuple) else (args,)
        out_sinfo = call.sinfo_args[0] if call.sinfo_args else binding.var.struct_info
        name = binding.var.name_hint
        if isinstance(out_sinfo, S.TupleStructInfo):
            outs = [self._alloc(f, f"{name}_{i}") for i, f in enumerate(out_sinfo.fields)]  # type: ignore[arg-type]
        else:
            outs = [self._alloc(out_sinfo, name)]  # type: ignore[arg-type]
        attrs = dict(call.attrs)
        dev = outs[0].struct_info.vdevice  # type: ignore[union-attr]
        attrs["device_index"] = device_index(self.mod, dev)  # type: ignore[arg-type]
        attrs["num_outputs"] = len(outs)
        packed = E.Call(
            func, tuple(arg_list) + tuple(outs), E.Attrs(attrs), (UNIT,), struct_info=UNIT, span=call.span
        )
        self.emit_binding(E.VarBinding(self._unit_var(), packed, span=binding.span))
        if isinstance(out_sinfo, S.TupleStructInfo):
            self.emit_binding(E.VarBinding(binding.var, E.Tuple(tuple(outs)), span=binding.span))
        else:
            self.var_remap[binding.var] = outs[0]

    def _rewrite_copy(self, binding: E.VarBinding, call: E.Call) -> None:
        sinfo = call.struct_info
        assert isinstance(sinfo, S.TensorStructInfo)
        out = self._alloc(sinfo, binding.var.name_hint)
        dst = device_index(self.mod, sinfo.vdevice)  # type: ignore[arg-type]
        packed = E.Call(
            E.ExternFunc(COPY_BUILTIN),
            (call.args[0], E.PrimValue(dst), out),
            sinfo_args=(UNIT,),
            struct_info=UNIT,
            span=call.span,
        )
        self.emit_binding(E.VarBinding(self._unit_var(), packed, span=binding.span))
        self.var_remap[binding.var] = out


class CallTIRRewrite(FunctionPass):
    def __init__(self) -> None:
        super().__init__("CallTIRRewrite")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        new = _Rewriter(mod).visit_expr(func)
        if new is not func and func.is_pure and not func.attrs.get("relax.force_pure"):
            # explicit allocation is impure; like TVM, the function stays pure to its
            # callers and says so with relax.force_pure
            new = E.replace(new, attrs=func.attrs.with_(**{"relax.force_pure": True}))
        return new  # type: ignore[return-value]
