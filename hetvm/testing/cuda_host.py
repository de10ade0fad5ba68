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
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

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


@dataclass(frozen=True)
class Param:
    """One kernel parameter as CuPy declares it: ``[raw] dtype name``."""

    dtype: str
    name: str
    raw: bool = False

    @property
    def ctype(self) -> str:
        return C_TYPES[self.dtype]


def _parse(params: str) -> list[Param]:
    """``"float32 x0, raw int64 x1"`` -> ``[Param("float32", "x0"), Param("int64", "x1", raw=True)]``."""
    out = []
    for part in params.split(","):
        words = part.split()
        if words:
            raw = words[0] == "raw"
            dtype, name = words[1:] if raw else words
            out.append(Param(dtype, name, raw))
    return out


_CTYPES_SCALAR = {
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bool": ctypes.c_bool,
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
}  # fmt: skip


def _is_scalar(arg: object) -> bool:
    return not isinstance(arg, np.ndarray)


def _c_args(params: list[Param], scalars: Sequence[bool], writable: Sequence[bool]) -> list[str]:
    """The C parameter of each kernel parameter: a scalar by value (CuPy passes
    Python numbers so), an array as a pointer (``p_<name>``; a raw one named
    ``<name>`` itself, indexed by the body as CuPy's ``CArray`` is)."""
    out = []
    for p, scalar, w in zip(params, scalars, writable):
        const = "" if w else "const "
        if scalar:
            out.append(f"{p.ctype} {p.name}")
        elif p.raw:
            out.append(f"{const}{p.ctype}* {p.name}")
        else:
            out.append(f"{const}{p.ctype}* p_{p.name}")
    return out


def _binds(params: list[Param], scalars: Sequence[bool], index: str, indent: str, *, output: bool) -> str:
    """Element ``index`` of each non-raw array parameter bound as CuPy binds it:
    an input as ``const T &x``, an output as ``T &y``."""
    const = "" if output else "const "
    return "".join(
        f"{indent}{const}{p.ctype} &{p.name} = p_{p.name}[{index}];\n"
        for p, scalar in zip(params, scalars) if not scalar and not p.raw
    )  # fmt: skip


def elementwise_source(ins: list[Param], outs: list[Param], in_scalars: Sequence[bool], body: str,
                       preamble: str, *, device: bool = False, name: str = "run") -> str:  # fmt: skip
    """One element-wise kernel: a host loop over the elements, or (``device``)
    a ``__global__`` function with one thread per element, for nvcc."""
    args = ["long long _n"] + _c_args(ins, in_scalars, [False] * len(ins))
    args += _c_args(outs, [False] * len(outs), [True] * len(outs))
    pad = " " * 8
    binds = _binds(ins, in_scalars, "i", pad, output=False) + _binds(outs, [False] * len(outs), "i", pad, output=True)
    if device:
        head = (f'extern "C" __global__ void {name}({", ".join(args)}) {{\n'
                f"    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < _n) {{\n")  # fmt: skip
    else:
        head = f'extern "C" void {name}({", ".join(args)}) {{\n    for (long long i = 0; i < _n; ++i) {{\n'
    return f"{'' if device else _HEADER}{preamble}\n{head}{binds}{pad}{body}\n    }}\n}}\n"


def reduction_source(ins: list[Param], outs: list[Param], in_scalars: Sequence[bool], map_expr: str,
                     reduce_expr: str, post_map_expr: str, identity: str, reduce_type: str, preamble: str, *,
                     device: bool = False, name: str = "run") -> str:  # fmt: skip
    """One reduction kernel with CuPy's macros (``REDUCE(a, b)``, ``POST_MAP(a)``,
    ``_type_reduce``): per output element, the identity, then each reduced
    element mapped and folded in order, then the post-map with the outputs
    bound. On the host the inputs come broadcast and laid out as (outputs,
    reduced), contiguous; ``device`` makes one thread per output, for nvcc."""
    args = ["long long _n_out", "long long _n_red"] + _c_args(ins, in_scalars, [False] * len(ins))
    args += _c_args(outs, [False] * len(outs), [True] * len(outs))
    pad = " " * 12
    if device:
        head = (f'extern "C" __global__ void {name}({", ".join(args)}) {{\n'
                f"    long long _o = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n    if (_o < _n_out) {{\n")  # fmt: skip
    else:
        head = f'extern "C" void {name}({", ".join(args)}) {{\n    for (long long _o = 0; _o < _n_out; ++_o) {{\n'
    return (
        f"{'' if device else _HEADER}{preamble}\n"
        f"#define REDUCE(a, b) ({reduce_expr})\n#define POST_MAP(a) ({post_map_expr})\n"
        f"{head}        typedef {reduce_type} _type_reduce;\n"
        f"        _type_reduce _s = _type_reduce({identity});\n"
        f"        for (long long _r = 0; _r < _n_red; ++_r) {{\n"
        f"{_binds(ins, in_scalars, '_o * _n_red + _r', pad, output=False)}"
        f"            _type_reduce _a = static_cast<_type_reduce>({map_expr});\n"
        f"            _s = REDUCE(_s, _a);\n        }}\n"
        f"{_binds(outs, [False] * len(outs), '_o', ' ' * 8, output=True)}"
        f"        POST_MAP(_s);\n    }}\n}}\n#undef REDUCE\n#undef POST_MAP\n"
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


def _check_dtypes(params: list[Param], args: Sequence[object]) -> None:
    for p, a in zip(params, args):
        if not _is_scalar(a):
            assert str(a.dtype) == p.dtype, f"{p.name}: {a.dtype} passed for {p.dtype}"


def _scalar_arg(p: Param, value: object) -> ctypes._SimpleCData:
    return _CTYPES_SCALAR[p.dtype](value.item() if isinstance(value, np.generic) else value)


def _pointer(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


class HostElementwiseKernel:
    """``cupy.ElementwiseKernel``'s signature, compiled for the host: inputs
    broadcast to the output, Python numbers as scalars, ``raw`` inputs passed
    whole (C-contiguous: the body indexes them flat), the element index ``i``."""

    def __init__(self, in_params: str, out_params: str, operation: str, name: str = "kernel", *,
                 preamble: str = "", options: tuple = (), no_return: bool = False) -> None:  # fmt: skip
        self.ins, self.outs = _parse(in_params), _parse(out_params)
        self.operation, self.preamble = operation, preamble
        self.name, self.options, self.no_return = name, options, no_return
        self.calls = 0
        self.scalars: list[bool] = [False] * len(self.ins)  # which inputs the last call passed as numbers

    @property
    def source(self) -> str:
        """The host source for the last call's inputs (arrays or numbers)."""
        return elementwise_source(self.ins, self.outs, self.scalars, self.operation, self.preamble)

    def __call__(self, *args: object) -> None:
        assert len(args) == len(self.ins) + len(self.outs)
        inputs, outputs = args[: len(self.ins)], args[len(self.ins) :]
        _check_dtypes(self.ins + self.outs, args)
        shape = outputs[0].shape
        scalars = self.scalars = [_is_scalar(a) for a in inputs]
        c_in = []
        for p, a, scalar in zip(self.ins, inputs, scalars):
            if scalar:
                c_in.append(_scalar_arg(p, a))
            else:
                held = np.ascontiguousarray(a) if p.raw else np.ascontiguousarray(np.broadcast_to(a, shape))
                c_in.append(held)
        flat_out = [np.empty(shape, o.dtype) for o in outputs]
        ptrs = [_pointer(a) if isinstance(a, np.ndarray) else a for a in c_in + flat_out]
        _library(self.source).run(ctypes.c_longlong(int(np.prod(shape, dtype=np.int64))), *ptrs)
        for o, f in zip(outputs, flat_out):
            o[...] = f
        self.calls += 1


class HostReductionKernel:
    """``cupy.ReductionKernel``'s signature, compiled for the host: the inputs
    broadcast together (Python numbers are scalars), reduced over ``axis``
    (all axes when None) in order from the identity; ``keepdims`` and ``out``
    as CuPy's. The order of the sum is not the GPU's (a tree), so float results
    differ from a GPU's by rounding."""

    def __init__(self, in_params: str, out_params: str, map_expr: str, reduce_expr: str, post_map_expr: str,
                 identity: str | None, name: str = "reduce_kernel", reduce_type: str | None = None,
                 reduce_dims: bool = True, preamble: str = "", options: tuple = ()) -> None:  # fmt: skip
        self.ins, self.outs = _parse(in_params), _parse(out_params)
        assert not any(p.raw for p in self.ins + self.outs), "raw parameters in a reduction"
        self.exprs = (map_expr, reduce_expr, post_map_expr)
        self.identity = "" if identity is None else str(identity)
        self.reduce_type = reduce_type or self.outs[0].ctype
        self.name, self.preamble, self.options = name, preamble, options
        self.calls = 0
        self.scalars: list[bool] = [False] * len(self.ins)  # which inputs the last call passed as numbers

    @property
    def source(self) -> str:
        """The host source for the last call's inputs (arrays or numbers)."""
        return reduction_source(self.ins, self.outs, self.scalars, *self.exprs, self.identity, self.reduce_type,
                                self.preamble)  # fmt: skip

    def __call__(self, *args: object, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                 out: np.ndarray | None = None) -> np.ndarray | None:  # fmt: skip
        inputs, outputs = list(args[: len(self.ins)]), list(args[len(self.ins) :])
        if out is not None:
            outputs = [out]
        scalars = self.scalars = [_is_scalar(a) for a in inputs]
        arrays = [a for a, s in zip(inputs, scalars) if not s]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        ndim = len(shape)
        red = tuple(range(ndim)) if axis is None else tuple(sorted({int(a) % ndim for a in np.atleast_1d(axis)}))
        kept = tuple(d for d in range(ndim) if d not in red)
        out_shape = tuple(1 if d in red else shape[d] for d in range(ndim)) if keepdims else tuple(shape[d] for d in kept)
        if not outputs:
            outputs = [np.empty(out_shape, self.outs[0].dtype)]
        _check_dtypes(self.ins + self.outs, inputs + outputs)
        assert all(o.shape == out_shape for o in outputs), f"outputs {[o.shape for o in outputs]} for {out_shape}"
        n_out = int(np.prod([shape[d] for d in kept], dtype=np.int64))
        n_red = int(np.prod([shape[d] for d in red], dtype=np.int64))
        if n_red == 0 and not self.identity:
            raise ValueError(f"zero-size array to reduction operation {self.name} which has no identity")
        c_in = []
        for p, a, scalar in zip(self.ins, inputs, scalars):
            if scalar:
                c_in.append(_scalar_arg(p, a))
            else:  # (kept..., reduced...) in order, contiguous
                c_in.append(np.ascontiguousarray(np.broadcast_to(a, shape).transpose(kept + red)))
        flat_out = [np.empty(n_out, o.dtype) for o in outputs]
        ptrs = [_pointer(a) if isinstance(a, np.ndarray) else a for a in c_in + flat_out]
        if n_out:
            _library(self.source).run(ctypes.c_longlong(n_out), ctypes.c_longlong(n_red), *ptrs)
        for o, f in zip(outputs, flat_out):
            o[...] = f.reshape(o.shape)
        self.calls += 1
        return outputs[0] if out is None and len(args) == len(self.ins) else None


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
    ReductionKernel = HostReductionKernel
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


def nvcc_check_kernels(kernels: Sequence[HostElementwiseKernel | HostReductionKernel]) -> str:
    """Compiles each kernel to PTX with nvcc (device code, no GPU needed), its
    inputs arrays or numbers as in its last call; each distinct preamble once.
    Returns nvcc's error text, or ''."""
    preambles: list[str] = []
    parts = []
    for k, kernel in enumerate(kernels):
        if kernel.preamble not in preambles:
            preambles.append(kernel.preamble)
        scalars = kernel.scalars
        if isinstance(kernel, HostReductionKernel):
            parts.append(reduction_source(kernel.ins, kernel.outs, scalars, *kernel.exprs, kernel.identity,
                                          kernel.reduce_type, "", device=True, name=f"r{k}"))  # fmt: skip
        else:
            parts.append(elementwise_source(kernel.ins, kernel.outs, scalars, kernel.operation, "", device=True,
                                            name=f"k{k}"))  # fmt: skip
    src = _dir() / "check.cu"
    src.write_text("\n".join(preambles + parts))
    cmd = [NVCC, "-ptx", "-arch=compute_80", "--fmad=false", "-w", str(src), "-o", str(_dir() / "check.ptx")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return done.stderr if done.returncode else ""


def nvcc_check(bodies: list[tuple[str, str, str]], preamble: str) -> str:
    """:func:`nvcc_check_kernels` of element-wise ``(in_params, out_params, body)``."""
    return nvcc_check_kernels([HostElementwiseKernel(i, o, body, preamble=preamble) for i, o, body in bodies])


class RecordingCupy(FakeCupy):
    """:class:`FakeCupy` that keeps every kernel made through it (``made``), for
    tests that count launches or compile the kernels with nvcc."""

    def __init__(self) -> None:
        self.made: list[HostElementwiseKernel | HostReductionKernel] = []
        made = self.made

        class Elementwise(HostElementwiseKernel):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                made.append(self)

        class Reduction(HostReductionKernel):
            def __init__(self, *args, **kwargs) -> None:
                super().__init__(*args, **kwargs)
                made.append(self)

        self.ElementwiseKernel = Elementwise
        self.ReductionKernel = Reduction


class _Uncompilable:
    """A kernel class whose every kernel fails at its first launch."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __call__(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("nvrtc: error: identifier is undefined")


class UncompilableCupy(FakeCupy):
    """:class:`FakeCupy` whose generated kernels all fail to compile at their
    first launch, as a template NVRTC rejects would: for the fallback tests."""

    ElementwiseKernel = _Uncompilable
    ReductionKernel = _Uncompilable
