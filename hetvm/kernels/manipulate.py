"""Shape manipulation, indexing, creation, dtype and selection kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.product_pool import matmul_into
from .common import as_ints, axes_or_none, store
from .registry import register_kernel


@register_kernel("reshape")
def reshape(xp: Any, attrs: dict, x: Any, shape: Any, out: Any) -> None:
    store(out, x.reshape(out.shape))


@register_kernel("expand_dims")
def expand_dims(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, x.reshape(out.shape))


@register_kernel("squeeze")
def squeeze(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, x.reshape(out.shape))


@register_kernel("flatten")
def flatten(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, x.reshape(out.shape))


@register_kernel("permute_dims")
def permute_dims(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    axes = attrs.get("axes")
    store(out, xp.transpose(x, None if axes is None else as_ints(axes)))


@register_kernel("broadcast_to")
def broadcast_to(xp: Any, attrs: dict, x: Any, shape: Any, out: Any) -> None:
    store(out, xp.broadcast_to(x, out.shape))


@register_kernel("concat")
def concat(xp: Any, attrs: dict, tensors: Any, out: Any) -> None:
    axis = attrs.get("axis", 0)
    if axis is None:
        store(out, xp.concatenate([t.reshape(-1) for t in tensors]))
    else:
        store(out, xp.concatenate(list(tensors), axis=int(axis)))


@register_kernel("split")
def split(xp: Any, attrs: dict, x: Any, *outs: Any) -> None:
    """Pieces as the op infers them (``hetvm.op.manipulate.split_sizes``): n
    sections are cut at multiples of ceil(dim / n), so the last piece is the
    smaller one (TVM's and ONNX's rule; ``numpy.split`` would refuse an uneven
    split, and ``array_split`` makes the *first* pieces larger); indices cut at
    [0:i0], [i0:i1], ... [ik:], clamped to the axis."""
    axis = int(attrs.get("axis", 0)) % x.ndim
    dim = x.shape[axis]
    ios = attrs.get("indices_or_sections", len(outs))
    if isinstance(ios, (list, tuple)):
        cuts = [0, *as_ints(ios), dim]
    else:
        n = int(ios)
        chunk = -(-dim // n)
        cuts = [k * chunk for k in range(n)] + [dim]
    if len(cuts) - 1 != len(outs):
        raise ValueError(f"split into {len(cuts) - 1} pieces, but {len(outs)} output buffers")
    index = [slice(None)] * x.ndim
    for lo, hi, out in zip(cuts, cuts[1:], outs):
        lo = min(lo, dim)
        index[axis] = slice(lo, max(lo, min(hi, dim)))
        store(out, x[tuple(index)])


@register_kernel("take")
def take(xp: Any, attrs: dict, x: Any, indices: Any, out: Any) -> None:
    axis = attrs.get("axis")
    mode = {"wrap": "wrap", "clip": "clip"}.get(attrs.get("mode", "fast"), "raise")
    src = x.reshape(-1) if axis is None else x
    store(out, xp.take(src, indices, axis=None if axis is None else int(axis), mode=mode))


@register_kernel("strided_slice")
def strided_slice(xp: Any, attrs: dict, x: Any, *rest: Any) -> None:
    """Slices on ``axes`` with Python/NumPy clamping (attrs axes, begin, end, strides)."""
    out = rest[-1]
    axes = as_ints(attrs["axes"])
    strides = as_ints(attrs.get("strides") or (1,) * len(axes))
    index = [slice(None)] * x.ndim
    for a, b, e, s in zip(axes, attrs["begin"], attrs["end"], strides):
        if isinstance(b, (int, np.integer)) and isinstance(e, (int, np.integer)):
            index[a] = slice(b, e, s)
        else:
            index[a] = _window(x.shape[a], b, e, s, out.shape[a])
    store(out, x[tuple(index)])


def _window(dim: int, begin: Any, end: Any, stride: int, length: int) -> slice:
    """The slice of one axis whose begin or end is symbolic (serialized, so not
    known here): its element count is the output buffer's extent, which the VM
    computed from the bound shape variables, and the constant bound fixes where
    it lies (an ONNX Slice ending at Shape(y)[1] gives such an end)."""
    if length == 0:
        return slice(0, 0)
    if isinstance(begin, (int, np.integer)):
        first = range(dim)[slice(begin, None, stride)]
        start = first.start if len(first) else (0 if stride > 0 else dim - 1)
    elif isinstance(end, (int, np.integer)) and abs(stride) == 1:
        stop = range(dim)[slice(None, end, stride)]
        last = stop.stop  # exclusive bound, clamped like NumPy
        start = last - length * stride
    else:
        raise ValueError("strided_slice: a symbolic begin needs a constant end and a stride of 1 or -1")
    stop_at = start + length * stride
    return slice(start, None if stop_at < 0 else stop_at, stride)


@register_kernel("astype")
def astype(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, x.astype(out.dtype))


@register_kernel("where")
def where(xp: Any, attrs: dict, cond: Any, a: Any, b: Any, out: Any) -> None:
    store(out, xp.where(cond, a, b).astype(out.dtype, copy=False))


@register_kernel("zeros")
def zeros(xp: Any, attrs: dict, shape: Any, out: Any) -> None:
    out[...] = 0


@register_kernel("ones")
def ones(xp: Any, attrs: dict, shape: Any, out: Any) -> None:
    out[...] = 1


@register_kernel("full")
def full(xp: Any, attrs: dict, shape: Any, fill_value: Any, out: Any) -> None:
    out[...] = fill_value


@register_kernel("zeros_like")
def zeros_like(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    out[...] = 0


@register_kernel("ones_like")
def ones_like(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    out[...] = 1


@register_kernel("full_like")
def full_like(xp: Any, attrs: dict, x: Any, fill_value: Any, out: Any) -> None:
    out[...] = fill_value


@register_kernel("matmul")
def matmul(xp: Any, attrs: dict, a: Any, b: Any, out: Any) -> None:
    """Written with ``out=`` when the output has the product's dtype. A stack of
    matrices times one matrix, (..., M, K) @ (K, N), is one (prod(...)*M, K)
    product: NumPy would otherwise call BLAS once per matrix of the stack."""
    dtype = xp.result_type(a.dtype, b.dtype)
    if out.dtype != dtype or not out.flags.c_contiguous:
        res = xp.matmul(a, b)
        store(out, res.astype(out.dtype, copy=False) if hasattr(res, "astype") else res)
        return
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous and out.shape == a.shape[:-1] + b.shape[-1:]:
        matmul_into(xp, a.reshape(-1, a.shape[-1]), b, out.reshape(-1, out.shape[-1]))
        return
    matmul_into(xp, a, b, out)


def _empty_identity(fn_name: str, dtype: Any) -> Any:
    """What max/min of no elements is (ONNX's ReduceMax/ReduceMin of an empty set):
    the identity of the reduction, -inf/+inf or the integer type's extremes."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return fn_name == "min"
    if dt.kind == "f":
        return -np.inf if fn_name == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if fn_name == "max" else info.max


def _reduction(op: str, fn_name: str) -> None:
    def kernel(xp: Any, attrs: dict, x: Any, out: Any) -> None:
        axis = axes_or_none(attrs.get("axis"))
        keep = bool(attrs.get("keepdims", False))
        if x.size == 0 and fn_name in ("max", "min"):
            out[...] = _empty_identity(fn_name, out.dtype)  # NumPy refuses a zero-size max
            return
        res = getattr(xp, fn_name)(x, axis=axis, keepdims=keep)
        store(out, xp.asarray(res).astype(out.dtype, copy=False))

    kernel.__name__ = f"kernel_{op}"
    register_kernel(op)(kernel)


for _op, _fn in (("sum", "sum"), ("mean", "mean"), ("max", "max"), ("min", "min"),
                 ("prod", "prod")):  # fmt: skip
    _reduction(_op, _fn)


def _arg_reduction(op: str, fn_name: str) -> None:
    def kernel(xp: Any, attrs: dict, x: Any, out: Any) -> None:
        axis = attrs.get("axis")
        keep = bool(attrs.get("keepdims", False))
        if axis is None:
            res = getattr(xp, fn_name)(x.reshape(-1))
            res = xp.asarray(res).reshape((1,) * x.ndim if keep else ())
        else:
            res = getattr(xp, fn_name)(x, axis=int(axis), keepdims=keep)
        store(out, xp.asarray(res).astype(out.dtype, copy=False))

    kernel.__name__ = f"kernel_{op}"
    register_kernel(op)(kernel)


_arg_reduction("argmax", "argmax")
_arg_reduction("argmin", "argmin")


@register_kernel("shape_to_tensor", kinds=("cpu",))
def shape_to_tensor(xp: Any, attrs: dict, shape: Any, out: Any) -> None:
    """A shape (a tuple of ints the VM evaluated) as a 1-D int64 host tensor."""
    store(out, xp.asarray(tuple(int(d) for d in shape), dtype=out.dtype))
