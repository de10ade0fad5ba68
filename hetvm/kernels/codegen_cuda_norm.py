"""Generated CUDA kernels for softmax, log-softmax, layer and RMS normalisation.

Why: on CuPy's arrays the kernels of :mod:`.nn` run NumPy's recipe one CuPy
call at a time: softmax is a max, a subtract, an exp, a sum and a divide (five
launches, two passes writing a tensor of x's size), layer norm eight. Here a
row's statistics are ``cupy.ReductionKernel`` s (one launch each, one value per
row written) and the result is one ``cupy.ElementwiseKernel`` that reads x
again and writes the output once: three launches for each op (two for RMS norm),
no temporary larger than the statistics.

Each formula is the NumPy kernel's, step for step (same operations, same
precision, no fused multiply-adds), so results differ from it only in the
order of a sum: softmax ``exp(x - max) / sum(exp(x - max))``; log-softmax
``(x - max) - log(sum(exp(x - max)))``; layer norm
``(x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta`` in x's dtype;
RMS norm in float64, as :func:`.compat.rms_norm`. The max propagates NaN. Taken
for float32 and float64 where the output (and gamma, beta, weight) have x's
dtype (RMS norm: any of the two for each); other calls, and a kernel that
fails to compile at its first launch, run the step-by-step kernels.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

from .codegen_cuda import C_TYPES, FMAD_OFF, PRELUDE
from .common import as_ints
from .cuda_launch import FirstLaunch, enabled

__all__ = ["specializer"]

_FLOATS = ("float32", "float64")


def _fmt(dtype: str) -> dict[str, str]:
    """Template fields: the dtype, its C type, libm suffix, helper suffix."""
    f32 = dtype == "float32"
    return {"d": dtype, "T": C_TYPES[dtype], "m": "f" if f32 else "", "s": "f" if f32 else "d"}


def _reduction(xp: Any, name: str, in_params: str, out_param: str, map_expr: str, reduce_expr: str,
               post_map: str, identity: str, dtype: str) -> Any:  # fmt: skip
    f = _fmt(dtype)
    return xp.ReductionKernel(
        in_params.format(**f), out_param.format(**f), map_expr.format(**f), reduce_expr.format(**f),
        post_map, identity.format(**f), f"hetvm_{name}", reduce_type=f["T"], preamble=PRELUDE, options=FMAD_OFF,
    )  # fmt: skip


def _elementwise(xp: Any, name: str, in_params: str, out_param: str, body: str, **fields: str) -> Any:
    return xp.ElementwiseKernel(in_params.format(**fields), out_param.format(**fields), body.format(**fields),
                                f"hetvm_{name}", preamble=PRELUDE, options=FMAD_OFF, no_return=True)  # fmt: skip


@functools.cache
def _row_max(xp: Any, dtype: str) -> Any:
    return _reduction(xp, "row_max", "{d} x", "{d} m", "x", "hv_max<{T}>(a, b)", "m = a", "-hv_inf_{s}()", dtype)


@functools.cache
def _exp_sum(xp: Any, dtype: str) -> Any:
    return _reduction(xp, "exp_sum", "{d} x, {d} m", "{d} s", "exp{m}(x - m)", "a + b", "s = a", "0", dtype)


@functools.cache
def _mean(xp: Any, dtype: str) -> Any:
    return _reduction(xp, "mean", "{d} x, {d} n", "{d} mean", "x", "a + b", "mean = a / n", "0", dtype)


@functools.cache
def _centred_square_mean(xp: Any, dtype: str) -> Any:
    return _reduction(xp, "centred_square_mean", "{d} x, {d} mean, {d} n", "{d} var", "(x - mean) * (x - mean)",
                      "a + b", "var = a / n", "0", dtype)  # fmt: skip


@functools.cache
def _square_mean_f64(xp: Any, dtype: str) -> Any:
    return xp.ReductionKernel(f"{dtype} x, float64 n", "float64 ms", "(double)x * (double)x", "a + b", "ms = a / n",
                              "0", "hetvm_square_mean", reduce_type="double", preamble=PRELUDE, options=FMAD_OFF)  # fmt: skip


@functools.cache
def _softmax_finish(xp: Any, dtype: str, log: bool) -> Any:
    body = "y = (x - m) - log{m}(s);" if log else "y = exp{m}(x - m) / s;"
    return _elementwise(xp, "log_softmax" if log else "softmax", "{d} x, {d} m, {d} s", "{d} y", body, **_fmt(dtype))


@functools.cache
def _layer_norm_finish(xp: Any, dtype: str, scale: bool, center: bool) -> Any:
    params = "{d} x, {d} mean, {d} var, {d} eps" + (", {d} g" if scale else "") + (", {d} b" if center else "")
    body = "y = (x - mean) / sqrt{m}(var + eps)" + (" * g" if scale else "") + (" + b" if center else "") + ";"
    return _elementwise(xp, "layer_norm", params, "{d} y", body, **_fmt(dtype))


@functools.cache
def _rms_norm_finish(xp: Any, x_dtype: str, w_dtype: str, out_dtype: str) -> Any:
    return _elementwise(xp, "rms_norm", "{x} x, float64 ms, {w} w, float64 eps", "{o} y",
                        "y = ({T})((double)x / sqrt(ms + eps) * (double)w);",
                        x=x_dtype, w=w_dtype, o=out_dtype, T=C_TYPES[out_dtype])  # fmt: skip


def _along(v: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """A per-normalised-element parameter (gamma, beta, weight) shaped to broadcast."""
    return v.reshape([n if d in axes else 1 for d, n in enumerate(shape)])


class _NormKernel:
    """``fn(*args)`` of one op on CuPy's arrays: generated where the dtypes are
    covered and the kernels compiled, the step-by-step ``generic`` otherwise."""

    def __init__(self, xp: Any, op: str, attrs: dict, generic: Callable[..., None]) -> None:
        self.xp, self.op, self.generic = xp, op, generic
        self.first_launch = FirstLaunch()
        # the attributes, parsed once at bind time (axes still need the rank of a call's x)
        self.axis = int(attrs.get("axis", -1))
        self.axes = tuple(int(a) for a in as_ints(attrs.get("axes", (-1,))))
        self.eps = float(attrs.get("epsilon", 1e-5))
        self.scale, self.center = bool(attrs.get("scale", True)), bool(attrs.get("center", True))
        self.launches = {"nn.softmax": self._softmax, "nn.log_softmax": self._softmax,
                         "nn.layer_norm": self._layer_norm, "nn.rms_norm": self._rms_norm}[op]  # fmt: skip

    def __call__(self, *args: Any) -> None:
        x = args[0]
        launch = self.launches(*args) if x.size else None
        if launch is None or not self.first_launch.run(launch[0], launch[1]):
            self.generic(*args)

    def _softmax(self, x: Any, out: Any) -> Any:
        dtype = str(x.dtype)
        if dtype not in _FLOATS or out.dtype != x.dtype or out.shape != x.shape:
            return None
        axis = self.axis % x.ndim
        xp, log = self.xp, self.op == "nn.log_softmax"

        def launch() -> None:
            m = _row_max(xp, dtype)(x, axis=axis, keepdims=True)
            s = _exp_sum(xp, dtype)(x, m, axis=axis, keepdims=True)
            _softmax_finish(xp, dtype, log)(x, m, s, out)

        return (dtype, launch)

    def _layer_norm(self, x: Any, gamma: Any, beta: Any, out: Any) -> Any:
        dtype = str(x.dtype)
        scale, center = self.scale, self.center
        params = ([gamma] if scale else []) + ([beta] if center else [])
        if dtype not in _FLOATS or out.dtype != x.dtype or out.shape != x.shape or any(p.dtype != x.dtype for p in params):
            return None
        axes = tuple(sorted({a % x.ndim for a in self.axes}))
        count, eps, xp = float(math.prod(x.shape[a] for a in axes)), self.eps, self.xp
        shaped = [_along(p, x.shape, axes) for p in params]

        def launch() -> None:
            mean = _mean(xp, dtype)(x, count, axis=axes, keepdims=True)
            var = _centred_square_mean(xp, dtype)(x, mean, count, axis=axes, keepdims=True)
            _layer_norm_finish(xp, dtype, scale, center)(x, mean, var, eps, *shaped, out)

        return ((dtype, scale, center), launch)

    def _rms_norm(self, x: Any, weight: Any, out: Any) -> Any:
        dtypes = (str(x.dtype), str(weight.dtype), str(out.dtype))
        if any(d not in _FLOATS for d in dtypes) or out.shape != x.shape:
            return None
        axes = tuple(sorted({a % x.ndim for a in self.axes}))
        count, eps = float(math.prod(x.shape[a] for a in axes)), self.eps
        xp, w = self.xp, _along(weight, x.shape, axes)

        def launch() -> None:
            ms = _square_mean_f64(xp, dtypes[0])(x, count, axis=axes, keepdims=True)
            _rms_norm_finish(xp, *dtypes)(x, ms, w, eps, out)

        return (dtypes, launch)


def specializer(op: str) -> Callable[[Any, dict], Any]:
    """The ``specialize`` hook of ``op``'s kernel: on an array module with
    CuPy's ``ReductionKernel``, a :class:`_NormKernel`; None (the registered
    kernel as it is) on NumPy or with ``HETVM_CUDA_CODEGEN=0``."""

    def specialize(xp: Any, attrs: dict) -> Any:
        if getattr(xp, "ReductionKernel", None) is None or not enabled():
            return None
        from .registry import get_kernel

        return _NormKernel(xp, op, attrs, functools.partial(get_kernel(op, "cuda"), xp, attrs))

    return specialize
