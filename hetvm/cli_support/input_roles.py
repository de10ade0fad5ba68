"""What an integer input of ``main`` is for, so ``hetvm run`` can make one up.

Random integers from a fixed range break real models: token ids index an
embedding table (``take`` / ONNX ``Gather``) and must stay below its size, and an
attention mask must hold 0s and 1s. This module reads the IR of ``main`` and
follows each integer or bool parameter forward through ops that keep its values
(casts, reshapes, transposes) to

* the ``indices`` of a ``take``: the input is an *index* below the table's size on
  the gathered axis (the smallest such size when it feeds several tables);
* the condition of a ``where`` or an operand of a ``multiply`` (or a name with
  ``mask`` in it): the input is a 0/1 *mask*.

It reads only the IR, so it works for ONNX models and TVMScript alike.
:func:`broadcast_pairs` finds symbolic dims the program broadcasts against each
other (``max(total, past + seq)`` in a shape): made-up inputs must make them equal,
as a KV-cached decoder's mask length is the past plus the new tokens.
:func:`index_extents` finds dims indexed at ``arange(0, n)`` positions (a ``take``
or ``gather_nd`` of a mask at ``arange(past + seq)``): the dim must be that long.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S

__all__ = ["InputRole", "input_roles", "broadcast_pairs", "index_extents"]

# ops whose result holds the values of their first argument (rearranged or cast)
_VALUE_KEEPING = frozenset({
    "astype", "reshape", "flatten", "expand_dims", "squeeze", "permute_dims",
    "broadcast_to", "strided_slice", "concat", "tile", "repeat",
})  # fmt: skip
_MASK_OPS = frozenset({"where", "multiply"})


@dataclass(frozen=True)
class InputRole:
    """``kind`` is ``"index"`` (values in ``[0, bound)``) or ``"mask"`` (0/1)."""

    kind: str
    why: str
    bound: int | None = None


def _is_integer(sinfo: S.StructInfo | None) -> bool:
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.dtype is None:
        return False
    return np.dtype(sinfo.dtype).kind in "iub"


def _bindings(seq: E.SeqExpr) -> list[E.Binding]:
    out: list[E.Binding] = []
    for block in seq.blocks:
        out.extend(block.bindings)
    return out


def _op_name(call: E.Call) -> str | None:
    return call.op.name if isinstance(call.op, E.Op) else None


def _node_label(binding: E.Binding, op: str, node_of: Mapping[str, tuple[str, str]]) -> str:
    """``Gather node 'word_embedding'`` where the ONNX node is known, else the IR value."""
    span = binding.span or binding.value.span  # type: ignore[attr-defined]
    if getattr(span, "node_name", None) is not None:
        return f"{span.op_type} node '{span.node_name}'"  # type: ignore[union-attr]
    name = binding.var.name_hint
    if name in node_of:
        node, op_type = node_of[name]
        return f"{op_type} node '{node}'"
    return f"'{op}' computing '{name}'"


def input_roles(func: E.Function, node_of: Mapping[str, tuple[str, str]] | None = None) -> dict[str, InputRole]:
    """Parameter name -> its role, for the integer parameters whose role is known."""
    node_of = dict(node_of or {})
    params = [p for p in func.params if _is_integer(p.struct_info)]
    source: dict[E.Var, set[E.Var]] = {p: {p} for p in params}
    bounds: dict[E.Var, tuple[int, str]] = {}
    masks: dict[E.Var, str] = {}

    def sources_of(expr: E.Expr) -> set[E.Var]:
        return source.get(expr, set()) if isinstance(expr, E.Var) else set()

    for b in _bindings(func.body):
        value = b.value
        if isinstance(b, E.MatchCast) or isinstance(value, E.Var):
            src = sources_of(value)
            if src:
                source[b.var] = src
            continue
        if not isinstance(value, E.Call):
            continue
        op = _op_name(value)
        if op in _VALUE_KEEPING and value.args:
            args = value.args[0].fields if op == "concat" and isinstance(value.args[0], E.Tuple) else value.args[:1]
            src = set().union(*(sources_of(a) for a in args))
            if src:
                source[b.var] = src
        elif op == "take" and len(value.args) == 2:
            table = value.args[0].struct_info
            axis = int(value.attrs.get("axis", 0) or 0)
            if isinstance(table, S.TensorStructInfo) and table.shape is not None and -len(table.shape) <= axis < len(table.shape):
                size = P.const_value(table.shape[axis])
                if size is not None and size > 0:
                    why = f"indices of {_node_label(b, 'take', node_of)}, a table of {size} rows"
                    for p in sources_of(value.args[1]):
                        if p not in bounds or size < bounds[p][0]:
                            bounds[p] = (size, why)
        elif op in _MASK_OPS:
            for a in value.args:
                for p in sources_of(a):
                    masks.setdefault(p, f"feeds {_node_label(b, op, node_of)}")
    roles: dict[str, InputRole] = {}
    for p in params:
        if p in bounds:
            size, why = bounds[p]
            roles[p.name_hint] = InputRole("index", why, size)
        elif "mask" in p.name_hint.lower():
            roles[p.name_hint] = InputRole("mask", "named like a mask")
        elif p in masks:
            roles[p.name_hint] = InputRole("mask", masks[p])
    return roles


def _max_pairs(e: P.PrimExpr, out: list[tuple[P.PrimExpr, P.PrimExpr]]) -> None:
    if isinstance(e, P.Max) and P.free_vars(e.a) and P.free_vars(e.b):
        out.append((e.a, e.b))
    for child in (getattr(e, "a", None), getattr(e, "b", None)):
        if isinstance(child, P.PrimExpr):
            _max_pairs(child, out)


def _shapes(sinfo: S.StructInfo | None):
    if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None:
        yield from sinfo.shape
    elif isinstance(sinfo, S.TupleStructInfo):
        for f in sinfo.fields:
            yield from _shapes(f)


def broadcast_pairs(func: E.Function) -> list[tuple[P.PrimExpr, P.PrimExpr]]:
    """Pairs of symbolic sizes ``main`` broadcasts together (NumPy's rule makes the
    result ``max(a, b)`` when neither is provably 1 or equal), each once, in order."""
    pairs: list[tuple[P.PrimExpr, P.PrimExpr]] = []
    for b in _bindings(func.body):
        for dim in _shapes(b.var.struct_info):
            _max_pairs(dim, pairs)
    seen: set[tuple[str, str]] = set()
    out = []
    for a, c in pairs:
        key = (P.to_str(a), P.to_str(c))
        if key not in seen:
            seen.add(key)
            out.append((a, c))
    return out


_KEEP_RANGE = frozenset({"expand_dims", "reshape", "broadcast_to", "astype", "permute_dims", "squeeze", "flatten"})


def _prim_of(expr: E.Expr) -> P.PrimExpr | None:
    if isinstance(expr, E.PrimValue) and not isinstance(expr.value, P.FloatImm):
        return expr.value
    return None


def index_extents(func: E.Function) -> list[tuple[P.PrimVar, P.PrimExpr]]:
    """``(dim, n)`` for a symbolic dim that ``main`` indexes at ``arange(0, n)``
    positions (through reshapes and broadcasts; for ``gather_nd``, the index tuple's
    parts concatenated on the last axis): made-up inputs give the dim length ``n``."""
    last_dim: dict[E.Var, P.PrimExpr] = {}  # values of var lie in [0, bound)
    parts: dict[E.Var, tuple[P.PrimExpr, ...]] = {}  # per last-axis position (index tuples)
    out: list[tuple[P.PrimVar, P.PrimExpr]] = []

    def table_dim(data: E.Expr, axis: int) -> P.PrimVar | None:
        sinfo = data.struct_info
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None and -len(sinfo.shape) <= axis < len(sinfo.shape):
            dim = sinfo.shape[axis]
            return dim if isinstance(dim, P.PrimVar) else None
        return None

    for b in _bindings(func.body):
        value = b.value
        if not isinstance(value, E.Call):
            continue
        op = _op_name(value)
        args = value.args
        if op == "arange" and len(args) == 3:
            start, end, step = (_prim_of(a) for a in args)
            if start is not None and end is not None and P.const_value(start) == 0 and P.const_value(step) == 1:
                last_dim[b.var] = end
        elif op in _KEEP_RANGE and args and isinstance(args[0], E.Var) and args[0] in last_dim:
            last_dim[b.var] = last_dim[args[0]]
        elif op == "concat" and args and isinstance(args[0], E.Tuple):
            fields = args[0].fields
            rank = b.var.struct_info.ndim if isinstance(b.var.struct_info, S.TensorStructInfo) else -1
            axis = int(value.attrs.get("axis", 0) or 0)
            if rank > 0 and axis % rank == rank - 1 and all(isinstance(f, E.Var) and f in last_dim for f in fields):
                parts[b.var] = tuple(last_dim[f] for f in fields)  # type: ignore[index]
        elif op == "take" and len(args) == 2 and isinstance(args[1], E.Var) and args[1] in last_dim:
            dim = table_dim(args[0], int(value.attrs.get("axis", 0) or 0))
            if dim is not None:
                out.append((dim, last_dim[args[1]]))
        elif op == "gather_nd" and len(args) == 2 and isinstance(args[1], E.Var) and args[1] in parts:
            if int(value.attrs.get("batch_dims", 0) or 0) == 0:
                for axis, bound in enumerate(parts[args[1]]):
                    dim = table_dim(args[0], axis)
                    if dim is not None:
                        out.append((dim, bound))
    return [(d, n) for d, n in out if d not in P.free_vars(n)]
