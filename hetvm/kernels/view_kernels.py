"""View kernels: where a view builtin's result lies in its source's bytes.

Why a table: a view builtin (declared ``VIEW`` in :mod:`hetvm.op.effects`)
makes no copy -- its result is one C-contiguous run of its source's bytes,
read in a new shape. The VM, the graph executor's code generator and the
reference interpreter each need only *where* that run is, so a view's kernel
is one function, ``place(shape, itemsize, *args) -> (byte offset, dims)``,
called with the source's shape and item size and the builtin's arguments
after the source; every consumer asks :func:`place_view` and none has code of
its own for any one view. Adding a view builtin is its declaration
(``effects.BUILTIN_EFFECTS``), its kernel here and its tests.

``arg_kinds`` say how the VM compiles immediate arguments (``"shape"``: a
list of dims, ``"prim"``: one value, either possibly symbolic); the VM
specialises an instruction whose arguments are all plain ints once at load
time (``runtime.builtins.static_view``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import HetvmRuntimeError

__all__ = ["ViewKernel", "register_view", "view_kernel", "view_symbols", "place_view"]

Place = Callable[..., tuple[int, tuple[int, ...]]]


@dataclass(frozen=True)
class ViewKernel:
    """``symbol``'s placement and the kinds of its arguments after the source."""

    symbol: str
    place: Place
    arg_kinds: tuple[str | None, ...] = ()


_VIEWS: dict[str, ViewKernel] = {}


def register_view(symbol: str, arg_kinds: Sequence[str | None] = ()) -> Callable[[Place], Place]:
    """Decorator registering ``place`` as the kernel of view builtin ``symbol``."""

    def do(place: Place) -> Place:
        _VIEWS[symbol] = ViewKernel(symbol, place, tuple(arg_kinds))
        return place

    return do


def view_kernel(symbol: str) -> ViewKernel | None:
    """The kernel of view builtin ``symbol`` (None: not a view builtin)."""
    return _VIEWS.get(symbol)


def view_symbols() -> tuple[str, ...]:
    return tuple(_VIEWS)


def place_view(symbol: str, shape: Sequence[int], itemsize: int, args: Sequence[Any]) -> tuple[int, tuple[int, ...]]:
    """(byte offset, dims) of ``symbol``'s result in a C-contiguous source of
    ``shape``; HetvmRuntimeError, naming the builtin, when it does not fit."""
    kernel = _VIEWS.get(symbol)
    if kernel is None:
        raise HetvmRuntimeError(f"'{symbol}' is not a view builtin")
    shape = tuple(int(d) for d in shape)
    offset, dims = kernel.place(shape, itemsize, *args)
    offset, dims = int(offset), tuple(int(d) for d in dims)
    size = math.prod(dims) * itemsize
    nbytes = math.prod(shape) * itemsize
    short = symbol.rsplit(".", 1)[-1]
    if min(dims, default=0) < 0:
        raise HetvmRuntimeError(f"{short}: negative dimension in shape {dims}")
    if offset < 0 or offset + size > nbytes:
        raise HetvmRuntimeError(
            f"{short}: {dims} at byte {offset} ({size} bytes) does not fit in a tensor {shape} "
            f"of {nbytes} bytes"
        )
    return offset, dims


@register_view("vm.builtin.reshape", ("shape",))
def _reshape(shape: tuple[int, ...], itemsize: int, new_shape: Sequence[Any]) -> tuple[int, tuple[int, ...]]:
    """All of the source in ``new_shape`` (one dim may be -1)."""
    dims = [int(d) for d in new_shape]
    count = math.prod(shape)
    if dims.count(-1) == 1:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = count // max(known, 1)
    if math.prod(dims) != count:
        raise HetvmRuntimeError(f"cannot reshape a tensor of shape {shape} to {tuple(dims)}")
    return 0, tuple(dims)


@register_view("vm.builtin.view_at", ("prim", "shape"))
def _view_at(
    shape: tuple[int, ...], itemsize: int, offset: Any, new_shape: Sequence[Any]
) -> tuple[int, tuple[int, ...]]:
    """``new_shape`` from byte ``offset`` on (ConcatInPlace's views of a concatenation)."""
    return int(offset), tuple(int(d) for d in new_shape)


@register_view("vm.builtin.slice_view", ("shape", "shape", "shape", "shape"))
def _slice_view(
    shape: tuple[int, ...], itemsize: int, axes: Sequence[Any], begin: Sequence[Any], end: Sequence[Any],
    strides: Sequence[Any],
) -> tuple[int, tuple[int, ...]]:
    """``strided_slice`` (NumPy slicing on ``axes``) when the slice is one contiguous
    run: every axis before the one cut to a range has one element left, every
    axis after it is whole."""
    ndim = len(shape)
    start, dims, step = [0] * ndim, list(shape), [1] * ndim
    for ax, b, e, s in zip(axes, begin, end, strides):
        ax = int(ax) + ndim if int(ax) < 0 else int(ax)
        picked = range(shape[ax])[int(b) : int(e) : int(s)]
        start[ax] = picked.start if len(picked) else 0
        dims[ax], step[ax] = len(picked), int(s)
    if 0 in dims:
        return 0, tuple(dims)
    cut = max((i for i in range(ndim) if dims[i] != shape[i] or (step[i] != 1 and dims[i] > 1)), default=-1)
    if (cut >= 0 and step[cut] != 1 and dims[cut] > 1) or any(dims[i] != 1 for i in range(max(cut, 0))):
        raise HetvmRuntimeError(f"slice_view: the slice {tuple(dims)} of {shape} is not one contiguous run")
    elems, offset = 1, 0
    for i in reversed(range(ndim)):
        offset += start[i] * elems
        elems *= shape[i]
    return offset * itemsize, tuple(dims)
