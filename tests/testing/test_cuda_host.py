"""The CuPy stand-in (hetvm.testing.cuda_host): it must fail where CuPy would, or
the CUDA runs on the host would pass code a GPU rejects."""

import numpy as np
import pytest

from hetvm.testing.cuda_host import CXX, FakeArray, FakeCupy, HostElementwiseKernel


def test_functions_return_device_arrays_and_host_copies_are_plain():
    cp = FakeCupy()
    a = cp.asarray(np.arange(6, dtype="float32").reshape(2, 3))
    assert isinstance(a, FakeArray) and isinstance(a + 1, FakeArray) and isinstance(np.exp(a), FakeArray)
    assert isinstance(cp.zeros((2,), "int64"), FakeArray) and isinstance(a.sum(axis=0), FakeArray)
    host = cp.asnumpy(a)
    assert type(host) is np.ndarray and host.tolist() == [[0, 1, 2], [3, 4, 5]]
    b = cp.empty((2, 3), "float32")
    b.set(host)
    assert type(b.get()) is np.ndarray and b.get().tolist() == host.tolist()


def test_what_cupy_lacks_is_refused():
    cp = FakeCupy()
    a = cp.zeros((3, 4), "float32")
    with pytest.raises(AttributeError, match="CuPy has no nanpercentile"):
        cp.nanpercentile  # noqa: B018
    with pytest.raises(TypeError, match="CuPy has no numpy.block"):
        np.block([[a, a]])
    np.copyto(a, 2.0)  # CuPy has copyto
    assert float(a.sum()) == 24.0


def test_the_kernel_class_broadcasts_as_cupys_does():
    if CXX is None:
        pytest.skip("no host C++ compiler")
    k = HostElementwiseKernel("float32 x0, float32 x1", "float32 y", "y = x0 * x1 + 1.0f;", "k")
    out = np.empty((2, 3), "float32")
    k(np.arange(3, dtype="float32"), np.array([[1.0], [2.0]], "float32"), out)
    np.testing.assert_array_equal(out, [[1, 2, 3], [1, 3, 5]])
    with pytest.raises(AssertionError, match="int32 passed for float32"):
        k(np.zeros(3, "int32"), np.zeros(3, "float32"), np.empty(3, "float32"))
