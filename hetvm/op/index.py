"""Indexing: ``take`` and ``strided_slice`` (NumPy slicing semantics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_int, axes_tuple, prim_tuple, seq_len_check
from .base import (
    common_vdevice,
    fail,
    make_call,
    norm_axes,
    norm_axis,
    register_op,
    tensor_arg,
)
from .effects import VIEW, declare_builtin

__all__ = ["take", "strided_slice", "slice_length"]

# An end at or beyond this means "to the end" even for a symbolic dimension.
_BIG = 2**31 - 1


def _infer_take(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    indices = tensor_arg(call, 1, "indices")
    if indices.dtype is not None and not indices.dtype.startswith(("int", "uint")):
        raise fail("take", f"indices must be integers, got {indices.dtype}")
    vdev = common_vdevice([data, indices])
    axis = call.attrs["axis"]
    if axis is None:
        return S.TensorStructInfo(indices.shape, data.dtype, indices.ndim, vdev)
    if data.ndim == 0:
        raise fail("take", "data must have at least one dimension when axis is given")
    if data.ndim == -1 or indices.ndim == -1:
        return S.TensorStructInfo(None, data.dtype, -1, vdev)
    ax = norm_axis("take", axis, data.ndim)
    if data.shape is None or indices.shape is None:
        return S.TensorStructInfo(None, data.dtype, data.ndim - 1 + indices.ndim, vdev)
    out = [*data.shape[:ax], *indices.shape, *data.shape[ax + 1 :]]
    return S.TensorStructInfo(out, data.dtype, vdevice=vdev)


def take(x: E.Expr, indices: E.Expr, axis: int | None = None, mode: str = "fast") -> E.Call:
    """Gathers ``x`` along ``axis`` at ``indices`` (axis None: from flattened x).

    ``mode`` follows TVM: "fast" (assume in range), "clip" or "wrap".
    """
    if mode not in ("fast", "clip", "wrap"):
        raise fail("take", f"mode must be 'fast', 'clip' or 'wrap', got {mode!r}")
    axis = None if axis is None else as_int("take", "axis", axis)
    return make_call("take", [x, indices], {"axis": axis, "mode": mode})


def slice_length(
    dim: P.PrimExpr, begin: int | P.PrimExpr, end: int | P.PrimExpr, stride: int
) -> P.PrimExpr:
    """Elements of ``range(dim)[begin:end:stride]``.

    Exact (NumPy clamping) whenever begin and end are constants, the dimension
    symbolic or not: ``x[-3:1]`` on a dim ``n`` has ``min(1, n) - max(n - 3, 0)``
    elements, never a negative count, so a valid slice of a short input gets a
    buffer of its true size (with ``n - 2`` it got 3 elements for ``n = 1``).
    Clamps that the bounds of ``dim`` decide vanish (``x[0:]`` is ``n``,
    ``x[1:]`` is ``max(n - 1, 0)``). A symbolic begin or end is taken as not
    negative and clamped at the end (``x[:m]`` on ``n`` is ``min(m, n)``), and an
    end >= 2**31-1 (<= -2**31+1 for negative strides) as "to the end".
    """
    cd, cb, ce = P.const_value(dim), _const(begin), _const(end)
    if cd is not None and cb is not None and ce is not None:
        return P.IntImm(len(range(cd)[slice(cb, ce, stride)]))
    if stride > 0:
        b = _clamped(dim, begin, 0, dim)
        e = _Clamp(None, (dim,)) if ce is not None and ce >= _BIG else _clamped(dim, end, 0, dim)
        span = _difference(e, b)
    else:
        last = P.sub(dim, 1)
        b = _Clamp(None, (last,)) if cb is not None and cb >= _BIG else _clamped(dim, begin, -1, last)
        e = _Clamp(None, (P.IntImm(-1),)) if ce is not None and ce <= -_BIG else _clamped(dim, end, -1, last)
        span = _difference(b, e)
    if cb is not None and ce is not None:
        span = P.max_(span, 0)
    step = abs(stride)
    return span if step == 1 else P.floordiv(P.add(span, step - 1), step)


def _const(v: int | P.PrimExpr) -> int | None:
    return v if isinstance(v, int) else P.const_value(v)


@dataclass(frozen=True)
class _Clamp:
    """``kind(*terms)`` with kind "min", "max" or None (the one term itself):
    kept apart until subtracted, so ``n - min(1, n)`` becomes ``max(n - 1, 0)``."""

    kind: str | None
    terms: tuple[P.PrimExpr, ...]


def _clamped(dim: P.PrimExpr, index: int | P.PrimExpr, lo: int, hi: P.PrimExpr) -> _Clamp:
    """A slice index as NumPy resolves it: counted from the end when negative,
    then clamped to ``[lo, hi]`` (a symbolic index is taken as in range)."""
    c = _const(index)
    if c is None:
        # a symbolic index (a dim of another tensor, say) is not negative but may
        # pass the end: NumPy clamps it there (the bounds drop the min when they can)
        return _Clamp("min", (P.as_prim(index), P.as_prim(hi)))
    if c >= _BIG or c <= -_BIG:
        # beyond any dim (dims are below 2**31): the clamp is decided, and a
        # min(n, 2**31 - 1) left in a shape would be planned at its upper bound
        return _Clamp(None, (P.as_prim(hi) if c > 0 else P.IntImm(lo),))
    if c < 0:
        return _Clamp("max", (P.add(dim, c), P.IntImm(lo)))
    return _Clamp("min", (P.IntImm(c), hi))


def _difference(a: _Clamp, b: _Clamp) -> P.PrimExpr:
    """``a - b``, with min/max distributed over the subtraction
    (x - min(p, q) = max(x - p, x - q)) so that bounds can simplify each term."""
    flip = {"min": P.max_, "max": P.min_}
    keep = {"min": P.min_, "max": P.max_}

    def minus_b(x: P.PrimExpr) -> P.PrimExpr:
        if b.kind is None:
            return P.sub(x, b.terms[0])
        return flip[b.kind](P.sub(x, b.terms[0]), P.sub(x, b.terms[1]))

    if a.kind is None:
        return minus_b(a.terms[0])
    return keep[a.kind](minus_b(a.terms[0]), minus_b(a.terms[1]))


def _infer_strided_slice(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    at = call.attrs
    axes, begin, end, strides = at["axes"], at["begin"], at["end"], at["strides"]
    if data.ndim == -1:
        return data
    norm = norm_axes("strided_slice", axes, data.ndim)
    if data.shape is None:
        return data
    out = list(data.shape)
    for ax, b, e, s in zip(norm, begin, end, strides):
        if at["assume_inbound"] and s > 0:
            out[ax] = P.floordiv(P.add(P.sub(e, b), s - 1), s)
        else:
            out[ax] = slice_length(data.shape[ax], b, e, s)
    return S.TensorStructInfo(out, data.dtype, vdevice=data.vdevice)


def strided_slice(
    x: E.Expr,
    axes: Sequence[int],
    begin: Sequence[Any],
    end: Sequence[Any],
    strides: Sequence[int] | None = None,
    assume_inbound: bool = False,
) -> E.Call:
    """``x[begin:end:strides]`` on the listed axes (clamped like NumPy slicing)."""
    op = "strided_slice"
    axes_t = axes_tuple(op, "axes", axes)
    begin_t = prim_tuple(op, "begin", begin)
    end_t = prim_tuple(op, "end", end)
    strides_t = (1,) * len(axes_t) if strides is None else axes_tuple(op, "strides", strides)
    seq_len_check(op, ("axes", "begin", "end", "strides"), (axes_t, begin_t, end_t, strides_t))
    if any(s == 0 for s in strides_t):
        raise fail(op, f"strides must be nonzero, got {strides_t}")
    attrs = {
        "axes": axes_t,
        "begin": begin_t,
        "end": end_t,
        "strides": strides_t,
        "assume_inbound": bool(assume_inbound),
    }
    return make_call(op, [x], attrs)


#: ``slice_view(src, axes, begin, end, strides)``: a strided_slice that is one
#: contiguous run of its source's bytes, as a view (kernel: kernels/view_kernels.py)
SLICE_VIEW = "vm.builtin.slice_view"
declare_builtin(SLICE_VIEW, VIEW)
_PURE_SLICE_VIEW = E.ExternFunc(SLICE_VIEW, struct_info=S.FuncStructInfo(None, S.ObjectStructInfo(), purity=True))


def _is_one(d: P.PrimExpr) -> bool:
    return P.const_value(d) == 1


def _slice_to_view(call: E.Call) -> E.Call | None:
    """A strided_slice whose result is one contiguous run of its input's bytes
    (leading axes cut to one element, one axis cut to a range with stride 1,
    the axes after it whole: ``x[0]``, ``x[:, 2:5]`` of a (1, n, m) tensor) as a
    view of the input, provably so from the shapes; None: it needs its kernel."""
    data, out = call.args[0].struct_info, call.struct_info
    if not (isinstance(data, S.TensorStructInfo) and isinstance(out, S.TensorStructInfo)):
        return None
    if data.shape is None or out.shape is None or len(data.shape) != len(out.shape):
        return None
    at = call.attrs
    axes = norm_axes("strided_slice", at["axes"], len(data.shape))
    stride = dict(zip(axes, at["strides"]))
    whole = [P.prove_equal(o, d) and stride.get(i, 1) == 1 for i, (o, d) in enumerate(zip(out.shape, data.shape))]
    cut = max((i for i, w in enumerate(whole) if not w), default=-1)
    if cut >= 0 and stride.get(cut, 1) != 1 and not _is_one(out.shape[cut]):
        return None
    if not all(_is_one(out.shape[i]) for i in range(max(cut, 0))):
        return None
    args = (call.args[0], E.ShapeExpr(tuple(P.IntImm(a) for a in axes)), E.ShapeExpr(at["begin"]),
            E.ShapeExpr(at["end"]), E.ShapeExpr(tuple(P.IntImm(s) for s in at["strides"])))  # fmt: skip
    return E.Call(_PURE_SLICE_VIEW, args, sinfo_args=(out,), struct_info=out, span=call.span)


register_op("take", _infer_take, num_inputs=2, attr_names=("axis", "mode"))
register_op(
    "strided_slice",
    _infer_strided_slice,
    num_inputs=1,
    attr_names=("axes", "begin", "end", "strides", "assume_inbound"),
    lower_to_view=_slice_to_view,
)
