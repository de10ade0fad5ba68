"""Checking runtime values against param_info (at function entry and match_cast).

Tensors are checked for liveness, device, dtype and shape (binding symbolic
variables); NumPy inputs are turned into NDArrays on the parameter's device
when ``convert`` is set (the top-level call). Errors name what is checked.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import DeviceMismatchError, HetvmRuntimeError
from .device import Device
from .ndarray import NDArray, ShapeTuple, adopt, adopt_checked, adopter_for, np_dtype
from .ndarray import array as nd_array
from .shapes import ShapeBinder

__all__ = ["check_value", "param_checker", "MAX_DIM"]

# The largest value a shape holds: shapes are int64 (as in TVM), and no tensor
# holds more bytes than an int64 (NumPy's intp) counts.
MAX_DIM = 2**63 - 1


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_value(
    value: Any,
    info: dict,
    binder: ShapeBinder,
    what: str,
    device_of: Callable[[int], Device],
    convert: bool,
) -> Any:
    """``value`` checked (and converted when ``convert``) against ``info``."""
    kind = info["kind"]
    if kind == "object":
        return value
    if kind == "tensor":
        return _check_tensor(value, info, binder, what, device_of, convert)
    if kind == "shape":
        if isinstance(value, NDArray) or not isinstance(value, (tuple, list)):
            raise HetvmRuntimeError(
                f"{what} of function '{binder.func}' must be a shape, given {_describe(value)}"
            )
        if not all(_is_int(d) for d in value):
            raise HetvmRuntimeError(f"{what} of function '{binder.func}': bad shape {value!r}")
        shape = ShapeTuple(int(d) for d in value)
        for i, d in enumerate(shape):  # (a negative one may be a value, not a size)
            if not -MAX_DIM - 1 <= d <= MAX_DIM:
                raise HetvmRuntimeError(
                    f"{what} of function '{binder.func}': dimension {i} is {d}; a shape's "
                    f"values are int64, at most {MAX_DIM} (2**63 - 1) (given {tuple(shape)})"
                )
        _bind_shape(info, shape, binder, what)
        return shape
    if kind == "prim":
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if not isinstance(value, (int, float, bool)):
            raise HetvmRuntimeError(
                f"{what} of function '{binder.func}' must be a scalar, given {_describe(value)}"
            )
        pattern = info.get("value")
        if pattern is not None:
            binder.bind_value(what, pattern, value)
        return value
    # tuple
    if not isinstance(value, (tuple, list)) or isinstance(value, ShapeTuple):
        raise HetvmRuntimeError(
            f"{what} of function '{binder.func}' must be a tuple, given {_describe(value)}"
        )
    fields = info.get("fields")
    if fields is None:
        return tuple(value)
    if len(fields) != len(value):
        raise HetvmRuntimeError(
            f"{what} of function '{binder.func}': expected a tuple of {len(fields)} fields, "
            f"given {len(value)}"
        )
    return tuple(
        check_value(v, f, binder, f"{what} field {i}", device_of, convert)
        for i, (v, f) in enumerate(zip(value, fields))
    )


def param_checker(info: dict, what: str, device_of: Callable[[int], Device],
                  bounds: dict | None = None, raw: bool = False) -> Callable[..., Any]:  # fmt: skip
    """See :func:`_checker`; ``raw``: the check returns the tensor's backend
    array (a parameter only kernels read, ``codegen._raw_params``). A NumPy
    input that passes the short path is that array itself, read in place with
    no tensor made; any other value is checked and converted as usual, its
    tensor held by the binder for the call."""
    check = _checker(info, what, device_of, bounds, raw)
    if not raw:
        return check

    def raw_check(value: Any, binder: ShapeBinder, convert: bool) -> Any:
        out = check(value, binder, convert)
        if out.__class__ is np.ndarray:
            return out
        binder.keep.append(out)
        return out._data

    return raw_check


def _checker(info: dict, what: str, device_of: Callable[[int], Device], bounds: dict | None,
             raw: bool) -> Callable[..., Any]:  # fmt: skip
    """``check(value, binder, convert)``: :func:`check_value` for one parameter,
    with what it looks up made once (at VM load) and a short path for the input
    a caller passes most: a NumPy array of the parameter's dtype for a CPU
    tensor parameter, read in place. Anything else takes :func:`check_value`,
    so errors and conversions are the same.

    The short path checks the shape against a plan made here: each dimension is
    a number to compare or a variable to bind (within its ``bounds``, the
    function's ``sym_bounds``). A dimension that is an expression, or any
    mismatch, takes the general path, which binds the same way and says what
    is wrong."""

    def general(value: Any, binder: ShapeBinder, convert: bool) -> Any:
        return check_value(value, info, binder, what, device_of, convert)

    if info.get("kind") != "tensor" or not isinstance(info.get("dtype"), str):
        return general
    dtype = _dtype_of(info["dtype"])
    dev_index = info.get("device")
    pattern = info.get("shape")
    try:
        dev = device_of(dev_index if dev_index is not None else 0)
    except Exception:  # noqa: BLE001 - the general path raises the error at the call
        return general
    if dtype is None or dev.kind != "cpu" or pattern is None:
        return general
    plan = _dims_plan(pattern, bounds or {})
    if plan is None:  # an expression among the dims: the binder evaluates it
        def check_binder(value: Any, binder: ShapeBinder, convert: bool) -> Any:
            if convert and value.__class__ is np.ndarray and value.dtype is dtype:
                binder.bind_dims(what, pattern, value.shape)
                out = adopt_checked(value, dev)
                if out is not None:
                    out._killable = False
                    return out
            return general(value, binder, convert)

        return check_binder
    ndim = len(pattern)
    adopter = adopter_for(dev)

    def check(value: Any, binder: ShapeBinder, convert: bool) -> Any:
        if convert and value.__class__ is np.ndarray and value.dtype is dtype:
            shape = value.shape
            if len(shape) == ndim:
                env = binder.env
                for i, want, lo, hi in plan:
                    g = shape[i]
                    if want.__class__ is int:
                        if g != want:
                            break
                    else:
                        have = env.get(want)
                        if have is None:
                            if g < lo or (hi is not None and g > hi):
                                break
                            env[want] = g
                        elif have != g:
                            break
                else:
                    if raw:  # the array itself, where adopting it would succeed
                        flags = value.flags
                        if flags.c_contiguous and flags.aligned:
                            return value
                    else:
                        out = adopter(value)
                        if out is not None:
                            out._killable = False
                            return out
        return general(value, binder, convert)

    return check


def _dims_plan(pattern: list, bounds: dict) -> list[tuple] | None:
    """(index, number or variable name, lower bound, upper bound) per dimension
    of a parameter's shape pattern; None if one is an expression."""
    plan = []
    for i, p in enumerate(pattern):
        if type(p) is int:
            plan.append((i, p, 0, None))
        elif isinstance(p, list) and len(p) == 2 and p[0] == "var" and isinstance(p[1], str):
            bound = bounds.get(p[1]) or ()
            lo = bound[0] if len(bound) > 0 and bound[0] is not None else -(1 << 63)
            hi = bound[1] if len(bound) > 1 else None
            plan.append((i, p[1], lo, hi))
        else:
            return None
    return plan


def _check_tensor(value, info, binder, what, device_of, convert) -> NDArray:
    dev_index = info.get("device")
    want_dev = device_of(dev_index if dev_index is not None else 0)
    dtype = info.get("dtype")
    if not isinstance(value, NDArray):
        if not convert or not isinstance(value, (np.ndarray, np.generic, int, float, bool)):
            raise HetvmRuntimeError(
                f"{what} of function '{binder.func}' must be a tensor, given {_describe(value)}"
            )
        host = np.asarray(value)
        # (a dtype comparison first: str() of a dtype costs more than the copy)
        if dtype is not None and host.dtype != _dtype_of(dtype) and str(host.dtype) != dtype:
            raise HetvmRuntimeError(
                f"{what} of function '{binder.func}': expected dtype {dtype}, given {host.dtype}"
            )
        _bind_shape(info, host.shape, binder, what)
        out = adopt(host, want_dev)  # read in place where it can be (never written)
        if out is None:
            out = nd_array(host, want_dev)
        out._killable = False
        return out
    if not value.alive:
        raise HetvmRuntimeError(f"{what} of function '{binder.func}' is a released NDArray")
    if dev_index is not None and value.device is not want_dev:
        raise DeviceMismatchError(
            f"{what} of function '{binder.func}' is on {value.device} but the function expects "
            f"it on {want_dev}; copy it with .copyto(...)"
        )
    if dtype is not None and value.dtype != dtype:
        raise HetvmRuntimeError(
            f"{what} of function '{binder.func}': expected dtype {dtype}, given {value.dtype}"
        )
    _bind_shape(info, value.shape, binder, what)
    return value


def _dtype_of(name: str) -> Any:
    """The NumPy dtype a parameter's dtype names (None: not one NumPy knows)."""
    try:
        return np_dtype(name)
    except HetvmRuntimeError:
        return None


def _bind_shape(info: dict, shape: tuple, binder: ShapeBinder, what: str) -> None:
    pattern = info.get("shape")
    if pattern is not None:
        binder.bind_dims(what, pattern, tuple(shape))
        return
    ndim = info.get("ndim", -1)
    if ndim is not None and ndim >= 0 and ndim != len(shape):
        raise HetvmRuntimeError(
            f"{what} of function '{binder.func}': expected {ndim} dimension(s), "
            f"given {len(shape)}: {tuple(shape)}"
        )


def _describe(value: Any) -> str:
    if isinstance(value, NDArray):
        return repr(value)
    if isinstance(value, np.ndarray):
        return f"ndarray {value.shape} {value.dtype}"
    return f"{type(value).__name__} {value!r}"[:120]
