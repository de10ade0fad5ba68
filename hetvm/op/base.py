"""Shared helpers for op registration and struct-info inference."""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.op_registry import DeviceBehavior, get_op, infer_call, register_op
from ..ir.vdevice import VDevice

__all__ = [
    "DeviceBehavior",
    "register_op",
    "make_call",
    "tensor_arg",
    "common_vdevice",
    "broadcast_shapes",
    "fail",
    "op_name",
    "norm_axis",
    "norm_axes",
    "shape_arg",
    "shape_product",
    "ceildiv",
    "dims_conflict",
    "is_float",
    "format_shape",
    "describe_arg",
]


def make_call(
    name: str,
    args: Sequence[E.Expr],
    attrs: dict[str, Any] | None = None,
    sinfo_args: Sequence[S.StructInfo] = (),
    span: Any = None,
) -> E.Call:
    """Builds a call of a registered op, inferring struct info when the args have it.

    A bare ``PrimExpr`` argument (``T.float32(2.0)``, ``n * 2``) is its PrimValue,
    as TVM's parser converts it."""
    args = [E.PrimValue(a) if isinstance(a, P.PrimExpr) else a for a in args]
    for i, arg in enumerate(args):
        if not isinstance(arg, E.Expr):
            raise fail(
                name,
                f"argument {i} must be an IR expression, got {type(arg).__name__} {arg!r:.60}"
                " (wrap constants with hetvm.ir.const)",
            )
    call = E.Call(get_op(name), tuple(args), E.Attrs(attrs or {}), tuple(sinfo_args), span=span)
    if all(a.struct_info is not None for a in call.args):
        call = E.replace(call, struct_info=infer_call(call))
    return call


def fail(op: str, message: str) -> StructInfoError:
    """An error naming the op (raise the result)."""
    return StructInfoError(f"op '{op}': {message}")


def describe_arg(expr: E.Expr) -> str:
    name = getattr(expr, "name_hint", None)
    sinfo = S.describe(expr.struct_info) if expr.struct_info is not None else "?"
    return f"'{name}' {sinfo}" if name else sinfo


def tensor_arg(call: E.Call, index: int, what: str = "") -> S.TensorStructInfo:
    """The TensorStructInfo of argument ``index``, or an error naming op and argument."""
    op = call.op.name  # type: ignore[attr-defined]
    if index >= len(call.args):
        raise fail(op, f"missing argument {index}{' (' + what + ')' if what else ''}")
    sinfo = call.args[index].struct_info
    if not isinstance(sinfo, S.TensorStructInfo):
        label = what or f"argument {index}"
        raise fail(op, f"{label} must be a tensor, got {describe_arg(call.args[index])}")
    return sinfo


def common_vdevice(sinfos: Sequence[S.StructInfo]) -> VDevice | None:
    """The vdevice shared by all tensor inputs; None if unknown or conflicting.

    A conflict is not an error: the device planner resolves it with a copy.
    """
    found: VDevice | None = None
    for s in sinfos:
        if isinstance(s, S.TensorStructInfo):
            if s.vdevice is None:
                continue
            if found is None:
                found = s.vdevice
            elif found != s.vdevice:
                return None
    return found


def broadcast_shapes(
    op: str, a: Sequence[P.PrimExpr], b: Sequence[P.PrimExpr]
) -> tuple[P.PrimExpr, ...]:
    """NumPy broadcasting over symbolic shapes; an error names both shapes."""
    out: list[P.PrimExpr] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else P.IntImm(1)
        y = b[-i] if i <= len(b) else P.IntImm(1)
        cx, cy = P.const_value(x), P.const_value(y)
        if cx == 1:
            out.append(y)
        elif cy == 1:
            out.append(x)
        elif P.prove_equal(x, y):
            out.append(x)
        elif cx is not None and cy is not None:
            raise fail(op, f"shapes {_fmt(a)} and {_fmt(b)} cannot be broadcast together")
        elif cx is not None or cy is not None:
            # Unprovable: a constant side (other than 1) must be the result,
            # since the symbolic side can only be 1 or equal to it.
            out.append(y if cx is None else x)
        else:
            # Two symbolic dims neither equal nor 1 for sure: the result is the
            # larger, or 0 where one is 0 (NumPy: 0 against 1 is 0). Taking one
            # side (as before) was wrong when that side is 1 at run time.
            out.append(P.mul(P.max_(x, y), P.min_(P.min_(x, y), 1)))
    return tuple(reversed(out))


def _fmt(shape: Sequence[P.PrimExpr]) -> str:
    return "(" + ", ".join(P.to_str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


format_shape = _fmt


# --------------------------------------------------------------------------
# helpers shared by the inference rules
# --------------------------------------------------------------------------


def op_name(call: E.Call) -> str:
    return call.op.name  # type: ignore[attr-defined]


def norm_axis(op: str, axis: int, ndim: int, what: str = "axis") -> int:
    """``axis`` in [0, ndim), accepting negatives; an error names op and range."""
    if not -ndim <= axis < ndim:
        raise fail(op, f"{what} {axis} is out of range for a tensor of {ndim} dimension(s)")
    return axis % ndim


def norm_axes(op: str, axes: Sequence[int], ndim: int, what: str = "axes") -> tuple[int, ...]:
    """Every axis normalised; repeated axes are an error."""
    out = tuple(norm_axis(op, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise fail(op, f"{what} {tuple(axes)} repeat an axis (tensor of {ndim} dimensions)")
    return out


def shape_arg(call: E.Call, index: int, what: str = "shape") -> tuple[tuple[P.PrimExpr, ...] | None, int]:
    """(values, ndim) of a shape-valued argument (ShapeExpr or a Var of shape)."""
    op = op_name(call)
    if index >= len(call.args):
        raise fail(op, f"missing argument {index} ({what})")
    sinfo = call.args[index].struct_info
    if not isinstance(sinfo, S.ShapeStructInfo):
        raise fail(op, f"{what} must be a shape, got {describe_arg(call.args[index])}")
    return sinfo.values, sinfo.ndim


def shape_product(dims: Sequence[P.PrimExpr]) -> P.PrimExpr:
    out: P.PrimExpr = P.IntImm(1)
    for d in dims:
        out = P.mul(out, d)
    return out


def ceildiv(a: P.IntLike, b: P.IntLike) -> P.PrimExpr:
    return P.floordiv(P.sub(P.add(a, b), 1), b)


def dims_conflict(a: P.PrimExpr, b: P.PrimExpr) -> bool:
    """True when two dimensions are provably different (both constant, unequal,
    or differing by a nonzero constant)."""
    diff = P.const_value(P.sub(a, b))
    return diff is not None and diff != 0


def is_float(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype == "bfloat16")
