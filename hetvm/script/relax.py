"""The ``R`` namespace: ``@R.function`` and the struct-info names.

Write ``from hetvm.script import relax as R``. Op calls such as ``R.add`` and
special forms such as ``R.dataflow()`` appear only inside decorated functions,
whose bodies are read by the parser and never run, so they need no Python
object here. The struct-info names exist because Python evaluates parameter
annotations when it defines a function; they return an inert placeholder.
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


def Tensor(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802 - TVM's name
    return _Annotation(*args, **kwargs)


def Shape(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802
    return _Annotation(*args, **kwargs)


def Tuple(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802
    return _Annotation(*args, **kwargs)


def Object(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802
    return _Annotation(*args, **kwargs)


Any = Object  # TVM 0.27's spelling of R.Object


def Prim(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802
    return _Annotation(*args, **kwargs)


def Callable(*args: _t.Any, **kwargs: _t.Any) -> _Annotation:  # noqa: N802
    return _Annotation(*args, **kwargs)
