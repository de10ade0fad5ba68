"""Import-time evaluation of ONNX nodes whose inputs are all known.

Why: the light ONNX models build every weight with ``ConstantOfShape`` and
transformer exports compute reshape targets with ``Shape -> Gather -> Concat``.
Evaluating such nodes once here, with NumPy, turns weights into constants and
shape arithmetic into static shapes, so nothing of it runs again per inference.

A *known* value is either a NumPy array (fully constant) or a :class:`SymArray`:
an integer tensor whose elements may be symbolic shape expressions (what
``Shape`` of a tensor with a dimension ``n`` gives). Shape-manipulation ops
(Gather, Concat, Slice, Unsqueeze, arithmetic ...) fold over SymArrays too, so a
model with symbolic batch size still gets ``reshape(x, (n, 12, 64))`` instead of
run-time shape computations. Ops without a NumPy folder here are evaluated with
``onnx.reference`` when all their inputs are constant arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ..ir import prim as P

__all__ = ["SymArray", "known", "is_known", "fold_node", "SYMBOLIC_FOLDABLE"]


@dataclass(frozen=True)
class SymArray:
    """An int64 tensor known at import time; elements are ints or PrimExprs."""

    data: np.ndarray  # dtype=object

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    def prims(self) -> list[P.PrimExpr]:
        """The elements (flattened) as PrimExprs."""
        return [P.as_prim(int(v)) if not isinstance(v, P.PrimExpr) else v for v in self.data.flat]


def _simplify(v: Any) -> Any:
    if isinstance(v, P.PrimExpr):
        c = P.const_value(v)
        return int(c) if c is not None else P.simplify(v)
    if isinstance(v, (np.integer, bool, np.bool_)):
        return int(v)
    return v


def known(values: Any) -> np.ndarray | SymArray:
    """An int64 array when every element is a constant, else a SymArray."""
    arr = np.asarray(values, dtype=object) if not isinstance(values, np.ndarray) else values
    if arr.dtype != object:
        return arr
    flat = [_simplify(v) for v in arr.flat]
    if all(isinstance(v, int) for v in flat):
        return np.asarray(flat, dtype=np.int64).reshape(arr.shape)
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return SymArray(out.reshape(arr.shape))


def is_known(value: Any) -> bool:
    return isinstance(value, (np.ndarray, SymArray))


def _raw(value: np.ndarray | SymArray) -> np.ndarray:
    return value.data if isinstance(value, SymArray) else value


def _ints(value: np.ndarray | SymArray | None) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, SymArray):
        raise _NotFoldable("needs constant integers")
    return [int(v) for v in np.asarray(value).reshape(-1)]


class _NotFoldable(Exception):
    """The folder cannot evaluate this node at import time (symbolic where it needs ints)."""


# --------------------------------------------------------------------------
# folders: (inputs, attrs, opset) -> list of outputs
# --------------------------------------------------------------------------

Folder = Callable[[list, dict, int], list]
_FOLDERS: dict[str, Folder] = {}

#: ops whose folders accept SymArray inputs (shape arithmetic)
SYMBOLIC_FOLDABLE = frozenset(
    """Identity Gather Concat Unsqueeze Squeeze Reshape Flatten Slice Cast Add Sub Mul Div
    Neg Abs Max Min Sum Equal Where Expand Shape Size ReduceProd ReduceSum Transpose""".split()
)


def _folder(*names: str) -> Callable[[Folder], Folder]:
    def deco(fn: Folder) -> Folder:
        for n in names:
            _FOLDERS[n] = fn
        return fn

    return deco


def _axes(ins: list, attrs: dict, opset: int, input_since: int, index: int = 1) -> list[int] | None:
    """Axes given as attribute (old opsets) or as input ``index`` (newer ones)."""
    if opset >= input_since:
        return _ints(ins[index] if len(ins) > index else None)
    axes = attrs.get("axes")
    return None if axes is None else [int(a) for a in axes]


@_folder("Identity")
def _identity(ins, attrs, opset):
    return [ins[0]]


@_folder("Constant")
def _constant(ins, attrs, opset):
    for key in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if key in attrs:
            v = attrs[key]
            if key in ("value_float", "value_floats"):
                return [np.asarray(v, dtype=np.float32)]
            if key in ("value_int", "value_ints"):
                return [np.asarray(v, dtype=np.int64)]
            return [np.asarray(v)]
    raise ValueError("Constant needs one of value, value_float(s), value_int(s)")


@_folder("ConstantOfShape")
def _constant_of_shape(ins, attrs, opset):
    shape = _ints(ins[0])
    value = attrs.get("value")
    fill = np.asarray(value).reshape(-1)[0] if value is not None else np.float32(0)
    return [np.full(shape, fill, dtype=np.asarray(fill).dtype)]


@_folder("Shape")
def _shape(ins, attrs, opset):
    dims = list(ins[0].shape)
    start, end = attrs.get("start", 0), attrs.get("end")
    return [known(np.asarray(dims[start:end], dtype=object) if dims else np.zeros(0, np.int64))]


@_folder("Size")
def _size(ins, attrs, opset):
    return [np.asarray(int(np.prod(ins[0].shape)), dtype=np.int64)]


@_folder("Gather")
def _gather(ins, attrs, opset):
    data, idx = _raw(ins[0]), np.asarray(_ints(ins[1]), dtype=np.int64).reshape(np.shape(_raw(ins[1])))
    return [_wrap(np.take(data, idx, axis=int(attrs.get("axis", 0))), ins[0])]


@_folder("GatherElements")
def _gather_elements(ins, attrs, opset):
    # constant inputs only (not in SYMBOLIC_FOLDABLE); the runtime kernel's own
    # NumPy, since onnx.reference's GatherElements fails on indices shorter than
    # the data along the axis (ALBERT's token-type buffer: data (1, 64), indices (1, 5))
    from ..kernels.extra import take_elements

    return [take_elements(np, np.asarray(ins[0]), np.asarray(ins[1]), int(attrs.get("axis", 0)))]


@_folder("Concat")
def _concat(ins, attrs, opset):
    arrs = [_raw(i) for i in ins if i is not None]
    out = np.concatenate(arrs, axis=int(attrs["axis"]))
    return [_wrap(out, *ins)]


@_folder("Unsqueeze")
def _unsqueeze(ins, attrs, opset):
    axes = _axes(ins, attrs, opset, 13)
    data = _raw(ins[0])
    rank = data.ndim + len(axes)
    out = np.expand_dims(data, tuple(sorted(a % rank for a in axes)))
    return [_wrap(out, ins[0])]


@_folder("Squeeze")
def _squeeze(ins, attrs, opset):
    axes = _axes(ins, attrs, opset, 13)
    data = _raw(ins[0])
    out = np.squeeze(data) if axes is None else np.squeeze(data, tuple(a % data.ndim for a in axes))
    return [_wrap(out, ins[0])]


def reshape_target(in_shape: Sequence[Any], target: Sequence[int], allowzero: bool) -> list[Any]:
    """ONNX Reshape's target: 0 copies the input dim (unless allowzero), -1 is inferred."""
    out: list[Any] = []
    infer = -1
    for i, t in enumerate(target):
        if t == 0 and not allowzero:
            out.append(in_shape[i])
        elif t == -1:
            infer = i
            out.append(None)
        else:
            out.append(t if isinstance(t, P.PrimExpr) else int(t))
    if infer >= 0:
        out[infer] = _infer_dim(list(in_shape), [d for i, d in enumerate(out) if i != infer])
    return out


def _infer_dim(total: list[Any], rest: list[Any]) -> Any:
    """prod(total) / prod(rest), cancelling equal (possibly symbolic) factors first
    so that ``(n, 3, 4) -> (n, -1)`` gives 12, not ``n*12 // n``."""
    remaining = list(rest)
    numer: list[Any] = []
    for d in total:
        for j, r in enumerate(remaining):
            if P.prove_equal(P.as_prim(d), P.as_prim(r)):
                del remaining[j]
                break
        else:
            numer.append(d)
    num: Any = 1
    for d in numer:
        num = P.mul(num, d)
    den: Any = 1
    for d in remaining:
        den = P.mul(den, d)
    q = P.floordiv(num, den)
    c = P.const_value(q)
    return int(c) if c is not None else q


@_folder("Reshape")
def _reshape(ins, attrs, opset):
    data = _raw(ins[0])
    target = _ints(ins[1]) if opset >= 5 else list(attrs["shape"])
    shape = reshape_target(data.shape, target, bool(attrs.get("allowzero", 0)))
    return [_wrap(data.reshape(shape), ins[0])]


@_folder("Flatten")
def _flatten(ins, attrs, opset):
    data = _raw(ins[0])
    axis = int(attrs.get("axis", 1))
    axis = axis + data.ndim if axis < 0 else axis  # -1 is the last axis, not ndim
    lead = int(np.prod(data.shape[:axis]))
    return [_wrap(data.reshape(lead, -1) if data.size else data.reshape(lead, 0), ins[0])]


@_folder("Transpose")
def _transpose(ins, attrs, opset):
    perm = attrs.get("perm")
    return [_wrap(np.transpose(_raw(ins[0]), perm), ins[0])]


@_folder("Slice")
def _slice(ins, attrs, opset):
    data = _raw(ins[0])
    if opset >= 10:
        starts, ends = _ints(ins[1]), _ints(ins[2])
        axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else None
        steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else None
    else:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes, steps = attrs.get("axes"), None
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a) % data.ndim] = slice(_clamp(s), _clamp(e), int(st))
    return [_wrap(data[tuple(index)], ins[0])]


def _clamp(v: int) -> int | None:
    # NumPy slicing already clamps; INT64 extremes only need to stay Python ints.
    return int(max(min(v, 2**62), -(2**62)))


@_folder("Cast")
def _cast(ins, attrs, opset):
    from .onnx_types import np_dtype_of

    dtype = np_dtype_of(int(attrs["to"]))
    if isinstance(ins[0], SymArray):
        if dtype.kind not in "iu":
            raise _NotFoldable("a symbolic shape value cannot become a float tensor at import time")
        return [ins[0]]
    return [np.asarray(ins[0]).astype(dtype)]


def _binary(fn: Callable[[Any, Any], Any]) -> Folder:
    def fold(ins, attrs, opset):
        a, b = _raw(ins[0]), _raw(ins[1])
        out = fn(a, b)
        if not isinstance(ins[0], SymArray) and not isinstance(ins[1], SymArray):
            out = np.asarray(out, dtype=np.result_type(a, b) if fn is not _div else None)
        return [_wrap(np.asarray(out), *ins)]

    return fold


def _div(a: Any, b: Any) -> Any:
    if a.dtype == object or b.dtype == object:
        return a // b  # shape arithmetic: non-negative, so floor == truncation
    if np.issubdtype(a.dtype, np.integer):
        q = np.abs(a) // np.abs(b)
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))
    return (a / b).astype(np.result_type(a, b))


_folder("Add")(_binary(lambda a, b: a + b))
_folder("Sub")(_binary(lambda a, b: a - b))
_folder("Mul")(_binary(lambda a, b: a * b))
_folder("Div")(_binary(_div))


@_folder("Pow")
def _pow(ins, attrs, opset):
    a, b = ins[0], ins[1]
    return [np.asarray(np.power(a, b.astype(a.dtype) if a.dtype.kind == "f" else b), dtype=a.dtype)]


@_folder("Neg")
def _neg(ins, attrs, opset):
    return [_wrap(-_raw(ins[0]), ins[0])]


@_folder("Abs")
def _abs(ins, attrs, opset):
    if isinstance(ins[0], SymArray):
        return [ins[0]]  # shape values are never negative
    return [np.abs(ins[0])]


def _elementwise(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``fn`` applied element by element to object arrays (shape values)."""

    def apply(a: Any, b: Any) -> Any:
        a, b = np.broadcast_arrays(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
        out = np.empty(a.shape, dtype=object)
        for idx in np.ndindex(a.shape):
            out[idx] = fn(*(int(v) if isinstance(v, np.integer) else v for v in (a[idx], b[idx])))
        return out

    return apply


#: Max / Min of shape values (``max(seq, 1)``, ``min(n, 512)``): the bounds of the
#: dims decide what they can (dims are never negative, so ``max(n, 0)`` is ``n``)
_SYMBOLIC_MINMAX = {id(np.maximum): _elementwise(P.max_), id(np.minimum): _elementwise(P.min_)}


def _variadic(fn: Callable[[Any, Any], Any]) -> Folder:
    def fold(ins, attrs, opset):
        vals = [i for i in ins if i is not None]
        if any(isinstance(v, SymArray) for v in vals):
            fn_ = _SYMBOLIC_MINMAX.get(id(fn), fn)
        else:
            fn_ = fn
        out = _raw(vals[0])
        for v in vals[1:]:
            out = fn_(out, _raw(v))
        return [_wrap(np.asarray(out), *vals)]

    return fold


_folder("Sum")(_variadic(np.add))
_folder("Max")(_variadic(np.maximum))
_folder("Min")(_variadic(np.minimum))
_folder("Sqrt")(lambda ins, attrs, opset: [np.sqrt(ins[0])])


@_folder("Equal")
def _equal(ins, attrs, opset):
    a, b = np.broadcast_arrays(_raw(ins[0]), _raw(ins[1]))
    out = np.empty(a.shape, dtype=bool)
    for idx in np.ndindex(a.shape):
        x, y = a[idx], b[idx]
        if isinstance(x, P.PrimExpr) or isinstance(y, P.PrimExpr):
            decided = decide_equal(x, y)
            if decided is None:
                raise _NotFoldable("cannot decide equality of symbolic dims")
            out[idx] = decided
        else:
            out[idx] = x == y
    return [out]


def decide_equal(x: Any, y: Any) -> bool | None:
    """``x == y`` for shape values, None when it depends on the dims' values.

    Dims are never negative, so ``n == -1`` is False: that is what settles the
    legacy exporter's ``Where(Equal(shape, -1), 1, shape)`` before an Expand.
    """
    diff = P.sub(P.as_prim(x), P.as_prim(y))
    if P.prove_equal(diff, 0):
        return True
    lo, hi = P.bounds(diff)
    if (lo is not None and lo > 0) or (hi is not None and hi < 0):
        return False
    return None


@_folder("Where")
def _where(ins, attrs, opset):
    cond = ins[0]
    if isinstance(cond, SymArray):
        raise _NotFoldable("symbolic condition")
    out = np.where(np.asarray(cond, dtype=bool), _raw(ins[1]), _raw(ins[2]))
    return [_wrap(out, ins[1], ins[2])]


@_folder("Expand")
def _expand(ins, attrs, opset):
    data = _raw(ins[0])
    shape = np.broadcast_shapes(data.shape, tuple(_ints(ins[1])))
    return [_wrap(np.broadcast_to(data, shape).copy(), ins[0])]


@_folder("Range")
def _range(ins, attrs, opset):
    start, limit, delta = (np.asarray(i).reshape(()) for i in ins[:3])
    return [np.arange(start, limit, delta, dtype=start.dtype)]


def _reduce(fn: Callable[..., Any], input_since: int) -> Folder:
    def fold(ins, attrs, opset):
        axes = _axes(ins, attrs, opset, input_since)
        keep = bool(attrs.get("keepdims", 1))
        data = _raw(ins[0])
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return [ins[0]]
            axes = list(range(data.ndim))
        out = fn(data, axis=tuple(a % max(data.ndim, 1) for a in axes), keepdims=keep)
        return [_wrap(np.asarray(out, dtype=data.dtype), ins[0])]

    return fold


_folder("ReduceProd")(_reduce(np.prod, 18))
_folder("ReduceSum")(_reduce(np.sum, 13))


@_folder("Dropout")
def _dropout(ins, attrs, opset):
    return [ins[0], np.ones(np.shape(ins[0]), dtype=bool)]


def _wrap(out: Any, *sources: Any) -> np.ndarray | SymArray:
    """Re-classifies an object-array result (symbolic or now constant)."""
    out = np.asarray(out)
    if out.dtype == object or any(isinstance(s, SymArray) for s in sources):
        return known(out.astype(object))
    return out


# --------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------


def fold_node(
    op_type: str,
    inputs: list[np.ndarray | SymArray | None],
    attrs: dict[str, Any],
    opset: int,
    node_proto: Any = None,
    num_outputs: int = 1,
) -> list[np.ndarray | SymArray] | None:
    """Outputs of the node when it can be evaluated now, else None.

    ``inputs`` holds known values (None for an omitted optional input). Nodes
    with symbolic inputs fold only through the shape-arithmetic folders; fully
    constant nodes without a NumPy folder go to ``onnx.reference``.
    """
    symbolic = any(isinstance(i, SymArray) for i in inputs)
    if symbolic and op_type not in SYMBOLIC_FOLDABLE:
        return None
    # ONNX's float semantics are IEEE's: log(0) is -inf, 0/0 is nan, and a cast of
    # them is what the exporter meant (T5's relative-position buckets take log(0)
    # and cast it). NumPy's RuntimeWarnings about them are noise at import time.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        return _fold(op_type, inputs, attrs, opset, node_proto, num_outputs, symbolic)


def _fold(
    op_type: str,
    inputs: list[np.ndarray | SymArray | None],
    attrs: dict[str, Any],
    opset: int,
    node_proto: Any,
    num_outputs: int,
    symbolic: bool,
) -> list[np.ndarray | SymArray] | None:
    folder = _FOLDERS.get(op_type)
    if folder is not None:
        try:
            outs = folder(inputs, attrs, opset)
        except _NotFoldable:
            return None
        return [_as_known(o) for o in outs][: max(num_outputs, 1)]
    if symbolic or node_proto is None:
        return None
    return _reference_fold(node_proto, inputs, opset)


def _as_known(value: Any) -> np.ndarray | SymArray:
    """A folder's output as a known value. NumPy ufuncs on 0-d arrays return
    scalars (``np.abs(np.asarray(-4))`` is an ``np.int64``), which no later
    step reads as known: a folded scalar graph output crashed the import."""
    if isinstance(value, SymArray):
        return value
    arr = np.asarray(value)
    return known(arr) if arr.dtype == object else arr


def _reference_fold(node_proto: Any, inputs: list, opset: int) -> list[np.ndarray]:
    """Evaluates one node with ``onnx.reference`` (ops without a NumPy folder here)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [n for n in node_proto.input]
    feeds = {n: v for n, v in zip(names, inputs) if n and v is not None}
    graph_inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for n, v in feeds.items()
    ]
    graph_outputs = [helper.make_empty_tensor_value_info(n) for n in node_proto.output if n]
    graph = helper.make_graph([node_proto], "fold", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    outs = ReferenceEvaluator(model).run(None, feeds)
    return [np.asarray(o) for o in outs]
