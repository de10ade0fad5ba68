"""Fits the polynomials of hetvm/kernels/math32.py and prints them as literals.

    python tools/fit_math32.py

Why: generated float32 code computes erf and GELU's erfc tail by polynomials
(no libm call, so a loop of them vectorises); their coefficients are committed
as constants, and ``tests/kernels/test_math32.py`` runs :func:`fit` again to
check that the constants are this fit's.

- erf(x) = x f(x^2), f(u) = erf(sqrt u) / sqrt u on u in [0, 16], a degree-20
  Chebyshev fit in t = u / 8 - 1 over 400,001 points, as power coefficients in t
  (relative error about 6e-11).
- erfc(w) = exp(-w^2) v H(s) for w in [ERFC_LO, ERFC_HI], v = 1 / w, s the map of
  v onto [-1, 1]: H(s) = erfc(w) exp(w^2) w, a degree-12 Chebyshev fit over
  200,001 points, as power coefficients in s (relative error about 3e-10).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.polynomial import chebyshev

#: the erfc form's interval of w (GELU's negative tail, x = -w sqrt 2): below
#: ERFC_LO, 1 + erf(-w) loses at most erf/erfc(1.5) = 28 times erf's error; above
#: ERFC_HI GELU is below half float32's least subnormal
ERFC_LO, ERFC_HI = 1.5, 10.5


def fit() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(erf's f in t, erfc's H in s), power coefficients, lowest degree first."""
    u = np.linspace(0.0, 16.0, 400_001)
    s = np.sqrt(u)
    f = np.array([math.erf(x) / x if x > 0 else 2.0 / math.sqrt(math.pi) for x in s])
    erf_c = chebyshev.cheb2poly(chebyshev.chebfit(u / 8.0 - 1.0, f, 20))
    w = np.linspace(ERFC_LO, ERFC_HI, 200_001)
    h = np.array([math.erfc(x) * math.exp(x * x) * x for x in w])
    v = 1.0 / w
    lo, hi = 1.0 / ERFC_HI, 1.0 / ERFC_LO
    erfc_c = chebyshev.cheb2poly(chebyshev.chebfit((2.0 * v - (lo + hi)) / (hi - lo), h, 12))
    return tuple(float(c) for c in erf_c), tuple(float(c) for c in erfc_c)


if __name__ == "__main__":
    erf_c, erfc_c = fit()
    print("ERF_F = (" + ", ".join(repr(c) for c in erf_c) + ")")
    print("ERFC_H = (" + ", ".join(repr(c) for c in erfc_c) + ")")
