"""Op calls of a script: ``R.<op>(...)`` -> the op's constructor in ``hetvm.op``,
called with the parsed values; keywords TVM spells differently are renamed and
vdevice strings resolved against the module's vdevice list first."""

from __future__ import annotations

import ast
from typing import Any

from ..errors import HetvmError
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.block_builder import normalize
from ..ir.op_registry import get_op
from ..ir.vdevice import VDevice
from ._diag import did_you_mean
from ._ops import (
    KEYWORD_ALIASES,
    SINFO_KEYWORDS,
    ctor_params,
    known_op_names,
    resolve_ctor,
    signature_of,
)
from ._values import SINFO_NAMES, VALUE_FORMS, positional
from ._vdevice import resolve_device

# TVM ops whose arguments are TIR (index maps, TE functions): out of scope, said so
_TIR_OPS = {
    "layout_transform": (
        "takes a TIR index map (a lambda or T.index_map), and TIR is out of scope in hetvm; "
        "a pure permutation of axes is R.permute_dims(x, axes=[...])"
    ),
    "emit_te": "builds TIR from a TE function, and TIR is out of scope in hetvm",
    "call_tir": "calls a TIR function, and TIR is out of scope in hetvm",
}


class OpCallMixin:
    """Part of the Evaluator: op calls and vdevice strings."""

    def op_call(self, name: str, node: ast.Call) -> Any:
        ctor = resolve_ctor(name)
        ops = known_op_names()
        if ctor is None and name in _TIR_OPS:
            raise self.err(node.func, f"R.{name} {_TIR_OPS[name]}")
        if ctor is None and name not in ops:
            hint = did_you_mean(name, [*ops, *VALUE_FORMS, *SINFO_NAMES, "call_packed"])
            raise self.err(node.func, f"unknown op 'R.{name}'{hint}")
        args = [self.arg_value(a) for a in positional(self, node)]
        params = ctor_params(ctor)
        kwargs: dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.err(kw.value, "unsupported Python syntax here: ** arguments")
            key = kw.arg
            if key == "attrs_type_key":
                continue
            if key in SINFO_KEYWORDS and key not in params:
                key = SINFO_KEYWORDS[key]
            elif key in KEYWORD_ALIASES and key not in params and KEYWORD_ALIASES[key] in params:
                key = KEYWORD_ALIASES[key]
            if key in ("sinfo_args", "out_sinfo"):
                kwargs[key] = self._sinfo_list(kw.value)
            else:
                kwargs[key] = self.arg_value(kw.value)
        if ctor is None:
            return self._generic_call(name, args, kwargs, node)
        value = self._call_ctor(name, ctor, args, kwargs, node)
        if isinstance(value, VDevice) and name == "device":
            # R.device(kind, index) names a declared vdevice by kind and index,
            # as TVM's R.device(device_type=2, index=0) does in hint_on_device
            return resolve_device(value, self.env.vdevices)
        return value

    def _sinfo_list(self, node: ast.AST) -> Any:
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.sinfo_of(e) for e in node.elts]
        return self.sinfo_of(node)

    def _call_ctor(self, name: str, ctor: Any, args: list, kwargs: dict, node: ast.Call) -> Any:
        sig = signature_of(ctor)
        try:
            bound = sig.bind(*args, **kwargs) if sig is not None else None
        except TypeError as e:
            plain = ", ".join(
                (f"*{p.name}" if p.kind is p.VAR_POSITIONAL else f"**{p.name}" if p.kind is p.VAR_KEYWORD else p.name)
                for p in sig.parameters.values()  # type: ignore[union-attr]
            )
            raise self.err(node, f"R.{name}({plain}): {e}") from None
        if bound is None:  # no signature to check against: call as written
            return self.span_of(self._invoke(name, ctor, args, kwargs, node), node)
        for pname, value in list(bound.arguments.items()):
            if "vdevice" in pname and isinstance(value, str):
                bound.arguments[pname] = self.resolve_vdevice(value, node)
        return self.span_of(self._invoke(name, ctor, list(bound.args), bound.kwargs, node), node)

    def _invoke(self, name: str, ctor: Any, args: list, kwargs: dict, node: ast.Call) -> Any:
        try:
            return ctor(*args, **kwargs)
        except HetvmError as e:
            raise self.err(node, str(e)) from None
        except (TypeError, ValueError) as e:
            raise self.err(node, f"R.{name}: {e}") from None

    def _generic_call(self, name: str, args: list, kwargs: dict, node: ast.Call) -> E.Expr:
        """A registered op without a Python constructor: args are IR, keywords attrs."""
        sinfo_args = kwargs.pop("sinfo_args", kwargs.pop("out_sinfo", ()))
        if isinstance(sinfo_args, S.StructInfo):
            sinfo_args = [sinfo_args]
        call = E.Call(
            get_op(name),
            tuple(self.to_expr(a, node) for a in args),
            E.Attrs(kwargs),
            tuple(sinfo_args),
            span=self.diag.span(node),
        )
        try:
            return normalize(call)
        except HetvmError as e:
            raise self.err(node, str(e)) from None

    def resolve_vdevice(self, text: str, node: ast.AST) -> VDevice:
        """``"cuda"``, ``"cuda:1"`` or ``"cuda:1:global"``: the i-th declared vdevice of a kind."""
        parts = text.split(":")
        kind = parts[0]
        try:
            index = int(parts[1]) if len(parts) > 1 and parts[1] else 0
        except ValueError:
            raise self.err(node, f"cannot read vdevice '{text}' (write 'kind:index')") from None
        scope = parts[2] if len(parts) > 2 else None
        same_kind = [v for v in self.env.vdevices if v.target == kind]
        if same_kind:
            if index >= len(same_kind):
                raise self.err(
                    node,
                    f"vdevice '{text}': the module declares only {len(same_kind)} "
                    f"'{kind}' vdevice(s)",
                )
            return same_kind[index]
        if self.env.vdevices:
            declared = ", ".join(sorted({v.target for v in self.env.vdevices}))
            raise self.err(
                node, f"vdevice '{text}' is not declared in I.module_global_infos (kinds: {declared})"
            )
        return VDevice(kind, index, scope or "global")
