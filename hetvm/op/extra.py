"""More TVM Relax ops: trigonometric/hyperbolic and float-class unary ops, integer
modulo and bitwise ops, scans (cumsum, cumprod), gather_elements and einsum.

Names, argument order and attrs follow TVM Relax (``R.tan``, ``R.floor_mod``,
``R.bitwise_and``, ``R.left_shift``, ``R.cumsum(data, axis, dtype, exclusive)``,
``R.gather_elements(data, indices, axis)``, ``R.einsum(operands, subscripts)``).
All are pure and run on the device of their inputs.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .attrs import as_int, as_tuple_arg, dtype_str
from .base import (
    broadcast_shapes,
    common_vdevice,
    dims_conflict,
    fail,
    format_shape,
    is_float,
    make_call,
    norm_axis,
    op_name,
    register_op,
    tensor_arg,
)

FLOAT_UNARY = ("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")
FLOAT_CLASS = ("isnan", "isinf", "isfinite")
INT_BINARY = ("mod", "floor_mod")
BITWISE_BINARY = ("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift")
SCANS = ("cumsum", "cumprod")

__all__ = [
    *FLOAT_UNARY, *FLOAT_CLASS, *INT_BINARY, *BITWISE_BINARY, "bitwise_not",
    "cumsum", "cumprod", "gather_elements", "einsum",
]  # fmt: skip


def _is_int(dtype: str | None) -> bool:
    return dtype is not None and dtype.startswith(("int", "uint"))


# --------------------------------------------------------------------------
# element-wise
# --------------------------------------------------------------------------


def _infer_float_unary(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    if x.dtype is not None and not is_float(x.dtype):
        raise fail(op_name(call), f"needs a floating-point tensor, got {x.dtype}")
    return x


def _infer_float_class(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    return S.TensorStructInfo(x.shape, "bool", x.ndim, x.vdevice)


def _infer_bitwise_not(call: E.Call) -> S.StructInfo:
    x = tensor_arg(call, 0, "data")
    if x.dtype is not None and not (_is_int(x.dtype) or x.dtype == "bool"):
        raise fail("bitwise_not", f"needs an integer or bool tensor, got {x.dtype}")
    return x


def _infer_binary(call: E.Call) -> S.StructInfo:
    op = op_name(call)
    a = tensor_arg(call, 0, "lhs")
    b = tensor_arg(call, 1, "rhs")
    if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
        raise fail(op, f"operand dtypes differ: lhs is {a.dtype}, rhs is {b.dtype}")
    dtype = a.dtype or b.dtype
    if op in BITWISE_BINARY and dtype is not None:
        allowed = _is_int(dtype) or (dtype == "bool" and not op.endswith("_shift"))
        if not allowed:
            raise fail(op, f"needs integer tensors, got {dtype}")
    vdev = common_vdevice([a, b])
    if a.shape is not None and b.shape is not None:
        return S.TensorStructInfo(broadcast_shapes(op, a.shape, b.shape), dtype, vdevice=vdev)
    ndim = max(a.ndim, b.ndim) if a.ndim != -1 and b.ndim != -1 else -1
    return S.TensorStructInfo(None, dtype, ndim, vdev)


for _name in FLOAT_UNARY:
    register_op(_name, _infer_float_unary, num_inputs=1, description="element-wise unary (float)")
for _name in FLOAT_CLASS:
    register_op(_name, _infer_float_class, num_inputs=1,
                description="element-wise float class test, result is bool")  # fmt: skip
register_op("bitwise_not", _infer_bitwise_not, num_inputs=1, description="element-wise bit inversion")
register_op("mod", _infer_binary, num_inputs=2,
            description="remainder of truncated division (sign of the dividend, C fmod)")  # fmt: skip
register_op("floor_mod", _infer_binary, num_inputs=2,
            description="remainder of floor division (sign of the divisor)")  # fmt: skip
for _name in BITWISE_BINARY:
    register_op(_name, _infer_binary, num_inputs=2, description="element-wise bit op with broadcasting")


def _unary_ctor(name: str, doc: str) -> Callable[[E.Expr], E.Call]:
    def ctor(data: E.Expr) -> E.Call:
        return make_call(name, [data])

    ctor.__name__ = name
    ctor.__doc__ = doc
    return ctor


def _binary_ctor(name: str, doc: str) -> Callable[[E.Expr, E.Expr], E.Call]:
    def ctor(x1: E.Expr, x2: E.Expr) -> E.Call:
        return make_call(name, [x1, x2])

    ctor.__name__ = name
    ctor.__doc__ = doc
    return ctor


tan = _unary_ctor("tan", "Element-wise tangent.")
asin = _unary_ctor("asin", "Element-wise arcsine.")
acos = _unary_ctor("acos", "Element-wise arccosine.")
atan = _unary_ctor("atan", "Element-wise arctangent.")
sinh = _unary_ctor("sinh", "Element-wise hyperbolic sine.")
cosh = _unary_ctor("cosh", "Element-wise hyperbolic cosine.")
asinh = _unary_ctor("asinh", "Element-wise inverse hyperbolic sine.")
acosh = _unary_ctor("acosh", "Element-wise inverse hyperbolic cosine.")
atanh = _unary_ctor("atanh", "Element-wise inverse hyperbolic tangent.")
isnan = _unary_ctor("isnan", "True where the element is NaN.")
isinf = _unary_ctor("isinf", "True where the element is +inf or -inf.")
isfinite = _unary_ctor("isfinite", "True where the element is neither inf nor NaN.")
bitwise_not = _unary_ctor("bitwise_not", "Element-wise bit inversion (logical not for bool).")
mod = _binary_ctor("mod", "x1 - trunc(x1 / x2) * x2: the sign of the dividend (C fmod).")
floor_mod = _binary_ctor("floor_mod", "x1 - floor(x1 / x2) * x2: the sign of the divisor.")
bitwise_and = _binary_ctor("bitwise_and", "Element-wise bit and, with NumPy broadcasting.")
bitwise_or = _binary_ctor("bitwise_or", "Element-wise bit or, with NumPy broadcasting.")
bitwise_xor = _binary_ctor("bitwise_xor", "Element-wise bit xor, with NumPy broadcasting.")
left_shift = _binary_ctor("left_shift", "x1 shifted left by x2 bits, with broadcasting.")
right_shift = _binary_ctor("right_shift", "x1 shifted right by x2 bits, with broadcasting.")


# --------------------------------------------------------------------------
# scans
# --------------------------------------------------------------------------


def _infer_scan(call: E.Call) -> S.StructInfo:
    op = op_name(call)
    data = tensor_arg(call, 0, "data")
    dtype = call.attrs["dtype"] or data.dtype
    axis = call.attrs["axis"]
    if axis is None:  # over the flattened tensor
        if data.shape is None:
            return S.TensorStructInfo(None, dtype, 1, data.vdevice)
        total: P.PrimExpr = P.IntImm(1)
        for d in data.shape:
            total = P.mul(total, d)
        return S.TensorStructInfo([total], dtype, vdevice=data.vdevice)
    if data.ndim == 0:
        raise fail(op, "data must have at least one dimension when axis is given")
    if data.ndim != -1:
        norm_axis(op, axis, data.ndim)
    return S.TensorStructInfo(data.shape, dtype, data.ndim, data.vdevice)


for _name in SCANS:
    register_op(_name, _infer_scan, num_inputs=1, attr_names=("axis", "dtype", "exclusive"),
                description="inclusive (or exclusive) scan along an axis")  # fmt: skip


def _scan_ctor(name: str, what: str) -> Callable[..., E.Call]:
    def ctor(
        data: E.Expr, axis: int | None = None, dtype: Any = None, exclusive: bool | None = None
    ) -> E.Call:
        attrs = {
            "axis": None if axis is None else as_int(name, "axis", axis),
            "dtype": dtype_str(dtype),
            "exclusive": bool(exclusive) if exclusive is not None else False,
        }
        return make_call(name, [data], attrs)

    ctor.__name__ = name
    ctor.__doc__ = (
        f"Cumulative {what} along ``axis`` (None: of the flattened tensor), in ``dtype``"
        " (None: data's); ``exclusive`` leaves each element out of its own result."
    )
    return ctor


cumsum = _scan_ctor("cumsum", "sum")
cumprod = _scan_ctor("cumprod", "product")


# --------------------------------------------------------------------------
# gather_elements
# --------------------------------------------------------------------------


def _infer_gather_elements(call: E.Call) -> S.StructInfo:
    op = "gather_elements"
    data = tensor_arg(call, 0, "data")
    indices = tensor_arg(call, 1, "indices")
    if indices.dtype is not None and not _is_int(indices.dtype):
        raise fail(op, f"indices must be integers, got {indices.dtype}")
    if data.ndim != -1 and indices.ndim != -1:
        if data.ndim != indices.ndim:
            raise fail(op, f"data and indices need the same rank, got {data.ndim} and {indices.ndim}")
        if data.ndim == 0:
            raise fail(op, "data must have at least one dimension")
        axis = norm_axis(op, call.attrs["axis"], data.ndim)
        if data.shape is not None and indices.shape is not None:
            for i, (d, k) in enumerate(zip(data.shape, indices.shape)):
                if i != axis and dims_conflict(d, k):
                    raise fail(
                        op,
                        f"indices {format_shape(indices.shape)} must match data "
                        f"{format_shape(data.shape)} on every axis but {axis}",
                    )
    return S.TensorStructInfo(indices.shape, data.dtype, indices.ndim, common_vdevice([data, indices]))


register_op("gather_elements", _infer_gather_elements, num_inputs=2, attr_names=("axis",),
            description="data gathered along axis at per-element indices (take_along_axis)")  # fmt: skip


def gather_elements(data: E.Expr, indices: E.Expr, axis: int = 0) -> E.Call:
    """out[i][j][k] = data[i][indices[i][j][k]][k] for axis 1 (negative indices count
    from the end); the result has the shape of ``indices``."""
    return make_call("gather_elements", [data, indices], {"axis": as_int("gather_elements", "axis", axis)})


# --------------------------------------------------------------------------
# einsum
# --------------------------------------------------------------------------


def parse_einsum(subscripts: str, ndims: Sequence[int]) -> tuple[list[str], str]:
    """The per-operand terms and the output term of ``subscripts``, with ``...``
    as ``.`` and the implicit output (letters seen once, sorted) made explicit."""
    eq = subscripts.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = [t.replace("...", ".") for t in lhs.split(",")]
    if len(terms) != len(ndims):
        raise fail("einsum", f"'{subscripts}' names {len(terms)} operand(s), got {len(ndims)}")
    for t in terms:
        if any(not (c.isalpha() or c == ".") for c in t) or t.count(".") > 1:
            raise fail("einsum", f"bad term '{t}' in '{subscripts}'")
    if arrow:
        out = rhs.replace("...", ".")
    else:
        letters = "".join(terms).replace(".", "")
        out = ("." if any("." in t for t in terms) else "") + "".join(
            sorted(c for c in set(letters) if letters.count(c) == 1)
        )
    return terms, out


def _infer_einsum(call: E.Call) -> S.StructInfo:
    op = "einsum"
    tup = call.args[0].struct_info
    if not isinstance(tup, S.TupleStructInfo) or not tup.fields:
        raise fail(op, "operands must be a non-empty tuple of tensors")
    fields = []
    for i, f in enumerate(tup.fields):
        if not isinstance(f, S.TensorStructInfo):
            raise fail(op, f"operands[{i}] must be a tensor, got {S.describe(f)}")
        fields.append(f)
    dtypes = {f.dtype for f in fields if f.dtype is not None}
    if len(dtypes) > 1:
        raise fail(op, f"operands have different dtypes {sorted(dtypes)}")
    dtype = dtypes.pop() if dtypes else None
    vdev = common_vdevice(fields)
    if any(f.ndim == -1 for f in fields):
        return S.TensorStructInfo(None, dtype, -1, vdev)
    terms, out = parse_einsum(call.attrs["subscripts"], [f.ndim for f in fields])
    sizes: dict[str, P.PrimExpr] = {}
    ellipsis: tuple[P.PrimExpr, ...] = ()
    ell_ndim = 0
    for term, f in zip(terms, fields):
        n_named = len(term.replace(".", ""))
        if ("." in term and f.ndim < n_named) or ("." not in term and f.ndim != n_named):
            raise fail(op, f"term '{term}' does not fit an operand of rank {f.ndim}")
        k = f.ndim - n_named
        ell_ndim = max(ell_ndim, k)
        if f.shape is None:
            continue
        dims = list(f.shape)
        if "." in term:
            at = term.index(".")
            ell = tuple(dims[at : at + k])
            ellipsis = broadcast_shapes(op, ellipsis, ell)
            dims = dims[:at] + dims[at + k :]
            term = term.replace(".", "")
        for c, d in zip(term, dims):
            prev = sizes.get(c)
            if prev is None or P.const_value(prev) == 1:
                sizes[c] = d
            elif P.const_value(d) != 1 and dims_conflict(prev, d):
                raise fail(op, f"subscript '{c}' has sizes {P.to_str(prev)} and {P.to_str(d)}")
    for c in out.replace(".", ""):
        if not any(c in t for t in terms):
            raise fail(op, f"output subscript '{c}' appears in no operand")
    out_ndim = len(out.replace(".", "")) + (ell_ndim if "." in out else 0)
    if any(f.shape is None for f in fields):
        return S.TensorStructInfo(None, dtype, out_ndim, vdev)
    shape: list[P.PrimExpr] = []
    for c in out:
        shape.extend(ellipsis if c == "." else (sizes[c],))
    return S.TensorStructInfo(shape, dtype, vdevice=vdev)


register_op("einsum", _infer_einsum, num_inputs=1, attr_names=("subscripts",),
            description="Einstein summation over a tuple of operands")  # fmt: skip


def einsum(operands: Any, subscripts: str) -> E.Call:
    """Einstein summation of ``operands`` (a tuple of tensors) as NumPy's
    ``einsum(subscripts, *operands)``."""
    if not isinstance(subscripts, str):
        raise fail("einsum", f"subscripts must be a string, got {subscripts!r}")
    return make_call("einsum", [as_tuple_arg("einsum", operands)], {"subscripts": subscripts})
