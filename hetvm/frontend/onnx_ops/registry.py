"""The converter registry: which function converts each ONNX op type, from which
opset. Its own module, so the converter modules import it and the package
imports them without either depending on the other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["OpSpec", "converter", "lookup", "is_supported", "CONVERTERS", "FOLD_ONLY"]


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
