"""Strided views and padded copies the convolution and pooling kernels share."""

import numpy as np
import pytest

from hetvm.kernels.views import padded, strided


def test_strided_view_reads_the_memory_and_is_read_only():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    item = x.itemsize
    v = strided(np, x, (2, 2), (12 * item, item), offset=5 * item)
    np.testing.assert_array_equal(v, [[5, 6], [17, 18]])
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1


def test_strided_view_past_the_end_is_refused():
    """For NumPy the ndarray constructor checks the view's extent (as_strided does not)."""
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match="size of buffer"):
        strided(np, x, (4, 5), (16, 4))


def test_strided_offset_needs_contiguous_memory():
    x = np.zeros((4, 8), np.float32)[:, ::2]
    with pytest.raises(ValueError, match="C-contiguous"):
        strided(np, x, (2,), (4,), offset=4)
    np.testing.assert_array_equal(strided(np, x, (4,), x.strides[:1]), x[:, 0])  # no offset: as_strided


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 2, 0, 1)])
def test_padded_fills_the_borders(pads):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    got = padded(np, x, pads, fill=-1.0, copy=True)
    pt, pl, pb, pr = pads
    want = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=-1.0)
    np.testing.assert_array_equal(got, want)
    assert padded(np, x, (0, 0, 0, 0)) is x  # nothing to pad, no copy asked: x itself
