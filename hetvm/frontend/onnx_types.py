"""ONNX element types and value infos as hetvm dtypes and struct info."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import FrontendError
from ..ir import prim as P
from ..ir import struct_info as S

__all__ = ["np_dtype_of", "dtype_of", "input_struct_info", "is_anonymous_dim", "parse_attrs"]


def np_dtype_of(elem_type: int) -> np.dtype:
    """The NumPy dtype of an ONNX ``TensorProto`` element type."""
    from onnx import helper

    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError) as err:
        raise FrontendError(f"ONNX element type {elem_type} has no NumPy equivalent") from err


def dtype_of(elem_type: int) -> str:
    """The hetvm dtype string of an ONNX element type (``"float32"``, ``"bool"`` ...)."""
    dt = np_dtype_of(elem_type)
    return "bool" if dt == np.bool_ else str(dt)


def input_struct_info(
    value_info: Any,
    override: Sequence[Any] | None,
    sym_vars: dict[str, P.PrimVar],
) -> S.TensorStructInfo:
    """Struct info of a graph input.

    A ``dim_param`` becomes a PrimVar shared by name across inputs (``sym_vars``);
    a dimension with neither value nor name, or with an anonymous one (``?``,
    see :func:`is_anonymous_dim`), gets a fresh PrimVar named after the input. ``override`` (from ``shape_dict``) replaces the whole shape; its
    entries may be ints or names of symbolic dims.
    """
    ttype = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type"):
        raise FrontendError(
            f"graph input '{value_info.name}' is not a tensor (sequence, map and optional "
            f"inputs are not supported)"
        )
    dtype = dtype_of(ttype.elem_type)
    if override is not None:
        dims = [_dim(d, sym_vars) for d in override]
        return S.TensorStructInfo(dims, dtype)
    if not ttype.HasField("shape"):
        return S.TensorStructInfo(None, dtype)
    dims = []
    for i, d in enumerate(ttype.shape.dim):
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(P.IntImm(int(d.dim_value)))
        elif d.HasField("dim_param") and not is_anonymous_dim(d.dim_param):
            dims.append(_dim(d.dim_param, sym_vars))
        else:
            dims.append(_dim(f"{_ident(value_info.name)}_dim{i}", sym_vars))
    return S.TensorStructInfo(dims, dtype)


def is_anonymous_dim(name: str) -> bool:
    """A ``dim_param`` that says "unknown" rather than naming a dim.

    paddle2onnx writes ``?`` for every free dim and others write ``-1`` or
    ``None``; taken as names, all of an image's ``?`` dims would be one variable
    (forcing H == W == batch). Each such dim is its own variable instead, like a
    dim with neither value nor name.
    """
    text = name.strip()
    return not any(c.isalpha() for c in text) or text == "None"


def _dim(d: Any, sym_vars: dict[str, P.PrimVar]) -> P.PrimExpr:
    if isinstance(d, (int, np.integer)) and not isinstance(d, bool):
        if d < 0:
            raise FrontendError(f"shape_dict: dimension {d} is negative")
        return P.IntImm(int(d))
    if isinstance(d, P.PrimExpr):
        return d
    if isinstance(d, str):
        name = _ident(d)
        if name not in sym_vars:
            sym_vars[name] = P.PrimVar(name)
        return sym_vars[name]
    raise FrontendError(f"shape_dict: a dimension must be an int or a name, got {d!r}")


def _ident(name: str) -> str:
    """A printable identifier made from an ONNX name."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else "_" + out


def parse_attrs(node: Any) -> dict[str, Any]:
    """A node's attributes as Python values (tensors become NumPy arrays)."""
    from onnx import AttributeProto, helper, numpy_helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
            out[a.name] = a  # kept raw; ops with subgraphs are not supported
            continue
        value = helper.get_attribute_value(a)
        if a.type == AttributeProto.TENSOR:
            value = numpy_helper.to_array(value)
        elif a.type == AttributeProto.TENSORS:
            value = [numpy_helper.to_array(t) for t in value]
        elif a.type == AttributeProto.STRING:
            value = value.decode("utf-8", "replace")
        elif a.type == AttributeProto.STRINGS:
            value = [v.decode("utf-8", "replace") for v in value]
        elif isinstance(value, list):
            value = list(value)
        out[a.name] = value
    return out


ident = _ident
