"""ONNX op converters, one module per op family, registered by op type.

A converter takes ``(ctx, node)`` (see :mod:`..onnx_context`) and returns the
node's output values: one value, or a list with one entry per output. Values
may be IR expressions or import-time constants; the importer folds nodes whose
inputs are all known before a converter is consulted, so converters only see
nodes with at least one run-time input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["OpSpec", "converter", "lookup", "CONVERTERS", "FOLD_ONLY"]


@dataclass(frozen=True)
class OpSpec:
    """A converter and the opsets it handles (``since`` .. latest)."""

    op_type: str
    convert: Callable[..., Any]
    since: int = 1


CONVERTERS: dict[str, OpSpec] = {}

#: ops that import only when their inputs are known at import time
#: (they are folded with NumPy; no run-time conversion exists)
FOLD_ONLY = frozenset({"Constant", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"})


def converter(*op_types: str, since: int = 1) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers ``fn`` as the converter of ``op_types`` from opset ``since`` on."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op_type in op_types:
            CONVERTERS[op_type] = OpSpec(op_type, fn, since)
        return fn

    return deco


def lookup(op_type: str, opset: int) -> OpSpec | None:
    """The converter of ``op_type`` at ``opset``, None when unsupported."""
    spec = CONVERTERS.get(op_type)
    if spec is None or opset < spec.since:
        return None
    return spec


def is_supported(op_type: str, opset: int) -> bool:
    return lookup(op_type, opset) is not None or op_type in FOLD_ONLY


from . import activation, attention, control_flow, conv_transpose, elementwise, index_nd, layout, loss, nn, norm, pool_size, quantize, recurrent, reduce, resize, rotary, shape  # noqa: E402,F401,I001  (registers converters)
