"""Numba loops of layer normalisation and softmax over rows (imported only with
Numba, from its copy in the kernel cache directory: see ``_depthwise_jit``):
see :mod:`.norm_direct`.

float32 rows (``*32``): each pass is its own small loop that LLVM vectorises,
and the reductions are written so that it may:

* max: on the float's bits as a signed int32 key (``bits ^ ((bits >> 31) &
  0x7fffffff)`` orders floats as numbers, -0.0 below +0.0): an integer max
  reduction vectorises where a float compare-and-select does not (LLVM does not
  reorder it, NaN or not). A NaN needs no test of its own here: its exp is NaN,
  so the row's sum and every item of the row are NaN, as in the NumPy passes.
* sums: float64 lanes (each float32 converted, ``fastmath={"reassoc"}`` on the
  summing loop only, which lets LLVM keep several partial sums; NaN and inf
  still behave as IEEE says). Error far below a float32 ulp at any row length.
* exp of ``d = x - max`` (never above 0): :func:`_exp_nonpos32`, float32
  arithmetic without libm (Numba calls libm's ``expf`` per element, which keeps
  a loop scalar), compiled with ``fastmath={"contract"}`` (multiply-adds fused).

* layer norm: mean and variance in float64 (two passes, centred first), the
  mean split into a float32 head and remainder so ``(x - head) - rest`` centres
  without the float32 mean's rounding; the scaling in float32, as the NumPy
  passes do.

Measured accuracy against float64 references (``tests/kernels/test_norm_direct.py``
checks the bounds): the exp within 0.91 float32 ulp; softmax items within 2.1
ulp of the float64 softmax of the float32 ``x - max`` (NumPy's passes: 5.4;
subnormal items within one subnormal step); layer norm within 3.1 ulp of the
row's largest term (``|(x - mean) / std * gamma|`` or ``|beta|``). The tests
allow 3 and 4 ulp. Rows whose float32 sums overflow in NumPy's passes (items
near float32's largest, or squares above it) come out right here.

float64 rows keep the loops of one pass per row item (sums in float64, libm's
exp): NumPy's passes are the faster path above small rows.
"""

import math

import numba
import numpy as np

# -- float32: reductions and the exp, on row ``r`` of a 2-D C array ----------------------
# (indexed in place: a row view per row costs Numba's reference counting a few
# atomic operations per row, a third of the time of a 256-item row)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _max32(bits, r):  # pragma: no cover - jitted
    """The largest item of a non-empty float32 row, from ``bits`` (the rows as
    int32) by the int32 order key (see the module doc); a positive NaN counts as
    the largest, a negative one as the smallest (their exps make the row NaN
    either way)."""
    top = np.int32(-2147483648)
    for i in range(bits.shape[1]):
        v = bits[r, i]
        top = max(top, np.int32(v ^ ((v >> 31) & np.int32(0x7FFFFFFF))))
    return np.int32(top ^ ((top >> 31) & np.int32(0x7FFFFFFF))).view(np.float32)


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def _sum64(a, r):  # pragma: no cover - jitted
    """The float64 sum of float32 row ``r``, reassociated (vectorised)."""
    s = 0.0
    for i in range(a.shape[1]):
        s += np.float64(a[r, i])
    return s


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def _squares64(a, r, mean):  # pragma: no cover - jitted
    """The float64 sum of ``(a[r, i] - mean) ** 2``, reassociated (vectorised)."""
    s = 0.0
    for i in range(a.shape[1]):
        d = np.float64(a[r, i]) - mean
        s += d * d
    return s


@numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _exp_nonpos32(d):  # pragma: no cover - jitted
    """exp(d) of a float32 ``d`` <= 0 (or NaN) in float32 arithmetic.

    d = n ln2 + r, n = round(d / ln2) by the 1.5 * 2**23 shifter (n is then the
    shifter's low mantissa bits), |r| <= ln2 / 2 with ln2 in two parts (the
    first of 9 bits, so n * ln2_hi is exact); exp(r) by Taylor to degree 7
    (truncation below 0.05 ulp); 2**n as two halves built from their bits, so
    each is a normal float and a subnormal result is rounded once, at the last
    multiply. From d = -104 (n = -150) the result rounds to 0; -inf gives 0,
    NaN gives NaN."""
    f = np.float32
    c = d if d > f(-104.0) else f(-104.0)
    t = c * f(1.442695) + f(12582912.0)
    n = t - f(12582912.0)
    r = (c - n * f(0.693359375)) + n * f(2.12194440e-4)
    q = f(0.041666668) + r * (f(0.008333334) + r * (f(0.0013888889) + r * f(0.00019841270)))
    p = f(1.0) + r * (f(1.0) + r * (f(0.5) + r * (f(0.16666667) + r * q)))
    k = np.int32(np.float32(t).view(np.int32) - np.int32(0x4B400000))  # n as an int32
    h = np.int32(k >> 1)
    lo = np.int32((h + 127) << 23).view(np.float32)
    hi = np.int32((k - h + 127) << 23).view(np.float32)
    e = (p * lo) * hi
    return e if d == d else d


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _exps32(x, r, top, out):  # pragma: no cover - jitted
    for i in range(x.shape[1]):
        out[r, i] = _exp_nonpos32(x[r, i] - top)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _scale32(out, r, s):  # pragma: no cover - jitted
    for i in range(out.shape[1]):
        out[r, i] = out[r, i] * s


# -- float32 rows ----------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _scale_shift32(x, r, m, lo, inv, gamma, beta, out):  # pragma: no cover - jitted
    for i in range(x.shape[1]):
        out[r, i] = ((x[r, i] - m) - lo) * inv * gamma[i] + beta[i]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _scale_only32(x, r, m, lo, inv, gamma, out):  # pragma: no cover - jitted
    for i in range(x.shape[1]):
        out[r, i] = ((x[r, i] - m) - lo) * inv * gamma[i]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _shift_only32(x, r, m, lo, inv, beta, out):  # pragma: no cover - jitted
    for i in range(x.shape[1]):
        out[r, i] = ((x[r, i] - m) - lo) * inv + beta[i]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _normalise32(x, r, m, lo, inv, out):  # pragma: no cover - jitted
    for i in range(x.shape[1]):
        out[r, i] = ((x[r, i] - m) - lo) * inv


@numba.njit(cache=True, nogil=True, error_model="numpy")
def softmax32(x, out):  # pragma: no cover - jitted
    """Softmax of every row of (R, C) float32 ``x`` (C > 0) in turn into ``out``
    (which may be ``x``): the max, the exps stored, their float64 sum, then a
    multiply by its reciprocal."""
    bits = x.view(np.int32)
    for r in range(x.shape[0]):
        top = _max32(bits, r)
        _exps32(x, r, top, out)
        _scale32(out, r, np.float32(1.0 / _sum64(out, r)))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def layer_norm32(x, gamma, beta, eps, scale, center, out):  # pragma: no cover - jitted
    """Every row of (R, C) float32 ``x`` (C > 0) in turn normalised into
    ``out`` (which may be ``x``): mean and centred mean square in float64, then
    ``(x - mean) * inv`` (times ``gamma`` (C,), plus ``beta`` (C,) where
    ``scale`` / ``center``) in float32. Written out here, not in a row function
    the driver calls: inlined that way the loops ran at half speed on rows of
    128 to 256 items."""
    cols = x.shape[1]
    for r in range(x.shape[0]):
        mean = _sum64(x, r) / cols
        inv = np.float32(1.0 / math.sqrt(_squares64(x, r, mean) / cols + eps))
        m = np.float32(mean)
        lo = np.float32(mean - np.float64(m))  # the mean's float32 remainder
        if scale and center:
            _scale_shift32(x, r, m, lo, inv, gamma, beta, out)
        elif scale:
            _scale_only32(x, r, m, lo, inv, gamma, out)
        elif center:
            _shift_only32(x, r, m, lo, inv, beta, out)
        else:
            _normalise32(x, r, m, lo, inv, out)


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def softmax32_parallel(x, out, blocks):  # pragma: no cover - jitted
    """:func:`softmax32` on ``blocks`` blocks of rows (one per thread: the
    caller passes Numba's thread count, which read in here would keep Numba
    from caching the function), shared out over Numba's threads."""
    rows = x.shape[0]
    blocks = max(1, min(rows, blocks))
    for b in numba.prange(blocks):
        lo, hi = b * rows // blocks, (b + 1) * rows // blocks
        softmax32(x[lo:hi], out[lo:hi])


@numba.njit(cache=True, nogil=True, error_model="numpy", parallel=True)
def layer_norm32_parallel(x, gamma, beta, eps, scale, center, out, blocks):  # pragma: no cover - jitted
    """:func:`layer_norm32` on ``blocks`` blocks of rows, as :func:`softmax32_parallel`."""
    rows = x.shape[0]
    blocks = max(1, min(rows, blocks))
    for b in numba.prange(blocks):
        lo, hi = b * rows // blocks, (b + 1) * rows // blocks
        layer_norm32(x[lo:hi], gamma, beta, eps, scale, center, out[lo:hi])


# -- float64 rows -------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True, error_model="numpy")
def layer_norm(x, gamma, beta, eps, out):  # pragma: no cover - jitted
    """Each row of (R, C) ``x`` centred, divided by sqrt(mean square + eps) and
    scaled / shifted by ``gamma`` / ``beta`` (an empty one is skipped), into
    ``out``. Sums in float64, two passes (centre first: no cancellation)."""
    cols = x.shape[1]
    scale = gamma.shape[0] > 0
    center = beta.shape[0] > 0
    for r in range(x.shape[0]):
        row = x[r]
        dst = out[r]
        total = 0.0
        for i in range(cols):
            total += row[i]
        mean = total / cols
        squares = 0.0
        for i in range(cols):
            d = row[i] - mean
            squares += d * d
        inv = 1.0 / math.sqrt(squares / cols + eps)
        for i in range(cols):
            v = (row[i] - mean) * inv
            if scale:
                v = v * gamma[i]
            if center:
                v = v + beta[i]
            dst[i] = v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def softmax(x, out):  # pragma: no cover - jitted
    """Each row of (R, C) ``x`` max-shifted, exponentiated and divided by its sum,
    into ``out``; the exps in x's dtype (as NumPy's), their sum in float64. A NaN anywhere in a row
    makes the whole row NaN, as in the NumPy passes."""
    cols = x.shape[1]
    for r in range(x.shape[0]):
        row = x[r]
        dst = out[r]
        top = row[0]
        for i in range(1, cols):
            v = row[i]
            if v > top or v != v:
                top = v
                if v != v:
                    break
        total = 0.0
        for i in range(cols):
            e = math.exp(row[i] - top)
            dst[i] = e
            total += e
        for i in range(cols):
            dst[i] = dst[i] / total
