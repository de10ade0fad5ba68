"""Struct info: what the compiler knows about a value (kind, shape, dtype, device).

Mirrors Relax: every expression carries one. Shapes are tuples of
:class:`~hetvm.ir.prim.PrimExpr`; unknown parts are ``None`` (shape), ``None``
(dtype) or ``-1`` (ndim).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from ..errors import StructInfoError
from . import prim
from .prim import IntLike, PrimExpr
from .vdevice import VDevice


class StructInfo:
    """Base class of struct info."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ObjectStructInfo(StructInfo):
    """Any value (R.Object / R.Any)."""


@dataclass(frozen=True, slots=True)
class PrimStructInfo(StructInfo):
    dtype: str = "int64"
    value: PrimExpr | None = None


def _shape_tuple(values: Iterable[IntLike] | None) -> tuple[PrimExpr, ...] | None:
    if values is None:
        return None
    return tuple(prim.as_prim(v) for v in values)


def _check_ndim(ndim: int, what: str) -> None:
    """``ndim`` is a rank or -1 (unknown), as in TVM; -2 is no rank at all."""
    if not isinstance(ndim, int) or isinstance(ndim, bool) or ndim < -1:
        raise StructInfoError(f"{what} ndim must be a non-negative integer or -1 (unknown), got {ndim!r}")


@dataclass(frozen=True, slots=True, init=False)
class ShapeStructInfo(StructInfo):
    values: tuple[PrimExpr, ...] | None
    ndim: int

    def __init__(self, values: Sequence[IntLike] | None = None, ndim: int = -1) -> None:
        vals = _shape_tuple(values)
        _check_ndim(ndim, "shape")
        if vals is not None:
            if ndim not in (-1, len(vals)):
                raise StructInfoError(f"shape {vals} does not have ndim {ndim}")
            ndim = len(vals)
        object.__setattr__(self, "values", vals)
        object.__setattr__(self, "ndim", ndim)


@dataclass(frozen=True, slots=True, init=False)
class TensorStructInfo(StructInfo):
    shape: tuple[PrimExpr, ...] | None
    dtype: str | None
    ndim: int
    vdevice: VDevice | None

    def __init__(
        self,
        shape: Sequence[IntLike] | None = None,
        dtype: str | None = None,
        ndim: int = -1,
        vdevice: VDevice | None = None,
    ) -> None:
        vals = _shape_tuple(shape)
        _check_ndim(ndim, "tensor")
        if vals is not None:
            if ndim not in (-1, len(vals)):
                raise StructInfoError(f"tensor shape {vals} does not have ndim {ndim}")
            ndim = len(vals)
        object.__setattr__(self, "shape", vals)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "ndim", ndim)
        object.__setattr__(self, "vdevice", vdevice)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape as ints when every dimension is a constant."""
        if self.shape is None:
            return None
        out = []
        for d in self.shape:
            c = prim.const_value(d)
            if c is None:
                return None
            out.append(c)
        return tuple(out)

    def with_vdevice(self, vdevice: VDevice | None) -> TensorStructInfo:
        return TensorStructInfo(self.shape, self.dtype, self.ndim, vdevice)


@dataclass(frozen=True, slots=True, init=False)
class TupleStructInfo(StructInfo):
    fields: tuple[StructInfo, ...]

    def __init__(self, fields: Sequence[StructInfo] = ()) -> None:
        object.__setattr__(self, "fields", tuple(fields))


@dataclass(frozen=True, slots=True, init=False)
class FuncStructInfo(StructInfo):
    params: tuple[StructInfo, ...] | None
    ret: StructInfo
    purity: bool

    def __init__(
        self,
        params: Sequence[StructInfo] | None = None,
        ret: StructInfo | None = None,
        purity: bool = True,
    ) -> None:
        object.__setattr__(self, "params", None if params is None else tuple(params))
        object.__setattr__(self, "ret", ret if ret is not None else ObjectStructInfo())
        object.__setattr__(self, "purity", purity)


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def dtype_nbytes(dtype: str) -> int:
    """Bytes per element of a dtype string ("bool" is one byte)."""
    import numpy as np

    if dtype == "bool":
        return 1
    try:
        return np.dtype(dtype).itemsize
    except TypeError as err:
        raise StructInfoError(f"unknown dtype '{dtype}'") from err


def sinfo_vdevices(sinfo: StructInfo) -> list[VDevice]:
    """All vdevices mentioned in a struct info, fields of tuples included."""
    out: list[VDevice] = []
    if isinstance(sinfo, TensorStructInfo) and sinfo.vdevice is not None:
        out.append(sinfo.vdevice)
    elif isinstance(sinfo, TupleStructInfo):
        for f in sinfo.fields:
            out.extend(sinfo_vdevices(f))
    elif isinstance(sinfo, FuncStructInfo):
        for p in sinfo.params or ():
            out.extend(sinfo_vdevices(p))
        out.extend(sinfo_vdevices(sinfo.ret))
    return out


def definable_vars(sinfo: StructInfo | None) -> list[prim.PrimVar]:
    """Symbolic vars a value of this struct info pins down by itself.

    Only a bare variable as a shape dimension (or prim value) counts: a
    parameter ``Tensor((n,))`` defines ``n``; ``Tensor((n + 1,))`` does not.
    """
    out: dict[prim.PrimVar, None] = {}
    if isinstance(sinfo, TensorStructInfo):
        dims: tuple = sinfo.shape or ()
    elif isinstance(sinfo, ShapeStructInfo):
        dims = sinfo.values or ()
    elif isinstance(sinfo, PrimStructInfo):
        dims = () if sinfo.value is None else (sinfo.value,)
    elif isinstance(sinfo, TupleStructInfo):
        dims = tuple(v for f in sinfo.fields for v in definable_vars(f))
    else:
        dims = ()
    for d in dims:
        if isinstance(d, prim.PrimVar):
            out.setdefault(d, None)
    return list(out)


def local_erase(sinfo: StructInfo, local: Iterable[prim.PrimVar]) -> StructInfo:
    """``sinfo`` with every part that mentions one of the ``local`` vars made unknown.

    A scope's result may not name the symbolic vars its own match_casts define.
    """
    drop = set(local)
    if not drop:
        return sinfo
    mentioned: set[prim.PrimVar] = set()
    _collect_vars(sinfo, mentioned)
    if not mentioned & drop:
        return sinfo
    return erase_to_well_defined(sinfo, mentioned - drop)


def mentioned_vars(sinfo: StructInfo | None) -> set[prim.PrimVar]:
    """The symbolic vars ``sinfo`` names anywhere (shapes, prim values, tuple fields)."""
    out: set[prim.PrimVar] = set()
    if sinfo is not None:
        _collect_vars(sinfo, out)
    return out


def _collect_vars(sinfo: StructInfo, out: set) -> None:
    dims: Iterable[PrimExpr] = ()
    if isinstance(sinfo, TensorStructInfo):
        dims = sinfo.shape or ()
    elif isinstance(sinfo, ShapeStructInfo):
        dims = sinfo.values or ()
    elif isinstance(sinfo, PrimStructInfo) and sinfo.value is not None:
        dims = (sinfo.value,)
    elif isinstance(sinfo, TupleStructInfo):
        for f in sinfo.fields:
            _collect_vars(f, out)
    for d in dims:
        out.update(prim.free_vars(d))


def erase_to_well_defined(sinfo: StructInfo, defined: Iterable[prim.PrimVar]) -> StructInfo:
    """``sinfo`` with every part that mentions a var outside ``defined`` made unknown.

    A function's return struct info may only use symbolic vars its parameters
    define; a shape computed from a var bound inside the body keeps its rank
    and dtype but loses its dimensions (TVM's EraseToWellDefined).
    """
    known = set(defined)

    def ok(exprs: Iterable[PrimExpr]) -> bool:
        return all(v in known for e in exprs for v in prim.free_vars(e))

    if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and not ok(sinfo.shape):
        return TensorStructInfo(None, sinfo.dtype, sinfo.ndim, sinfo.vdevice)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None and not ok(sinfo.values):
        return ShapeStructInfo(None, sinfo.ndim)
    if isinstance(sinfo, PrimStructInfo) and sinfo.value is not None and not ok([sinfo.value]):
        return PrimStructInfo(sinfo.dtype)
    if isinstance(sinfo, TupleStructInfo):
        fields = [erase_to_well_defined(f, known) for f in sinfo.fields]
        if any(a is not b for a, b in zip(fields, sinfo.fields)):
            return TupleStructInfo(fields)
    return sinfo


def strip_vdevice(sinfo: StructInfo) -> StructInfo:
    """The same struct info with every vdevice removed."""
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.with_vdevice(None) if sinfo.vdevice is not None else sinfo
    if isinstance(sinfo, TupleStructInfo):
        return TupleStructInfo([strip_vdevice(f) for f in sinfo.fields])
    return sinfo


def shapes_equal(a: Sequence[PrimExpr] | None, b: Sequence[PrimExpr] | None) -> bool:
    """Provable equality of two shapes (None only equals None)."""
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(prim.prove_equal(x, y) for x, y in zip(a, b))


def is_base_of(base: StructInfo, derived: StructInfo, check_vdevice: bool = True) -> bool:
    """True when every value described by ``derived`` is also described by ``base``.

    Used to check that a binding's annotation admits its value, and that a
    match_cast narrows rather than contradicts. ``check_vdevice=False`` ignores
    devices: in hetvm an annotation naming another device than the value's is
    a placement constraint that PlanDevices resolves with a copy, not a type
    error.
    """
    if isinstance(base, ObjectStructInfo):
        return True
    if isinstance(base, TensorStructInfo):
        if not isinstance(derived, TensorStructInfo):
            return False
        if base.dtype is not None and derived.dtype != base.dtype:
            return False
        if base.ndim != -1 and derived.ndim != base.ndim:
            return False
        if base.shape is not None and not shapes_equal(base.shape, derived.shape):
            return False
        # a tensor known to live on a device is not admitted by one that may live anywhere
        if check_vdevice and base.vdevice is not None and derived.vdevice != base.vdevice:
            return False
        return True
    if isinstance(base, ShapeStructInfo):
        if not isinstance(derived, ShapeStructInfo):
            return False
        if base.ndim != -1 and derived.ndim != base.ndim:
            return False
        if base.values is not None and not shapes_equal(base.values, derived.values):
            return False
        return True
    if isinstance(base, PrimStructInfo):
        if not isinstance(derived, PrimStructInfo) or derived.dtype != base.dtype:
            return False
        if base.value is not None:
            return derived.value is not None and prim.prove_equal(base.value, derived.value)
        return True
    if isinstance(base, TupleStructInfo):
        return (
            isinstance(derived, TupleStructInfo)
            and len(base.fields) == len(derived.fields)
            and all(is_base_of(b, d, check_vdevice) for b, d in zip(base.fields, derived.fields))
        )
    if isinstance(base, FuncStructInfo):
        if not isinstance(derived, FuncStructInfo):
            return False
        if base.purity and not derived.purity:
            return False
        if base.params is not None:
            # parameters are contravariant: the derived callable accepts at least as much
            if derived.params is None or len(derived.params) != len(base.params):
                return False
            if not all(is_base_of(d, b, check_vdevice) for b, d in zip(base.params, derived.params)):
                return False
        return is_base_of(base.ret, derived.ret, check_vdevice)
    return False


def could_match(a: StructInfo, b: StructInfo) -> bool:
    """True when some value could satisfy both (match_cast may succeed at run time)."""
    if isinstance(a, ObjectStructInfo) or isinstance(b, ObjectStructInfo):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, TensorStructInfo):
        assert isinstance(b, TensorStructInfo)
        if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
            return False
        if a.ndim != -1 and b.ndim != -1 and a.ndim != b.ndim:
            return False
        if a.shape is not None and b.shape is not None:
            for x, y in zip(a.shape, b.shape):
                cx, cy = prim.const_value(x), prim.const_value(y)
                if cx is not None and cy is not None and cx != cy:
                    return False
        return True
    if isinstance(a, TupleStructInfo):
        assert isinstance(b, TupleStructInfo)
        return len(a.fields) == len(b.fields) and all(
            could_match(x, y) for x, y in zip(a.fields, b.fields)
        )
    return True


def unify(a: StructInfo, b: StructInfo) -> StructInfo:
    """The most precise struct info describing both (used for If results)."""
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else None
        vdev = a.vdevice if a.vdevice == b.vdevice else None
        if a.shape is not None and shapes_equal(a.shape, b.shape):
            return TensorStructInfo(a.shape, dtype, vdevice=vdev)
        ndim = a.ndim if a.ndim == b.ndim else -1
        return TensorStructInfo(None, dtype, ndim, vdev)
    if isinstance(a, ShapeStructInfo) and isinstance(b, ShapeStructInfo):
        if a.values is not None and shapes_equal(a.values, b.values):
            return a
        return ShapeStructInfo(None, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, PrimStructInfo) and isinstance(b, PrimStructInfo) and a.dtype == b.dtype:
        if a.value is not None and b.value is not None and prim.prove_equal(a.value, b.value):
            return a
        return PrimStructInfo(a.dtype)
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo):
        if len(a.fields) == len(b.fields):
            return TupleStructInfo([unify(x, y) for x, y in zip(a.fields, b.fields)])
    if isinstance(a, FuncStructInfo) and isinstance(b, FuncStructInfo):
        return FuncStructInfo(None, unify(a.ret, b.ret), a.purity and b.purity)
    return ObjectStructInfo()


def describe(sinfo: StructInfo) -> str:
    """A short human description, e.g. ``Tensor((n, 4), float32, cuda:0)``."""
    if isinstance(sinfo, TensorStructInfo):
        parts = []
        if sinfo.shape is not None:
            parts.append("(" + ", ".join(prim.to_str(d) for d in sinfo.shape) + ")")
        elif sinfo.ndim != -1:
            parts.append(f"ndim={sinfo.ndim}")
        if sinfo.dtype is not None:
            parts.append(sinfo.dtype)
        if sinfo.vdevice is not None:
            parts.append(str(sinfo.vdevice))
        return f"Tensor({', '.join(parts)})"
    if isinstance(sinfo, ShapeStructInfo):
        if sinfo.values is not None:
            return "Shape([" + ", ".join(prim.to_str(d) for d in sinfo.values) + "])"
        return f"Shape(ndim={sinfo.ndim})"
    if isinstance(sinfo, PrimStructInfo):
        return f"Prim({sinfo.dtype})" if sinfo.value is None else f"Prim({prim.to_str(sinfo.value)})"
    if isinstance(sinfo, TupleStructInfo):
        return "Tuple(" + ", ".join(describe(f) for f in sinfo.fields) + ")"
    if isinstance(sinfo, FuncStructInfo):
        return "Callable"
    return "Object"
