"""Normalisation and dropout: ``nn.batch_norm``, ``nn.layer_norm``, ``nn.dropout``."""

from __future__ import annotations

from typing import Sequence

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..attrs import as_int, axes_tuple
from ..base import (
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    is_float,
    make_call,
    norm_axes,
    norm_axis,
    register_op,
    tensor_arg,
)

__all__ = ["batch_norm", "layer_norm", "dropout"]

BN_ARGS = ("data", "gamma", "beta", "moving_mean", "moving_var")


def _check_param(
    op: str, what: str, data: S.TensorStructInfo, param: S.TensorStructInfo,
    expect: Sequence[P.PrimExpr],
) -> None:  # fmt: skip
    """A parameter tensor must have shape ``expect`` and data's dtype."""
    if data.dtype is not None and param.dtype is not None and param.dtype != data.dtype:
        raise fail(op, f"{what} is {param.dtype} but data is {data.dtype}")
    if param.ndim not in (-1, len(expect)):
        raise fail(
            op, f"{what} must have shape {format_shape(expect)}, got {S.describe(param)}"
        )
    if param.shape is not None and any(dims_conflict(a, b) for a, b in zip(param.shape, expect)):
        raise fail(
            op,
            f"{what} has shape {format_shape(param.shape)} but data {format_shape(data.shape or ())} "
            f"needs {format_shape(expect)}",
        )


def _infer_batch_norm(call: E.Call) -> S.StructInfo:
    op = "nn.batch_norm"
    sinfos = [tensor_arg(call, i, name) for i, name in enumerate(BN_ARGS)]
    data = sinfos[0]
    if data.dtype is not None and not is_float(data.dtype):
        raise fail(op, f"needs a floating-point tensor, got {data.dtype}")
    vdev = common_vdevice(sinfos)
    if data.ndim != -1:
        axis = norm_axis(op, call.attrs["axis"], data.ndim)
        if data.shape is not None:
            for name, s in zip(BN_ARGS[1:], sinfos[1:]):
                _check_param(op, name, data, s, (data.shape[axis],))
    out = S.TensorStructInfo(data.shape, data.dtype, data.ndim, vdev)
    stat = sinfos[3]
    stat_shape = (data.shape[norm_axis(op, call.attrs["axis"], data.ndim)],) if data.shape else None
    stat_out = S.TensorStructInfo(stat_shape, data.dtype or stat.dtype, 1, vdev)
    return S.TupleStructInfo([out, stat_out, stat_out])


def _infer_layer_norm(call: E.Call) -> S.StructInfo:
    op = "nn.layer_norm"
    data = tensor_arg(call, 0, "data")
    gamma = tensor_arg(call, 1, "gamma")
    beta = tensor_arg(call, 2, "beta")
    if data.dtype is not None and not is_float(data.dtype):
        raise fail(op, f"needs a floating-point tensor, got {data.dtype}")
    if data.ndim != -1:
        axes = norm_axes(op, call.attrs["axes"], data.ndim)
        if data.shape is not None:
            expect = tuple(data.shape[a] for a in axes)
            _check_param(op, "gamma", data, gamma, expect)
            _check_param(op, "beta", data, beta, expect)
    return S.TensorStructInfo(data.shape, data.dtype, data.ndim, common_vdevice([data, gamma, beta]))


def _infer_dropout(call: E.Call) -> S.StructInfo:
    data = tensor_arg(call, 0, "data")
    return S.TupleStructInfo([data, data])


register_op(
    "nn.batch_norm",
    _infer_batch_norm,
    num_inputs=5,
    attr_names=("axis", "epsilon", "center", "scale", "momentum", "training"),
    description="batch normalisation; result (output, new mean, new var)",
)
register_op(
    "nn.layer_norm",
    _infer_layer_norm,
    num_inputs=3,
    attr_names=("axes", "epsilon", "center", "scale"),
    description="layer normalisation over axes",
)
register_op("nn.dropout", _infer_dropout, num_inputs=1, attr_names=("rate",),
            description="dropout; result (output, mask); identity at inference")  # fmt: skip


def batch_norm(
    data: E.Expr,
    gamma: E.Expr,
    beta: E.Expr,
    moving_mean: E.Expr,
    moving_var: E.Expr,
    axis: int,
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
    momentum: float = 0.1,
    training: bool = True,
) -> E.Call:
    """Batch normalisation along ``axis``; a Tuple (output, mean, var) as in Relax.

    ``training`` False normalises with the moving statistics (inference).
    """
    attrs = {
        "axis": as_int("nn.batch_norm", "axis", axis),
        "epsilon": float(epsilon),
        "center": bool(center),
        "scale": bool(scale),
        "momentum": float(momentum),
        "training": bool(training),
    }
    return make_call("nn.batch_norm", [data, gamma, beta, moving_mean, moving_var], attrs)


def layer_norm(
    data: E.Expr,
    gamma: E.Expr,
    beta: E.Expr,
    axes: int | Sequence[int],
    epsilon: float = 1e-5,
    center: bool = True,
    scale: bool = True,
) -> E.Call:
    """Normalises over ``axes`` then applies gamma/beta (shape = data's dims at axes)."""
    attrs = {
        "axes": axes_tuple("nn.layer_norm", "axes", axes),
        "epsilon": float(epsilon),
        "center": bool(center),
        "scale": bool(scale),
    }
    return make_call("nn.layer_norm", [data, gamma, beta], attrs)


def dropout(data: E.Expr, rate: float = 0.5) -> E.Call:
    """Dropout; a Tuple (output, mask). hetvm compiles for inference: output = data."""
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise fail("nn.dropout", f"rate must be in [0, 1), got {rate}")
    return make_call("nn.dropout", [data], {"rate": rate})
