"""Depthwise convolution as a direct Numba loop, with bias and ReLU fused.

Why: the NumPy path (``depthwise.py``) copies each channel's KH*KW tap
windows into columns and contracts them in a batched product -- KH*KW times
the input in copies plus a product of one row per channel, then a pass for
the ReLU. The direct loop (``_depthwise_jit``) reads the input once into a
padded plane per channel and multiply-adds each tap over it while it is in
cache, adding bias and ReLU in its final store. Measured one thread, CPU time,
float32, bias and ReLU, NumPy path / direct on ShuffleNet's layers: 272x14x14
3x3 152 / 69 us, 136x28x28 274 / 95, 544x7x7 112 / 81, 112x56x56 3x3/2
609 / 263, 136x28x28 3x3/2 172 / 123.

Taken where Numba is available and on (``HETVM_NUMBA`` not ``0``: see
``codegen_numba.mode``), the arrays are NumPy's and all float32 or all
float64; integer and mixed dtypes keep the NumPy path. Results differ from the
NumPy path's by rounding only (the sum's order), except that a padding tap is
a multiply by zero in both: an infinite weight meeting the padding gives NaN
in both.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime.threads import numba_parallel_ok
from . import codegen_numba

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# the parallel loop runs from this many output elements (below it, waking the
# thread pool costs more than it saves)
PARALLEL_MIN = 1 << 15



def _loops() -> Any:
    return codegen_numba.package_module("_depthwise_jit")


def precompile(dtype: str, parallel: bool) -> int:
    """Compiles (or loads from the disk cache) the loops :func:`run` calls for
    ``dtype`` (float32 or float64), with the argument types it passes, ahead of
    a run; ``parallel`` also the threaded loop. Returns how many it compiled."""
    nb = codegen_numba._numba
    elem = nb.from_dtype(np.dtype(dtype))
    arr = [nb.types.Array(elem, nd, "C") for nd in (4, 3, 1, 4)]
    sig = (*arr, *[nb.types.int64] * 9, nb.types.boolean, nb.types.boolean)
    jit = _loops()
    loops = (jit.serial, jit.parallel) if parallel else (jit.serial,)
    for fn in loops:
        fn.compile(sig)
    return len(loops)


def applies(xp: Any, data: Any, weight: Any, out: Any, groups: int, bias: Any = None) -> bool:
    """Whether :func:`run` takes this call: NumPy arrays of one float dtype, one
    input channel per group, Numba available and on."""
    if xp is not np or data.ndim != 4 or weight.ndim != 4 or weight.shape[1] != 1 or groups <= 1:
        return False
    if data.shape[1] != groups or weight.shape[0] % groups or out.shape[1] != weight.shape[0]:
        return False
    dt = data.dtype
    if (
        dt not in _FLOATS
        or weight.dtype != dt
        or out.dtype != dt
        or (bias is not None and bias.dtype != dt)
    ):
        return False
    return codegen_numba.available()


def run(data: Any, weight: Any, out: Any, strides: tuple[int, int], dilation: tuple[int, int],
        pads: tuple[int, int, int, int], bias: Any = None, relu: bool = False) -> None:  # fmt: skip
    """``out = act(conv(data, weight) + bias)`` for a call :func:`applies` took; the
    geometry must have been checked to fit (``conv._check_fits``)."""
    n, c, h, w = data.shape
    o, _, kh, kw = weight.shape
    _, _, oh, ow = out.shape
    if out.size == 0:
        return
    (s0, s1), (d0, d1) = strides, dilation
    pt, pl, pb, pr = pads
    # the padded plane: the input with its padding, and room for the last tap
    # of the last output (stride 1 reads whole padded rows)
    hp = max(pt + h + pb, (oh - 1) * s0 + (kh - 1) * d0 + 1)
    wp = max(pl + w + pr, (ow - 1) * s1 + (kw - 1) * d1 + 1)
    x = np.ascontiguousarray(data)
    taps = np.ascontiguousarray(weight.reshape(o, kh, kw))
    b = np.ascontiguousarray(bias.reshape(o)) if bias is not None else np.zeros(1, data.dtype)
    dst = out if out.flags.c_contiguous else np.empty(out.shape, out.dtype)
    jit = _loops()
    args = (x, taps, b, dst, o // c, s0, s1, d0, d1, pt, pl, hp, wp, bias is not None, bool(relu))
    numba = codegen_numba._numba
    lock = codegen_numba._PARALLEL_LOCK
    if (out.size >= PARALLEL_MIN and numba_parallel_ok() and numba.get_num_threads() > 1
            and lock.acquire(blocking=False)):  # fmt: skip
        try:
            jit.parallel(*args)
        finally:
            lock.release()
    else:
        jit.serial(*args)
    if dst is not out:
        out[...] = dst
