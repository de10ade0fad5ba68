"""Text of the leaves of the script: shape expressions, struct info, literals, constants.

Kept apart from the statement printer so both the module printer and
``print_node`` (used in error messages) share one spelling of every value.
The spellings are those TVM 0.27 prints (``R.Any``, ``T.int64``,
``vdevice="cuda:0:global"``); see docs/script.md.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.vdevice import VDevice

PrimNamer = Callable[[P.PrimVar], str]


def _default_namer(var: P.PrimVar) -> str:
    return var.name


class ValueContext:
    """What leaf printing needs from its surroundings: names of symbolic
    variables and the module's vdevice list (for ``"kind:i:scope"`` strings)."""

    def __init__(
        self, prim_namer: PrimNamer | None = None, vdevices: list[VDevice] | None = None
    ) -> None:
        self.prim_namer = prim_namer or _default_namer
        self.vdevices = list(vdevices or [])

    # ------------------------------------------------------------------
    # symbolic integer expressions
    # ------------------------------------------------------------------
    def prim(self, e: P.PrimExpr, parent_prec: int = 0) -> str:
        """Python-syntax text of a shape expression (``n * 2 + 1``, ``T.min(a, b)``)."""
        if isinstance(e, P.IntImm):
            if e.dtype not in ("int64", "bool"):
                return f"T.{e.dtype}({e.value})"
            if e.dtype == "bool":
                return "True" if e.value else "False"
            return str(e.value) if e.value >= 0 or parent_prec == 0 else f"({e.value})"
        if isinstance(e, P.FloatImm):
            return f"T.{e.dtype}({float_text(e.value)})"
        if isinstance(e, P.PrimVar):
            return self.prim_namer(e)
        if isinstance(e, P.Add):
            b = e.b
            if isinstance(b, P.IntImm) and b.value < 0:
                text = f"{self.prim(e.a, 1)} - {-b.value}"
            elif isinstance(b, P.Mul) and isinstance(b.b, P.IntImm) and b.b.value < 0:
                negated = b.a if b.b.value == -1 else P.Mul(b.a, P.IntImm(-b.b.value))
                text = f"{self.prim(e.a, 1)} - {self.prim(negated, 2)}"
            else:
                text = f"{self.prim(e.a, 1)} + {self.prim(b, 1)}"
            return f"({text})" if parent_prec > 1 else text
        for cls, sym in ((P.Mul, "*"), (P.FloorDiv, "//"), (P.FloorMod, "%")):
            if isinstance(e, cls):
                text = f"{self.prim(e.a, 2)} {sym} {self.prim(e.b, 3)}"  # type: ignore[attr-defined]
                return f"({text})" if parent_prec > 2 else text
        if isinstance(e, P.Min):
            return f"T.min({self.prim(e.a)}, {self.prim(e.b)})"
        if isinstance(e, P.Max):
            return f"T.max({self.prim(e.a)}, {self.prim(e.b)})"
        if isinstance(e, P._Compare):
            text = f"{self.prim(e.a, 1)} {e.symbol} {self.prim(e.b, 1)}"
            return f"({text})" if parent_prec > 0 else text
        return repr(e)

    def shape_tuple(self, values: tuple[P.PrimExpr, ...]) -> str:
        inner = ", ".join(self.prim(v) for v in values)
        return f"({inner},)" if len(values) == 1 else f"({inner})"

    def shape_list(self, values: tuple[P.PrimExpr, ...]) -> str:
        return "[" + ", ".join(self.prim(v) for v in values) + "]"

    # ------------------------------------------------------------------
    # vdevices
    # ------------------------------------------------------------------
    def vdevice_ref(self, vdev: VDevice) -> str | None:
        """``"kind:i:scope"`` when ``vdev`` is in the module's list (i counts per kind)."""
        pos = 0
        for known in self.vdevices:
            if known.target == vdev.target:
                if known == vdev:
                    return f"{vdev.target}:{pos}:{vdev.memory_scope}"
                pos += 1
        return None

    def vdevice_decl(self, vdev: VDevice) -> str:
        """``I.vdevice(target, id, scope)``; a target with extra keys prints as a dict."""
        if vdev.target_attrs:
            items = dict(vdev.target_attrs)
            items["kind"] = vdev.target
            target = self.literal({k: items[k] for k in sorted(items)})
        else:
            target = json.dumps(vdev.target)
        return f"I.vdevice({target}, {vdev.vdevice_id}, {json.dumps(vdev.memory_scope)})"

    def vdevice_in_sinfo(self, vdev: VDevice) -> str:
        ref = self.vdevice_ref(vdev)
        if ref is None:  # the declared vdevice of the same runtime kind and id (cpu -> llvm)
            from ._vdevice import resolve_device

            declared = resolve_device(vdev, self.vdevices)
            if declared.memory_scope == vdev.memory_scope:
                ref = self.vdevice_ref(declared)
        if ref is None:  # not declared in the module: spell it out by id
            ref = f"{vdev.target}:{vdev.vdevice_id}:{vdev.memory_scope}"
        return json.dumps(ref)

    # ------------------------------------------------------------------
    # struct info
    # ------------------------------------------------------------------
    def sinfo(self, s: S.StructInfo | None) -> str:
        """The annotation text of a struct info (``R.Tensor((n, 4), dtype="float32")``)."""
        if s is None or isinstance(s, S.ObjectStructInfo):
            return "R.Any"
        if isinstance(s, S.TensorStructInfo):
            parts: list[str] = []
            if s.shape is not None:
                parts.append(self.shape_tuple(s.shape))
            if s.dtype is not None:
                parts.append(f"dtype={json.dumps(s.dtype)}")
            if s.shape is None and s.ndim != -1:
                parts.append(f"ndim={s.ndim}")
            if s.vdevice is not None:
                parts.append(f"vdevice={self.vdevice_in_sinfo(s.vdevice)}")
            return "R.Tensor" if not parts else "R.Tensor(" + ", ".join(parts) + ")"
        if isinstance(s, S.ShapeStructInfo):
            if s.values is not None:
                return f"R.Shape({self.shape_list(s.values)})"
            return f"R.Shape(ndim={s.ndim})"
        if isinstance(s, S.PrimStructInfo):
            if s.value is None:
                return f"T.{s.dtype}"
            if s.dtype == "int64":
                return f"R.Prim(value={self.prim(s.value)})"
            return f"R.Prim({json.dumps(s.dtype)}, value={self.prim(s.value)})"
        if isinstance(s, S.TupleStructInfo):
            if not s.fields:
                return "R.Tuple"
            return "R.Tuple(" + ", ".join(self.sinfo(f) for f in s.fields) + ")"
        if isinstance(s, S.FuncStructInfo):
            if s.params is None:  # opaque: TVM's keyword form, its defaults left out
                parts = [] if isinstance(s.ret, S.ObjectStructInfo) else [f"ret={self.sinfo(s.ret)}"]
                if s.purity:
                    parts.append("purity=True")
                return "R.Callable" + (f"({', '.join(parts)})" if parts else "")
            inner = ", ".join(self.sinfo(p) for p in s.params)
            params = f"({inner},)" if len(s.params) == 1 else f"({inner})"
            return f"R.Callable({params}, {self.sinfo(s.ret)}, {s.purity})"
        raise TypeError(f"cannot print struct info {s!r}")

    # ------------------------------------------------------------------
    # plain data (attrs, func_attr, global infos)
    # ------------------------------------------------------------------
    def literal(self, value: Any, key: str = "") -> str:
        """A Python literal for attr data; VDevices named ``*vdevice*`` print by reference."""
        if value is None or isinstance(value, bool):
            return repr(value)
        if isinstance(value, np.bool_):
            return repr(bool(value))
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        if isinstance(value, (float, np.floating)):
            return float_literal(float(value))
        if isinstance(value, str):
            return json.dumps(value)
        if isinstance(value, VDevice):
            ref = self.vdevice_ref(value) if "vdevice" in key else None
            return json.dumps(ref) if ref is not None else self.vdevice_decl(value)
        if isinstance(value, P.PrimExpr):
            return self.prim(value)
        if isinstance(value, S.StructInfo):
            return self.sinfo(value)
        if isinstance(value, dict):  # keys sorted, as TVM prints its maps
            items = ", ".join(
                f"{json.dumps(str(k))}: {self.literal(value[k], str(k))}"
                for k in sorted(value, key=str)
            )
            return "{" + items + "}"
        if isinstance(value, (list, tuple)):
            return "[" + ", ".join(self.literal(v, key) for v in value) + "]"
        raise TypeError(f"cannot print attribute value {value!r}")


def without_prim_values(s: S.StructInfo | None) -> S.StructInfo | None:
    """``s`` with the values of its prim struct infos dropped (``R.Prim(value=5)``
    -> ``T.int64``), as TVM 0.27 prints binding and return annotations. The
    parser gives a variable so annotated its value's struct info back."""
    if isinstance(s, S.PrimStructInfo) and s.value is not None:
        return S.PrimStructInfo(s.dtype)
    if isinstance(s, S.TupleStructInfo):
        fields = [without_prim_values(f) for f in s.fields]
        if any(a is not b for a, b in zip(fields, s.fields)):
            return S.TupleStructInfo(fields)
    return s


def float_digits(x: float) -> str:
    """A finite float as TVM 0.27 prints it: integral values in full with ``.0``
    (``1e20`` -> ``100000000000000000000.0``), others with 17 significant digits
    (``0.1`` -> ``0.10000000000000001``). Both read back as the same double."""
    if x.is_integer():
        return f"{x:.1f}"
    return f"{x:.17g}"


def float_text(x: float) -> str:
    """A float inside ``T.float32(...)`` / ``R.const(...)``; non-finite as ``"nan"``."""
    if math.isnan(x) or math.isinf(x):
        return json.dumps(repr(x))  # "nan", "inf", "-inf" as TVM prints them
    return float_digits(x)


def float_literal(x: float) -> str:
    """A float as an attr value. Non-finite values print as ``float("inf")``,
    which both parsers read as a float; TVM prints the string ``"inf"``, which
    only constructors that convert with ``float()`` accept."""
    if math.isnan(x) or math.isinf(x):
        return f'float("{x!r}")'
    return float_digits(x)


def _array_items(data: np.ndarray) -> str:
    if data.ndim == 0:
        return _scalar_text(data[()])
    return "[" + ", ".join(_array_items(sub) for sub in data) + "]"


def _scalar_text(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return repr(bool(x))
    if isinstance(x, (np.integer, int)):
        return str(int(x))
    return float_text(float(x))


def constant_text(const: E.Constant) -> str:
    """``R.const(value, "dtype")``; arrays print inline as nested lists (round-trips)."""
    data = const.data
    dtype = "bool" if data.dtype == np.bool_ else str(data.dtype)
    return f"R.const({_array_items(data)}, {json.dumps(dtype)})"
