"""What an ONNX op converter sees: the node, its input values, and emit helpers.

Values flowing between nodes are one of

* ``np.ndarray`` -- known at import time (initializers, folded subgraphs),
* :class:`~hetvm.frontend.fold.SymArray` -- integer shape values with symbolic dims,
* an IR expression (a graph input, a parameter, or an emitted variable).

Converters turn inputs into IR with :meth:`ConvertContext.tensor` only when they
need a run-time tensor, so attribute-like inputs (Reshape's shape, Slice's
starts ...) stay plain integers. Every variable a converter emits is recorded
against its ONNX node (name, op type) for device pinning and reports, and its
value carries a :class:`~hetvm.ir.span.Span` naming the node, for errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import FrontendError, HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.block_builder import BlockBuilder, NameTable
from ..ir.span import Span
from .fold import SymArray
from .onnx_types import ident

__all__ = ["NodeView", "ConvertContext", "NeedsControlFlow", "Value"]

Value = Any  # np.ndarray | SymArray | E.Expr


class NeedsControlFlow(Exception):
    """Raised by a converter that must emit control flow (an If) while the importer
    builds a dataflow block, which cannot hold it; the importer starts again
    without one. Not an error the user sees."""


@dataclass
class NodeView:
    """One ONNX node with its inputs resolved to values."""

    name: str
    op_type: str
    opset: int
    inputs: list[Value | None]
    input_names: list[str]
    output_names: list[str]
    attrs: dict[str, Any]
    proto: Any = None

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def input(self, index: int) -> Value | None:
        """Input ``index``, or None when it is omitted (absent or named '')."""
        return self.inputs[index] if index < len(self.inputs) else None

    @property
    def num_outputs(self) -> int:
        """How many outputs the graph asks for (trailing empty names excluded)."""
        n = len(self.output_names)
        while n and not self.output_names[n - 1]:
            n -= 1
        return n


@dataclass
class ConvertContext:
    """Emission state shared by all converters of one import."""

    bb: BlockBuilder
    keep_params: bool = False
    node: NodeView | None = None
    node_of: dict[str, tuple[str, str]] = field(default_factory=dict)
    params: list[E.Var] = field(default_factory=list)
    param_values: dict[str, np.ndarray] = field(default_factory=dict)
    param_eligible: set[str] = field(default_factory=set)
    names: NameTable = field(default_factory=NameTable)
    #: the model's label (file name or '<model>') for the spans of emitted values
    source: str = "<model>"
    #: walks a subgraph (GraphProto, owner node name) into the current scope and
    #: returns its output values; set by the importer
    subgraph: Callable[..., list[Any]] | None = None
    #: the value an ONNX name has in the scope being converted (None: no such
    #: name); set by the importer
    lookup: Callable[[str], Any] | None = None
    #: import RNN/GRU/LSTM unrolled into plain ops (a static sequence length)
    #: instead of one ``nn.recurrent_scan`` call per direction
    unroll_recurrent: bool = False
    _param_of: dict[str, E.Var] = field(default_factory=dict)

    # -- errors and ops ---------------------------------------------------
    def where(self) -> str:
        n = self.node
        return "" if n is None else f"{n.op_type} node '{n.name}' (opset {n.opset})"

    def error(self, message: str) -> FrontendError:
        """A FrontendError naming the node being converted (raise the result)."""
        where = self.where()
        return FrontendError(f"{where}: {message}" if where else message)

    def op(self, path: str) -> Callable[..., E.Call]:
        """The hetvm op constructor at ``path`` (``"nn.conv2d"``), or a clear error."""
        from .. import op as hop

        obj: Any = hop
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                raise self.error(f"hetvm has no op '{path}' to convert it to")
        return obj

    def has_op(self, path: str) -> bool:
        from .. import op as hop

        obj: Any = hop
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                return False
        return True

    # -- values -------------------------------------------------------------
    def tensor(self, value: Value | int, what: str = "input") -> E.Expr:
        """``value`` (or input number ``value``) as an IR expression."""
        name = ""
        if isinstance(value, int) and not isinstance(value, bool):
            assert self.node is not None
            index = value
            value = self.node.input(index)
            name = self.node.input_names[index] if index < len(self.node.input_names) else ""
            if value is None:
                raise self.error(f"input {index} ({what}) is missing")
        if isinstance(value, E.Expr):
            return value
        if isinstance(value, SymArray):
            return self._shape_tensor(value)
        arr = np.asarray(value)
        if self.keep_params and name and name in self.param_eligible:
            return self._param(name, arr)
        return E.Constant(arr)

    def becomes_param(self, index: int) -> bool:
        """True when input ``index`` will be a function parameter (keep_params_in_input)."""
        assert self.node is not None
        if not self.keep_params or index >= len(self.node.input_names):
            return False
        return self.node.input_names[index] in self.param_eligible

    def folded(self, index: int) -> np.ndarray | None:
        """Input ``index`` as an array when it is a constant the importer may transform
        (reshape, transpose, scale) at import time; None when it is a run-time value
        or will become a parameter."""
        assert self.node is not None
        value = self.node.input(index)
        if isinstance(value, np.ndarray) and not self.becomes_param(index):
            return value
        return None

    def const(self, value: Any, dtype: Any = None) -> E.Constant:
        """A constant made by a converter (never turned into a parameter)."""
        return E.Constant(np.asarray(value, dtype=dtype))

    def _param(self, name: str, arr: np.ndarray) -> E.Var:
        var = self._param_of.get(name)
        if var is None:
            dtype = "bool" if arr.dtype == np.bool_ else str(arr.dtype)
            var = E.Var(self.names.unique(ident(name)), struct_info=S.TensorStructInfo(arr.shape, dtype))
            self._param_of[name] = var
            self.params.append(var)
            self.param_values[var.name_hint] = arr
        return var

    def _shape_tensor(self, value: SymArray) -> E.Expr:
        """A shape value as an int64 tensor: ``shape_to_tensor`` of its elements,
        reshaped when it is not 1-D (``past_len + arange(seq)`` reads a 0-d one)."""
        if not self.has_op("shape_to_tensor"):  # pragma: no cover - the op is always there
            raise self.error("a symbolic shape value is used as a run-time tensor")
        flat = self.emit(self.op("shape_to_tensor")(E.ShapeExpr(tuple(value.prims()))), "shape")
        if value.data.ndim == 1:
            return flat
        return self.emit(self.op("reshape")(flat, tuple(value.shape)), "shape")

    # -- struct info ----------------------------------------------------------
    @staticmethod
    def sinfo(expr: E.Expr) -> S.TensorStructInfo:
        sinfo = expr.struct_info
        if not isinstance(sinfo, S.TensorStructInfo):
            raise FrontendError(f"expected a tensor, got {S.describe(sinfo) if sinfo else '?'}")
        return sinfo

    def shape_of(self, value: Value) -> tuple[P.PrimExpr, ...] | None:
        """The (possibly symbolic) shape of a value, None when unknown."""
        if isinstance(value, (np.ndarray, SymArray)):
            return tuple(P.IntImm(int(d)) for d in np.shape(value.data if isinstance(value, SymArray) else value))
        return self.sinfo(value).shape

    def known_shape(self, value: Value, what: str) -> tuple[P.PrimExpr, ...]:
        """The shape of ``value``, or an error naming ``what`` when it is unknown."""
        shape = self.shape_of(value)
        if shape is None:
            raise self.error(f"{what} needs a known shape")
        return shape

    def static_dim(self, dim: P.PrimExpr, what: str) -> int:
        """``dim`` as an int, or an error naming ``what`` when it is symbolic."""
        value = P.const_value(dim)
        if value is None:
            raise self.error(f"{what} must be static, got {P.to_str(dim)}")
        return int(value)

    def rank(self, value: Value) -> int:
        """The number of dimensions, or an error when it is unknown."""
        if isinstance(value, (np.ndarray, SymArray)):
            return int(np.ndim(value.data if isinstance(value, SymArray) else value))
        ndim = self.sinfo(value).ndim
        if ndim < 0:
            raise self.error("the rank of an input is unknown")
        return ndim

    def dtype(self, value: Value) -> str:
        if isinstance(value, SymArray):
            return "int64"
        if isinstance(value, np.ndarray):
            return "bool" if value.dtype == np.bool_ else str(value.dtype)
        dtype = self.sinfo(value).dtype
        if dtype is None:
            raise self.error("the dtype of an input is unknown")
        return dtype

    def ints(self, value: Value | None, what: str) -> list[int] | None:
        """A constant integer input as a list (None when omitted)."""
        if value is None:
            return None
        if isinstance(value, np.ndarray):
            return [int(v) for v in value.reshape(-1)]
        raise self.error(f"{what} must be a constant known at import time")

    def dims(self, value: Value | None, what: str) -> list[P.PrimExpr] | None:
        """A shape input (constant or symbolic) as PrimExprs (None when omitted)."""
        if value is None:
            return None
        if isinstance(value, SymArray):
            return value.prims()
        if isinstance(value, np.ndarray):
            return [P.IntImm(int(v)) for v in value.reshape(-1)]
        return self._run_time_dims(value, what)

    def _run_time_dims(self, value: E.Expr, what: str) -> list[P.PrimExpr]:
        """A shape computed from tensor values (``Cast(Ceil(Shape(x) / 2))``, say):
        ``match_cast(tensor_to_shape(t), R.Shape([d0, d1, ...]))`` binds fresh dims
        at run time. Their values must be sizes (match_cast rejects a negative one),
        so Reshape's -1 and 0 are not read from a run-time target."""
        sinfo = value.struct_info
        length = None
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.ndim == 1 and sinfo.shape is not None:
            length = P.const_value(sinfo.shape[0])
        dtype = sinfo.dtype if isinstance(sinfo, S.TensorStructInfo) else None
        if length is None or dtype not in ("int64", "int32") or not self.has_op("tensor_to_shape"):
            raise self.error(
                f"{what} is computed at run time; hetvm needs it known at import time "
                f"(a constant, or derived from input shapes) or a 1-D integer tensor of "
                f"known length"
            )
        if dtype != "int64":
            value = self.call("astype", value, "int64")
        shape = self.call("tensor_to_shape", value)
        hint = self._default_hint()
        dims: list[P.PrimExpr] = [P.PrimVar(self.names.unique(ident(f"{hint}_d{i}"))) for i in range(int(length))]
        var = self.bb.match_cast(shape, S.ShapeStructInfo(dims), self.names.unique(ident(f"{hint}_dims")))
        if self.node is not None:
            self.node_of[var.name_hint] = (self.node.name, self.node.op_type)
        return dims

    # -- emission ---------------------------------------------------------------
    def emit(self, expr: E.Expr, hint: str | None = None) -> E.Var:
        """Binds ``expr`` and records it against the current node."""
        if hint is None:
            hint = self._default_hint()
        if self.node is not None and expr.span is None and not isinstance(expr, (E.Var, E.Constant)):
            expr = E.replace(expr, span=self.node_span())
        try:
            var = self.bb.emit(expr, self.names.unique(ident(hint)))
        except HetvmError as err:
            if isinstance(err, FrontendError):
                raise
            raise self.error(str(err)) from None
        if self.node is not None:
            self.node_of[var.name_hint] = (self.node.name, self.node.op_type)
        return var

    def node_span(self) -> Span:
        """The span of values made for the current node: it names the ONNX node (and
        its inputs) in errors at build and run time, and passes keep it."""
        n = self.node
        assert n is not None
        return Span.of_node(self.source, n.name, n.op_type, tuple(n.input_names))

    def call(self, path: str, *args: Any, hint: str | None = None, **kwargs: Any) -> E.Var:
        """Builds op ``path`` with ``args`` and emits it; op errors name the node."""
        ctor = self.op(path)
        try:
            expr = ctor(*args, **kwargs)
        except HetvmError as err:
            if isinstance(err, FrontendError):
                raise
            raise self.error(f"{err} (inputs: {self.describe_inputs()})") from None
        return self.emit(expr, hint)

    def _default_hint(self) -> str:
        n = self.node
        if n is None:
            return "lv"
        outs = [o for o in n.output_names if o]
        return outs[0] if outs else n.op_type.lower()

    def describe_inputs(self) -> str:
        n = self.node
        if n is None:
            return ""
        parts = []
        for name, v in zip(n.input_names, n.inputs):
            if v is None:
                continue
            if isinstance(v, E.Expr) and v.struct_info is not None:
                parts.append(f"'{name}' {S.describe(v.struct_info)}")
            else:
                parts.append(f"'{name}' const{tuple(np.shape(v.data if isinstance(v, SymArray) else v))}")
        return ", ".join(parts)


def normalize_axis(ctx: ConvertContext, axis: int, rank: int) -> int:
    """``axis`` in ``[0, rank)``; an out-of-range axis is an error naming the node."""
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def normalize_axes(ctx: ConvertContext, axes: Sequence[int], rank: int) -> list[int]:
    return [normalize_axis(ctx, int(a), rank) for a in axes]
