"""Well-formedness: the structural rules every pass may assume and must keep.

The rules follow TVM Relax's checker:

* SSA: a variable is bound once in the whole module (parameters included);
* a variable is used only where it is defined: after its binding, in the same or
  an enclosing scope (an ``If`` branch sees outer variables, not its sibling's,
  and what a branch binds leaves it only through the branch result);
* a ``DataflowVar`` is bound only inside a dataflow block and read only there;
* a dataflow block holds neither control flow nor impure calls, and a pure
  function (unless ``attrs["relax.force_pure"]``) makes no impure call;
* a symbolic shape variable is defined (by a parameter's shape or an earlier
  ``match_cast``) before struct info mentions it;
* call arguments are leaves (A-normal form); a ``GlobalVar`` names a function
  of the module and a call passes it as many arguments as it takes;
* struct info is present and consistent: a binding's variable admits its value
  (``is_base_of(var, value)``), a function's return struct info admits its body;
* every vdevice in struct info or attributes is declared in
  ``mod.global_infos["vdevice"]``.

The first violation raises :class:`~hetvm.errors.WellFormedError` naming the
function and the offending binding.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..errors import StructInfoError, WellFormedError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import op_info
from ..ir.vdevice import VDevice
from .free_vars import definable_symbolic_vars, sinfo_symbolic_vars

#: function attributes that switch the purity check off (as in TVM)
FORCE_PURE_ATTRS = ("relax.force_pure", "force_pure")


def well_formed(mod_or_func: IRModule | E.Function, check_struct_info: bool = True) -> bool:
    """True when the module (or a lone function) obeys every rule above."""
    try:
        check_well_formed(mod_or_func, check_struct_info)
    except WellFormedError:
        return False
    return True


def check_well_formed(
    mod_or_func: IRModule | E.Function, check_struct_info: bool = True
) -> None:
    """Raises :class:`WellFormedError` at the first broken rule.

    A lone function has no module: GlobalVar targets and vdevice declarations
    are then not checked.
    """
    if isinstance(mod_or_func, IRModule):
        checker = _Checker(mod_or_func, check_struct_info)
        for vdev in mod_or_func.global_infos.get("vdevice", []):
            if not isinstance(vdev, VDevice):
                raise WellFormedError(
                    f"global_infos['vdevice'] holds {vdev!r}, which is not a VDevice"
                )
        for name, func in mod_or_func.functions.items():
            if not isinstance(func, E.Function):
                raise WellFormedError(f"module entry '{name}' is not a Function")
            checker.function(name, func)
    elif isinstance(mod_or_func, E.Function):
        name = str(mod_or_func.attrs.get("global_symbol", "<function>"))
        _Checker(None, check_struct_info).function(name, mod_or_func)
    else:
        raise WellFormedError(
            f"well-formedness is defined for an IRModule or a Function, "
            f"not {type(mod_or_func).__name__}"
        )


# --------------------------------------------------------------------------
# describing where a problem is
# --------------------------------------------------------------------------


def show(node: Any) -> str:
    """Script text of a node for error messages (a short form if no printer)."""
    try:
        from ..script.printer import print_node  # late: script sits above analysis
    except ImportError:
        return _brief(node)
    try:
        return print_node(node)
    except Exception:  # noqa: BLE001 - a message must not fail because printing did
        return _brief(node)


def _brief(node: Any) -> str:
    if isinstance(node, E.MatchCast):
        sinfo = S.describe(node.struct_info)
        return f"{node.var.name_hint} = R.match_cast({_brief(node.value)}, {sinfo})"
    if isinstance(node, E.VarBinding):
        return f"{node.var.name_hint} = {_brief(node.value)}"
    if isinstance(node, (E.Var, E.GlobalVar)):
        return node.name_hint
    if isinstance(node, E.Op):
        return f"R.{node.name}"
    if isinstance(node, E.ExternFunc):
        return f"R.ExternFunc({node.global_symbol!r})"
    if isinstance(node, E.Call):
        return f"{_brief(node.op)}({', '.join(_brief(a) for a in node.args)})"
    if isinstance(node, E.Tuple):
        return "(" + ", ".join(_brief(f) for f in node.fields) + ("," if len(node.fields) == 1 else "") + ")"
    if isinstance(node, E.TupleGetItem):
        return f"{_brief(node.tuple_value)}[{node.index}]"
    if isinstance(node, E.ShapeExpr):
        return "R.shape([" + ", ".join(P.to_str(v) for v in node.values) + "])"
    if isinstance(node, E.PrimValue):
        return f"R.prim_value({P.to_str(node.value)})"
    if isinstance(node, (E.StringImm, E.DataTypeImm)):
        return repr(node.value)
    if isinstance(node, E.Constant):
        return f"R.const(<{node.data.dtype}{list(node.data.shape)}>)"
    if isinstance(node, E.If):
        return f"R.If({_brief(node.cond)}, ...)"
    if isinstance(node, E.Function):
        return "<function>"
    if isinstance(node, E.SeqExpr):
        return "<seq>"
    return repr(node)


# --------------------------------------------------------------------------
# the checker
# --------------------------------------------------------------------------


class _Checker:
    def __init__(self, mod: IRModule | None, check_struct_info: bool) -> None:
        self.mod = mod
        self.check_sinfo = check_struct_info
        self.declared: list[VDevice] | None = (
            None if mod is None else list(mod.global_infos.get("vdevice", []))
        )
        self.bound_in: dict[E.Var, str] = {}  # module-wide SSA: var -> function name
        self.func_name = "<function>"
        self.where: E.Binding | str = ""  # what the next error message points at
        self.visible: set[E.Var] = set()
        self.expired_dataflow: set[E.Var] = set()
        self.symbolic: set[P.PrimVar] = set()
        self.pure = True

    # -- reporting ----------------------------------------------------------
    def fail(self, message: str) -> None:
        if isinstance(self.where, E.Binding):
            where = f"binding `{show(self.where)}`"
        else:
            where = self.where or "body"
        raise WellFormedError(f"function '{self.func_name}', {where}: {message}")

    # -- scopes ---------------------------------------------------------------
    def _save(self) -> tuple:
        return (set(self.visible), set(self.symbolic), self.where)

    def _restore(self, saved: tuple) -> None:
        self.visible, self.symbolic, self.where = set(saved[0]), set(saved[1]), saved[2]

    def define(self, var: E.Var) -> None:
        if not isinstance(var, E.Var):
            self.fail(f"binds {type(var).__name__} {var!r}, which is not a variable")
        first = self.bound_in.get(var)
        if first is not None:
            place = "earlier" if first == self.func_name else f"in function '{first}'"
            self.fail(f"variable '{var.name_hint}' is bound twice (already bound {place}); IR must be SSA")
        self.bound_in[var] = self.func_name
        self.visible.add(var)

    def use(self, var: E.Var) -> None:
        if var in self.visible:
            return
        if var in self.expired_dataflow:
            self.fail(
                f"DataflowVar '{var.name_hint}' is used outside the dataflow block that binds it"
            )
        if var in self.bound_in:
            self.fail(f"variable '{var.name_hint}' is used outside the scope that binds it")
        self.fail(f"variable '{var.name_hint}' is used but not defined (or used before its binding)")

    # -- struct info ------------------------------------------------------------
    def sinfo(self, sinfo: S.StructInfo | None, what: str) -> None:
        """Symbolic vars defined and vdevices declared; presence if required."""
        if sinfo is None:
            if self.check_sinfo:
                self.fail(f"{what} has no struct info")
            return
        # a callable's own symbolic vars are its business, not this scope's
        self.symbolic_defined(sinfo_symbolic_vars(sinfo, through_functions=False), what)
        self.vdevices(S.sinfo_vdevices(sinfo), what)

    def symbolic_defined(self, syms: Iterable[P.PrimVar], what: str) -> None:
        for v in syms:
            if v not in self.symbolic:
                self.fail(
                    f"symbolic variable '{v.name}' in {what} is not defined "
                    "(define it by a parameter's shape or an earlier match_cast)"
                )

    def vdevices(self, vdevs: Iterable[VDevice], what: str) -> None:
        if self.declared is None:
            return
        for vdev in vdevs:
            # a vdevice names a device by kind and id (R.device("cpu", 0) is the
            # declared I.vdevice("llvm", 0)); scope and target attrs may differ
            if vdev not in self.declared and not any(
                d.kind == vdev.kind and d.vdevice_id == vdev.vdevice_id for d in self.declared
            ):
                self.fail(
                    f"vdevice {vdev} in {what} is not declared in global_infos['vdevice'] "
                    f"(declared: {', '.join(map(str, self.declared)) or 'none'})"
                )

    # -- functions ------------------------------------------------------------
    def function(self, name: str, func: E.Function) -> None:
        outer = (self.func_name, self.pure, self._save())
        self.func_name = name
        self.pure = func.is_pure and not any(func.attrs.get(k) for k in FORCE_PURE_ATTRS)
        for p in func.params:
            self.where = f"parameter '{getattr(p, 'name_hint', p)}'"
            if isinstance(p, E.DataflowVar):
                self.fail("a function parameter may not be a DataflowVar")
            self.define(p)
        for p in func.params:
            self.symbolic.update(definable_symbolic_vars(p.struct_info))
        for p in func.params:
            self.where = f"parameter '{p.name_hint}'"
            self.sinfo(p.struct_info, "its struct info")
        self.where = ""
        self.seq(func.body)
        self.where = "return value"
        body_sinfo = func.body.struct_info
        if func.ret_struct_info is not None:
            self.sinfo(func.ret_struct_info, "the return struct info")
            if self.check_sinfo and body_sinfo is not None and not S.is_base_of(
                func.ret_struct_info, body_sinfo, check_vdevice=False
            ):
                self.fail(
                    f"returns {S.describe(body_sinfo)}, which the declared return "
                    f"struct info {S.describe(func.ret_struct_info)} does not admit"
                )
        elif self.check_sinfo:
            self.fail("function has no return struct info")
        self.func_name, self.pure, saved = outer
        self._restore(saved)

    def seq(self, seq: E.SeqExpr) -> None:
        """A scope: what it binds is invisible once it ends."""
        saved = self._save()
        for block in seq.blocks:
            is_dataflow = isinstance(block, E.DataflowBlock)
            local: list[E.Var] = []
            for binding in block.bindings:
                self.where = binding
                self.binding(binding, is_dataflow)
                if isinstance(binding.var, E.DataflowVar):
                    local.append(binding.var)
            for var in local:
                self.visible.discard(var)
                self.expired_dataflow.add(var)
        self.where = saved[2] or "result"
        self.value(seq.body, in_dataflow=False)
        if self.check_sinfo and seq.struct_info is None:
            self.fail("a sequence has no struct info")
        self._restore(saved)

    def binding(self, b: E.Binding, in_dataflow: bool) -> None:
        var, value = b.var, b.value  # type: ignore[attr-defined]
        if isinstance(var, E.DataflowVar) and not in_dataflow:
            self.fail(f"DataflowVar '{var.name_hint}' is bound outside a dataflow block")
        if in_dataflow and isinstance(value, E.If):
            self.fail("a dataflow block may not contain control flow (If)")
        self.value(value, in_dataflow)
        if isinstance(b, E.MatchCast):
            self.symbolic.update(definable_symbolic_vars(b.struct_info))
            self.sinfo(b.struct_info, "the match_cast pattern")
            if self.check_sinfo and value.struct_info is not None:
                if not S.could_match(b.struct_info, value.struct_info):
                    self.fail(
                        f"match_cast pattern {S.describe(b.struct_info)} can never match "
                        f"a value of {S.describe(value.struct_info)}"
                    )
                if var.struct_info is not None and not S.is_base_of(var.struct_info, b.struct_info, check_vdevice=False):
                    self.fail(
                        f"variable '{var.name_hint}' is annotated {S.describe(var.struct_info)}, "
                        f"which does not admit the pattern {S.describe(b.struct_info)}"
                    )
        elif self.check_sinfo and var.struct_info is not None and value.struct_info is not None:
            if not S.is_base_of(var.struct_info, value.struct_info, check_vdevice=False):
                self.fail(
                    f"variable '{var.name_hint}' is annotated {S.describe(var.struct_info)}, "
                    f"which does not admit its value's {S.describe(value.struct_info)}"
                )
        self.sinfo(var.struct_info, f"variable '{var.name_hint}'")
        self.define(var)

    # -- expressions --------------------------------------------------------------
    def leaf(self, e: E.Expr, what: str) -> None:
        if not E.is_leaf(e):
            self.fail(
                f"{what} `{show(e)}` is not a leaf (bind it to a variable first: A-normal form)"
            )
        self.value(e, in_dataflow=False)

    def value(self, e: E.Expr, in_dataflow: bool) -> None:
        if isinstance(e, E.Var):
            self.use(e)
        elif isinstance(e, E.GlobalVar):
            self.global_var(e)
            return
        elif isinstance(e, (E.Op, E.ExternFunc)):
            return
        elif isinstance(e, E.ShapeExpr):
            self.symbolic_defined(_prim_vars(e.values), "a shape expression")
        elif isinstance(e, E.PrimValue):
            self.symbolic_defined(_prim_vars([e.value]), "a prim value")
        elif isinstance(e, E.Tuple):
            for f in e.fields:
                self.leaf(f, "tuple field")
        elif isinstance(e, E.TupleGetItem):
            self.leaf(e.tuple_value, "tuple of a TupleGetItem")
        elif isinstance(e, E.Call):
            self.call(e, in_dataflow)
        elif isinstance(e, E.If):
            self.leaf(e.cond, "If condition")
            self.condition(e.cond)
            self.seq(e.true_branch)
            self.seq(e.false_branch)
        elif isinstance(e, E.SeqExpr):
            self.seq(e)
        elif isinstance(e, E.Function):
            self.function(self.func_name, e)
            return
        if self.check_sinfo and e.struct_info is None:
            self.fail(f"expression `{show(e)}` has no struct info")
        if e.struct_info is not None and not isinstance(e, E.Var):
            self.vdevices(S.sinfo_vdevices(e.struct_info), f"the struct info of `{show(e)}`")

    def condition(self, cond: E.Expr) -> None:
        sinfo = cond.struct_info
        if not self.check_sinfo or sinfo is None:
            return
        if isinstance(sinfo, S.PrimStructInfo) or (
            isinstance(sinfo, S.TensorStructInfo) and sinfo.ndim in (0, -1)
        ):
            return
        self.fail(f"If condition must be a scalar, got {S.describe(sinfo)}")

    def global_var(self, gvar: E.GlobalVar) -> E.Function | None:
        if self.mod is None:
            return None
        if gvar.name_hint not in self.mod.functions:
            self.fail(f"refers to function '{gvar.name_hint}', which the module does not define")
        return self.mod.functions[gvar.name_hint]

    def call(self, call: E.Call, in_dataflow: bool) -> None:
        callee = call.op
        if not isinstance(callee, (E.Op, E.GlobalVar, E.ExternFunc, E.Var)):
            self.fail(f"callee `{show(callee)}` is not an op, function name or variable")
        self.value(callee, in_dataflow=False)
        for i, arg in enumerate(call.args):
            self.leaf(arg, f"argument {i}")
        for s in call.sinfo_args:
            self.sinfo(s, "sinfo_args")
        self.vdevices(_attr_vdevices(call.attrs.values()), "the call's attributes")
        if isinstance(callee, E.GlobalVar):
            target = self.global_var(callee)
            if target is not None and len(target.params) != len(call.args):
                self.fail(
                    f"passes {len(call.args)} argument(s) to '{callee.name_hint}', "
                    f"which takes {len(target.params)}"
                )
        pure, name = self.callee_purity(callee)
        if not pure:
            if in_dataflow:
                self.fail(f"dataflow block calls {name}, which is impure")
            if self.pure:
                self.fail(
                    f"pure function calls {name}, which is impure "
                    "(mark the function impure or set attrs['relax.force_pure'])"
                )

    def callee_purity(self, callee: E.Expr) -> tuple[bool, str]:
        if isinstance(callee, E.Op):
            try:
                return op_info(callee).pure, f"op '{callee.name}'"
            except StructInfoError as err:
                self.fail(str(err))
        name = f"'{getattr(callee, 'name_hint', None) or getattr(callee, 'global_symbol', '?')}'"
        if isinstance(callee, E.GlobalVar) and self.mod is not None:
            return self.mod.functions[callee.name_hint].is_pure, f"function {name}"
        sinfo = callee.struct_info
        if isinstance(sinfo, S.FuncStructInfo):
            return sinfo.purity, name
        return False, name


def _prim_vars(exprs: Iterable[P.PrimExpr]) -> list[P.PrimVar]:
    return [v for e in exprs for v in P.free_vars(e)]


def _attr_vdevices(values: Iterable[Any]) -> list[VDevice]:
    out: list[VDevice] = []
    for v in values:
        if isinstance(v, VDevice):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out.extend(_attr_vdevices(v))
        elif isinstance(v, dict):
            out.extend(_attr_vdevices(v.values()))
    return out


__all__ = ["well_formed", "check_well_formed", "show", "FORCE_PURE_ATTRS"]
