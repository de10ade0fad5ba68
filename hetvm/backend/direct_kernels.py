"""Which direct Numba loops (depthwise convolution, pooling, convolution
epilogue, layer norm and softmax over trailing axes) a lowered module's kernel
calls will take, for which dtypes.

Why: those loops compile on their first call unless the build compiles them;
knowing from the calls' struct info which ones a run takes lets the build
compile (or load from the disk cache) exactly those, and no others. The
tests here mirror the kernels' own ``applies`` checks on what is static; a
call whose dtypes or ranks are not known is left to compile on its first call.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S

__all__ = ["SYMBOLS", "describe", "loops_of", "precompile"]

_FLOATS = ("float32", "float64")
_CONV = ("kernel.nn.conv2d", "kernel.nn.conv2d_bias_act", "kernel.nn.conv2d_bias_add_act")
_POOL = ("kernel.nn.max_pool2d", "kernel.nn.avg_pool2d", "kernel.nn.max_pool2d_bias_act")
_NORM = ("kernel.nn.layer_norm", "kernel.nn.softmax")
SYMBOLS = frozenset(_CONV + _POOL + _NORM)

#: a loop to compile: ("depthwise", dtype, parallel) | ("pool", dtype, is_max) | ("epilogue", dtype, False)
#: | ("layer_norm", dtype, parallel) | ("softmax", dtype, parallel)
Loop = tuple[str, str, bool]


def _tensor(arg: E.Expr) -> tuple[str, tuple[int | None, ...]] | None:
    sinfo = arg.struct_info
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None or sinfo.dtype is None:
        return None
    return sinfo.dtype, tuple(P.const_value(d) for d in sinfo.shape)


def _depthwise(attrs: dict, data: Any, weight: Any, out: Any) -> bool:
    """``depthwise_direct.applies`` on static info (1x1 unpadded convolutions
    take the pointwise path before it)."""
    (dt, xs), (wt, ws), (ot, os_) = data, weight, out
    groups = int(attrs.get("groups", 1))
    if len(xs) != 4 or len(ws) != 4 or len(os_) != 4 or ws[1] != 1 or groups <= 1 or xs[1] != groups:
        return False
    if ws[2] == 1 and ws[3] == 1 and not any(attrs.get("padding", (0, 0, 0, 0))):
        return False
    return dt in _FLOATS and wt == dt and ot == dt


def _whole_input(attrs: dict, xs: tuple, os_: tuple) -> bool:
    """``pool._whole_input``: one window that is the whole input, a reduction
    the pools run without the direct loop."""
    return (
        os_[2:] == (1, 1)
        and tuple(int(k) for k in attrs.get("pool_size", (1, 1))) == xs[2:]
        and tuple(attrs.get("dilation", (1, 1))) == (1, 1)
        and not any(attrs.get("padding", (0, 0, 0, 0)))
    )


def _norm(symbol: str, attrs: dict, info: list, threaded: bool) -> list[Loop]:
    """``norm_direct.layer_norm_applies`` / ``softmax_applies`` on static info
    (contiguity is the run's: a strided input falls back to NumPy then). A
    symbolic shape counts as small (float64) and as large enough to thread
    (float32, with ``threaded``): the exported transformers' sequence length
    is symbolic."""
    from ..kernels import norm_direct

    (dt, xs), (ot, _) = info[0], info[-1]
    if not xs or dt not in _FLOATS or ot != dt:
        return []
    size = math.prod(xs) if all(d is not None for d in xs) else None  # type: ignore[arg-type]
    most = norm_direct.limit(dt)
    if size is not None and most is not None and size > most:
        return []
    ndim = len(xs)
    kind = "softmax" if symbol == "kernel.nn.softmax" else "layer_norm"
    parallel = dt == "float32" and threaded and (size is None or size >= norm_direct.parallel_min(kind))
    if kind == "softmax":
        return [("softmax", dt, parallel)] if int(attrs.get("axis", -1)) % ndim == ndim - 1 else []
    axes = tuple(int(a) % ndim for a in attrs.get("axes", (-1,)))
    if not axes or axes != tuple(range(ndim - len(axes), ndim)):
        return []
    used = (attrs.get("scale", True), attrs.get("center", True))
    if any(flag and param[0] != dt for flag, param in zip(used, info[1:3])):
        return []
    return [("layer_norm", dt, parallel)]


def loops_of(symbol: str, attrs: dict, args: Sequence[E.Expr], parallel_min: int, threaded: bool) -> list[Loop]:
    """The direct loops a call of kernel ``symbol`` (arguments ``args``, the
    output last) runs; ``parallel_min`` and ``threaded`` decide whether the
    depthwise call may take the threaded loop."""
    info = [_tensor(a) for a in args]
    if any(i is None for i in info):
        return []
    out = info[-1]
    if symbol in _NORM:
        return _norm(symbol, attrs, info, threaded)
    if symbol in _POOL:
        (dt, xs), (ot, os_) = info[0], out
        if len(xs) != 4 or len(os_) != 4 or dt not in _FLOATS or ot != dt or _whole_input(attrs, xs, os_):
            return []
        return [("pool", dt, symbol != "kernel.nn.avg_pool2d")]
    loops: list[Loop] = []
    if _depthwise(attrs, info[0], info[1], out):
        size = None if any(d is None for d in out[1]) else math.prod(out[1])  # type: ignore[arg-type]
        loops.append(("depthwise", out[0], threaded and (size is None or size >= parallel_min)))
        if symbol == "kernel.nn.conv2d_bias_act":  # bias and activation fused into the loop
            return loops
    if symbol != "kernel.nn.conv2d" and out[0] in _FLOATS and len(out[1]) >= 2:
        loops.append(("epilogue", out[0], False))
    return loops


def describe(loop: Loop) -> str:
    """The build report's name of a loop: ``"depthwise float32"``,
    ``"depthwise+parallel float32"``, ``"max_pool float32"``, ``"epilogue float64"``,
    ``"layer_norm float32"``, ``"softmax+parallel float32"``."""
    kind, dtype, flag = loop
    if kind == "pool":
        kind = "max_pool" if flag else "avg_pool"
    elif kind in ("depthwise", "layer_norm", "softmax") and flag:
        kind += "+parallel"
    return f"{kind} {dtype}"


def precompile(loop: Loop) -> int:
    """Compiles (or loads) one loop; how many Numba functions that was."""
    from ..kernels import depthwise_direct, epilogue_direct, norm_direct, pool_direct

    kind, dtype, flag = loop
    if kind in ("layer_norm", "softmax"):
        return norm_direct.precompile(dtype, kind, flag)
    if kind == "depthwise":
        return depthwise_direct.precompile(dtype, flag)
    if kind == "pool":
        return pool_direct.precompile(dtype, flag)
    return epilogue_direct.precompile(dtype)
