"""Numba loop of a convolution's epilogue (imported only with Numba, from its
copy in the kernel cache directory: see ``_depthwise_jit``): see
:mod:`.epilogue_direct`."""

from __future__ import annotations

import numba


@numba.njit(cache=True, nogil=True, error_model="numpy")
def bias_add_act(out, bias, residual, relu):  # pragma: no cover - jitted
    """``out = act(out + bias[c] + residual)`` in place over (N, C, P) ``out``, in
    NumPy's order of the two adds; an empty ``bias`` or ``residual`` is skipped."""
    has_bias = bias.shape[0] > 0
    has_residual = residual.shape[0] > 0
    for n in range(out.shape[0]):
        for c in range(out.shape[1]):
            row = out[n, c]
            b = bias[c] if has_bias else out.dtype.type(0)
            if has_residual:
                res = residual[n, c]
                for i in range(row.shape[0]):
                    v = row[i] + b + res[i] if has_bias else row[i] + res[i]
                    if relu and v < 0:  # NaN stays NaN, as with maximum
                        v = 0
                    row[i] = v
            else:
                for i in range(row.shape[0]):
                    v = row[i] + b
                    if relu and v < 0:
                        v = 0
                    row[i] = v
