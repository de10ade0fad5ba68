"""Element-wise kernels: binary with broadcasting, comparisons, unary math, clip.

Binary ufunc kernels are specialised at load time to the bare ufunc called as
``ufunc(a, b, out)`` -- the cheapest dispatch NumPy offers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .common import erf, same_shape, store
from .registry import register_kernel

# ops whose ufunc gives the right result for every dtype with out= given
_SAFE_UFUNCS = {
    "add": "add",
    "subtract": "subtract",
    "multiply": "multiply",
    "maximum": "maximum",
    "minimum": "minimum",
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "less",
    "less_equal": "less_equal",
    "greater": "greater",
    "greater_equal": "greater_equal",
    "logical_and": "logical_and",
    "logical_or": "logical_or",
}


_NO_POSITIONAL_OUT = frozenset({"maximum", "minimum"})


def _is_int(arr: Any) -> bool:
    return arr.dtype.kind in "iub"


def _write(xp: Any, out: Any, value: Any) -> None:
    store(out, value)


def _make_ufunc_kernel(op: str, ufunc_name: str) -> None:
    def kernel(xp: Any, attrs: dict, a: Any, b: Any, out: Any) -> None:
        getattr(xp, ufunc_name)(a, b, out=out)

    def specialize(xp: Any, attrs: dict) -> Any:
        if xp is not np:
            return None
        if ufunc_name in _NO_POSITIONAL_OUT:  # NumPy deprecates a third positional arg here
            ufunc = getattr(np, ufunc_name)
            return lambda a, b, out: ufunc(a, b, out=out)
        return getattr(xp, ufunc_name)

    kernel.__name__ = f"kernel_{op}"
    register_kernel(op, specialize=specialize)(kernel)


for _op, _uf in _SAFE_UFUNCS.items():
    _make_ufunc_kernel(_op, _uf)


@register_kernel("divide")
def divide(xp: Any, attrs: dict, a: Any, b: Any, out: Any) -> None:
    if _is_int(out):  # integer division truncates toward zero, like TVM's
        _write(xp, out, xp.trunc(xp.true_divide(a, b)).astype(out.dtype))
    else:
        xp.true_divide(a, b, out=out)


@register_kernel("floor_divide")
def floor_divide(xp: Any, attrs: dict, a: Any, b: Any, out: Any) -> None:
    if _is_int(out):
        xp.floor_divide(a, b, out=out)
    else:
        xp.floor(xp.true_divide(a, b), out=out)


@register_kernel("power")
def power(xp: Any, attrs: dict, a: Any, b: Any, out: Any) -> None:
    xp.power(a, b, out=out)


_UNARY = {
    "exp": lambda xp, x: xp.exp(x),
    "log": lambda xp, x: xp.log(x),
    "sqrt": lambda xp, x: xp.sqrt(x),
    "rsqrt": lambda xp, x: 1 / xp.sqrt(x),
    "tanh": lambda xp, x: xp.tanh(x),
    "sigmoid": lambda xp, x: _sigmoid(xp, x),
    "negative": lambda xp, x: xp.negative(x),
    "abs": lambda xp, x: xp.abs(x),
    "sin": lambda xp, x: xp.sin(x),
    "cos": lambda xp, x: xp.cos(x),
    "floor": lambda xp, x: xp.floor(x),
    "ceil": lambda xp, x: xp.ceil(x),
    "round": lambda xp, x: xp.round(x),
    "sign": lambda xp, x: xp.sign(x),
    "reciprocal": lambda xp, x: 1 / x,
    "logical_not": lambda xp, x: xp.logical_not(x),
    "erf": lambda xp, x: erf(xp, x),
}


def _sigmoid(xp: Any, x: Any) -> Any:
    # split by sign so exp never overflows
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


# unary ops that are one ufunc: written with out= (no temporary, no copy) when
# the output has the input's dtype; a float kernel also for inexact inputs only
_UNARY_UFUNCS = {
    "exp": ("exp", True), "log": ("log", True), "sqrt": ("sqrt", True), "tanh": ("tanh", True),
    "sin": ("sin", True), "cos": ("cos", True), "floor": ("floor", True), "ceil": ("ceil", True),
    "round": ("round", True), "reciprocal": ("reciprocal", True), "negative": ("negative", False),
    "abs": ("absolute", False), "sign": ("sign", False), "logical_not": ("logical_not", False),
}  # fmt: skip


def _make_unary(op: str) -> None:
    fn = _UNARY[op]
    ufunc_name, float_only = _UNARY_UFUNCS.get(op, (None, False))

    def kernel(xp: Any, attrs: dict, x: Any, out: Any) -> None:
        same_shape(x, out)
        if ufunc_name is not None and x.dtype == out.dtype and (not float_only or x.dtype.kind in "fc"):
            ufunc = xp.rint if ufunc_name == "round" else getattr(xp, ufunc_name)
            ufunc(x, out=out)
            return
        if op == "erf" and x.dtype.kind == "f":
            erf(xp, x, out)
            return
        if op == "rsqrt" and x.dtype == out.dtype and x.dtype.kind == "f":
            xp.sqrt(x, out=out)
            xp.reciprocal(out, out=out)
            return
        _write(xp, out, fn(xp, x))

    kernel.__name__ = f"kernel_{op}"
    register_kernel(op)(kernel)


for _op in _UNARY:
    _make_unary(_op)


@register_kernel("clip")
def clip(xp: Any, attrs: dict, x: Any, out: Any) -> None:
    lo, hi = attrs.get("min"), attrs.get("max")
    _write(xp, out, xp.clip(x, lo, hi))
