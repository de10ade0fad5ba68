"""Runs hetvm's generated CUDA element-wise kernels on the host, for tests on
machines without a GPU.

``HostElementwiseKernel`` takes what ``cupy.ElementwiseKernel`` takes and runs
the same C++ body with a host compiler: the inputs broadcast to the output (as
CuPy's indexing does), one loop over the elements, each input a ``const``
reference and the output a reference, as in CuPy's generated kernel. ``FakeCupy`` is an
array module that is NumPy plus that class, so a kernel specialised for "CuPy"
runs end to end here. What this cannot show: CUDA's own math library (its
``expf`` and ``erff`` are within a few ulps of glibc's) and launch details; a
GPU session runs the same tests on CuPy (``test_codegen_cuda.py``)."""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from hetvm.kernels.codegen_cuda import C_TYPES

CXX = shutil.which("g++") or shutil.which("c++")
NVCC = shutil.which("nvcc")
_LIBS: dict[str, ctypes.CDLL] = {}


@functools.cache
def _dir() -> Path:
    """This process's folder of sources and libraries, made on first use."""
    return Path(tempfile.mkdtemp(prefix="hetvm-cuda-host-"))


_HEADER = """\
#include <cmath>
#define __device__
using namespace std;
"""


def _parse(params: str) -> list[tuple[str, str]]:
    """``"float32 x0, int64 x1"`` -> ``[("float32", "x0"), ("int64", "x1")]``."""
    out = []
    for part in params.split(","):
        if part.strip():
            dtype, name = part.split()
            out.append((dtype, name))
    return out


def _signature(ins: list[tuple[str, str]], outs: list[tuple[str, str]], indent: str) -> tuple[str, str]:
    """The C parameters (a count, then a pointer per argument) and the
    statements binding element ``i``: each input a const reference, each output
    a reference, as CuPy's ElementwiseKernel binds them (``const T &x =
    _raw_x[_ind.get()];``)."""
    args = ["long long n"]
    args += [f"const {C_TYPES[d]}* p_{name}" for d, name in ins]
    args += [f"{C_TYPES[d]}* p_{name}" for d, name in outs]
    binds = "".join(f"{indent}const {C_TYPES[d]} &{name} = p_{name}[i];\n" for d, name in ins)
    binds += "".join(f"{indent}{C_TYPES[d]} &{name} = p_{name}[i];\n" for d, name in outs)
    return ", ".join(args), binds


def host_source(ins: list[tuple[str, str]], outs: list[tuple[str, str]], body: str, preamble: str) -> str:
    args, binds = _signature(ins, outs, " " * 8)
    return (
        f"{_HEADER}{preamble}\n"
        f'extern "C" void run({args}) {{\n'
        f"    for (long long i = 0; i < n; ++i) {{\n{binds}"
        f"        {body}\n    }}\n}}\n"
    )


def _library(source: str) -> ctypes.CDLL:
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    if key not in _LIBS:
        src, lib = _dir() / f"{key}.cpp", _dir() / f"{key}.so"
        src.write_text(source)
        # no contraction and no fast math: the rounding of NumPy's loops
        cmd = [CXX, "-O1", "-shared", "-fPIC", "-ffp-contract=off", "-fno-fast-math", "-w", str(src), "-o", str(lib)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"host compile failed:\n{done.stderr}\n{source}")
        _LIBS[key] = ctypes.CDLL(str(lib))
    return _LIBS[key]


class HostElementwiseKernel:
    """``cupy.ElementwiseKernel``'s signature, compiled for the host."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel", *,
                 preamble: str = "", options: tuple = (), no_return: bool = False) -> None:  # fmt: skip
        self.ins, self.outs = _parse(in_params), _parse(out_params)
        self.source = host_source(self.ins, self.outs, operation, preamble)
        self.name, self.options, self.no_return = name, options, no_return
        self.calls = 0

    def __call__(self, *args: np.ndarray) -> None:
        assert len(args) == len(self.ins) + len(self.outs)
        inputs, outputs = args[: len(self.ins)], args[len(self.ins) :]
        shape = outputs[0].shape
        for (dtype, name), a in zip(self.ins + self.outs, args):
            assert str(a.dtype) == dtype, f"{name}: {a.dtype} passed for {dtype}"
        flat_in = [np.ascontiguousarray(np.broadcast_to(a, shape)) for a in inputs]
        flat_out = [np.empty(shape, o.dtype) for o in outputs]
        ptrs = [ctypes.c_void_p(a.ctypes.data) for a in flat_in + flat_out]
        _library(self.source).run(ctypes.c_longlong(int(np.prod(shape, dtype=np.int64))), *ptrs)
        for o, f in zip(outputs, flat_out):
            o[...] = f
        self.calls += 1


@functools.cache
def _cupy_names() -> dict[str, frozenset[str]]:
    """Module -> the names CuPy has there too (``tools/cupy_names.py`` writes the file)."""
    with open(Path(__file__).with_name("cupy_names.json")) as f:
        return {m: frozenset(v) for m, v in json.load(f)["modules"].items()}


class FakeArray(np.ndarray):
    """A NumPy array with CuPy's ``set`` / ``get`` (host <-> device copies) that,
    like CuPy's array, takes a NumPy function only where CuPy has one of the same
    name (``__array_function__``): a kernel that calls, say, ``np.lib.stride_tricks``
    or ``np.einsum_path`` on a device array fails here as it would on a GPU."""

    def set(self, host: np.ndarray) -> None:
        self[...] = host

    def get(self) -> np.ndarray:
        return np.array(self).view(np.ndarray)

    def __array_function__(self, func, types, args, kwargs):
        module = getattr(func, "__module__", "") or ""
        if func.__name__ not in _cupy_names().get(module, frozenset()):
            raise TypeError(f"CuPy has no {module}.{func.__name__}: a device array cannot go through it")
        return super().__array_function__(func, types, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if ufunc.__name__ not in _cupy_names()["numpy"]:
            raise TypeError(f"CuPy has no ufunc {ufunc.__name__}")
        args = [_host_view(a) for a in inputs]
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_host_view(o) for o in out)
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _on_device(result)


def _host_view(a: object) -> object:
    return a.view(np.ndarray) if isinstance(a, FakeArray) else a


def _on_device(result: object) -> object:
    """A function's array results as device arrays (what CuPy's functions return)."""
    if isinstance(result, np.ndarray) and not isinstance(result, FakeArray):
        return result.view(FakeArray)
    if isinstance(result, tuple):
        return tuple(_on_device(r) for r in result)
    if isinstance(result, list):
        return [_on_device(r) for r in result]
    return result


class _Device:
    def __init__(self, index: int = 0) -> None:
        self.index = index

    def __enter__(self) -> "_Device":
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def synchronize(self) -> None:
        return None


class _Event:
    """CuPy's event, as a host clock (the stand-in runs synchronously)."""

    def record(self) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        return None


class _Runtime:
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802 - CuPy's name
        return 1


class _Cuda:
    Device = _Device
    Event = _Event
    runtime = _Runtime

    @staticmethod
    def get_elapsed_time(start: _Event, end: _Event) -> float:
        return (end.at - start.at) * 1e3  # milliseconds, as CuPy's


class FakeCupy:
    """NumPy dressed as CuPy: :class:`HostElementwiseKernel` as
    ``ElementwiseKernel``, buffers that are :class:`FakeArray`, ``asnumpy`` and
    ``cuda.Device``; every other name is NumPy's. As ``sys.modules["cupy"]`` it
    lets a program built for a CUDA device run here, through hetvm's CuPy code
    paths (which take ``xp is not numpy``)."""

    __name__ = "cupy"
    ElementwiseKernel = HostElementwiseKernel
    ndarray = FakeArray
    cuda = _Cuda

    @staticmethod
    def asnumpy(a):
        return np.array(a).view(np.ndarray)

    def __getattr__(self, name: str):
        """NumPy's ``name`` where CuPy has it too: functions return device arrays,
        ufuncs and types are NumPy's own (a ufunc on a device array gives one)."""
        obj = getattr(np, name)
        if isinstance(obj, (type, np.ufunc)) or not callable(obj):
            return obj
        if name not in _cupy_names()["numpy"]:
            raise AttributeError(f"CuPy has no {name}")

        def on_device(*args, **kwargs):
            return _on_device(obj(*args, **kwargs))

        return on_device


def nvcc_check(bodies: list[tuple[str, str, str]], preamble: str) -> str:
    """Compiles each ``(in_params, out_params, body)`` as a CUDA kernel to PTX
    with nvcc (device code, no GPU needed); returns nvcc's error text, or ''."""
    parts = [preamble]
    for k, (in_params, out_params, body) in enumerate(bodies):
        args, binds = _signature(_parse(in_params), _parse(out_params), " " * 4)
        parts.append(
            f'extern "C" __global__ void k{k}({args}) {{\n'
            f"    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i >= n) return;\n{binds}    {body}\n}}\n"
        )
    src = _dir() / "check.cu"
    src.write_text("\n".join(parts))
    cmd = [NVCC, "-ptx", "-arch=compute_80", "--fmad=false", "-w", str(src), "-o", str(_dir() / "check.ptx")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return done.stderr if done.returncode else ""
