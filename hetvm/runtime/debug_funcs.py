"""The global functions ``R.print`` and ``R.assert_op`` run as (TVM's names
``relax.run.print`` / ``relax.run.assert_op``). Values are rendered as TVM
renders them: a tensor by its contents, a shape as a tuple, a tuple by its
fields; the format is Python's ``str.format``."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..errors import HetvmRuntimeError
from .ndarray import NDArray
from .registry import register_func

__all__ = ["ProgramAssertionError", "render", "relax_print", "relax_assert_op"]


class ProgramAssertionError(HetvmRuntimeError, AssertionError):
    """A program's ``R.assert_op`` failed (an AssertionError, as in TVM)."""


def render(value: Any) -> str:
    """The text of one printed value."""
    if isinstance(value, NDArray):
        return str(value.numpy())
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(render(v) for v in value) + ")"
    return str(value)


def _message(fmt: str, values: tuple) -> str:
    rendered = [render(v) for v in values]
    if not fmt:
        return " ".join(rendered)
    try:
        return fmt.format(*rendered)
    except (IndexError, KeyError, ValueError) as e:
        raise HetvmRuntimeError(f"R.print / R.assert_op: format {fmt!r} does not fit {len(values)} value(s): {e}") from None


def _truth(condition: Any) -> bool:
    if isinstance(condition, NDArray):
        host = condition.numpy()
        if host.size != 1 or host.dtype != np.bool_:
            raise HetvmRuntimeError(
                f"R.assert_op: the condition must be a bool scalar, got {host.dtype} {host.shape}"
            )
        return bool(host.reshape(()))
    if isinstance(condition, (bool, int, np.integer, np.bool_)):
        return bool(condition)
    raise HetvmRuntimeError(f"R.assert_op: the condition must be a bool scalar, got {condition!r}")


def relax_print(fmt: str, *values: Any) -> tuple:
    builtins.print(_message(fmt, values))
    return ()


def relax_assert_op(condition: Any, fmt: str, *values: Any) -> tuple:
    if not _truth(condition):
        message = "Assertion Failed"
        if values or fmt:
            message = _message(fmt, values) if fmt else ", ".join(render(v) for v in values)
        raise ProgramAssertionError(message)
    return ()


register_func("relax.run.print", relax_print, override=True)
register_func("relax.run.assert_op", relax_assert_op, override=True)
