"""Devices, NDArrays, storage reference counting and the allocators."""

import gc

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmRuntimeError, OutOfMemoryError
from hetvm.runtime import nd
from hetvm.runtime.device import Device, device, get_api
from hetvm.runtime.memory import NaiveAllocator, Storage
from hetvm.runtime.ndarray import view
from hetvm.runtime.pool import PooledAllocator


def test_devices_are_interned_values():
    assert hetvm.cpu(0) is Device("cpu", 0) is device("llvm", 0) is device("cpu:0")
    assert device("sim", 1) is not device("sim", 2)
    assert str(device("sim", 3)) == "sim:3"
    with pytest.raises(HetvmRuntimeError, match="unknown device kind"):
        device("tpu", 0)


def test_sim_configuration_is_kept_until_reconfigured():
    dev = device("sim", 7, capacity=100, missing_kernels=("nn.softmax",))
    assert device("sim", 7) is dev
    assert get_api(dev).capacity == 100
    assert get_api(dev).missing_kernels == {"nn.softmax"}
    device("sim", 7, capacity=None, missing_kernels=())
    assert get_api(dev).capacity is None


def test_ndarray_round_trip_and_numpy_from_an_accelerator():
    x = np.arange(12, dtype="float32").reshape(3, 4)
    a = nd.array(x, device("sim", 1))
    assert a.shape == (3, 4) and a.dtype == "float32" and a.device is device("sim", 1)
    host = a.numpy()  # an explicit host copy, as TVM's and CuPy's numpy() give
    np.testing.assert_array_equal(host, x)
    host[0, 0] = -1.0  # a copy: the device's array is untouched
    np.testing.assert_array_equal(a.numpy(), x)
    b = a.copyto(device("sim", 2)).copyto(hetvm.cpu(0))
    np.testing.assert_array_equal(b.numpy(), x)


def test_storage_refcount_frees_after_storage_and_view_are_released():
    dev = device("sim", 11, capacity=None, missing_kernels=())
    alloc = NaiveAllocator(dev)
    st = Storage(alloc.alloc(64))
    t = view(st.allocation, 16, (4,), "float32")
    assert alloc.bytes_in_use == 64
    st.release()  # kill the storage right after carving the tensor out
    assert alloc.bytes_in_use == 64
    st.release()  # idempotent
    t.release()
    assert alloc.bytes_in_use == 0
    t.release()
    assert alloc.bytes_in_use == 0


def test_garbage_collection_releases_views():
    alloc = NaiveAllocator(hetvm.cpu(0))
    st = Storage(alloc.alloc(32))
    t = view(st.allocation, 0, (8,), "float32")
    del st
    gc.collect()
    assert alloc.bytes_in_use == 32
    del t
    gc.collect()
    assert alloc.bytes_in_use == 0


def test_pooled_allocator_reuses_same_size_blocks():
    alloc = PooledAllocator(hetvm.cpu(0))
    a = alloc.alloc(128)
    buf = a.buffer
    a.force_free()
    assert (alloc.bytes_in_use, alloc.pool_bytes) == (0, 128)
    b = alloc.alloc(128)
    assert b.buffer is buf and alloc.pool_bytes == 0 and alloc.raw_allocs == 1
    c = alloc.alloc(64)
    assert alloc.raw_allocs == 2 and alloc.peak_bytes == 192 and alloc.alloc_calls == 3
    b.force_free()
    c.force_free()
    alloc.release_all()
    assert alloc.pool_bytes == 0 and get_api(hetvm.cpu(0)).allocated >= 0


def test_out_of_memory_names_device_request_use_and_capacity():
    dev = device("sim", 12, capacity=100, missing_kernels=())
    alloc = PooledAllocator(dev)
    a = alloc.alloc(60)
    a.force_free()  # pooled: 60 bytes held by the pool
    b = alloc.alloc(80)  # fits only after the pool is released
    assert alloc.pool_bytes == 0 and alloc.bytes_in_use == 80
    with pytest.raises(OutOfMemoryError) as info:
        alloc.alloc(40)
    msg = str(info.value)
    assert "sim:12" in msg and "40 bytes" in msg and "80 bytes in use" in msg and "100" in msg
    b.force_free()
    alloc.release_all()
    device("sim", 12, capacity=None)


def test_poison_fills_freed_memory():
    alloc = PooledAllocator(hetvm.cpu(0), poison=True)
    block = alloc.alloc(16)
    t = view(block, 0, (4,), "float32")
    t._data[...] = 1.0
    t.release()
    again = view(alloc.alloc(16), 0, (4,), "float32")
    assert np.isnan(again.numpy()).all()


def test_view_bounds_are_checked():
    alloc = NaiveAllocator(hetvm.cpu(0))
    block = alloc.alloc(16)
    with pytest.raises(HetvmRuntimeError, match="does not fit"):
        view(block, 8, (4,), "float32")
