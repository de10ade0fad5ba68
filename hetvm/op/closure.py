"""Closures, as TVM Relax writes them after LambdaLift: ``R.make_closure(f, (captured,))``
and ``R.invoke_closure(clo, (args,), sinfo_args=...)`` / ``R.invoke_pure_closure``.

A closure is a module function with some trailing parameters bound (TVM binds the
captured values *last*: ``f(*args, *captured)``). The parser makes them of a local
``def`` that captures variables (script/_local_functions.py); the VM runs them as
``vm.builtin.make_closure`` / ``vm.builtin.invoke_closure`` (runtime/builtins.py).

Memory: a closure holds its captured values, so both ops are OPAQUE (the result
may be any argument): the value analysis keeps a captured tensor alive as long as
the closure, and an invocation's result may be one of them.
"""

from __future__ import annotations

from typing import Any

from ..ir import expr as E
from ..ir import struct_info as S
from .base import DeviceBehavior, describe_arg, fail, make_call, register_op
from .effects import OPAQUE

__all__ = ["make_closure", "invoke_closure", "invoke_pure_closure"]


def _infer_make_closure(call: E.Call) -> S.StructInfo:
    func, captured = call.args
    fsinfo = func.struct_info
    if not isinstance(fsinfo, S.FuncStructInfo):
        raise fail("make_closure", f"the first argument must be a function, got {describe_arg(func)}")
    if not isinstance(captured.struct_info, S.TupleStructInfo):
        raise fail("make_closure", f"the captured values must be a tuple, got {describe_arg(captured)}")
    k = len(captured.struct_info.fields)
    if fsinfo.params is None:
        return S.FuncStructInfo(None, fsinfo.ret, fsinfo.purity)
    if k > len(fsinfo.params):
        raise fail("make_closure", f"captures {k} value(s) but the function takes {len(fsinfo.params)}")
    for i, (want, got) in enumerate(zip(fsinfo.params[len(fsinfo.params) - k:], captured.struct_info.fields)):
        if not S.could_match(want, got):
            raise fail(
                "make_closure",
                f"captured value {i} is {S.describe(got)}, the parameter it binds is {S.describe(want)}",
            )
    # what is left to pass (TVM infers R.Any here; the remaining signature is as true)
    return S.FuncStructInfo(list(fsinfo.params[: len(fsinfo.params) - k]), fsinfo.ret, fsinfo.purity)


def _infer_invoke(name: str):
    def infer(call: E.Call) -> S.StructInfo:
        clo, args = call.args
        if not isinstance(clo.struct_info, (S.FuncStructInfo, S.ObjectStructInfo)):
            raise fail(name, f"the first argument must be a closure, got {describe_arg(clo)}")
        if not isinstance(args.struct_info, S.TupleStructInfo):
            raise fail(name, f"the arguments must be a tuple, got {describe_arg(args)}")
        if not call.sinfo_args:
            return S.ObjectStructInfo()
        if len(call.sinfo_args) == 1:
            return call.sinfo_args[0]
        return S.TupleStructInfo(list(call.sinfo_args))

    return infer


register_op("make_closure", _infer_make_closure, num_inputs=2, device_behavior=DeviceBehavior.MEMORY,
            effects=OPAQUE, description="a module function with its trailing parameters bound")  # fmt: skip
register_op("invoke_closure", _infer_invoke("invoke_closure"), pure=False, num_inputs=2,
            device_behavior=DeviceBehavior.MEMORY, effects=OPAQUE,
            description="calls a closure (impure: the closure may be)")  # fmt: skip
register_op("invoke_pure_closure", _infer_invoke("invoke_pure_closure"), num_inputs=2,
            device_behavior=DeviceBehavior.MEMORY, effects=OPAQUE,
            description="calls a closure the caller declares pure")  # fmt: skip


def _tuple(op: str, value: Any) -> E.Expr:
    if isinstance(value, E.Expr):
        return value
    if isinstance(value, (list, tuple)):
        return E.Tuple(tuple(value))
    raise fail(op, f"expected a tuple of values, got {value!r}")


def _sinfos(sinfo_args: Any) -> list[S.StructInfo]:
    if sinfo_args is None:
        return []
    if isinstance(sinfo_args, S.StructInfo):
        return [sinfo_args]
    return list(sinfo_args)


def make_closure(func: E.Expr, captured: Any = ()) -> E.Call:
    """``R.make_closure(cls.f, (x,))``: ``f`` with its last ``len(captured)`` parameters bound."""
    return make_call("make_closure", [func, _tuple("make_closure", captured)])


def invoke_closure(closure: E.Expr, args: Any = (), sinfo_args: Any = None) -> E.Call:
    """``R.invoke_closure(clo, (y,), sinfo_args=R.Tensor(...))``: calls ``clo(y)``."""
    return make_call("invoke_closure", [closure, _tuple("invoke_closure", args)], {}, _sinfos(sinfo_args))


def invoke_pure_closure(closure: E.Expr, args: Any = (), sinfo_args: Any = None) -> E.Call:
    """As :func:`invoke_closure`, for a closure the caller vouches is pure."""
    return make_call("invoke_pure_closure", [closure, _tuple("invoke_pure_closure", args)], {}, _sinfos(sinfo_args))
