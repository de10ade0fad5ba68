"""The printer: IR -> TVMScript text, as TVM 0.27 prints it.

``print_module`` gives a whole module (header comments, module-level
``TypeVar`` declarations of signature shape variables, ``@I.ir_module``
class); ``print_node`` prints any single node, for error messages. Every
binding carries its struct-info annotation; a binding whose value nobody uses
and whose struct info is the empty tuple prints as a bare call
(``R.memory.kill_tensor(y)``), as TVM does.
"""

from __future__ import annotations

import json
from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import op_info
from ..ir.structural import structural_equal
from ..ir.vdevice import VDevice
from ._names import NameTable, sanitize
from ._ops import (
    TVM_DEFAULT_ARGS,
    TVM_POSITIONAL_ATTRS,
    TVM_STRING_ATTRS,
    UNANNOTATED_WHEN_DERIVED,
    attr_print_order,
    sinfo_keyword,
)
from ._print_values import ValueContext, constant_text, float_text, without_prim_values
from ._vdevice import hint_device_text
from ._walk import FunctionFacts

INDENT = "    "
HEADER_I = "# from tvm.script import ir as I"
HEADER_T = "# from tvm.script import tirx as T"
HEADER_AXIS = "# from tvm.tirx.layout import Axis"  # TVM 0.27 prints it with T
HEADER_R = "# from tvm.script import relax as R"
HEADER_TYPEVAR = "# from typing import TypeVar"

__all__ = ["print_module", "print_node"]


class _Printer:
    """Prints one function at a time; holds the names of its variables."""

    def __init__(self, vdevices: list[VDevice] | None = None) -> None:
        self.var_names: dict[int, str] = {}
        self.prim_names: dict[int, str] = {}
        self.values = ValueContext(self._prim_name, vdevices)
        self.facts: FunctionFacts | None = None
        self.names = NameTable()
        self.uses_t = False

    # -- names -------------------------------------------------------------
    def _prim_name(self, var: P.PrimVar) -> str:
        return self.prim_names.get(id(var), sanitize(var.name))

    def var_name(self, var: E.Var) -> str:
        return self.var_names.get(id(var)) or sanitize(var.name_hint)

    def define(self, var: E.Var) -> str:
        name = self.names.fresh(var.name_hint)
        self.var_names[id(var)] = name
        return name

    # -- leaves --------------------------------------------------------------
    def sinfo(self, s: S.StructInfo | None) -> str:
        text = self.values.sinfo(s)
        if "T." in text:
            self.uses_t = True
        return text

    def prim(self, e: P.PrimExpr) -> str:
        text = self.values.prim(e)
        if "T." in text:
            self.uses_t = True
        return text

    # -- expressions ---------------------------------------------------------
    def expr(self, e: E.Expr, *, as_arg: bool = False) -> str:
        """Text of an expression; ``as_arg`` for TVM's argument spellings."""
        if isinstance(e, E.Var):
            return self.var_name(e)
        if isinstance(e, E.GlobalVar):
            return f"cls.{e.name_hint}"
        if isinstance(e, E.Constant):
            return constant_text(e)
        if isinstance(e, E.Tuple):
            if not e.fields:
                return "R.tuple()"
            inner = ", ".join(self.expr(f, as_arg=True) for f in e.fields)
            return f"({inner},)" if len(e.fields) == 1 else f"({inner})"
        if isinstance(e, E.TupleGetItem):
            return f"{self.expr(e.tuple_value)}[{e.index}]"
        if isinstance(e, E.ShapeExpr):
            return f"R.shape([{', '.join(self.prim(v) for v in e.values)}])"
        if isinstance(e, E.PrimValue):
            v = e.value
            if isinstance(v, P.IntImm) and v.dtype != "int64":
                # TVM prints a bare 3, which reads back as an int64
                return f"R.prim_value({self.prim(v)})"
            return self.prim(v)  # 5, n * 2, T.float32(1.5): as TVM prints them
        if isinstance(e, E.StringImm):
            return f"R.str({json.dumps(e.value)})"
        if isinstance(e, E.DataTypeImm):
            return f"R.dtype({json.dumps(e.value)})"
        if isinstance(e, E.ExternFunc):
            return json.dumps(e.global_symbol) if as_arg else f"R.ExternFunc({json.dumps(e.global_symbol)})"
        if isinstance(e, E.Op):
            return f"R.{e.name}"
        if isinstance(e, E.Call):
            return self.call(e)
        raise TypeError(f"{type(e).__name__} cannot be printed inline")

    def call(self, call: E.Call) -> str:
        callee = call.op
        args = [self.expr(a, as_arg=True) for a in call.args]
        if isinstance(callee, E.Op):
            name = callee.name
            if name == "hint_on_device":
                hint = self._hint_device(call.attrs.get("dst_vdevice"))
                if hint is not None:
                    return f"R.hint_on_device({', '.join([*args, hint])})"
            default = TVM_DEFAULT_ARGS.get(name)
            if default is not None and len(call.args) == default[0]:
                args.append(default[1])
            positional = TVM_POSITIONAL_ATTRS.get(name, ())
            args.extend(self._positional_attrs(name, call.attrs, positional))
            keyword = sinfo_keyword(name)
            if call.sinfo_args and keyword is not None:
                args.append(f"{keyword}={self._sinfo_arg(call.sinfo_args, keyword)}")
            info = op_info(callee)
            # attrs hetvm adds to a TVM op print only when set, so TVM reads the rest
            own = info.extra.get("hetvm_only_attrs", {})  # attr -> its value meaning "as TVM"
            shown = {k: v for k, v in call.attrs.items() if k not in positional}
            strings = TVM_STRING_ATTRS.get(name, ())
            rest = E.Attrs({
                k: v for k, v in shown.items() if not (k in own and v == own[k]) and k not in strings
            })
            args.extend(self._attrs(rest, attr_print_order(name, info.attr_names)))
            args.extend(f"{k}=R.str({json.dumps(call.attrs[k])})" for k in strings if k in call.attrs)
            return f"R.{name}({', '.join(args)})"
        if isinstance(callee, E.ExternFunc):
            parts = [json.dumps(callee.global_symbol), *args]
            if call.attrs:  # TVM names the attrs' type first; the parser ignores it
                parts.append('attrs_type_key="ir.DictAttrs"')
            parts.extend(self._attrs(call.attrs, ()))
            if call.sinfo_args:
                inner = ", ".join(self.sinfo(s) for s in call.sinfo_args)
                parts.append(f"ty_args=({inner},)")
            return f"R.call_packed({', '.join(parts)})"
        return f"{self.expr(callee)}({', '.join(args)})"

    def _hint_device(self, vdev: Any) -> str | None:
        """``R.device(...)[, scope]`` for a hint's vdevice, or None to print the attr."""
        if not isinstance(vdev, VDevice):
            return None
        return hint_device_text(vdev, self.values.vdevices)

    def _positional_attrs(self, name: str, attrs: E.Attrs, keys: tuple[str, ...]) -> list[str]:
        """Attrs TVM takes as Relax arguments: clip bounds as ``T.float64(...)``,
        strided_slice's lists as tuples (all-one strides, TVM's default, left out)."""
        out = []
        for k in keys:
            value = attrs.get(k)
            if name == "clip":
                self.uses_t = True
                out.append(f"T.float64({float_text(float(value))})")
            elif k == "strides" and all(isinstance(v, int) and v == 1 for v in value):
                continue
            else:
                items = [self.values.literal(v) for v in value]
                out.append(f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})")
                self.uses_t = self.uses_t or any("T." in i for i in items)
        return out

    def _sinfo_arg(self, sinfos: tuple[S.StructInfo, ...], keyword: str) -> str:
        if keyword == "ty_args":
            return "(" + "".join(self.sinfo(s) + ", " for s in sinfos).rstrip(" ") + ")"
        if keyword == "out_ty" and len(sinfos) == 1:
            only = sinfos[0]
            if isinstance(only, S.TupleStructInfo) and len(only.fields) >= 2:
                return "[" + ", ".join(self.sinfo(f) for f in only.fields) + "]"
            return self.sinfo(only)
        return "[" + ", ".join(self.sinfo(s) for s in sinfos) + "]"

    def _attrs(self, attrs: E.Attrs, order: tuple[str, ...]) -> list[str]:
        keys = [k for k in order if k in attrs] + sorted(k for k in attrs if k not in order)
        out = []
        for k in keys:
            text = self.values.literal(attrs[k], k)
            if "T." in text:
                self.uses_t = True
            out.append(f"{k}={text}")
        return out

    # -- bindings ------------------------------------------------------------
    def _is_bare(self, binding: E.Binding, in_dataflow: bool) -> bool:
        var = binding.var
        if not isinstance(binding, E.VarBinding) or self.facts is None:
            return False
        if self.facts.use_count(var) or not isinstance(binding.value, E.Call):
            return False
        if not (isinstance(var.struct_info, S.TupleStructInfo) and not var.struct_info.fields):
            return False
        return isinstance(var, E.DataflowVar) == in_dataflow

    @staticmethod
    def _annotation(var_sinfo: S.StructInfo | None, value_sinfo: S.StructInfo | None) -> S.StructInfo | None:
        """TVM's annotation: prim values left out where the variable has exactly its
        value's struct info (the parser restores them from the value)."""
        if var_sinfo is not None and structural_equal(var_sinfo, value_sinfo, map_free_vars=False):
            return without_prim_values(var_sinfo)
        return var_sinfo

    @staticmethod
    def _derived_annotation(binding: E.Binding) -> bool:
        """TVM leaves out the annotation of a ``call_dps_packed`` binding whose
        variable has exactly the struct info of the call's ``out_ty``."""
        value = binding.value  # type: ignore[attr-defined]
        if not (isinstance(binding, E.VarBinding) and isinstance(value, E.Call)):
            return False
        if not (isinstance(value.op, E.Op) and value.op.name in UNANNOTATED_WHEN_DERIVED):
            return False
        return structural_equal(binding.var.struct_info, value.struct_info)

    def binding(self, binding: E.Binding, indent: str, in_dataflow: bool = False) -> list[str]:
        value = binding.value  # type: ignore[attr-defined]
        if self._is_bare(binding, in_dataflow):
            return [indent + self.expr(value)]
        if isinstance(value, E.If):
            return self._if(binding.var, value, indent)
        name = self.define(binding.var)
        if self._derived_annotation(binding):
            return [f"{indent}{name} = {self.expr(value)}"]
        ann = self.sinfo(self._annotation(binding.var.struct_info, value.struct_info))
        if isinstance(value, E.StringImm) and ann == "R.Any":
            ann = "I.StringType()"  # TVM's annotation of a string (read back as R.Any)
        if isinstance(binding, E.MatchCast):
            rhs = f"R.match_cast({self.expr(value)}, {self.sinfo(binding.struct_info)})"
        elif isinstance(value, E.Tuple) and len(value.fields) >= 2:
            rhs = ", ".join(self.expr(f, as_arg=True) for f in value.fields)
        elif isinstance(value, E.PrimValue) and isinstance(value.value, P.IntImm) and ann == f"T.{value.value.dtype}":
            imm = value.value  # `c: T.int32 = 3`: the annotation gives the dtype
            rhs = repr(bool(imm.value)) if imm.dtype == "bool" else str(imm.value)
        else:
            rhs = self.expr(value)
        return [f"{indent}{name}: {ann} = {rhs}"]

    def _if(self, var: E.Var, node: E.If, indent: str) -> list[str]:
        name = self.define(var)
        ann = self.sinfo(var.struct_info)
        lines = [f"{indent}if {self.expr(node.cond)}:"]
        for branch, label in ((node.true_branch, "then"), (node.false_branch, "else")):
            if label == "else":
                lines.append(f"{indent}else:")
            inner = indent + INDENT
            for block in branch.blocks:
                lines.extend(self.block(block, inner))
            lines.append(f"{inner}{name}: {ann} = {self.expr(branch.body)}")
        return lines

    def block(self, block: E.BindingBlock, indent: str) -> list[str]:
        if not isinstance(block, E.DataflowBlock):
            out: list[str] = []
            for b in block.bindings:
                out.extend(self.binding(b, indent))
            return out
        inner = indent + INDENT
        lines = [f"{indent}with R.dataflow():"]
        outputs: list[str] = []
        for b in block.bindings:
            lines.extend(self.binding(b, inner, in_dataflow=True))
            if not isinstance(b.var, E.DataflowVar):
                outputs.append(self.var_name(b.var))
        lines.append(f"{inner}R.output({', '.join(outputs)})")
        return lines

    # -- functions -----------------------------------------------------------
    def function(self, name: str, func: E.Function, indent: str, typevars: dict[str, None]) -> list[str]:
        """Lines of one ``@R.function``; signature shape variables go to ``typevars``."""
        self.facts = facts = FunctionFacts(func)
        self.names = NameTable()
        self.var_names = {}
        self.prim_names = {}
        declared: list[str] = []
        sym_table = NameTable()
        for var in facts.signature_vars.values():
            pname = sym_table.fresh(var.name)
            self.prim_names[id(var)] = pname
            self.names.reserve(pname)
            if var.dtype == "int64":
                typevars.setdefault(pname, None)
            else:
                declared.append(f"{pname} = T.{var.dtype}()")
        for var in facts.body_vars.values():
            pname = sym_table.fresh(var.name)
            self.prim_names[id(var)] = pname
            self.names.reserve(pname)
            declared.append(f"{pname} = T.{var.dtype}()")
        if declared:
            self.uses_t = True
        params = []
        for p in func.params:
            params.append(f"{self.define(p)}: {self.sinfo(p.struct_info)}")
        ret_sinfo = self._annotation(func.ret_struct_info, func.body.struct_info)
        ret = f" -> {self.sinfo(ret_sinfo)}" if ret_sinfo is not None else ""
        flags = []
        if not func.is_pure:
            flags.append("pure=False")
        if func.attrs.get("private"):
            flags.append("private=True")
        deco = "@R.function" + (f"({', '.join(flags)})" if flags else "")
        body_indent = indent + INDENT
        lines = [indent + deco, f"{indent}def {name}({', '.join(params)}){ret}:"]
        fattrs = {k: func.attrs[k] for k in sorted(func.attrs) if k != "private"}
        if fattrs:
            lines.append(f"{body_indent}R.func_attr({self.values.literal(fattrs)})")
        lines.extend(body_indent + d for d in declared)
        if facts.has_global_ref:  # after the shape variables, as TVM prints it
            lines.append(f"{body_indent}cls = Module")
        for block in func.body.blocks:
            lines.extend(self.block(block, body_indent))
        lines.append(f"{body_indent}return {self.expr(func.body.body)}")
        self.facts = None
        return lines


def _header(uses_t: bool, typevars: dict[str, None]) -> list[str]:
    lines = [HEADER_TYPEVAR] if typevars else []
    lines.append(HEADER_I)
    if uses_t:
        lines.extend([HEADER_T, HEADER_AXIS])
    lines.append(HEADER_R)
    return lines


def print_module(mod: IRModule, **_options: Any) -> str:
    """The module as TVMScript text, as TVM 0.27 prints it (constants inline)."""
    printer = _Printer(mod.vdevices)
    typevars: dict[str, None] = {}
    body: list[str] = []
    infos = {k: v for k, v in mod.global_infos.items() if not (k == "vdevice" and not v)}
    if mod.attrs:  # before the global infos, as TVM prints them
        body.append(f"{INDENT}I.module_attrs({printer.values.literal(dict(mod.attrs))})")
    if infos:
        body.append(f"{INDENT}I.module_global_infos({_global_infos(printer, infos)})")
    # TVM prints functions, and the TypeVars of their signatures, sorted by name
    for i, (name, func) in enumerate(sorted(mod.functions.items())):
        if i:
            body.append("")
        body.extend(printer.function(name, func, INDENT, typevars))
    lines = _header(printer.uses_t, typevars)
    lines.append("")
    lines.extend(f'{v} = TypeVar("{v}")' for v in sorted(typevars))
    lines.append("@I.ir_module")
    lines.append("class Module:")
    lines.extend(body or [f"{INDENT}pass"])
    return "\n".join(lines)  # no final newline, as TVM's script()


def _global_infos(printer: _Printer, infos: dict[str, Any]) -> str:
    parts = []
    for key, value in infos.items():
        if key == "vdevice":
            text = "[" + ", ".join(printer.values.vdevice_decl(v) for v in value) + "]"
        else:
            text = printer.values.literal(value)
        parts.append(f"{json.dumps(key)}: {text}")
    return "{" + ", ".join(parts) + "}"


def print_node(node: Any) -> str:
    """Text of any node: module, function, binding, block, expression, struct info."""
    if isinstance(node, IRModule):
        return print_module(node)
    printer = _Printer()
    if isinstance(node, E.Function):
        typevars: dict[str, None] = {}
        lines = printer.function(str(node.attrs.get("global_symbol", "main")), node, "", typevars)
        return "\n".join([f'{v} = TypeVar("{v}")' for v in typevars] + lines)
    if isinstance(node, E.Binding):
        return "\n".join(printer.binding(node, ""))
    if isinstance(node, E.BindingBlock):
        return "\n".join(printer.block(node, ""))
    if isinstance(node, E.SeqExpr):
        lines = [line for b in node.blocks for line in printer.block(b, "")]
        return "\n".join([*lines, printer.expr(node.body)])
    if isinstance(node, E.If):
        var = E.Var("_", struct_info=node.struct_info)
        return "\n".join(printer._if(var, node, ""))
    if isinstance(node, E.Expr):
        return printer.expr(node)
    if isinstance(node, S.StructInfo):
        return printer.sinfo(node)
    if isinstance(node, P.PrimExpr):
        return printer.prim(node)
    if isinstance(node, VDevice):
        return printer.values.vdevice_decl(node)
    return repr(node)
