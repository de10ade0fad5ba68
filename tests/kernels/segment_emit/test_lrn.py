"""The nn.lrn body (segment_emit/lrn.py) against its NumPy kernel."""

import numpy as np
import pytest

from hetvm.testing.segment_check import assert_segment_matches

pytest.importorskip("numba")


def _f(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _lrn(x, out=None, size=5, beta=0.75, axis=1, alpha=1e-4, bias=1.0):
    attrs = {"size": size, "alpha": alpha, "beta": beta, "bias": bias, "axis": axis}
    return ("nn.lrn", attrs, [x, np.empty_like(x) if out is None else out])


def test_lrn_matches_the_numpy_kernel_for_every_covered_beta_window_and_axis(numba_on):
    x = _f((2, 7, 5, 6)) * 3
    x[0, 2, 1, 1] = np.nan
    x[1, 4, 0, 3] = np.inf
    wide = _f((3, 4, 9), np.float64, 1)
    calls = [
        _lrn(x), _lrn(x, size=4, beta=0.5, alpha=0.5, bias=2.0), _lrn(x, size=1, beta=1.0),
        _lrn(x, size=11),  # a window wider than the channels, clipped at both ends
        _lrn(wide, size=3, axis=-1, alpha=0.3), _lrn(wide, size=2, axis=0, beta=0.5),
        _lrn(_f((4, 3), seed=2), size=3),  # rank 2: planes of one
        _lrn(np.zeros((0, 3, 2), np.float32)),
    ]
    assert_segment_matches(calls, rtol=1e-6, atol=1e-7)


def test_lrn_of_non_contiguous_inputs_and_outputs(numba_on):
    x = _f((2, 4, 6, 5), seed=3)
    t = x.transpose(0, 1, 3, 2)  # a non-contiguous input
    out_t = np.empty((2, 6, 5, 4), np.float32).transpose(0, 3, 1, 2)  # a non-contiguous output
    assert_segment_matches([_lrn(t, size=3), _lrn(x, out=out_t)], rtol=1e-6, atol=1e-7)


def test_lrn_with_another_beta_or_dtype_keeps_its_numpy_kernel(numba_on):
    x = _f((1, 4, 3, 3))
    assert_segment_matches([_lrn(x, beta=0.7), _lrn(x.astype(np.float16))], compiled=False)
