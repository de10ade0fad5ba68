"""Frontends: turn models written elsewhere into hetvm IR.

``from_onnx`` imports an ONNX model. The ``onnx`` package is an optional extra
(``pip install hetvm[onnx]``); it is imported only when a model is imported, so
``import hetvm.frontend`` works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ..ir.module import IRModule

__all__ = ["from_onnx"]


def from_onnx(
    model: Any,
    shape_dict: dict[str, Any] | None = None,
    opset: int | None = None,
    keep_params_in_input: bool = False,
    unroll_recurrent: bool = False,
    dim_bounds: dict[str, int] | None = None,
) -> IRModule:
    """Imports an ONNX model (a ``ModelProto`` or a path); see :mod:`.onnx_importer`.
    ``dim_bounds`` (``{"batch": 32}``): upper bounds of symbolic dims, for which
    the memory plan is sized (without one a dim is planned with formulas)."""
    from .onnx_importer import from_onnx as _impl

    return _impl(model, shape_dict=shape_dict, opset=opset, keep_params_in_input=keep_params_in_input,
                 unroll_recurrent=unroll_recurrent, dim_bounds=dim_bounds)  # fmt: skip
