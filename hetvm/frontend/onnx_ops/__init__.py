"""ONNX op converters, one module per op family, registered by op type.

A converter takes ``(ctx, node)`` (see :mod:`..onnx_context`) and returns the
node's output values: one value, or a list with one entry per output. Values
may be IR expressions or import-time constants; the importer folds nodes whose
inputs are all known before a converter is consulted, so converters only see
nodes with at least one run-time input.
"""

from __future__ import annotations

from .registry import CONVERTERS, FOLD_ONLY, OpSpec, converter, is_supported, lookup

__all__ = ["OpSpec", "converter", "lookup", "is_supported", "CONVERTERS", "FOLD_ONLY"]

from . import activation, attention, control_flow, conv_transpose, elementwise, index_nd, layout, loops, loss, nn, norm, pool_size, quantize, recurrent, reduce, resize, rotary, shape  # noqa: F401,I001  (registers converters)
