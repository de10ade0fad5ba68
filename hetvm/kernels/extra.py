"""Kernels of the ops in :mod:`hetvm.op.extra`: one implementation for NumPy and
CuPy through ``xp`` (the ufuncs and ``take_along_axis``/``einsum`` both provide)."""

from __future__ import annotations

from typing import Any

from .common import same_shape, store
from .registry import register_kernel

# op -> xp function name
_UNARY = {
    "tan": "tan", "asin": "arcsin", "acos": "arccos", "atan": "arctan",
    "sinh": "sinh", "cosh": "cosh", "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh",
    "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite", "bitwise_not": "invert",
}  # fmt: skip

_BINARY = {
    "mod": "fmod",  # truncated: the dividend's sign
    "floor_mod": "remainder",  # floored: the divisor's sign
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "left_shift": "left_shift", "right_shift": "right_shift",
}  # fmt: skip


def _make_unary(op: str, fn_name: str) -> None:
    def kernel(xp: Any, attrs: dict, x: Any, out: Any) -> None:
        same_shape(x, out)
        fn = getattr(xp, fn_name)
        if x.dtype == out.dtype or op in ("isnan", "isinf", "isfinite"):
            fn(x, out=out)
        else:
            store(out, fn(x).astype(out.dtype))

    kernel.__name__ = f"kernel_{op}"
    register_kernel(op)(kernel)


def _make_binary(op: str, fn_name: str) -> None:
    def kernel(xp: Any, attrs: dict, a: Any, b: Any, out: Any) -> None:
        fn = getattr(xp, fn_name)
        if out.dtype.kind in "iu" and op in ("mod", "floor_mod"):
            # x mod 0 is 0 (NumPy's integer result, without its warning)
            safe = xp.where(b == 0, 1, b).astype(out.dtype)
            store(out, xp.where(b == 0, 0, fn(a, safe)).astype(out.dtype))
            return
        fn(a, b, out=out)

    kernel.__name__ = f"kernel_{op}"
    register_kernel(op)(kernel)


for _op, _fn in _UNARY.items():
    _make_unary(_op, _fn)
for _op, _fn in _BINARY.items():
    _make_binary(_op, _fn)


def _scan(xp: Any, attrs: dict, x: Any, out: Any, name: str) -> None:
    axis = attrs.get("axis")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = int(axis) % max(x.ndim, 1)
    res = getattr(xp, name)(x, axis=axis, dtype=out.dtype)
    if not attrs.get("exclusive"):
        store(out, res)
        return
    # exclusive: each element left out of its own result (identity first)
    lead = [slice(None)] * x.ndim
    rest = list(lead)
    lead[axis] = slice(0, 1)
    rest[axis] = slice(1, None)
    head = [slice(None)] * x.ndim
    head[axis] = slice(0, -1)
    out[tuple(lead)] = 0 if name == "cumsum" else 1
    out[tuple(rest)] = res[tuple(head)]


@register_kernel("cumsum")
def cumsum(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _scan(xp, attrs, x, out, "cumsum")


@register_kernel("cumprod")
def cumprod(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _scan(xp, attrs, x, out, "cumprod")


def take_elements(xp: Any, data: Any, indices: Any, axis: int) -> Any:
    """ONNX GatherElements: ``out[..., i, ...] = data[..., indices[..., i, ...], ...]``
    along ``axis``, negative indices counted from the end.

    Why not ``take_along_axis`` alone: ONNX lets ``indices`` be shorter than
    ``data`` on the other axes (the output is the indices' shape), where NumPy
    needs them equal or broadcastable, so ``data`` is cut to them first; longer
    is an error, not a broadcast."""
    axis %= data.ndim
    if indices.ndim != data.ndim:
        raise ValueError(f"indices of rank {indices.ndim} for data of rank {data.ndim}")
    for d, (n, m) in enumerate(zip(indices.shape, data.shape)):
        if d != axis and n > m:
            raise ValueError(f"indices shape {tuple(indices.shape)} exceeds data shape {tuple(data.shape)} on axis {d}")
    idx = indices.astype(xp.int64, copy=False)
    n = data.shape[axis]
    idx = xp.where(idx < 0, idx + n, idx)
    # checked here: take_along_axis would read an index in [-2n, -n) from the end again
    if idx.size and bool(((idx < 0) | (idx >= n)).any()):
        raise ValueError(f"an index of gather_elements is out of range for axis {axis} of {n} elements")
    cut = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx.shape))
    return xp.take_along_axis(data[cut], idx, axis=axis)


@register_kernel("gather_elements")
def gather_elements(xp: Any, attrs: dict, data: Any, indices: Any, out: Any) -> None:
    store(out, take_elements(xp, data, indices, int(attrs.get("axis", 0))))


@register_kernel("einsum")
def einsum(xp: Any, attrs: dict, operands: Any, out: Any) -> None:
    res = xp.einsum(attrs["subscripts"], *operands)
    store(out, xp.asarray(res).astype(out.dtype, copy=False))
