"""Kernels of :mod:`hetvm.op.index_nd`, :mod:`hetvm.op.dynamic` and ``det``: one
implementation for NumPy and CuPy through ``xp``.

Indices are checked before use: an index outside ``[-dim, dim)`` is an error
naming the op, the index and the dim, never a wrapped-around or clipped read.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import HetvmRuntimeError
from .common import same_buffer, store
from .registry import register_kernel


def _fail(op: str, message: str) -> HetvmRuntimeError:
    return HetvmRuntimeError(f"op '{op}': {message}")


def _resolve(xp: Any, op: str, idx: Any, dims: tuple[int, ...]) -> Any:
    """``idx[..., j]`` counted from the end where negative, checked against ``dims[j]``."""
    idx = idx.astype(xp.int64, copy=True)
    if idx.size == 0 or not dims:
        return idx
    # every column at once (a transformer's position gather: one call a model call)
    d = xp.asarray(dims, dtype=xp.int64)
    bad = (idx < -d) | (idx >= d)
    if bool(bad.any()):
        j = int(xp.argmax(bad.reshape(-1, len(dims)).any(axis=0)))  # the first column that is off
        first = int(idx[..., j][bad[..., j]].reshape(-1)[0])
        raise _fail(op, f"index {first} is out of range for a dim of size {dims[j]} (position {j} of an index tuple)")
    idx += (idx < 0) * d
    return idx


def _flat_offsets(xp: Any, idx: Any, dims: tuple[int, ...]) -> Any:
    """Row-major offsets into ``dims`` of the (checked) index tuples of ``idx``."""
    off = xp.zeros(idx.shape[:-1], dtype=xp.int64)
    for j, d in enumerate(dims):
        off = off * d + idx[..., j]
    return off


@register_kernel("gather_nd")
def gather_nd(xp: Any, attrs: dict, data: Any, indices: Any, out: Any) -> None:
    b = int(attrs.get("batch_dims", 0))
    m = indices.shape[-1]
    batch = data.shape[:b]
    nb = math.prod(batch)
    addressed = tuple(data.shape[b : b + m])
    rest = data.shape[b + m :]
    k = math.prod(indices.shape[b:-1])
    idx = _resolve(xp, "gather_nd", indices.reshape(nb, k, m), addressed)
    flat = data.reshape(nb, math.prod(addressed), *rest)
    rows = xp.arange(nb, dtype=xp.int64).reshape(nb, 1)
    res = flat[rows, _flat_offsets(xp, idx, addressed)]
    store(out, res.reshape(out.shape))


_UFUNCS = {"add": "add", "mul": "multiply", "min": "minimum", "max": "maximum"}


@register_kernel("scatter_nd")
def scatter_nd(xp: Any, attrs: dict, data: Any, indices: Any, updates: Any, out: Any) -> None:
    reduction = attrs.get("reduction", "update")
    m = indices.shape[-1]
    addressed = tuple(data.shape[:m])
    rest = data.shape[m:]
    k = math.prod(indices.shape[:-1])
    idx = _resolve(xp, "scatter_nd", indices.reshape(k, m), addressed)
    offsets = _flat_offsets(xp, idx, addressed)
    # writing over data itself (LoopCarriedInPlace: a loop's preallocated scan
    # output): only the updated rows are touched
    in_place = same_buffer(data, out) and out.flags.c_contiguous
    res = (out if in_place else xp.array(data, copy=True)).reshape(math.prod(addressed), *rest)
    upd = updates.reshape(k, *rest).astype(res.dtype, copy=False)
    if reduction == "update":
        res[offsets] = upd  # duplicates: undefined in ONNX, the last one wins here
    else:
        ufunc = getattr(xp, _UFUNCS[reduction])
        if hasattr(ufunc, "at"):
            ufunc.at(res, offsets, upd)
        else:  # an array module without ufunc.at: combine on the host
            host = np.asarray(res.get() if hasattr(res, "get") else res)
            getattr(np, _UFUNCS[reduction]).at(host, np.asarray(offsets.get()), np.asarray(upd.get()))
            res = xp.asarray(host)
            in_place = False  # the combined rows are a new array
    if not in_place:
        store(out, res.reshape(out.shape))


@register_kernel("one_hot")
def one_hot(xp: Any, attrs: dict, indices: Any, on_value: Any, off_value: Any, out: Any) -> None:
    depth = int(attrs["depth"])
    axis = int(attrs.get("axis", -1)) % out.ndim
    idx = indices.astype(xp.int64, copy=True)
    idx[idx < 0] += depth  # outside [-depth, depth): matches no position
    hot = idx[..., None] == xp.arange(depth, dtype=xp.int64)
    res = xp.where(hot, on_value, off_value).astype(out.dtype, copy=False)
    store(out, xp.moveaxis(res, -1, axis))


@register_kernel("tril")
def tril(xp: Any, attrs: dict, x: Any, k: Any, out: Any) -> None:
    store(out, xp.tril(x, int(k)))


@register_kernel("triu")
def triu(xp: Any, attrs: dict, x: Any, k: Any, out: Any) -> None:
    store(out, xp.triu(x, int(k)))


@register_kernel("arange")
def arange(xp: Any, attrs: dict, start: Any, end: Any, step: Any, out: Any) -> None:
    n = out.shape[0]
    if all(isinstance(v, (int, np.integer)) for v in (start, end, step)):
        store(out, (int(start) + int(step) * xp.arange(n, dtype=xp.int64)).astype(out.dtype))
    else:
        store(out, (float(start) + float(step) * xp.arange(n, dtype=xp.float64)).astype(out.dtype))


def _scalar(xp: Any, x: Any) -> Any:
    value = x.reshape(-1)[0]
    return value.item() if hasattr(value, "item") else value


@register_kernel("range_length")
def range_length(xp: Any, attrs: dict, start: Any, limit: Any, delta: Any, out: Any) -> None:
    a, b, d = (_scalar(xp, v) for v in (start, limit, delta))
    if d == 0:
        raise _fail("range_length", f"delta of a Range is 0 (start {a}, limit {b}): the range never ends")
    if all(isinstance(v, int) for v in (a, b, d)):
        n = -((a - b) // d)
    else:
        n = math.ceil((b - a) / d)
    out[...] = max(int(n), 0)


@register_kernel("nonzero")
def nonzero(xp: Any, attrs: dict, x: Any, *rest: Any) -> None:
    out = rest[-1]
    found = xp.nonzero(x.reshape(1) if x.ndim == 0 else x)
    count = int(found[0].shape[0]) if found else 0
    if count != out.shape[1]:
        raise _fail("nonzero", f"the input has {count} nonzero elements, the result was sized for {out.shape[1]}")
    if out.size:
        store(out, xp.stack(found).astype(out.dtype, copy=False))


@register_kernel("topk")
def topk(xp: Any, attrs: dict, data: Any, *outs: Any) -> None:
    k = int(attrs["k"])
    axis = int(attrs.get("axis", -1)) % data.ndim
    n = data.shape[axis]
    if attrs.get("largest", True):
        # descending, equal values lowest index first: a stable ascending sort of
        # the reversed axis, read backwards
        order = xp.flip(xp.argsort(xp.flip(data, axis), axis=axis, kind="stable"), axis)
        order = (n - 1) - order
    else:
        order = xp.argsort(data, axis=axis, kind="stable")
    picked = xp.take(order, xp.arange(k), axis=axis)
    ret = attrs.get("ret_type", "both")
    if ret in ("both", "values"):
        store(outs[0], xp.take_along_axis(data, picked, axis=axis))
    if ret in ("both", "indices"):
        store(outs[-1], picked.astype(outs[-1].dtype))


@register_kernel("det")
def det(xp: Any, attrs: dict, data: Any, out: Any) -> None:
    store(out, xp.linalg.det(data).astype(out.dtype, copy=False))


def _host(x: Any) -> np.ndarray:
    return np.asarray(x.get() if hasattr(x, "get") else x)


def _unique_host(x: Any, axis: Any, keep_sorted: bool) -> tuple[np.ndarray, ...]:
    """np.unique's four results (first index, inverse, counts), reordered by first
    occurrence when not sorted."""
    data = _host(x)
    ax = None if axis is None else int(axis) % data.ndim
    y, first, inverse, counts = np.unique(data, return_index=True, return_inverse=True, return_counts=True, axis=ax)
    inverse = inverse.reshape(-1)
    if not keep_sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if ax is None else ax)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return y, first, inverse, counts


@register_kernel("unique_count")
def unique_count(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    axis = attrs.get("axis")
    data = _host(x)
    if axis is None:
        n = np.unique(data.reshape(-1)).shape[0]
    else:
        ax = int(axis) % data.ndim
        n = np.unique(data, axis=ax).shape[ax]
    out[...] = n


@register_kernel("unique")
def unique(xp: Any, attrs: dict, x: Any, *rest: Any) -> None:
    outs = rest[-4:]
    results = _unique_host(x, attrs.get("axis"), bool(attrs.get("sorted", True)))
    if results[1].shape[0] != outs[1].shape[0]:
        raise _fail("unique", f"the input has {results[1].shape[0]} distinct values, the results were sized for {outs[1].shape[0]}")
    for out, value in zip(outs, results):
        store(out, xp.asarray(value).astype(out.dtype, copy=False))
