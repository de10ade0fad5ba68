"""``check_device_plan``: the well-formedness rule a device plan must satisfy.

After PlanDevices every tensor carries a declared vdevice and every edge that
crosses devices carries its copy: an op reads only tensors on its own device, a
call passes arguments on the callee's parameter devices, a function returns on
its declared device, an ``If`` reads its condition on the host and its branches
end on the result's device, and each value is copied at most once per
destination (never to the device it is already on).
"""

from __future__ import annotations

from ...errors import DevicePlanError
from ...ir import expr as E
from ...ir import struct_info as S
from ...ir.module import IRModule
from ...ir.op_registry import DeviceBehavior, op_info
from .devices import DeviceKey, device_key, key_kind, key_str


def _devs(sinfo: S.StructInfo | None) -> list[DeviceKey | None]:
    if isinstance(sinfo, S.TensorStructInfo):
        return [None if sinfo.vdevice is None else device_key(sinfo.vdevice)]
    if isinstance(sinfo, S.TupleStructInfo):
        out: list[DeviceKey | None] = []
        for f in sinfo.fields:
            out.extend(_devs(f))
        return out
    return []


def _seen_as(sinfo: S.StructInfo | None, declared: S.StructInfo | None) -> S.StructInfo | None:
    """``sinfo`` where ``declared`` looks at it: a result declared ``R.Any`` (or a
    tuple field so declared) may be on any device, so it has none to check."""
    if isinstance(declared, S.ObjectStructInfo):
        return declared
    if (
        isinstance(declared, S.TupleStructInfo)
        and isinstance(sinfo, S.TupleStructInfo)
        and len(declared.fields) == len(sinfo.fields)
    ):
        return S.TupleStructInfo([_seen_as(f, d) for f, d in zip(sinfo.fields, declared.fields)])
    return sinfo


def _at(span) -> str:
    return f" (at {span})" if span is not None else ""


class _Checker:
    def __init__(self, mod: IRModule) -> None:
        self.mod = mod
        self.declared = {device_key(v) for v in mod.vdevices}
        self.func = ""

    def fail(self, msg: str, span=None) -> DevicePlanError:
        return DevicePlanError(f"device plan of '{self.func}': {msg}{_at(span)}")

    def need(self, sinfo: S.StructInfo | None, what: str, span=None) -> list[DeviceKey]:
        out = []
        for d in _devs(sinfo):
            if d is None:
                raise self.fail(f"{what} has a tensor without a vdevice", span)
            if d not in self.declared:
                raise self.fail(f"{what} uses vdevice {key_str(d)}, which is not declared", span)
            out.append(d)
        return out

    def same(self, got: list[DeviceKey], want: list[DeviceKey], what: str, span=None) -> None:
        if got != want:
            g = ", ".join(map(key_str, got))
            w = ", ".join(map(key_str, want))
            raise self.fail(f"{what} is on [{g}] but is read on [{w}] without a copy", span)

    def run(self) -> None:
        for name, func in self.mod.functions.items():
            self.func = name
            for p in func.params:
                self.need(p.struct_info, f"parameter '{p.name_hint}'", p.span)
            ret = self.need(func.ret_struct_info, "the return type", func.span)
            self.seq(func.body)
            body = self.need(_seen_as(func.body.body.struct_info, func.ret_struct_info), "the block result")
            self.same(body, ret, "the function result", func.span)

    def seq(self, seq: E.SeqExpr) -> list[DeviceKey]:
        copies: dict[tuple[int, DeviceKey], str] = {}
        for block in seq.blocks:
            for b in block.bindings:
                self.binding(b, copies)
        return self.need(seq.body.struct_info, "the block result", seq.span)

    def binding(self, b: E.Binding, copies: dict) -> None:
        value = b.value  # type: ignore[attr-defined]
        name = f"'{b.var.name_hint}'"
        span = b.span or value.span
        out = self.need(b.var.struct_info, name, span)
        if isinstance(value, E.If):
            cond = self.need(value.cond.struct_info, f"the condition of {name}", span)
            if any(key_kind(d) != "cpu" for d in cond):
                raise self.fail(f"the condition of {name} is on {key_str(cond[0])}, not on the host", span)
            self.same(self.seq(value.true_branch), out, f"the true branch of {name}", span)
            self.same(self.seq(value.false_branch), out, f"the false branch of {name}", span)
            return
        if not isinstance(value, E.Call):
            self.same(self.need(value.struct_info, name, span), out, f"the value of {name}", span)
            return
        op = value.op
        if isinstance(op, E.GlobalVar) and op.name_hint in self.mod:
            callee = self.mod[op.name_hint]
            for a, p in zip(value.args, callee.params):
                self.same(self.need(a.struct_info, "an argument", span), self.need(p.struct_info, "a parameter"),
                          f"argument of {op.name_hint}() for parameter '{p.name_hint}' in {name}", span)
            self.same(self.need(callee.ret_struct_info, "a result"), out, f"the result of {op.name_hint}() in {name}", span)
            return
        if not isinstance(op, E.Op):
            return
        info = op_info(op)
        if info.device_behavior is DeviceBehavior.CROSS_DEVICE:
            src = self.need(value.args[0].struct_info, "a copy source", span)
            if src == out:
                raise self.fail(f"{name} copies to {key_str(out[0])}, where its source already is", span)
            key = (id(value.args[0]), out[0])
            if key in copies:
                raise self.fail(f"{name} copies a value to {key_str(out[0])} again (first: '{copies[key]}')", span)
            copies[key] = b.var.name_hint
            return
        if info.device_behavior is DeviceBehavior.ANNOTATION:
            raise self.fail(f"hint_on_device {name} survived device planning", span)
        if info.device_behavior is not DeviceBehavior.FOLLOW_INPUTS and info.name != "call_dps_packed":
            return
        args = value.args
        if info.name == "call_dps_packed":
            args = value.args[1].fields if isinstance(value.args[1], E.Tuple) else value.args[1:]
        for a in args:
            for d in self.need(a.struct_info, "an input", span):
                if out and d != out[0]:
                    raise self.fail(
                        f"'{info.name}' computing {name} runs on {key_str(out[0])} but reads an input on {key_str(d)} "
                        "without a copy", span)


def check_device_plan(mod: IRModule) -> None:
    """Raises :class:`DevicePlanError` at the first edge of ``mod`` missing its copy."""
    _Checker(mod).run()
