"""The ``R`` namespace: ``@R.function`` and the struct-info names.

Write ``from hetvm.script import relax as R``. Op calls such as ``R.add`` and
special forms such as ``R.dataflow()`` appear only inside decorated functions,
whose bodies are read by the parser and never run, so they need no Python
object here. The struct-info names exist because Python evaluates parameter
annotations when it defines a function; given plain values (``R.Tensor((2, 3),
"float32")``) they return real struct info, so Python code can build IR with
them as TVM users do, else an inert placeholder.
"""

from __future__ import annotations

import sys
import typing as _t

from ._decorate import caller_names, in_class_body, source_of

__all__ = ["function", "Tensor", "Shape", "Tuple", "Object", "Any", "Prim", "Callable"]


def function(
    func: _t.Callable[..., _t.Any] | None = None, *, pure: bool = True, private: bool = False
) -> _t.Any:
    """Decorator: a standalone function becomes a hetvm Function.

    Inside an ``@I.ir_module`` class it returns the method unchanged; the module
    decorator parses the whole class. Flags are read from the source.
    """

    def wrap(f: _t.Callable[..., _t.Any], frame: _t.Any) -> _t.Any:
        if in_class_body(f):
            return f
        from .parser import parse_function_source

        source, filename, first = source_of(f)
        return parse_function_source(source, filename, first, **caller_names(frame))

    frame = sys._getframe(1)
    if func is None:
        return lambda f: wrap(f, frame)
    return wrap(func, frame)


class _Annotation:
    """An inert value for parameter annotations evaluated by Python."""

    def __init__(self, *args: _t.Any, **kwargs: _t.Any) -> None:
        self.args = args
        self.kwargs = kwargs


def _struct_info(kind: str, args: tuple, kwargs: dict) -> _t.Any:
    """Real struct info where the arguments are plain values, so Python code can
    write TVM's ``relax.Var("x", R.Tensor((2, 3), "float32"))``; the inert
    placeholder otherwise (an annotation naming script variables)."""
    from ..errors import HetvmError
    from ..ir import prim as P
    from ..ir import struct_info as S
    from ..ir.vdevice import VDevice

    def dims(values: _t.Any) -> _t.Any:
        if values is None:
            return None
        out = []
        for d in values:
            if isinstance(d, str) and d.isidentifier():
                d = P.PrimVar(d, "int64")
            if isinstance(d, bool) or not isinstance(d, (int, P.PrimExpr)):
                raise TypeError(d)
            out.append(d)
        return out

    try:
        if kind == "Tensor":
            names = ["shape", "dtype", "vdevice", "ndim"]
            a = dict(zip(names, args), **kwargs)
            if isinstance(a.get("shape"), str) and "dtype" not in a:
                a["dtype"] = a.pop("shape")
            vdev = a.get("vdevice")
            if isinstance(vdev, str):
                parts = vdev.split(":")
                vdev = VDevice(parts[0], int(parts[1]) if len(parts) > 1 else 0, parts[2] if len(parts) > 2 else "global")
            return S.TensorStructInfo(dims(a.get("shape")), a.get("dtype"), a.get("ndim", -1), vdev)
        if kind == "Shape":
            a = dict(zip(["values", "ndim"], args), **kwargs)
            return S.ShapeStructInfo(dims(a.get("values")), a.get("ndim", -1))
        if kind == "Object":
            return S.ObjectStructInfo() if not args and not kwargs else _Annotation(*args, **kwargs)
        if kind == "Prim":
            a = dict(zip(["dtype", "value"], args), **kwargs)
            if isinstance(a.get("dtype"), str) and "value" not in a:
                return S.PrimStructInfo(a["dtype"])
        if kind == "Tuple" and not kwargs:
            fields = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
            if all(isinstance(f, S.StructInfo) for f in fields):
                return S.TupleStructInfo(fields)
    except (HetvmError, TypeError, ValueError):
        pass
    return _Annotation(*args, **kwargs)


def Tensor(*args: _t.Any, **kwargs: _t.Any) -> _t.Any:  # noqa: N802 - TVM's name
    return _struct_info("Tensor", args, kwargs)


def Shape(*args: _t.Any, **kwargs: _t.Any) -> _t.Any:  # noqa: N802
    return _struct_info("Shape", args, kwargs)


def Tuple(*args: _t.Any, **kwargs: _t.Any) -> _t.Any:  # noqa: N802
    return _struct_info("Tuple", args, kwargs)


def Object(*args: _t.Any, **kwargs: _t.Any) -> _t.Any:  # noqa: N802
    return _struct_info("Object", args, kwargs)


Any = Object  # TVM 0.27's spelling of R.Object


def Prim(*args: _t.Any, **kwargs: _t.Any) -> _t.Any:  # noqa: N802
    return _struct_info("Prim", args, kwargs)


def Callable(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802
    return _Annotation(*args, **kwargs)
