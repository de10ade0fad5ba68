"""ONNX Runtime's planned activation bytes, read from its CPU arena's statistics.

ORT plans a session's intermediates in two steps: the allocation planner picks
which values share a buffer (reuse of a freed buffer of the same size, and
in-place outputs), and with ``enable_mem_pattern`` the first run records the
offsets of every planned allocation; from the second run on, one block of that
pattern's peak size is taken from the arena per run and every intermediate is
carved from it. That block is ORT's planned bytes, the figure to compare with
hetvm's arena.

The Python bindings do not expose the arena's statistics; the C API does
(``OrtApi::CreateAllocator`` on the session gives its arena,
``OrtApi::AllocatorGetStats`` its counters). This module calls the C API of the
``libonnxruntime`` that ships with the ``onnxruntime`` wheel through ctypes.
After two runs, ``MaxAllocSize`` (the largest single request the arena
served) is the pattern block, provided nothing else asks for more: weights are
kept out of the arena (``session.use_device_allocator_for_initializers``) and
prepacking is off (``session.disable_prepacking``: prepacked weights come
from the arena), so the only other requests are outputs and kernel scratch,
each smaller than the activations' block on the light models (the figure is
reported together with ``MaxInUse`` for that reason).

The function table's slots are the C API's stable ABI (``OrtApi`` only grows
at the end), taken from ``onnxruntime_c_api.h``; ORT 1.22+ has every slot used.
Run in a subprocess by the benchmark, so a mismatch cannot take it down.
"""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

# slot of each function in struct OrtApi (onnxruntime_c_api.h)
_SLOT = {
    "GetErrorMessage": 2,
    "CreateEnv": 3,
    "CreateSession": 7,
    "Run": 9,
    "CreateSessionOptions": 10,
    "EnableMemPattern": 16,
    "EnableCpuMemArena": 18,
    "SetSessionGraphOptimizationLevel": 23,
    "SetIntraOpNumThreads": 24,
    "CreateTensorWithDataAsOrtValue": 49,
    "CreateCpuMemoryInfo": 69,
    "ReleaseEnv": 92,
    "ReleaseStatus": 93,
    "ReleaseMemoryInfo": 94,
    "ReleaseSession": 95,
    "ReleaseValue": 96,
    "ReleaseSessionOptions": 100,
    "AddSessionConfigEntry": 130,
    "CreateAllocator": 131,
    "ReleaseAllocator": 132,
    "CreateAndRegisterAllocator": 144,
    "CreateArenaCfg": 156,
    "ReleaseArenaCfg": 157,
    "GetKeyValue": 297,
    "ReleaseKeyValuePairs": 300,
    "AllocatorGetStats": 319,
}
_API_VERSION = 22
_VP = ctypes.c_void_p
_STATS = ("InUse", "MaxInUse", "TotalAllocated", "NumAllocs", "MaxAllocSize")


class _Api:
    def __init__(self) -> None:
        import onnxruntime

        capi = os.path.join(os.path.dirname(onnxruntime.__file__), "capi")
        lib_name = next(f for f in sorted(os.listdir(capi)) if f.startswith("libonnxruntime.so"))
        lib = ctypes.CDLL(os.path.join(capi, lib_name))
        lib.OrtGetApiBase.restype = ctypes.POINTER(_VP * 2)
        get_api = ctypes.CFUNCTYPE(_VP, ctypes.c_uint32)(lib.OrtGetApiBase().contents[0])
        table = get_api(_API_VERSION)
        if not table:
            raise RuntimeError(f"this onnxruntime does not offer C API version {_API_VERSION}")
        self._table = ctypes.cast(table, ctypes.POINTER(_VP * 400)).contents

    def fn(self, name: str, restype, *argtypes):  # noqa: ANN001, ANN201
        return ctypes.CFUNCTYPE(restype, *argtypes)(self._table[_SLOT[name]])

    def call(self, name: str, *args) -> None:  # noqa: ANN002
        status = self.fn(name, _VP, *[_VP] * len(args))(*args)
        if status:
            msg = self.fn("GetErrorMessage", ctypes.c_char_p, _VP)(status)
            self.fn("ReleaseStatus", None, _VP)(status)
            raise RuntimeError(f"ORT {name}: {msg.decode() if msg else '?'}")


def arena_stats(model_path: str, runs: int = 2, threads: int = 1) -> dict[str, int]:
    """The CPU arena's counters after ``runs`` runs of the model on random inputs."""
    import onnx
    from onnx import helper

    api = _Api()
    env, opts, sess, mem = _VP(), _VP(), _VP(), _VP()
    api.call("CreateEnv", _VP(3), ctypes.c_char_p(b"hetvm-bench"), ctypes.byref(env))
    # one arena for the process, grown by exactly what is asked and splitting every
    # chunk it hands out (at most 256 dead bytes): a request's chunk is its size
    cfg, arena_mem = _VP(), _VP()
    api.call("CreateArenaCfg", _VP(0), _VP(1), _VP(-1 & 0xFFFFFFFF), _VP(256), ctypes.byref(cfg))
    api.call("CreateCpuMemoryInfo", _VP(1), _VP(0), ctypes.byref(arena_mem))
    api.call("CreateAndRegisterAllocator", env, arena_mem, cfg)
    api.call("CreateSessionOptions", ctypes.byref(opts))
    api.call("EnableMemPattern", opts)
    api.call("EnableCpuMemArena", opts)
    api.call("SetIntraOpNumThreads", opts, _VP(threads))
    for key, value in (
        (b"session.use_device_allocator_for_initializers", b"1"),
        (b"session.disable_prepacking", b"1"),
        (b"session.use_env_allocators", b"1"),
    ):
        api.call("AddSessionConfigEntry", opts, ctypes.c_char_p(key), ctypes.c_char_p(value))
    api.call("CreateSession", env, ctypes.c_char_p(model_path.encode()), opts, ctypes.byref(sess))
    api.call("CreateCpuMemoryInfo", _VP(0), _VP(0), ctypes.byref(mem))

    model = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    rng = np.random.default_rng(0)
    arrays, names, values = [], [], []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        elem = vi.type.tensor_type.elem_type
        arr = np.ascontiguousarray(rng.standard_normal(shape).astype(helper.tensor_dtype_to_np_dtype(elem)))
        dims = (ctypes.c_int64 * len(shape))(*shape)
        value = _VP()
        api.call("CreateTensorWithDataAsOrtValue", mem, _VP(arr.ctypes.data), _VP(arr.nbytes), dims,
                 _VP(len(shape)), _VP(elem), ctypes.byref(value))  # fmt: skip
        arrays.append(arr)
        names.append(vi.name.encode())
        values.append(value)
    out_names = [o.name.encode() for o in model.graph.output]
    in_n = (ctypes.c_char_p * len(names))(*names)
    in_v = (_VP * len(values))(*values)
    out_n = (ctypes.c_char_p * len(out_names))(*out_names)
    for _ in range(runs):
        out_v = (_VP * len(out_names))()
        api.call("Run", sess, _VP(), in_n, in_v, _VP(len(names)), out_n, _VP(len(out_names)), out_v)
        for v in out_v:
            api.fn("ReleaseValue", None, _VP)(v)
    alloc, kvp = _VP(), _VP()
    api.call("CreateAllocator", sess, mem, ctypes.byref(alloc))
    api.call("AllocatorGetStats", alloc, ctypes.byref(kvp))
    get = api.fn("GetKeyValue", ctypes.c_char_p, _VP, ctypes.c_char_p)
    stats = {}
    for key in _STATS:
        raw = get(kvp, key.encode())
        if raw is not None:
            stats[key] = int(raw)
    api.fn("ReleaseKeyValuePairs", None, _VP)(kvp)
    api.fn("ReleaseAllocator", None, _VP)(alloc)
    for v in values:
        api.fn("ReleaseValue", None, _VP)(v)
    api.fn("ReleaseMemoryInfo", None, _VP)(mem)
    api.fn("ReleaseSession", None, _VP)(sess)
    api.fn("ReleaseSessionOptions", None, _VP)(opts)
    api.fn("ReleaseMemoryInfo", None, _VP)(arena_mem)
    api.fn("ReleaseArenaCfg", None, _VP)(cfg)
    api.fn("ReleaseEnv", None, _VP)(env)
    return stats


if __name__ == "__main__":
    import json

    print(json.dumps(arena_stats(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 2)))
