"""Structural equality and hashing of IR.

Variables (``Var``, ``PrimVar``) are compared by where they are bound, not by
name: the first time a pair is met they are mapped to each other, and the
mapping must stay a bijection. ``GlobalVar`` compares by name, constants by
value, everything else field by field. The hash treats variables by the order
in which they are first met, so equal programs hash equally.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ..errors import HetvmError
from . import expr as E
from . import prim as P
from . import struct_info as S
from .module import IRModule
from .vdevice import VDevice


class _Mismatch(Exception):
    def __init__(self, path: list[str], lhs: Any, rhs: Any, why: str) -> None:
        super().__init__(why)
        self.path = list(path)
        self.lhs = lhs
        self.rhs = rhs
        self.why = why


def _short(x: Any) -> str:
    if isinstance(x, (E.Expr, E.Binding, E.BindingBlock, IRModule)):
        try:
            from ..script.printer import print_node  # late: script sits above ir

            text = print_node(x)
        except Exception:  # noqa: BLE001 - best effort description only
            text = repr(x)
    elif isinstance(x, S.StructInfo):
        text = S.describe(x)
    else:
        text = repr(x)
    return text if len(text) < 300 else text[:297] + "..."


class _PathStep:
    """Pushes a path element while comparing a child (for mismatch messages)."""

    __slots__ = ("path", "name")

    def __init__(self, path: list[str], name: str) -> None:
        self.path = path
        self.name = name

    def __enter__(self) -> None:
        self.path.append(self.name)

    def __exit__(self, *exc: Any) -> None:
        self.path.pop()


class _Equal:
    def __init__(self, map_free_vars: bool = True) -> None:
        self.lhs_to_rhs: dict[int, Any] = {}
        self.rhs_to_lhs: dict[int, Any] = {}
        self.path: list[str] = []
        self.map_free_vars = map_free_vars
        # true while comparing a signature or match_cast pattern: the symbolic
        # vars met there are defined by it, like TVM's DefEqual
        self.defining_symbols = False

    def fail(self, lhs: Any, rhs: Any, why: str) -> None:
        raise _Mismatch(self.path, lhs, rhs, why)

    def at(self, name: str) -> _PathStep:
        return _PathStep(self.path, name)

    # -- variables --------------------------------------------------------
    def var_pair(self, a: Any, b: Any, *, define: bool) -> None:
        ma = self.lhs_to_rhs.get(id(a))
        mb = self.rhs_to_lhs.get(id(b))
        if ma is None and mb is None:
            if not define and not self.map_free_vars:
                if a is not b:
                    self.fail(a, b, "different free variables")
                return
            self.lhs_to_rhs[id(a)] = b
            self.rhs_to_lhs[id(b)] = a
            return
        if ma is not b or mb is not a:
            self.fail(a, b, "variables bound at different places")

    # -- dispatch -----------------------------------------------------------
    def value(self, a: Any, b: Any) -> None:
        if isinstance(a, E.Expr) or isinstance(b, E.Expr):
            return self.expr(a, b)
        if isinstance(a, P.PrimExpr) or isinstance(b, P.PrimExpr):
            return self.prim(a, b)
        if isinstance(a, S.StructInfo) or isinstance(b, S.StructInfo):
            return self.sinfo(a, b)
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            if len(a) != len(b):
                self.fail(a, b, f"lengths differ ({len(a)} vs {len(b)})")
            for i, (x, y) in enumerate(zip(a, b)):
                with self.at(f"[{i}]"):
                    self.value(x, y)
            return
        if isinstance(a, dict) and isinstance(b, dict):
            if set(a) != set(b):
                self.fail(a, b, f"keys differ ({sorted(map(str, a))} vs {sorted(map(str, b))})")
            for k in sorted(a, key=str):
                with self.at(f"[{k!r}]"):
                    self.value(a[k], b[k])
            return
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            if not (
                isinstance(a, np.ndarray)
                and isinstance(b, np.ndarray)
                and a.dtype == b.dtype
                and a.shape == b.shape
                and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
            ):
                self.fail(a, b, "arrays differ")
            return
        if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
            return  # both NaN
        if type(a) is not type(b) or a != b:
            self.fail(a, b, "values differ")

    def prim(self, a: Any, b: Any) -> None:
        if type(a) is not type(b):
            self.fail(a, b, "shape expressions differ")
        if isinstance(a, P.PrimVar):
            if a.dtype != b.dtype:
                self.fail(a, b, "symbolic variable dtypes differ")
            self.var_pair(a, b, define=self.defining_symbols)
        elif isinstance(a, P._Binary):
            self.prim(a.a, b.a)
            self.prim(a.b, b.b)
        elif a != b:
            self.fail(a, b, "shape expressions differ")

    def sinfo(self, a: Any, b: Any) -> None:
        if type(a) is not type(b):
            self.fail(a, b, "struct info kinds differ")
        if isinstance(a, S.TensorStructInfo):
            if a.dtype != b.dtype:
                self.fail(a, b, "dtypes differ")
            if a.ndim != b.ndim:
                self.fail(a, b, "ndims differ")
            if a.vdevice != b.vdevice:
                self.fail(a, b, "vdevices differ")
            if (a.shape is None) != (b.shape is None):
                self.fail(a, b, "one shape is unknown")
            if a.shape is not None:
                with self.at("shape"):
                    self.value(a.shape, b.shape)
        elif isinstance(a, S.ShapeStructInfo):
            if a.ndim != b.ndim or (a.values is None) != (b.values is None):
                self.fail(a, b, "shape struct infos differ")
            if a.values is not None:
                self.value(a.values, b.values)
        elif isinstance(a, S.PrimStructInfo):
            if a.dtype != b.dtype or (a.value is None) != (b.value is None):
                self.fail(a, b, "prim struct infos differ")
            if a.value is not None:
                self.prim(a.value, b.value)
        elif isinstance(a, S.TupleStructInfo):
            with self.at("fields"):
                self.value(list(a.fields), list(b.fields))
        elif isinstance(a, S.FuncStructInfo):
            if a.purity != b.purity or (a.params is None) != (b.params is None):
                self.fail(a, b, "function struct infos differ")
            if a.params is not None:
                with self.at("params"):
                    self.value(list(a.params), list(b.params))
            with self.at("ret"):
                self.sinfo(a.ret, b.ret)

    def opt_sinfo(self, a: Any, b: Any) -> None:
        if a is None and b is None:
            return
        if a is None or b is None:
            self.fail(a, b, "one struct info is missing")
        self.sinfo(a, b)

    def define_var(self, a: E.Var, b: E.Var, *, defines_symbols: bool = False) -> None:
        if type(a) is not type(b):
            self.fail(a, b, "variable kinds differ (Var vs DataflowVar)")
        with self.at("struct_info"):
            self.defining_symbols = defines_symbols
            try:
                self.opt_sinfo(a.struct_info, b.struct_info)
            finally:
                self.defining_symbols = False
        self.var_pair(a, b, define=True)

    def use_var(self, a: E.Var, b: E.Var) -> None:
        """A variable read; a free pair met the first time must agree in struct info."""
        if id(a) not in self.lhs_to_rhs and id(b) not in self.rhs_to_lhs and a is not b:
            with self.at("struct_info"):
                self.opt_sinfo(a.struct_info, b.struct_info)
        self.var_pair(a, b, define=False)

    def expr(self, a: Any, b: Any) -> None:
        if type(a) is not type(b):
            self.fail(a, b, f"node kinds differ ({type(a).__name__} vs {type(b).__name__})")
        if isinstance(a, E.Var):
            self.use_var(a, b)
        elif isinstance(a, E.GlobalVar):
            if a.name_hint != b.name_hint:
                self.fail(a, b, "global names differ")
        elif isinstance(a, E.Op):
            if a.name != b.name:
                self.fail(a, b, "ops differ")
        elif isinstance(a, E.ExternFunc):
            if a.global_symbol != b.global_symbol:
                self.fail(a, b, "extern function names differ")
        elif isinstance(a, E.Constant):
            self.value(a.data, b.data)
        elif isinstance(a, E.Tuple):
            with self.at("fields"):
                self.value(list(a.fields), list(b.fields))
        elif isinstance(a, E.TupleGetItem):
            if a.index != b.index:
                self.fail(a, b, "tuple indices differ")
            with self.at("tuple_value"):
                self.expr(a.tuple_value, b.tuple_value)
        elif isinstance(a, E.ShapeExpr):
            self.value(a.values, b.values)
        elif isinstance(a, E.PrimValue):
            self.prim(a.value, b.value)
        elif isinstance(a, (E.StringImm, E.DataTypeImm)):
            if a.value != b.value:
                self.fail(a, b, "immediates differ")
        elif isinstance(a, E.Call):
            with self.at("op"):
                self.expr(a.op, b.op)
            with self.at("args"):
                self.value(list(a.args), list(b.args))
            with self.at("attrs"):
                self.value(dict(a.attrs), dict(b.attrs))
            with self.at("sinfo_args"):
                self.value(list(a.sinfo_args), list(b.sinfo_args))
        elif isinstance(a, E.If):
            with self.at("cond"):
                self.expr(a.cond, b.cond)
            with self.at("true_branch"):
                self.expr(a.true_branch, b.true_branch)
            with self.at("false_branch"):
                self.expr(a.false_branch, b.false_branch)
        elif isinstance(a, E.SeqExpr):
            if len(a.blocks) != len(b.blocks):
                self.fail(a, b, f"block counts differ ({len(a.blocks)} vs {len(b.blocks)})")
            for i, (x, y) in enumerate(zip(a.blocks, b.blocks)):
                with self.at(f"blocks[{i}]"):
                    self.block(x, y)
            with self.at("body"):
                self.expr(a.body, b.body)
        elif isinstance(a, E.Function):
            if len(a.params) != len(b.params):
                self.fail(a, b, "parameter counts differ")
            for i, (x, y) in enumerate(zip(a.params, b.params)):
                with self.at(f"params[{i}]"):
                    self.define_var(x, y, defines_symbols=True)
            if a.is_pure != b.is_pure:
                self.fail(a.is_pure, b.is_pure, "purity differs")
            with self.at("attrs"):
                self.value(dict(a.attrs), dict(b.attrs))
            with self.at("body"):
                self.expr(a.body, b.body)
            with self.at("ret_struct_info"):
                self.opt_sinfo(a.ret_struct_info, b.ret_struct_info)
        else:  # pragma: no cover - every node kind is listed above
            self.fail(a, b, f"unknown node {type(a).__name__}")

    def block(self, a: E.BindingBlock, b: E.BindingBlock) -> None:
        if type(a) is not type(b):
            self.fail(a, b, "block kinds differ (dataflow vs plain)")
        if len(a.bindings) != len(b.bindings):
            self.fail(a, b, f"binding counts differ ({len(a.bindings)} vs {len(b.bindings)})")
        for i, (x, y) in enumerate(zip(a.bindings, b.bindings)):
            with self.at(f"bindings[{i}]"):
                self.binding(x, y)

    def binding(self, a: E.Binding, b: E.Binding) -> None:
        if type(a) is not type(b):
            self.fail(a, b, "binding kinds differ")
        with self.at("value"):
            self.expr(a.value, b.value)  # type: ignore[attr-defined]
        if isinstance(a, E.MatchCast):
            with self.at("struct_info"):
                self.defining_symbols = True
                try:
                    self.sinfo(a.struct_info, b.struct_info)  # type: ignore[attr-defined]
                finally:
                    self.defining_symbols = False
        with self.at(f"var({a.var.name_hint})"):
            self.define_var(a.var, b.var)

    def module(self, a: IRModule, b: IRModule) -> None:
        if set(a.functions) != set(b.functions):
            self.fail(
                sorted(a.functions), sorted(b.functions), "modules define different functions"
            )
        with self.at("global_infos"):
            self.value(a.global_infos, b.global_infos)
        for name in sorted(a.functions):
            with self.at(f"[{name!r}]"):
                self.expr(a.functions[name], b.functions[name])


def _compare(lhs: Any, rhs: Any, map_free_vars: bool) -> _Mismatch | None:
    eq = _Equal(map_free_vars)
    try:
        if isinstance(lhs, IRModule) or isinstance(rhs, IRModule):
            if not (isinstance(lhs, IRModule) and isinstance(rhs, IRModule)):
                eq.fail(lhs, rhs, "only one side is a module")
            eq.module(lhs, rhs)
        elif isinstance(lhs, E.BindingBlock):
            eq.block(lhs, rhs)
        elif isinstance(lhs, E.Binding):
            eq.binding(lhs, rhs)
        else:
            eq.value(lhs, rhs)
    except _Mismatch as mismatch:
        return mismatch
    return None


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = True) -> bool:
    """True when ``lhs`` and ``rhs`` are the same program up to variable renaming."""
    return _compare(lhs, rhs, map_free_vars) is None


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = True) -> None:
    """Raises AssertionError showing the path to the first mismatch and both sides."""
    mismatch = _compare(lhs, rhs, map_free_vars)
    if mismatch is None:
        return
    path = "root" + "".join(p if p.startswith("[") else "." + p for p in mismatch.path)
    raise AssertionError(
        f"structural mismatch at {path}: {mismatch.why}\n"
        f"  lhs: {_short(mismatch.lhs)}\n  rhs: {_short(mismatch.rhs)}"
    )


# --------------------------------------------------------------------------
# hashing
# --------------------------------------------------------------------------


class _Hasher:
    def __init__(self) -> None:
        self.var_index: dict[int, int] = {}
        self.h = hashlib.blake2b(digest_size=8)

    def put(self, *items: Any) -> None:
        for item in items:
            self.h.update(repr(item).encode())
            self.h.update(b"\x00")

    def var(self, v: Any) -> None:
        idx = self.var_index.setdefault(id(v), len(self.var_index))
        self.put("var", type(v).__name__, idx)

    def value(self, x: Any) -> None:
        if isinstance(x, E.Expr):
            self.expr(x)
        elif isinstance(x, P.PrimExpr):
            self.prim(x)
        elif isinstance(x, S.StructInfo):
            self.sinfo(x)
        elif isinstance(x, (list, tuple)):
            self.put("seq", len(x))
            for y in x:
                self.value(y)
        elif isinstance(x, dict):
            self.put("dict", len(x))
            for k in sorted(x, key=str):
                self.put(k)
                self.value(x[k])
        elif isinstance(x, np.ndarray):
            self.put("array", str(x.dtype), x.shape)
            if x.dtype.kind in "fc":  # equal arrays may differ in bytes: -0.0, NaN payloads
                x = np.where(np.isnan(x), x.dtype.type(np.nan), x) + x.dtype.type(0)
            self.h.update(np.ascontiguousarray(x).tobytes())
        elif isinstance(x, float):
            self.put("float", x + 0.0)  # -0.0 + 0.0 is 0.0
        elif isinstance(x, VDevice):
            self.put("vdevice", x.target, x.vdevice_id, x.memory_scope, x.target_attrs)
        else:
            self.put(type(x).__name__, x)

    def prim(self, p: P.PrimExpr) -> None:
        if isinstance(p, P.PrimVar):
            self.var(p)
            self.put(p.dtype)
        elif isinstance(p, P._Binary):
            self.put(type(p).__name__)
            self.prim(p.a)
            self.prim(p.b)
        elif isinstance(p, P.FloatImm):
            self.put("FloatImm", p.dtype, p.value + 0.0)
        else:
            self.put(p)

    def sinfo(self, s: S.StructInfo | None) -> None:
        self.put(type(s).__name__)
        if isinstance(s, S.TensorStructInfo):
            self.put(s.dtype, s.ndim)
            self.value(s.vdevice)
            self.value(s.shape)
        elif isinstance(s, S.ShapeStructInfo):
            self.put(s.ndim)
            self.value(s.values)
        elif isinstance(s, S.PrimStructInfo):
            self.put(s.dtype)
            self.value(s.value)
        elif isinstance(s, S.TupleStructInfo):
            self.value(list(s.fields))
        elif isinstance(s, S.FuncStructInfo):
            self.put(s.purity)
            self.value(None if s.params is None else list(s.params))
            self.sinfo(s.ret)

    def expr(self, e: E.Expr) -> None:
        self.put(type(e).__name__)
        if isinstance(e, E.Var):
            self.var(e)
        elif isinstance(e, E.GlobalVar):
            self.put(e.name_hint)
        elif isinstance(e, E.Op):
            self.put(e.name)
        elif isinstance(e, E.ExternFunc):
            self.put(e.global_symbol)
        elif isinstance(e, E.Constant):
            self.value(e.data)
        elif isinstance(e, E.Tuple):
            self.value(list(e.fields))
        elif isinstance(e, E.TupleGetItem):
            self.put(e.index)
            self.expr(e.tuple_value)
        elif isinstance(e, E.ShapeExpr):
            self.value(e.values)
        elif isinstance(e, E.PrimValue):
            self.prim(e.value)
        elif isinstance(e, (E.StringImm, E.DataTypeImm)):
            self.put(e.value)
        elif isinstance(e, E.Call):
            self.expr(e.op)
            self.value(list(e.args))
            self.value(dict(e.attrs))
            self.value(list(e.sinfo_args))
        elif isinstance(e, E.If):
            self.expr(e.cond)
            self.expr(e.true_branch)
            self.expr(e.false_branch)
        elif isinstance(e, E.SeqExpr):
            for block in e.blocks:
                self.block(block)
            self.expr(e.body)
        elif isinstance(e, E.Function):
            for p in e.params:
                self.sinfo(p.struct_info)
                self.var(p)
            self.put(e.is_pure)
            self.value(dict(e.attrs))
            self.expr(e.body)
            self.sinfo(e.ret_struct_info)

    def block(self, b: E.BindingBlock) -> None:
        self.put(type(b).__name__, len(b.bindings))
        for binding in b.bindings:
            self.put(type(binding).__name__)
            self.expr(binding.value)  # type: ignore[attr-defined]
            if isinstance(binding, E.MatchCast):
                self.sinfo(binding.struct_info)
            self.sinfo(binding.var.struct_info)
            self.var(binding.var)


def structural_hash(node: Any) -> int:
    """A hash consistent with :func:`structural_equal`."""
    hasher = _Hasher()
    if isinstance(node, IRModule):
        hasher.value(node.global_infos)
        for name in sorted(node.functions):
            hasher.put(name)
            hasher.expr(node.functions[name])
    elif isinstance(node, E.BindingBlock):
        hasher.block(node)
    else:
        hasher.value(node)
    return int.from_bytes(hasher.h.digest(), "little")


__all__ = ["structural_equal", "structural_hash", "assert_structural_equal", "HetvmError"]
