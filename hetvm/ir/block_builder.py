"""BlockBuilder: build functions binding by binding, inferring struct info.

The method names are those TVM users know (``function``, ``dataflow``,
``emit``, ``emit_output``, ``match_cast``, ``emit_func_output``, ``get``).
Nested non-leaf arguments are bound to fresh variables first (A-normal form),
so every call's arguments are leaves once emitted.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from ..errors import StructInfoError, WellFormedError
from . import expr as E
from . import struct_info as S
from .module import IRModule
from .op_registry import infer_call
from .vdevice import VDevice


class NameTable:
    """Hands out unique names per function: ``lv``, ``lv1``, ``lv2``..."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.used: set[str] = set()

    def reserve(self, name: str) -> None:
        self.used.add(name)

    def unique(self, hint: str) -> str:
        if hint not in self.used:
            self.used.add(hint)
            return hint
        n = self.counts.get(hint, 0)
        while True:
            n += 1
            candidate = f"{hint}{n}"
            if candidate not in self.used:
                self.counts[hint] = n
                self.used.add(candidate)
                return candidate


class _Frame:
    def __init__(self, is_dataflow: bool) -> None:
        self.is_dataflow = is_dataflow
        self.bindings: list[E.Binding] = []


class _FuncScope:
    def __init__(self, name: str, params: Sequence[E.Var] | None, attrs: dict, pure: bool) -> None:
        self.name = name
        self.params = list(params) if params is not None else None
        self.attrs = attrs
        self.pure = pure
        self.blocks: list[E.BindingBlock] = []
        self.finished = False
        self.names = NameTable()
        for p in self.params or ():
            self.names.reserve(p.name_hint)


class BlockBuilder:
    """Builds an IRModule function by function."""

    def __init__(self, mod: IRModule | None = None) -> None:
        self._mod = mod.copy() if mod is not None else IRModule()
        self._func: _FuncScope | None = None
        self._frames: list[_Frame] = []

    # ------------------------------------------------------------------
    # scopes
    # ------------------------------------------------------------------
    @contextlib.contextmanager
    def function(
        self,
        name: str,
        params: E.Var | Sequence[E.Var] | None = None,
        attrs: dict[str, Any] | None = None,
        pure: bool = True,
        private: bool = False,
    ) -> Iterator[None]:
        """Scope of one function; end it with :meth:`emit_func_output`."""
        if self._func is not None:
            raise WellFormedError("BlockBuilder.function scopes cannot nest")
        if isinstance(params, E.Var):
            params = [params]
        fattrs = dict(attrs or {})
        if private:
            fattrs["private"] = True
        self._func = _FuncScope(name, params, fattrs, pure)
        self._frames = [_Frame(is_dataflow=False)]
        scope = self._func
        try:
            yield
        finally:
            self._func = None
            self._frames = []
        if not scope.finished:  # reached only when no exception is in flight
            raise WellFormedError(
                f"function '{name}' scope ended without emit_func_output; nothing was added"
            )

    @contextlib.contextmanager
    def dataflow(self) -> Iterator[None]:
        """Scope of a dataflow block; emit results with :meth:`emit_output`."""
        self._require_func()
        self._close_frame()
        self._frames.append(_Frame(is_dataflow=True))
        try:
            yield
        finally:
            self._close_frame()
            self._frames.append(_Frame(is_dataflow=False))

    @property
    def in_dataflow(self) -> bool:
        """True while emitting into a dataflow block (which cannot hold an If)."""
        return bool(self._frames) and self._frames[-1].is_dataflow

    def begin_scope(self) -> None:
        """Starts a nested scope (an If branch); pair with :meth:`end_scope`."""
        self._frames.append(_Frame(is_dataflow=False))

    def end_scope(self, body: E.Expr) -> E.SeqExpr:
        """Ends a nested scope, returning its bindings as a SeqExpr ending in ``body``."""
        frame = self._frames.pop()
        body = self.normalize(body)
        blocks = [E.BindingBlock(frame.bindings)] if frame.bindings else []
        return E.SeqExpr(blocks, body)

    def _require_func(self) -> _FuncScope:
        if self._func is None:
            raise WellFormedError("this BlockBuilder call needs an enclosing function() scope")
        return self._func

    def _close_frame(self) -> None:
        func = self._require_func()
        frame = self._frames.pop()
        if frame.bindings:
            cls = E.DataflowBlock if frame.is_dataflow else E.BindingBlock
            func.blocks.append(cls(frame.bindings))

    @property
    def _frame(self) -> _Frame:
        if not self._frames:
            raise WellFormedError("no open block: emit inside a function() scope")
        return self._frames[-1]

    # ------------------------------------------------------------------
    # emitting
    # ------------------------------------------------------------------
    def _new_var(self, hint: str, sinfo: S.StructInfo, dataflow: bool) -> E.Var:
        func = self._require_func()
        name = func.names.unique(hint)
        cls = E.DataflowVar if dataflow else E.Var
        return cls(name, struct_info=sinfo)

    def emit(self, expr: E.Expr, name_hint: str = "") -> E.Var:
        """Binds ``expr`` (normalised) to a fresh variable and returns it."""
        value = self.normalize(self._declared_device(self._flatten_args(expr)))
        assert value.struct_info is not None
        dataflow = self._frame.is_dataflow
        var = self._new_var(name_hint or "lv", value.struct_info, dataflow)
        self._frame.bindings.append(E.VarBinding(var, value, span=value.span))
        return var

    def emit_output(self, expr: E.Expr, name_hint: str = "") -> E.Var:
        """Inside a dataflow block: binds a value visible after the block."""
        if not self._frame.is_dataflow:
            raise WellFormedError("emit_output is only valid inside a dataflow() scope")
        value = self.normalize(self._declared_device(self._flatten_args(expr)))
        assert value.struct_info is not None
        var = self._new_var(name_hint or "gv", value.struct_info, dataflow=False)
        self._frame.bindings.append(E.VarBinding(var, value, span=value.span))
        return var

    def match_cast(self, value: E.Expr, struct_info: S.StructInfo, name_hint: str = "") -> E.Var:
        """Binds ``value`` checked against ``struct_info`` (defines symbolic vars)."""
        value = self.normalize(self._flatten_args(value))
        assert value.struct_info is not None
        if not S.could_match(struct_info, value.struct_info):
            raise StructInfoError(
                f"match_cast can never succeed: value is {S.describe(value.struct_info)}, "
                f"pattern is {S.describe(struct_info)}"
            )
        var = self._new_var(name_hint or "lv", struct_info, self._frame.is_dataflow)
        self._frame.bindings.append(E.MatchCast(var, value, struct_info, span=value.span))
        return var

    def emit_binding(self, binding: E.Binding) -> None:
        """Appends an already-built binding as it is."""
        self._frame.bindings.append(binding)

    def emit_func_output(
        self, output: E.Expr | Sequence[E.Expr], params: E.Var | Sequence[E.Var] | None = None
    ) -> E.GlobalVar:
        """Ends the current function with ``output`` and adds it to the module."""
        func = self._require_func()
        if self._frame.is_dataflow:
            raise WellFormedError("emit_func_output must be called after the dataflow() scope ends")
        if params is not None:
            if func.params is not None:
                raise WellFormedError("function parameters were given twice")
            func.params = [params] if isinstance(params, E.Var) else list(params)
        if func.params is None:
            raise WellFormedError(f"function '{func.name}' has no parameter list")
        if isinstance(output, (list, tuple)):
            output = E.Tuple(tuple(output))
        body = self.normalize(self._flatten_args(output))
        if not E.is_leaf(body):
            body = self.emit(body, "gv")
        self._close_frame()
        seq = E.SeqExpr(func.blocks, body)
        # ret struct info None: Function derives it, erasing body-local symbolic vars
        function = E.Function(func.params, seq, None, func.pure, func.attrs)
        self._mod[func.name] = function
        func.finished = True
        self._frames = [_Frame(is_dataflow=False)]
        return self._mod.get_global_var(func.name)

    # ------------------------------------------------------------------
    # module
    # ------------------------------------------------------------------
    def add_func(self, func: E.Function, name: str) -> E.GlobalVar:
        """Adds a finished function, renaming on clash; returns its GlobalVar."""
        table = NameTable()
        for existing in self._mod.functions:
            table.reserve(existing)
        unique = table.unique(name)
        self._mod[unique] = func
        return self._mod.get_global_var(unique)

    def update_func(self, gvar: E.GlobalVar | str, func: E.Function) -> None:
        self._mod[gvar] = func

    def get(self) -> IRModule:
        """The module built so far (a copy: later building does not change it)."""
        return self._mod.copy()

    @property
    def module(self) -> IRModule:
        return self._mod

    # ------------------------------------------------------------------
    # normalisation
    # ------------------------------------------------------------------
    def _flatten_args(self, expr: E.Expr) -> E.Expr:
        """Binds non-leaf call arguments to fresh variables (A-normal form)."""
        if isinstance(expr, E.Call):
            new_args = []
            changed = False
            for arg in expr.args:
                flat = self._flatten_arg(arg)
                changed |= flat is not arg
                new_args.append(flat)
            if changed:
                return E.replace(expr, args=tuple(new_args), struct_info=None)
        elif isinstance(expr, E.Tuple):
            fields = [self._flatten_arg(f) for f in expr.fields]
            if any(a is not b for a, b in zip(fields, expr.fields)):
                return E.Tuple(tuple(fields), span=expr.span)
        elif isinstance(expr, E.TupleGetItem) and not E.is_leaf(expr.tuple_value):
            return E.TupleGetItem(self._flatten_arg(expr.tuple_value), expr.index, span=expr.span)
        return expr

    def _flatten_arg(self, arg: E.Expr) -> E.Expr:
        if E.is_leaf(arg):
            return arg
        if isinstance(arg, E.Tuple):
            return self._flatten_args(arg)
        if isinstance(arg, (E.Function, E.SeqExpr)):
            return arg
        return self.emit(arg)

    def _declared_device(self, expr: E.Expr) -> E.Expr:
        """``hint_on_device(x, R.device("cpu", 0))`` names the module's declared
        vdevice of that runtime kind, id and scope (``llvm:0``), as the parser reads it."""
        if not (isinstance(expr, E.Call) and isinstance(expr.op, E.Op)):
            return expr
        if expr.op.name not in ("hint_on_device", "to_vdevice"):
            return expr
        vdev = expr.attrs.get("dst_vdevice")
        declared = self._mod.vdevices
        if not isinstance(vdev, VDevice) or not declared or vdev in declared:
            return expr
        for known in declared:
            if (known.kind, known.vdevice_id, known.memory_scope) == (
                vdev.kind,
                vdev.vdevice_id,
                vdev.memory_scope,
            ):
                attrs = E.Attrs({**expr.attrs, "dst_vdevice": known})
                return E.replace(expr, attrs=attrs, struct_info=None)
        return expr

    def normalize(self, expr: E.Expr) -> E.Expr:
        """Fills in missing struct info, recursively; does not bind anything."""
        return normalize(expr, self._mod)


def _call_sinfo(call: E.Call, mod: IRModule | None) -> S.StructInfo:
    callee = call.op
    if isinstance(callee, E.Op):
        return infer_call(call)
    if isinstance(callee, E.ExternFunc):
        return call.sinfo_args[0] if call.sinfo_args else S.ObjectStructInfo()
    fsinfo = callee.struct_info
    if isinstance(callee, E.GlobalVar) and mod is not None and callee.name_hint in mod:
        fsinfo = mod[callee.name_hint].struct_info
    if isinstance(fsinfo, S.FuncStructInfo):
        return _specialize_ret(fsinfo, call)
    if call.sinfo_args:
        return call.sinfo_args[0]
    if isinstance(callee, E.GlobalVar):
        raise StructInfoError(f"call of unknown function '{callee.name_hint}'")
    return S.ObjectStructInfo()


def _specialize_ret(fsinfo: S.FuncStructInfo, call: E.Call) -> S.StructInfo:
    """The callee's return struct info with its symbolic vars bound from the args."""
    from . import prim as P

    if fsinfo.params is None:
        return fsinfo.ret
    if len(fsinfo.params) != len(call.args):
        raise StructInfoError(
            f"call passes {len(call.args)} argument(s) to a function of {len(fsinfo.params)}"
        )
    mapping: dict[P.PrimVar, P.PrimExpr] = {}

    def bind(param: S.StructInfo, arg: S.StructInfo | None) -> None:
        if isinstance(param, S.TensorStructInfo) and isinstance(arg, S.TensorStructInfo):
            if param.shape is not None and arg.shape is not None and len(param.shape) == len(arg.shape):
                for p, a in zip(param.shape, arg.shape):
                    if isinstance(p, P.PrimVar) and p not in mapping:
                        mapping[p] = a
        elif isinstance(param, S.ShapeStructInfo) and isinstance(arg, S.ShapeStructInfo):
            if param.values is not None and arg.values is not None:
                for p, a in zip(param.values, arg.values):
                    if isinstance(p, P.PrimVar) and p not in mapping:
                        mapping[p] = a
        elif isinstance(param, S.TupleStructInfo) and isinstance(arg, S.TupleStructInfo):
            for p, a in zip(param.fields, arg.fields):
                bind(p, a)

    for param, arg in zip(fsinfo.params, call.args):
        bind(param, arg.struct_info)
    if not mapping:
        return fsinfo.ret
    return substitute_sinfo(fsinfo.ret, mapping)


def substitute_sinfo(sinfo: S.StructInfo, mapping: dict) -> S.StructInfo:
    """Struct info with symbolic variables replaced per ``mapping``."""
    from . import prim as P

    if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None:
        return S.TensorStructInfo(
            [P.substitute(d, mapping) for d in sinfo.shape], sinfo.dtype, vdevice=sinfo.vdevice
        )
    if isinstance(sinfo, S.ShapeStructInfo) and sinfo.values is not None:
        return S.ShapeStructInfo([P.substitute(d, mapping) for d in sinfo.values])
    if isinstance(sinfo, S.PrimStructInfo) and sinfo.value is not None:
        return S.PrimStructInfo(sinfo.dtype, P.substitute(sinfo.value, mapping))
    if isinstance(sinfo, S.TupleStructInfo):
        return S.TupleStructInfo([substitute_sinfo(f, mapping) for f in sinfo.fields])
    return sinfo


def normalize(expr: E.Expr, mod: IRModule | None = None) -> E.Expr:
    """Returns ``expr`` with struct info filled in everywhere it was missing."""
    if expr.struct_info is not None and not isinstance(
        expr, (E.Tuple, E.SeqExpr, E.If, E.Function)
    ):
        return expr
    if isinstance(expr, E.Call):
        args = tuple(normalize(a, mod) for a in expr.args)
        call = expr if all(a is b for a, b in zip(args, expr.args)) else E.replace(expr, args=args)
        try:
            sinfo = _call_sinfo(call, mod)
        except StructInfoError as err:
            if expr.span is not None and str(expr.span) not in str(err):
                raise StructInfoError(f"{err} (at {expr.span})") from None
            raise
        return E.replace(call, struct_info=sinfo)
    if isinstance(expr, E.Tuple):
        fields = tuple(normalize(f, mod) for f in expr.fields)
        if expr.struct_info is not None and all(a is b for a, b in zip(fields, expr.fields)):
            return expr
        return E.Tuple(fields, span=expr.span)
    if isinstance(expr, E.TupleGetItem):
        tup = normalize(expr.tuple_value, mod)
        return E.TupleGetItem(tup, expr.index, span=expr.span)
    if isinstance(expr, E.SeqExpr):
        if expr.struct_info is not None:
            return expr
        body = normalize(expr.body, mod)
        return E.SeqExpr(expr.blocks, body, span=expr.span)
    if isinstance(expr, E.If):
        if expr.struct_info is not None:
            return expr
        tb = normalize(expr.true_branch, mod)
        fb = normalize(expr.false_branch, mod)
        assert tb.struct_info is not None and fb.struct_info is not None
        sinfo = S.unify(tb.struct_info, fb.struct_info)
        return E.If(expr.cond, tb, fb, struct_info=sinfo, span=expr.span)  # type: ignore[arg-type]
    if isinstance(expr, E.Function):
        return expr
    if isinstance(expr, E.Var):
        raise StructInfoError(f"variable '{expr.name_hint}' has no struct info")
    return expr
