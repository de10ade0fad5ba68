"""float32 exp, tanh, erf and the GELUs as Numba source without libm calls.

Why: Numba (without SVML) calls libm per element for ``exp``, ``tanh`` and
``erf``, which keeps a loop scalar: a generated GELU loop lost to NumPy's
passes. These are straight-line float64 arithmetic -- a polynomial, a range
reduction, 2**n built from its bits, selects instead of branches -- so LLVM
vectorises a loop of them. float32 only: float64 work is exact enough for a
float32 result (within one float32 ulp of the true value, subnormal results
included), not for a float64 one, which keeps libm. The erf-GELU computes in
float32 itself (below), within 7 ulp, for twice the vector width.

:data:`SOURCE` is prepended to every generated module (with the sigmoid of
:mod:`.codegen_numba`); each function takes and returns a float32 except the
``*64`` helpers. The polynomials' coefficients are the output of
``tools/fit_math32.py`` (``tests/kernels/test_math32.py`` fits them again):

- exp(c) = 2**n (1 + q(r)), c = n ln2 + r (ln2 in two parts, Cody and Waite),
  |r| <= ln2 / 2, q expm1's Taylor polynomial of degree 10 (relative error
  below 3e-13); expm1 is 2**n q + (2**n - 1), exact at n = 0, so tanh(x) =
  -expm1(-2|x|) / (2 + expm1(-2|x|)) keeps its relative accuracy near 0.
- erf(x) = x f(x^2) for |x| < 4, f a degree-20 fit on [0, 16]; +-1 beyond
  (erf(4) rounds to 1 in float32).
- GELU(x) = 0.5 x (1 + erf(z)), z = x / sqrt 2, in float32 arithmetic (twice
  the float64 vector width: the encoder's bias + GELU over 128 x 1024 245 ->
  131 us a call, 1 thread), within 7 float32 ulp (6 on the test's sweep, 1.6%
  of it beyond one): erf(z) = z P(z^2) for |z| <= 0.5;
  beyond, with w = |z|, erfc(w) = exp(-w^2) t Q(t), t = 1 / (1 + w / 2), and
  GELU = x - 0.5 x erfc(w) (x > 0) or 0.5 x erfc(w) (x < 0, no cancellation).
  w^2 = x^2 / 2 is split exactly (x in two 12-bit halves, Veltkamp), exp of the
  high part by the prelude's ``_exp_neg32`` (its scale applied last, so the
  subnormal tail keeps its bits) and of the low part by a degree-4 Taylor
  series. Above w = 10.6 erfc is 0 for float32. Needs the prelude of
  :mod:`.codegen_numba` (``_exp_neg32``) ahead of :data:`SOURCE`.
- tanh-GELU 0.5 x (1 + tanh(u)) = x sigmoid(2u): no cancellation for x < 0.

Where NumPy's float32 kernels give NaN (inf * 0 in GELU of -inf) so do these.
"""

from __future__ import annotations

import math

__all__ = ["ERF_F", "GELU_P", "GELU_Q", "GELU_NEAR", "GELU_FAR", "SOURCE", "FUNCTIONS"]

# fmt: off
#: erf(x) / x as a polynomial in t = x^2 / 8 - 1 (tools/fit_math32.py)
ERF_F = (0.3535309956438961, -0.17657623323798532, 0.1316751167705946, -0.1077104473614256, 0.09020899925590699,
         -0.07472775773390546, 0.05988682219679779, -0.045766212094467816, 0.0330613130222531,
         -0.022467422930453992, 0.014346352345259838, -0.008626707880368274, 0.004863156807982554,
         -0.0025357428925141872, 0.0012744925437462031, -0.000667925577824686, 0.0002972547593153944,
         -7.501331495431647e-05, 3.201928522490616e-05, -3.612243288374911e-05, 1.3058986539503719e-05)
#: GELU's erf(z) / z near 0 as a polynomial in z^2, float32 values (tools/fit_math32.py)
GELU_P = (1.1283791065216064, -0.3761260211467743, 0.11282754689455032, -0.026755178347229958,
          0.004717317409813404)
#: GELU's erfc(w) exp(w^2) / t as a polynomial in t = 1 / (1 + w / 2), float32 values
GELU_Q = (0.28208938241004944, 0.2822439670562744, 0.2450743168592453, 0.18782809376716614,
          0.038234859704971313, 0.10412723571062088, -0.19637873768806458, -0.010851305909454823,
          0.10773182660341263, -0.040142323821783066)
# fmt: on
GELU_NEAR, GELU_FAR = 0.5, 10.6

#: the functions :data:`SOURCE` defines for generated templates
FUNCTIONS = ("_exp32", "_tanh32", "_erf32", "_gelu32", "_gelu_tanh32")


def _horner(coeffs: tuple[float, ...], var: str) -> str:
    """``c0 + v * (c1 + v * (...))`` with each coefficient written by ``repr`` (exact)."""
    text = repr(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        text = f"{c!r} + {var} * ({text})"
    return text


def _horner32(coeffs: tuple[float, ...], var: str) -> str:
    """:func:`_horner` with every coefficient a float32 (``f`` is np.float32 where
    it is used), so the arithmetic stays float32."""
    text = f"f({coeffs[-1]!r})"
    for c in reversed(coeffs[:-1]):
        text = f"f({c!r}) + {var} * ({text})"
    return text


_EXPM1_R = _horner(tuple(1.0 / math.factorial(k) for k in range(1, 11)), "r")
_X_NEAR = GELU_NEAR * math.sqrt(2.0)  # |x| of the near form
_X_FAR = GELU_FAR * math.sqrt(2.0)  # |x| from which erfc(w) is 0 in float32

_JIT = '@numba.njit(cache=True, inline="always", error_model="numpy")'

SOURCE = f'''\
{_JIT}
def _pow2_64(n):
    # 2**n for an integral float64 n in [-1022, 1023], from its bits
    return np.int64(np.int64(n + 1023.0) << 52).view(np.float64)


{_JIT}
def _expm1_r(r):
    # expm1(r) for |r| <= ln(2)/2: Taylor to degree 10, relative error below 3e-13
    return r * ({_EXPM1_R})


{_JIT}
def _exp64(c):
    # exp(c) for c <= 709 (0 at or below -708, and for NaN)
    d = c if c > -708.0 else -708.0
    n = np.floor(d * 1.4426950408889634 + 0.5)
    r = (d - n * 0.6931471803691238) - n * 1.9082149292705877e-10
    s = _pow2_64(n)
    return s + s * _expm1_r(r) if c > -708.0 else 0.0


{_JIT}
def _expm1_64(c):
    # expm1(c) for -708 < c <= 709; exact reduction where n = 0 (|c| < ln(2)/2)
    n = np.floor(c * 1.4426950408889634 + 0.5)
    r = (c - n * 0.6931471803691238) - n * 1.9082149292705877e-10
    s = _pow2_64(n)
    return s * _expm1_r(r) + (s - 1.0)


{_JIT}
def _exp32(x):
    # exp(-104) rounds to 0 in float32, exp(89) overflows to inf
    a = np.float64(x)
    c = a if a > -104.0 else -104.0
    c = c if c < 89.0 else 89.0
    e = _exp64(c)
    return np.float32(e if a == a else a)


{_JIT}
def _tanh32(x):
    # tanh(20) is 1 in float32; the sign copied back, so tanh(-0.0) is -0.0
    a = np.float64(x)
    c = np.abs(a)
    c = c if c < 20.0 else 20.0
    m = _expm1_64(-2.0 * c)
    t = math.copysign(-m / (2.0 + m), a)
    return np.float32(t if a == a else a)


{_JIT}
def _erf64(z):
    # erf of a float64 to about 6e-11 relative: z f(z^2) below |z| = 4, +-1 beyond, NaN kept
    u = z * z
    t = u * 0.125 - 1.0
    p = z * ({_horner(ERF_F, "t")})
    return math.copysign(1.0, z) if u >= 16.0 else p


{_JIT}
def _erf32(x):
    return np.float32(_erf64(np.float64(x)))


{_JIT}
def _gelu32(x):
    f = np.float32
    ax = np.abs(x)
    z = x * f(0.70710677)
    u = z * z
    near = (f(0.5) * x) * (f(1.0) + z * ({_horner32(GELU_P, "u")}))
    a = ax if ax < f({_X_FAR!r}) else f({_X_FAR!r})
    v = a * f(4097.0)  # a = xh + xl, xh of 12 bits: xh * xh is exact
    xh = v - (v - a)
    xl = a - xh
    hi = f(0.5) * (xh * xh)  # w^2 = hi + lo exactly
    lo = f(0.5) * (xl * (xh + a))
    m, k = _exp_neg32(hi)
    el = f(1.0) - lo * (f(1.0) - lo * (f(0.5) - lo * (f(0.16666667) - lo * f(0.041666668))))
    t = f(1.0) / (f(1.0) + a * f({0.5 / math.sqrt(2.0)!r}))
    h = (f(0.5) * x) * ((t * ({_horner32(GELU_Q, "t")})) * (el * m))
    if ax < f({_X_FAR!r}):
        far = x - h * k if x > f(0.0) else h * k
    else:  # x * 0: -0.0, or NaN at -inf as NumPy's 0.5 x (1 + erf)
        far = x if x > f(0.0) else x * f(0.0)
    r = near if ax <= f({_X_NEAR!r}) else far
    return r if x == x else x


{_JIT}
def _gelu_tanh32(x):
    # 0.5 x (1 + tanh(u)) = x sigmoid(2 u): exp(-|2 u|) 0 from 200 on (so GELU(-inf) is NaN, as NumPy's)
    a = np.float64(x)
    y = 1.5957691216057308 * (a + 0.044715 * a * a * a)
    c = np.abs(y)
    e = _exp64(-c) if c < 200.0 else 0.0
    d = 1.0 / (1.0 + e)
    return np.float32(a * (d if y >= 0 else e * d))

'''
