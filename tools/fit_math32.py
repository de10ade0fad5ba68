"""Fits the polynomials of hetvm/kernels/math32.py and prints them as literals.

    python tools/fit_math32.py

Why: generated float32 code computes erf and GELU's erf / erfc by polynomials
(no libm call, so a loop of them vectorises); their coefficients are committed
as constants, and ``tests/kernels/test_math32.py`` runs :func:`fit` again to
check that the constants are this fit's.

- erf(x) = x f(x^2), f(u) = erf(sqrt u) / sqrt u on u in [0, 16], a degree-20
  Chebyshev fit in t = u / 8 - 1 over 400,001 points, as power coefficients in t
  (relative error about 6e-11).
- GELU's float32 forms (:func:`fit_gelu`), least squares for relative error on
  the power basis (Chebyshev-to-power coefficients cancel too much to be
  evaluated in float32), each coefficient rounded to float32: erf(z) = z P(z^2)
  for |z| <= GELU_NEAR, P of degree 4 (relative error 6e-8 with float32
  coefficients); erfc(w) = exp(-w^2) t Q(t), t = 1 / (1 + w / 2), for w in
  [GELU_NEAR, GELU_FAR], Q of degree 9 (4e-8).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.polynomial import chebyshev

#: GELU's float32 form: erf(z) near 0 up to GELU_NEAR (below, 1 + erf(z) keeps
#: at least 0.48: no cancellation worth a bit), erfc(w) from there to GELU_FAR,
#: beyond which GELU(-w sqrt 2) is below float32's least subnormal
GELU_NEAR, GELU_FAR = 0.5, 10.6


def fit() -> tuple[float, ...]:
    """erf's f in t, power coefficients, lowest degree first."""
    u = np.linspace(0.0, 16.0, 400_001)
    s = np.sqrt(u)
    f = np.array([math.erf(x) / x if x > 0 else 2.0 / math.sqrt(math.pi) for x in s])
    erf_c = chebyshev.cheb2poly(chebyshev.chebfit(u / 8.0 - 1.0, f, 20))
    return tuple(float(c) for c in erf_c)


def _relative_lstsq(v: np.ndarray, f: np.ndarray, degree: int) -> tuple[float, ...]:
    """Power coefficients of degree ``degree`` in ``v`` minimising the summed
    squared relative error to ``f``, each rounded to float32."""
    basis = np.vander(v, degree + 1, increasing=True) / f[:, None]
    coeffs, *_ = np.linalg.lstsq(basis, np.ones_like(f), rcond=None)
    return tuple(float(np.float32(c)) for c in coeffs)


def fit_gelu() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(P in u = z^2 for erf near 0, Q in t for erfc beyond), float32 values."""
    u = np.linspace(0.0, GELU_NEAR**2, 40_001)
    s = np.sqrt(u)
    f = np.array([math.erf(x) / x if x > 0 else 2.0 / math.sqrt(math.pi) for x in s])
    w = np.linspace(GELU_NEAR, GELU_FAR, 400_001)
    t = 1.0 / (1.0 + 0.5 * w)
    q = np.array([math.erfc(x) * math.exp(x * x) for x in w]) / t
    return _relative_lstsq(u, f, 4), _relative_lstsq(t, q, 9)


if __name__ == "__main__":
    print("ERF_F = (" + ", ".join(repr(c) for c in fit()) + ")")
    near, far = fit_gelu()
    print("GELU_P = (" + ", ".join(repr(c) for c in near) + ")")
    print("GELU_Q = (" + ", ".join(repr(c) for c in far) + ")")
