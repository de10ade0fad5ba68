"""Carving a storage's direct views: once per pooled block, or once per shape.

Why: a planned tensor read only by kernels needs no NDArray, no count and no
kill (see :mod:`.direct_views`); its backend array is a slice of its storage's
block. With a static plan the slices are the same on every call, so they are
made once and kept with the pooled block. With symbolic shapes the planner's
offsets and shapes are expressions over the function's shape variables (a
BERT's ``batch`` and ``seq``): evaluating them tensor by tensor on every call,
and making an NDArray of each, was most of a small model's call. Here they are
evaluated once per block and *shape environment*: the carver reads the
variables it depends on, and a block that comes back with views carved for the
same values hands them out again; other values carve anew (the last set is
kept, so a model called with alternating shapes re-carves, and stays correct).

A recipe places one tensor: at an offset with a shape (``Place.source`` None),
or as a view builtin of an earlier recipe's tensor (``reshape``, ``view_at``,
...) whose placement :func:`~hetvm.kernels.view_kernels.place_view` computes
from its source's shape. Placements at the same bytes with the same shape and
dtype are one array: an in-place output is its input's own object, so NumPy's
ufunc sees ``out`` is its input instead of checking two views for overlap.
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import HetvmRuntimeError
from ..kernels.view_kernels import place_view, view_kernel
from .shapes import eval_prim

__all__ = ["Place", "make_carver", "prim_vars"]

_keys = itertools.count()


@dataclass(frozen=True)
class Place:
    """Where one direct tensor lies in its storage.

    ``source`` None: at byte ``offset`` with ``dims`` (ints or serialised
    PrimExprs). Otherwise the view builtin ``symbol`` of the tensor of recipe
    number ``source`` (an earlier one of the same storage) with ``args`` (the
    builtin's arguments after the source, possibly symbolic). ``where`` names
    the instruction, for errors."""

    offset: Any
    dims: tuple
    dtype: Any
    where: str
    source: int | None = None
    symbol: str = ""
    args: tuple = ()


def prim_vars(e: Any, out: set[str]) -> set[str]:
    """Adds the variables of a serialised PrimExpr (or a list of them) to ``out``."""
    if isinstance(e, (list, tuple)):
        if len(e) == 2 and e[0] == "var" and isinstance(e[1], str):
            out.add(e[1])
        else:
            for x in e:
                prim_vars(x, out)
    return out


def _eval_args(symbol: str, args: tuple, env: Any) -> list:
    kinds = view_kernel(symbol).arg_kinds  # type: ignore[union-attr]  # checked by the planner
    out = []
    for i, a in enumerate(args):
        kind = kinds[i] if i < len(kinds) else None
        if kind == "shape":
            out.append(tuple(eval_prim(d, env) for d in a))
        elif kind == "prim":
            out.append(eval_prim(a, env))
        else:
            out.append(a)
    return out


def _placements(recipes: list[Place], env: Any, nbytes: int) -> list[tuple[int, tuple[int, ...]]]:
    """(byte offset, dims) of each recipe under ``env`` in a block of ``nbytes``,
    checked as ``alloc_tensor`` and the view builtins check them."""
    out: list[tuple[int, tuple[int, ...]]] = []
    for p in recipes:
        if p.source is None:
            offset = int(eval_prim(p.offset, env))
            dims = tuple(int(eval_prim(d, env)) for d in p.dims)
            if min(dims, default=0) < 0:
                raise HetvmRuntimeError(f"{p.where}: negative dimension in shape {dims}")
        else:
            base, src_dims = out[p.source]
            try:
                rel, dims = place_view(p.symbol, src_dims, p.dtype.itemsize, _eval_args(p.symbol, p.args, env))
            except HetvmRuntimeError as exc:
                raise HetvmRuntimeError(f"{p.where}: {exc}") from None
            offset = base + rel
        size = math.prod(dims) * p.dtype.itemsize
        if offset < 0 or offset + size > nbytes:
            raise HetvmRuntimeError(
                f"{p.where}: tensor {dims} {p.dtype} at offset {offset} ({size} bytes) does not fit "
                f"in a storage of {nbytes} bytes"
            )
        out.append((offset, dims))
    return out


#: placements a carver keeps (for that many sets of shape values; then it starts over)
_PLACED_MAX = 16


def make_carver(recipes: list[Place], variables: tuple[str, ...], where: str) -> Callable[..., tuple]:
    """``carve(storage, env)``: the backend arrays of ``recipes`` over the
    storage's block under the shape environment ``env`` (which only
    ``variables`` are read from), kept with a pooled block for the next call
    with the same values of ``variables``."""
    key = ("direct", next(_keys))
    read: Callable[[Any], Any] = operator.itemgetter(*variables) if variables else (lambda env: ())
    placed: dict[tuple, list] = {}  # (values, block bytes) -> placements

    def carve(storage: Any, env: Any = None) -> tuple:
        block = storage.allocation
        views = block.views
        values = read(env) if variables else ()
        if views is not None:
            got = views.get(key)
            if got is not None and got[0] == values:
                return got[1]
        if block.freed:
            raise HetvmRuntimeError(f"{where}: direct views of a released storage")
        # the placements depend on the values and the block's size only: a block the
        # pool hands out after another storage used it has no views for this key, but
        # its placements need no symbolic evaluation again
        at_key = (values, block.nbytes)
        places = placed.get(at_key)
        if places is None:
            places = _placements(recipes, env, block.nbytes)
            if len(placed) >= _PLACED_MAX:
                placed.clear()
            placed[at_key] = places
        buf = block.buffer
        arrays: dict[tuple, Any] = {}
        out = []
        for (offset, dims), p in zip(places, recipes):
            at = (offset, dims, p.dtype)
            arr = arrays.get(at)
            if arr is None:
                end = offset + math.prod(dims) * p.dtype.itemsize
                arr = arrays[at] = buf[offset:end].view(p.dtype).reshape(dims)
            out.append(arr)
        got = tuple(out)
        if views is not None:
            views[key] = (values, got)
        return got

    return carve
