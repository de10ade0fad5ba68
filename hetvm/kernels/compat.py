"""Kernels of :mod:`hetvm.op.compat` and :mod:`hetvm.op.nn.compat_nn`, one
implementation for NumPy and CuPy through ``xp``. ``nn.conv1d`` is the 2-D
convolution kernel on views with a height of 1; the norms compute in float64
where the data is narrower and store in the output's dtype."""

from __future__ import annotations

from typing import Any

from . import codegen_cuda_norm
from .common import store
from .conv import Geometry, convolve
from .registry import register_kernel


@register_kernel("tile")
def tile(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, xp.tile(x, tuple(int(r) for r in attrs["repeats"])))


@register_kernel("flip")
def flip(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    store(out, xp.flip(x, axis=int(attrs["axis"])))


@register_kernel("repeat")
def repeat(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    axis = attrs.get("axis")
    store(out, xp.repeat(x, int(attrs["repeats"]), axis=None if axis is None else int(axis)))


@register_kernel("scatter_elements")
def scatter_elements(xp: Any, attrs: dict, data: Any, indices: Any, updates: Any, out: Any) -> None:
    axis = int(attrs.get("axis", 0)) % max(data.ndim, 1)
    size = data.shape[axis]
    idx = indices.astype("int64")
    if idx.size and (int(idx.min()) < -size or int(idx.max()) >= size):
        raise ValueError(f"scatter_elements: an index is outside [-{size}, {size}) on axis {axis}")
    idx = xp.where(idx < 0, idx + size, idx)
    store(out, data)
    # the full index of every update: its own position, with the axis replaced by the index
    grid = list(xp.indices(idx.shape, sparse=True))
    grid[axis] = idx
    where = tuple(xp.broadcast_to(g, idx.shape) for g in grid)
    reduction = attrs.get("reduction", "update")
    if reduction == "update":
        out[where] = updates
    elif reduction == "add":
        xp.add.at(out, where, updates)
    elif reduction == "mul":
        xp.multiply.at(out, where, updates)
    elif reduction == "max":
        xp.maximum.at(out, where, updates)
    elif reduction == "min":
        xp.minimum.at(out, where, updates)
    elif reduction == "mean":
        total = data.astype("float64")
        count = xp.ones(data.shape, dtype="float64")
        xp.add.at(total, where, updates.astype("float64"))
        xp.add.at(count, where, 1.0)
        store(out, (total / count).astype(out.dtype))
    else:
        raise ValueError(f"scatter_elements: unknown reduction {reduction!r}")


def _moment(xp: Any, attrs: dict, x: Any, out: Any, root: bool) -> None:
    axis = attrs.get("axis")
    axis = None if axis is None else tuple(int(a) for a in axis)
    var = xp.var(x.astype("float64"), axis=axis, keepdims=bool(attrs.get("keepdims")))
    store(out, xp.sqrt(var) if root else var)


@register_kernel("variance")
def variance(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _moment(xp, attrs, x, out, root=False)


@register_kernel("std")
def std(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    _moment(xp, attrs, x, out, root=True)


@register_kernel("nn.conv1d")
def conv1d(xp: Any, attrs: dict, data: Any, weight: Any, out: Any) -> None:
    """NCW data, OIW weights (other layouts: kernels/layouts.py transposes)."""
    (pl, pr), (s,), (d,) = attrs["padding"], attrs["strides"], attrs["dilation"]
    geo = Geometry((1, int(s)), (1, int(d)), (0, int(pl), 0, int(pr)), int(attrs.get("groups", 1)))
    n, c, w = data.shape
    o, i, k = weight.shape
    dst = out.reshape(out.shape[0], out.shape[1], 1, out.shape[2])
    convolve(xp, geo, data.reshape(n, c, 1, w), weight.reshape(o, i, 1, k), dst)


@register_kernel("nn.rms_norm", specialize=codegen_cuda_norm.specializer("nn.rms_norm"))
def rms_norm(xp: Any, attrs: dict, x: Any, weight: Any, out: Any) -> None:
    axes = tuple(int(a) % x.ndim for a in attrs["axes"])
    wide = x.astype("float64")
    ms = xp.mean(wide * wide, axis=axes, keepdims=True)
    shape = [x.shape[a] if a in axes else 1 for a in range(x.ndim)]
    store(out, wide / xp.sqrt(ms + float(attrs["epsilon"])) * weight.astype("float64").reshape(shape))


@register_kernel("nn.group_norm")
def group_norm(xp: Any, attrs: dict, x: Any, gamma: Any, beta: Any, out: Any) -> None:
    g = int(attrs["num_groups"])
    ch = int(attrs["channel_axis"]) % x.ndim
    axes = tuple(int(a) % x.ndim for a in attrs["axes"])
    c = x.shape[ch]
    # split the channel axis into (groups, channels per group); reduce over the
    # per-group channels and the given axes
    split = list(x.shape[:ch]) + [g, c // g] + list(x.shape[ch + 1:])
    wide = x.astype("float64").reshape(split)
    red = [ch + 1] + [a + 1 if a > ch else a for a in axes]
    mean = xp.mean(wide, axis=tuple(red), keepdims=True)
    var = xp.var(wide, axis=tuple(red), keepdims=True)
    y = ((wide - mean) / xp.sqrt(var + float(attrs["epsilon"]))).reshape(x.shape)
    shape = [c if a == ch else 1 for a in range(x.ndim)]
    if attrs.get("scale", True):
        y = y * gamma.astype("float64").reshape(shape)
    if attrs.get("center", True):
        y = y + beta.astype("float64").reshape(shape)
    store(out, y)
