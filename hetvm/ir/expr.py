"""IR nodes after TVM Relax: expressions, bindings, blocks and functions.

Nodes are frozen slotted dataclasses compared by identity (``==`` is ``is``);
use :func:`hetvm.ir.structural_equal` to compare programs. Every expression
carries ``struct_info`` (filled by op constructors or the BlockBuilder's
normaliser) and an optional source ``span``. A rewrite builds new nodes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import KW_ONLY, dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import StructInfoError
from . import prim
from .prim import IntLike, PrimExpr
from .span import Span
from .struct_info import (
    FuncStructInfo,
    ObjectStructInfo,
    PrimStructInfo,
    ShapeStructInfo,
    StructInfo,
    TensorStructInfo,
    TupleStructInfo,
    definable_vars,
    erase_to_well_defined,
    local_erase,
)


class Attrs(dict):
    """An immutable mapping of op or function attributes."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Attrs are immutable; build a new Attrs instead")

    __setitem__ = __delitem__ = _readonly  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted((k, _hashable(v)) for k, v in self.items())))

    def with_(self, **changes: Any) -> Attrs:
        merged = dict(self)
        merged.update(changes)
        return Attrs(merged)


def _hashable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def _attrs(value: Mapping[str, Any] | None) -> Attrs:
    if isinstance(value, Attrs):
        return value
    return Attrs(value or {})


# --------------------------------------------------------------------------
# expressions
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Expr:
    """Base of all expressions."""

    _: KW_ONLY
    struct_info: StructInfo | None = None
    span: Span | None = None

    def with_struct_info(self, sinfo: StructInfo) -> Expr:
        return dataclasses.replace(self, struct_info=sinfo)


def replace(node: Any, **changes: Any) -> Any:
    """A copy of ``node`` with fields changed (nodes are immutable)."""
    return dataclasses.replace(node, **changes)


@dataclass(frozen=True, slots=True, eq=False, init=False)
class Var(Expr):
    """A variable bound once: a function parameter or a binding's left side.

    ``Var("x", sinfo)`` takes the struct info as the second positional argument
    too, as TVM's ``relax.Var("x", R.Tensor(...))``."""

    name_hint: str

    def __init__(self, name_hint: str, struct_info: StructInfo | None = None, *, span: Span | None = None) -> None:
        object.__setattr__(self, "name_hint", name_hint)
        object.__setattr__(self, "struct_info", struct_info)
        object.__setattr__(self, "span", span)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name_hint})"


@dataclass(frozen=True, slots=True, eq=False, repr=False, init=False)
class DataflowVar(Var):
    """A variable local to a dataflow block (may not escape it)."""


@dataclass(frozen=True, slots=True)
class GlobalVar(Expr):
    """Names a function of the module. Equal by name."""

    name_hint: str

    def __repr__(self) -> str:
        return f"GlobalVar({self.name_hint})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalVar) and other.name_hint == self.name_hint

    def __hash__(self) -> int:
        return hash(("GlobalVar", self.name_hint))


@dataclass(frozen=True, slots=True, eq=False)
class Op(Expr):
    """A registered operator; get one with :func:`Op.get`."""

    name: str

    @staticmethod
    def get(name: str) -> Op:
        from .op_registry import get_op

        return get_op(name)

    def __repr__(self) -> str:
        return f"Op({self.name})"


@dataclass(frozen=True, slots=True, eq=False)
class ExternFunc(Expr):
    """A packed function looked up by name at run time (``R.call_packed``)."""

    global_symbol: str

    def __post_init__(self) -> None:
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", FuncStructInfo(None, ObjectStructInfo(), False))


@dataclass(frozen=True, slots=True, eq=False)
class Constant(Expr):
    """A tensor constant holding a NumPy array (treated as read-only)."""

    data: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.data, np.ndarray):
            object.__setattr__(self, "data", np.asarray(self.data))
        if self.struct_info is None:
            dtype = "bool" if self.data.dtype == np.bool_ else str(self.data.dtype)
            object.__setattr__(self, "struct_info", TensorStructInfo(self.data.shape, dtype))


@dataclass(frozen=True, slots=True, eq=False)
class Tuple(Expr):
    fields: tuple[Expr, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))
        if self.struct_info is None and all(f.struct_info is not None for f in self.fields):
            sinfo = TupleStructInfo([f.struct_info for f in self.fields])  # type: ignore[misc]
            object.__setattr__(self, "struct_info", sinfo)


@dataclass(frozen=True, slots=True, eq=False)
class TupleGetItem(Expr):
    tuple_value: Expr
    index: int

    def __post_init__(self) -> None:
        tsinfo = self.tuple_value.struct_info
        if self.struct_info is None and tsinfo is not None:
            if isinstance(tsinfo, TupleStructInfo):
                if not -len(tsinfo.fields) <= self.index < len(tsinfo.fields):
                    raise StructInfoError(
                        f"tuple index {self.index} out of range for a tuple of "
                        f"{len(tsinfo.fields)} fields"
                    )
                object.__setattr__(self, "struct_info", tsinfo.fields[self.index])
            elif isinstance(tsinfo, ObjectStructInfo):
                object.__setattr__(self, "struct_info", ObjectStructInfo())
            else:
                raise StructInfoError(f"TupleGetItem on a value that is not a tuple ({tsinfo})")


@dataclass(frozen=True, slots=True, eq=False)
class ShapeExpr(Expr):
    values: tuple[PrimExpr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", tuple(prim.as_prim(v) for v in self.values))
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", ShapeStructInfo(self.values))


@dataclass(frozen=True, slots=True, eq=False)
class PrimValue(Expr):
    value: PrimExpr

    def __post_init__(self) -> None:
        if not isinstance(self.value, PrimExpr):
            v = self.value
            if isinstance(v, float):
                object.__setattr__(self, "value", prim.FloatImm(v))
            else:
                object.__setattr__(self, "value", prim.as_prim(v))
        if self.struct_info is None:
            object.__setattr__(
                self, "struct_info", PrimStructInfo(self.value.dtype, self.value)
            )


@dataclass(frozen=True, slots=True, eq=False)
class StringImm(Expr):
    value: str

    def __post_init__(self) -> None:
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", ObjectStructInfo())


@dataclass(frozen=True, slots=True, eq=False)
class DataTypeImm(Expr):
    value: str

    def __post_init__(self) -> None:
        if self.struct_info is None:
            object.__setattr__(self, "struct_info", ObjectStructInfo())


@dataclass(frozen=True, slots=True, eq=False)
class Call(Expr):
    """A call of an Op, a GlobalVar, an ExternFunc or a function-valued Var."""

    op: Expr
    args: tuple[Expr, ...] = ()
    attrs: Attrs = dataclasses.field(default_factory=Attrs)
    sinfo_args: tuple[StructInfo, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", _attrs(self.attrs))
        if not isinstance(self.sinfo_args, tuple):
            object.__setattr__(self, "sinfo_args", tuple(self.sinfo_args))


@dataclass(frozen=True, slots=True, eq=False)
class If(Expr):
    """``if cond: true_branch else: false_branch``; branches are SeqExprs."""

    cond: Expr
    true_branch: SeqExpr
    false_branch: SeqExpr


# --------------------------------------------------------------------------
# bindings and blocks
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class Binding:
    var: Var
    _: KW_ONLY
    span: Span | None = None


@dataclass(frozen=True, slots=True, eq=False)
class VarBinding(Binding):
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class MatchCast(Binding):
    """Binds ``var`` to ``value`` after checking it against ``struct_info``;
    symbolic variables appearing first here are defined by the match."""

    value: Expr
    struct_info: StructInfo


@dataclass(frozen=True, slots=True, eq=False)
class BindingBlock:
    bindings: tuple[Binding, ...]
    _: KW_ONLY
    span: Span | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.bindings, tuple):
            object.__setattr__(self, "bindings", tuple(self.bindings))


@dataclass(frozen=True, slots=True, eq=False)
class DataflowBlock(BindingBlock):
    """A block of pure bindings; DataflowVars defined here stay here."""


def _merge_adjacent_blocks(blocks: tuple[BindingBlock, ...]) -> tuple[BindingBlock, ...]:
    """Adjacent blocks of the same kind become one. The text form cannot tell two
    plain blocks from one (and TVM merges adjacent dataflow blocks when it reads
    them), so this normal form keeps print -> parse an exact round trip."""
    out: list[BindingBlock] = []
    for block in blocks:
        if out and type(out[-1]) is type(block):
            out[-1] = type(block)(out[-1].bindings + block.bindings, span=out[-1].span)
        else:
            out.append(block)
    return tuple(out)


@dataclass(frozen=True, slots=True, eq=False)
class SeqExpr(Expr):
    blocks: tuple[BindingBlock, ...]
    body: Expr

    def __post_init__(self) -> None:
        blocks = tuple(self.blocks)
        if any(type(a) is type(b) for a, b in zip(blocks, blocks[1:])):
            blocks = _merge_adjacent_blocks(blocks)
        object.__setattr__(self, "blocks", blocks)
        if self.struct_info is None and self.body.struct_info is not None:
            object.__setattr__(self, "struct_info", scope_struct_info(self.blocks, self.body.struct_info))


def scope_struct_info(blocks: Sequence[BindingBlock], body: StructInfo, outer: Iterable[prim.PrimVar] = ()) -> StructInfo:
    """The struct info of a scope ending in ``body``: symbolic vars its own
    match_casts define do not leave it. A match_cast naming a var defined
    *before* the scope (``outer``: a parameter's dim, an enclosing
    match_cast's) only checks it and does not make it local: without
    ``outer`` (a SeqExpr built with no view of its enclosing scope) every var
    a match_cast names counts as local. Whoever builds a branch knows the
    enclosing scope and passes it (the TVMScript parser, ExprMutator)."""
    keep = set(outer)
    local = [
        v
        for block in blocks
        for b in block.bindings
        if isinstance(b, MatchCast)
        for v in definable_vars(b.struct_info)
        if v not in keep
    ]
    return local_erase(body, local)


@dataclass(frozen=True, slots=True, eq=False)
class Function(Expr):
    params: tuple[Var, ...]
    body: SeqExpr
    ret_struct_info: StructInfo | None = None
    is_pure: bool = True
    attrs: Attrs = dataclasses.field(default_factory=Attrs)

    def __post_init__(self) -> None:
        if not isinstance(self.params, tuple):
            object.__setattr__(self, "params", tuple(self.params))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", _attrs(self.attrs))
        if self.ret_struct_info is None and self.body.struct_info is not None:
            # only symbolic vars the parameters define may appear in the signature
            defined = [v for p in self.params for v in definable_vars(p.struct_info)]
            ret = erase_to_well_defined(self.body.struct_info, defined)
            object.__setattr__(self, "ret_struct_info", ret)
        if self.struct_info is None and all(p.struct_info is not None for p in self.params):
            sinfo = FuncStructInfo(
                [p.struct_info for p in self.params],  # type: ignore[misc]
                self.ret_struct_info,
                self.is_pure,
            )
            object.__setattr__(self, "struct_info", sinfo)


# --------------------------------------------------------------------------
# convenience constructors
# --------------------------------------------------------------------------


def const(value: Any, dtype: str | None = None) -> Constant:
    """A Constant from a Python or NumPy value."""
    arr = np.asarray(value, dtype=dtype)
    return Constant(arr)


def shape(values: Iterable[IntLike]) -> ShapeExpr:
    return ShapeExpr(tuple(values))


def prim_value(value: IntLike | float) -> PrimValue:
    return PrimValue(value)  # type: ignore[arg-type]


def is_leaf(expr: Expr) -> bool:
    """Leaves may appear as call arguments without being bound first."""
    return isinstance(
        expr,
        (Var, GlobalVar, Op, ExternFunc, Constant, ShapeExpr, PrimValue, StringImm, DataTypeImm),
    ) or (isinstance(expr, Tuple) and all(is_leaf(f) for f in expr.fields))


def binding_value(binding: Binding) -> Expr:
    return binding.value  # type: ignore[attr-defined]


def bindings_of(blocks: Sequence[BindingBlock]) -> Iterable[Binding]:
    for block in blocks:
        yield from block.bindings
