"""VM codegen: lowered IR -> bytecode (see docs/CONTRACTS.md section 3).

Input is the IR after the build pipeline: plain blocks, explicit allocation
(``memory.*`` / ``vm.*`` / ``builtin.alloc_tensor``), kernel calls as
``call_packed("kernel.<op>", inputs..., outputs...)`` and kills. Every bound
variable gets its own register; constants live in a pool; static shapes and
scalars become immediates so the VM does no work for them at run time.
"""

from __future__ import annotations

from typing import Any

from ..errors import HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.device_index import device_index, sinfo_device_index
from ..ir.module import IRModule
from ..ir.op_registry import op_info
from ..op.effects import kernel_op_of
from ..runtime import bytecode as B

Arg = tuple


def serialize_prim(e: P.PrimExpr) -> Any:
    """A PrimExpr as JSON: int, ["var", name] or [op, a, b]."""
    if isinstance(e, P.IntImm):
        return e.value
    if isinstance(e, P.FloatImm):
        return e.value
    if isinstance(e, P.PrimVar):
        return ["var", e.name]
    names = {
        P.Add: "add", P.Mul: "mul", P.FloorDiv: "floordiv", P.FloorMod: "floormod", P.Min: "min", P.Max: "max",
        P.EQ: "eq", P.NE: "ne", P.LT: "lt", P.LE: "le", P.GT: "gt", P.GE: "ge",
    }  # fmt: skip
    for cls, name in names.items():
        if isinstance(e, cls):
            return [name, serialize_prim(e.a), serialize_prim(e.b)]  # type: ignore[attr-defined]
    raise HetvmError(f"cannot serialise shape expression {e!r}")


def serialize_shape(values: tuple[P.PrimExpr, ...] | None) -> list | None:
    return None if values is None else [serialize_prim(v) for v in values]


def param_info(mod: IRModule, sinfo: S.StructInfo | None) -> dict:
    """What the VM checks about a value: kind, shape pattern, dtype, device."""
    if isinstance(sinfo, S.TensorStructInfo):
        return {
            "kind": "tensor",
            "shape": serialize_shape(sinfo.shape),
            "ndim": sinfo.ndim,
            "dtype": sinfo.dtype,
            "device": device_index(mod, sinfo.vdevice) if sinfo.vdevice is not None else None,
        }
    if isinstance(sinfo, S.ShapeStructInfo):
        return {"kind": "shape", "shape": serialize_shape(sinfo.values), "ndim": sinfo.ndim}
    if isinstance(sinfo, S.PrimStructInfo):
        value = None if sinfo.value is None else serialize_prim(sinfo.value)
        return {"kind": "prim", "dtype": sinfo.dtype, "value": value}
    if isinstance(sinfo, S.TupleStructInfo):
        return {"kind": "tuple", "fields": [param_info(mod, f) for f in sinfo.fields]}
    return {"kind": "object"}


class _FunctionCodegen:
    def __init__(self, mod: IRModule, name: str, func: E.Function, constants: list) -> None:
        self.mod = mod
        self.name = name
        self.func = func
        self.constants = constants
        self.const_index: dict[int, int] = {}
        self.code: list[Any] = []
        self.reg_of: dict[E.Var, Arg] = {}
        self.num_registers = 0
        self.debug_info: dict[int, dict] = {}
        self.specialised = _specialised_arenas(mod, name)
        # arena var -> tensor name -> the shape variable its call-time offset is bound to
        self.placement_of: dict[E.Var, dict[str, str]] = {}

    def new_reg(self) -> int:
        r = self.num_registers
        self.num_registers += 1
        return r

    # -- arguments ---------------------------------------------------------
    def arg(self, expr: E.Expr, kernel_operand: bool = False) -> Arg:
        if isinstance(expr, E.Var):
            if expr not in self.reg_of:
                raise HetvmError(f"codegen: variable '{expr.name_hint}' used before definition in {self.name}")
            return self.reg_of[expr]
        if isinstance(expr, E.Constant):
            key = id(expr)
            if key not in self.const_index:
                self.const_index[key] = len(self.constants)
                self.constants.append(expr.data)
            ref = ("c", self.const_index[key])
            vdev = expr.struct_info.vdevice if isinstance(expr.struct_info, S.TensorStructInfo) else None
            if kernel_operand or vdev is None or vdev.is_host:
                return ref
            # outside a kernel call a constant is a host NDArray: bring it to its planned device
            reg = self.new_reg()
            self.code.append(
                B.Call(reg, "vm.builtin.copy_to", (ref, ("i", device_index(self.mod, vdev)), ("i", None)))
            )
            return ("r", reg)
        if isinstance(expr, E.ShapeExpr):
            dims = [P.const_value(v) for v in expr.values]
            if all(d is not None for d in dims):
                return ("i", dims)
            reg = self.new_reg()
            self.code.append(B.Call(reg, "vm.builtin.make_shape", (("i", serialize_shape(expr.values)),)))
            return ("r", reg)
        if isinstance(expr, E.PrimValue):
            c = P.const_value(expr.value) if not isinstance(expr.value, P.FloatImm) else None
            if isinstance(expr.value, P.FloatImm):
                return ("i", expr.value.value)
            if c is not None:
                return ("i", c)
            reg = self.new_reg()
            self.code.append(B.Call(reg, "vm.builtin.prim_value", (("i", serialize_prim(expr.value)),)))
            return ("r", reg)
        if isinstance(expr, (E.StringImm, E.DataTypeImm)):
            return ("i", expr.value)
        if isinstance(expr, E.Tuple):
            fields = tuple(self.arg(f) for f in expr.fields)
            reg = self.new_reg()
            self.code.append(B.Call(reg, "vm.builtin.make_tuple", fields))
            return ("r", reg)
        if isinstance(expr, E.GlobalVar):
            return ("f", expr.name_hint)
        if isinstance(expr, E.ExternFunc):
            return ("f", expr.global_symbol)
        raise HetvmError(f"codegen: unsupported argument {type(expr).__name__} in {self.name}")

    # -- bindings ------------------------------------------------------------
    def emit_seq(self, seq: E.SeqExpr, result_reg: int | None = None) -> Arg:
        for block in seq.blocks:
            for b in block.bindings:
                self.emit_binding(b)
        out = self.arg(seq.body)
        if result_reg is not None:
            self.code.append(B.Call(result_reg, "vm.builtin.identity", (out,)))
            return ("r", result_reg)
        return out

    def define(self, var: E.Var) -> int:
        reg = self.new_reg()
        self.reg_of[var] = ("r", reg)
        return reg

    def emit_binding(self, b: E.Binding) -> None:
        start = len(self.code)
        self._emit_binding(b)
        info = debug_info_of(b.span or b.value.span)  # type: ignore[attr-defined]
        if info is not None:
            for pc in range(start, len(self.code)):
                self.debug_info.setdefault(pc, info)  # an If's inner bindings keep their own

    def _emit_binding(self, b: E.Binding) -> None:
        value = b.value  # type: ignore[attr-defined]
        if isinstance(b, E.MatchCast):
            src = self.arg(value)
            dst = self.define(b.var)
            info = param_info(self.mod, b.struct_info)
            self.code.append(B.Call(dst, "vm.builtin.match_cast", (src, ("i", info))))
            return
        if isinstance(value, (E.Var, E.Constant, E.PrimValue, E.StringImm, E.DataTypeImm, E.GlobalVar)):
            self.reg_of[b.var] = self.arg(value)
            return
        if isinstance(value, E.ShapeExpr):
            self.reg_of[b.var] = self.arg(value)
            return
        if isinstance(value, E.Tuple):
            fields = tuple(self.arg(f) for f in value.fields)
            dst = self.define(b.var)
            self.code.append(B.Call(dst, "vm.builtin.make_tuple", fields))
            return
        if isinstance(value, E.TupleGetItem):
            tup = self.arg(value.tuple_value)
            dst = self.define(b.var)
            self.code.append(B.Call(dst, "vm.builtin.tuple_getitem", (tup, ("i", value.index))))
            return
        if isinstance(value, E.If):
            self.emit_if(b.var, value)
            return
        if isinstance(value, E.Call):
            self.emit_call(b.var, value)
            return
        raise HetvmError(f"codegen: cannot compile binding of {type(value).__name__} in {self.name}")

    def emit_if(self, var: E.Var, node: E.If) -> None:
        cond = self.arg(node.cond)
        creg = self.new_reg()
        self.code.append(B.Call(creg, "vm.builtin.read_cond", (cond,)))
        dst = self.define(var)
        branch_at = len(self.code)
        self.code.append(None)  # placeholder for If
        self.emit_seq(node.true_branch, dst)
        goto_at = len(self.code)
        self.code.append(None)  # placeholder for Goto
        false_start = len(self.code)
        self.emit_seq(node.false_branch, dst)
        end = len(self.code)
        self.code[branch_at] = B.If(creg, false_start - branch_at)
        self.code[goto_at] = B.Goto(end - goto_at)

    def emit_call(self, var: E.Var, call: E.Call) -> None:
        callee = call.op
        if isinstance(callee, E.Op):
            self.emit_op(var, call, callee.name)
            return
        is_kernel = isinstance(callee, E.ExternFunc) and kernel_op_of(callee.global_symbol) is not None
        args = tuple(self.arg(a, kernel_operand=is_kernel) for a in call.args)
        if isinstance(callee, E.ExternFunc):
            name = callee.global_symbol
            kernel = kernel_op_of(name)
            if kernel is not None:
                attrs = dict(call.attrs.get("op_attrs", {}))
                dev = int(call.attrs.get("device_index", 0))
                nout = int(call.attrs.get("num_outputs", 1))
                names = tuple(getattr(a, "name_hint", "") for a in call.args)
                self.code.append(
                    B.KernelCall(kernel, _plain(attrs), dev, args, nout, names)
                )
                self.reg_of[var] = ("i", None)
                return
            dst = self.define(var)
            self.code.append(B.Call(dst, _packed_name(name), args))
            return
        if isinstance(callee, E.GlobalVar):
            dst = self.define(var)
            self.code.append(B.Call(dst, callee.name_hint, args))
            return
        if isinstance(callee, E.Var):
            ref = self.reg_of.get(callee)
            if ref is not None and ref[0] == "f":  # `g = cls.f; g(x)`: the function is known
                dst = self.define(var)
                self.code.append(B.Call(dst, ref[1], args))
                return
            # a function value chosen at run time (a parameter, an If's result, a closure)
            tup = self.new_reg()
            self.code.append(B.Call(tup, "vm.builtin.make_tuple", args))
            dst = self.define(var)
            self.code.append(B.Call(dst, "vm.builtin.invoke_closure", (self.arg(callee), ("r", tup))))
            return
        raise HetvmError(f"codegen: cannot call a {type(callee).__name__} in {self.name}")

    def emit_op(self, var: E.Var, call: E.Call, name: str) -> None:
        a = call.args
        if name in ("memory.kill_tensor", "memory.kill_storage", "vm.kill_object"):
            target = self.arg(a[0])
            if target[0] == "r":
                self.code.append(B.Kill(target[1]))
            self.reg_of[var] = ("i", None)
            return
        builtin_args: tuple[Arg, ...]
        if name == "memory.alloc_storage" and var.name_hint in self.specialised:
            size = self.arena_placement(var)
            builtin, builtin_args = "vm.builtin.alloc_storage", (size, self.arg(a[1]), self.arg(a[2]))
        elif name == "memory.alloc_tensor" and a and a[0] in self.placement_of:
            builtin, builtin_args = "vm.builtin.alloc_tensor", self.placed_tensor_args(var, a)
        elif name == "memory.alloc_storage":  # (size, dev, scope, dtype)
            builtin, builtin_args = "vm.builtin.alloc_storage", (self.arg(a[0]), self.arg(a[1]), self.arg(a[2]))
        elif name == "vm.alloc_storage":  # (size, dev, dtype[, scope])
            scope = self.arg(a[3]) if len(a) > 3 else ("i", "global")
            builtin, builtin_args = "vm.builtin.alloc_storage", (self.arg(a[0]), self.arg(a[1]), scope)
        elif name in ("memory.alloc_tensor", "vm.alloc_tensor"):
            builtin, builtin_args = "vm.builtin.alloc_tensor", tuple(self.arg(x) for x in a[:4])
        elif name == "builtin.alloc_tensor":
            builtin, builtin_args = "vm.builtin.alloc_tensor_direct", tuple(self.arg(x) for x in a[:3])
        elif name == "shape_of":
            builtin, builtin_args = "vm.builtin.shape_of", (self.arg(a[0]),)
        elif name == "tensor_to_shape":
            builtin, builtin_args = "vm.builtin.tensor_to_shape", (self.arg(a[0]),)
        elif name == "null_value":
            builtin, builtin_args = "vm.builtin.null_value", ()
        elif name == "hint_on_device":
            builtin, builtin_args = "vm.builtin.identity", (self.arg(a[0]),)
        elif name == "call_pure_packed":  # the callee by name, as call_packed
            builtin = _packed_name(a[0].global_symbol)  # type: ignore[attr-defined]
            builtin_args = tuple(self.arg(x) for x in a[1:])
        elif name == "print":
            builtin = "relax.run.print"
            builtin_args = (("i", call.attrs.get("format", "")), *(self.arg(x) for x in a))
        elif name == "assert_op":
            builtin = "relax.run.assert_op"
            builtin_args = (self.arg(a[0]), ("i", call.attrs.get("format", "")), *(self.arg(x) for x in a[1:]))
        elif name == "make_closure":  # (func, (captured...)): TVM binds them last
            captured = a[1].fields if isinstance(a[1], E.Tuple) else None
            if captured is None:
                raise HetvmError(f"codegen: make_closure in {self.name} needs a literal tuple of captured values")
            builtin, builtin_args = "vm.builtin.make_closure", (self.arg(a[0]), *(self.arg(x) for x in captured))
        elif name in ("invoke_closure", "invoke_pure_closure"):
            builtin, builtin_args = "vm.builtin.invoke_closure", (self.arg(a[0]), self.arg(a[1]))
        elif name == "to_vdevice":
            dev = sinfo_device_index(self.mod, call.struct_info)
            builtin, builtin_args = "vm.builtin.copy_to", (self.arg(a[0]), ("i", dev), ("i", None))
        else:
            where = f" at {call.span}" if call.span is not None else ""
            kind = op_info(name).device_behavior.value
            raise HetvmError(
                f"codegen: op '{name}' ({kind}){where} in function '{self.name}' was not lowered; "
                "run LegalizeOps and CallTIRRewrite first"
            )
        dst = self.define(var)
        self.code.append(B.Call(dst, builtin, builtin_args))

    def arena_placement(self, arena: E.Var) -> Arg:
        """For a symbolic arena the VM re-packs at call time: ``arena_plan``,
        which binds the arena's size and each tensor's offset at this call's
        dims as shape variables (``%arena:<arena>``, ``%offset:<arena>:<k>``),
        and the size argument of its ``alloc_storage``."""
        spec = self.specialised[arena.name_hint]
        names = [f"%arena:{arena.name_hint}"] + [f"%offset:{arena.name_hint}:{k}" for k in range(len(spec["buffers"]))]
        self.code.append(B.Call(None, "vm.builtin.arena_plan", (("i", [self.name, arena.name_hint]), ("i", names))))
        index = {b["name"]: names[k + 1] for k, b in enumerate(spec["buffers"])}
        self.placement_of[arena] = index
        return ("i", [["var", names[0]]])

    def placed_tensor_args(self, var: E.Var, a: tuple) -> tuple[Arg, ...]:
        """``alloc_tensor`` arguments with the offset the call's ``arena_plan`` bound."""
        name = self.placement_of[a[0]].get(var.name_hint)
        if name is None:
            raise HetvmError(f"codegen: tensor '{var.name_hint}' of {self.name} is carved from a specialised arena that does not list it")
        return (self.arg(a[0]), ("i", ["var", name]), *(self.arg(x) for x in a[2:4]))

    def run(self) -> B.VMFunction:
        params = []
        infos = []
        for p in self.func.params:
            self.define(p)
            params.append(p.name_hint)
            infos.append(param_info(self.mod, p.struct_info))
        out = self.emit_seq(self.func.body)
        if out[0] != "r":
            reg = self.new_reg()
            self.code.append(B.Call(reg, "vm.builtin.identity", (out,)))
            out = ("r", reg)
        self.code.append(B.Ret(out[1]))
        bounds = dict(self.func.attrs.get("tir_var_upper_bound", {}) or {})
        return B.VMFunction(
            name=self.name,
            params=list(params),
            param_info=list(infos),
            num_registers=self.num_registers,
            instructions=list(self.code),
            sym_bounds={str(k): [None, int(v)] for k, v in bounds.items()},
            debug_info=dict(self.debug_info),
        )


def _specialised_arenas(mod: IRModule, name: str) -> dict[str, dict]:
    """Arena var name -> the planner's call-time specialisation spec, for the
    symbolic arenas of function ``name`` (see ``runtime/plan_specialise.py``)."""
    plan = mod.attrs.get("memory_plan")
    facts = plan.get("functions", {}).get(name) if isinstance(plan, dict) else None
    out: dict[str, dict] = {}
    for dev in (facts or {}).get("devices", {}).values():
        for arena in dev.get("arenas", []):
            if "specialise" in arena:
                out[arena["var"]] = arena["specialise"]
    return out


def debug_info_of(span: Any) -> dict | None:
    """What the bytecode keeps of a span that names a model node (else None)."""
    if span is None or getattr(span, "node_name", None) is None:
        return None
    return {"node": span.node_name, "op_type": span.op_type or "?",
            "inputs": list(span.node_inputs), "source": span.source_name}  # fmt: skip


# TVM's builtins that are hetvm's under another name: vm.builtin.copy moves a
# register (it returns its argument)
_PACKED_ALIASES = {"vm.builtin.copy": "vm.builtin.identity"}


def _packed_name(name: str) -> str:
    """The VM function a packed call of ``name`` runs."""
    return _PACKED_ALIASES.get(name, name)


def _plain(value: Any) -> Any:
    """Attribute values as JSON-able data (tuples to lists, PrimExprs to ints)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, P.PrimExpr):
        c = P.const_value(value) if not isinstance(value, P.FloatImm) else value.value
        return c if c is not None else serialize_prim(value)
    if hasattr(value, "vdevice_id"):
        return {"kind": value.kind, "index": value.vdevice_id}
    return value


def device_descriptors(mod: IRModule) -> list[dict]:
    """The executable's device list, in vdevice order (one CPU when none)."""
    vdevs = mod.vdevices
    if not vdevs:
        return [{"kind": "cpu", "index": 0, "memory_scope": "global"}]
    out = []
    for v in vdevs:
        d = {"kind": v.kind, "index": v.vdevice_id, "memory_scope": v.memory_scope}
        if v.host is not None:  # a device of another machine (hetvm.distributed)
            d["host"] = v.host
        out.append(d)
    return out


def vm_codegen(mod: IRModule, metadata: dict | None = None) -> B.Executable:
    """Compiles every function of a lowered module into one Executable."""
    constants: list = []
    functions = {}
    for name, func in mod.functions.items():
        functions[name] = _FunctionCodegen(mod, name, func, constants).run()
    return B.Executable(
        devices=device_descriptors(mod),
        constants=constants,
        functions=functions,
        metadata=dict(metadata or {}),
    )
