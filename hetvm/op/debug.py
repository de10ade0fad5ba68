"""TVM Relax's run-time helpers: ``R.print``, ``R.assert_op`` and
``R.call_pure_packed``.

``R.print(*values, format="")`` and ``R.assert_op(condition, *format_args,
format="")`` are impure and return void (``R.Tuple()``), as in TVM; the VM runs
them as the global functions ``relax.run.print`` / ``relax.run.assert_op``
(hetvm/runtime/debug_funcs.py). ``R.call_pure_packed(func, *args,
sinfo_args=...)`` calls a packed function the caller vouches is pure (TVM's
``call_pure_packed``): it may stay in a dataflow block and be removed when
unread; the VM calls ``func`` by name.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import StructInfoError
from ..ir import expr as E
from ..ir import struct_info as S
from .base import DeviceBehavior, describe_arg, fail, make_call, register_op
from .effects import NO_MEMORY, OPAQUE
from .packed import _packed_arg

__all__ = ["print", "assert_op", "call_pure_packed"]

VOID = S.TupleStructInfo([])


def _infer_print(call: E.Call) -> S.StructInfo:
    fmt = call.attrs.get("format", "")
    if not isinstance(fmt, str):
        raise fail("print", f"format must be a string, got {fmt!r}")
    return VOID


def _infer_assert(call: E.Call) -> S.StructInfo:
    if not call.args:
        raise fail("assert_op", "needs a condition")
    cond = call.args[0].struct_info
    if isinstance(cond, S.TensorStructInfo):
        if cond.dtype not in (None, "bool") or cond.ndim not in (-1, 0):
            raise fail("assert_op", f"the condition must be a bool scalar, got {describe_arg(call.args[0])}")
    elif isinstance(cond, S.PrimStructInfo):
        if not (cond.dtype == "bool" or cond.dtype.startswith(("int", "uint"))):
            raise fail("assert_op", f"the condition must be a bool scalar, got {describe_arg(call.args[0])}")
    elif not isinstance(cond, S.ObjectStructInfo):
        raise fail("assert_op", f"the condition must be a bool scalar, got {describe_arg(call.args[0])}")
    fmt = call.attrs.get("format", "")
    if not isinstance(fmt, str):
        raise fail("assert_op", f"format must be a string, got {fmt!r}")
    return VOID


def _infer_call_pure_packed(call: E.Call) -> S.StructInfo:
    if not call.args or not isinstance(call.args[0], E.ExternFunc):
        raise fail("call_pure_packed", "the first argument must name a packed function")
    if not call.sinfo_args:
        raise fail("call_pure_packed", "needs sinfo_args (the struct info of its result), as in TVM")
    return call.sinfo_args[0]


register_op("print", _infer_print, pure=False, device_behavior=DeviceBehavior.MEMORY,
            attr_names=("format",), effects=NO_MEMORY, variadic=True,
            description="prints its values with a str.format string (impure, void)")  # fmt: skip
register_op("assert_op", _infer_assert, pure=False, device_behavior=DeviceBehavior.MEMORY,
            attr_names=("format",), effects=NO_MEMORY, variadic=True,
            description="raises when the bool scalar condition is false (impure, void)")  # fmt: skip
register_op("call_pure_packed", _infer_call_pure_packed, device_behavior=DeviceBehavior.MEMORY,
            effects=OPAQUE, variadic=True, description="a packed function call the caller declares pure")  # fmt: skip


def _values(op: str, values: Sequence[Any]) -> list[E.Expr]:
    try:
        return [_packed_arg(v) for v in values]
    except StructInfoError as e:
        raise fail(op, str(e)) from None


def print(*values: Any, format: str = "") -> E.Call:  # noqa: A001, A002 - TVM's names
    """``R.print(x, y, format="x: {}, y: {}")``: prints at run time (empty format:
    the values separated by spaces)."""
    fmt = format.value if isinstance(format, E.StringImm) else format
    return make_call("print", _values("print", values), {"format": fmt})


def assert_op(condition: Any, *format_args: Any, format: str = "") -> E.Call:  # noqa: A002 - TVM's name
    """``R.assert_op(cond, x, format="x: {}")``: raises at run time when ``cond``
    is false. The format arguments may also be given as one list (TVM's
    ``format_args=[...]``)."""
    if len(format_args) == 1 and isinstance(format_args[0], (list, tuple)):
        format_args = tuple(format_args[0])
    fmt = format.value if isinstance(format, E.StringImm) else format
    args = _values("assert_op", (condition, *format_args))
    return make_call("assert_op", args, {"format": fmt})


def call_pure_packed(func: Any, *args: Any, sinfo_args: Any = None) -> E.Call:
    """``R.call_pure_packed("f", x, sinfo_args=R.Tensor(...))``."""
    callee = func if isinstance(func, E.ExternFunc) else E.ExternFunc(func) if isinstance(func, str) else None
    if callee is None:
        raise fail("call_pure_packed", f"func must be a name or an ExternFunc, got {func!r}")
    if sinfo_args is None:
        sinfos: list[S.StructInfo] = []
    elif isinstance(sinfo_args, S.StructInfo):
        sinfos = [sinfo_args]
    else:
        sinfos = list(sinfo_args)
    return make_call("call_pure_packed", [callee, *_values("call_pure_packed", args)], {}, sinfos)
