"""Special forms of the dialects: ``R.shape``, ``R.const``, ``R.match_cast`` ...,
the struct-info names (``R.Tensor`` ...), ``T.min`` / ``T.int64(3)`` and
``I.vdevice``. Each reads its own arguments from the AST."""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from ..errors import HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ._values import (
    SINFO_NAMES,
    STATEMENT_FORMS,
    VALUE_FORMS,
    MatchCastForm,
    Namespace,
    describe,
    is_dtype,
    is_none,
    positional,
)
from ._vdevice import make_vdevice


class FormsMixin:
    """Part of the Evaluator: the special forms of R, T and I."""

    def relax_call(self, func: Namespace, node: ast.Call) -> Any:
        name = func.dotted
        if name in SINFO_NAMES:
            return self.sinfo_call(name, node)
        if name in STATEMENT_FORMS:
            raise self.err(node, f"R.{name}(...) is a statement, not a value")
        form = getattr(self, "_form_" + name, None) if name in VALUE_FORMS else None
        if form is not None:
            return form(node)
        return self.op_call(name, node)

    # -- special forms of R -----------------------------------------------
    def _form_shape(self, node: ast.Call) -> E.Expr:
        a = self.bind_args(node, "R.shape", ["value"], 1)
        return E.ShapeExpr(self.shape_values(a["value"]), span=self.diag.span(node))

    def _form_prim_value(self, node: ast.Call) -> E.Expr:
        a = self.bind_args(node, "R.prim_value", ["value"], 1)
        if isinstance(a["value"], ast.Name):
            var = self.scope.lookup(a["value"].id)
            if var is not None and isinstance(var.struct_info, S.PrimStructInfo):
                return var  # R.prim_value of a prim variable is the variable (TVM)
        return E.PrimValue(self.prim(a["value"], allow_float=True), span=self.diag.span(node))

    def _literal_str(self, node: ast.Call, fname: str) -> str:
        a = self.bind_args(node, fname, ["value"], 1)
        value = self.eval(a["value"])
        if not isinstance(value, str):
            raise self.err(a["value"], f"{fname} takes a string literal, got {describe(value)}")
        return value

    def _form_str(self, node: ast.Call) -> E.Expr:
        return E.StringImm(self._literal_str(node, "R.str"), span=self.diag.span(node))

    def _form_dtype(self, node: ast.Call) -> E.Expr:
        return E.DataTypeImm(self._literal_str(node, "R.dtype"), span=self.diag.span(node))

    def _form_ExternFunc(self, node: ast.Call) -> E.Expr:
        return E.ExternFunc(self._literal_str(node, "R.ExternFunc"), span=self.diag.span(node))

    def _form_TupleGetItem(self, node: ast.Call) -> E.Expr:
        a = self.bind_args(node, "R.TupleGetItem", ["tuple_value", "index"], 2)
        index = self.eval(a["index"])
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.err(a["index"], "R.TupleGetItem's index must be an integer literal")
        value = self.to_expr(self.eval(a["tuple_value"]), a["tuple_value"])
        try:
            return E.TupleGetItem(value, index, span=self.diag.span(node))
        except HetvmError as e:
            raise self.err(node, str(e)) from None

    def _form_tuple(self, node: ast.Call) -> E.Expr:
        if node.keywords:
            raise self.err(node, "R.tuple(*fields) takes positional arguments only")
        fields = tuple(self.to_expr(self.eval(a), a) for a in positional(self, node))
        return E.Tuple(fields, span=self.diag.span(node))

    def _form_match_cast(self, node: ast.Call) -> MatchCastForm:
        a = self.bind_args(node, "R.match_cast", ["value", "struct_info"], 2)
        value = self.to_expr(self.eval(a["value"]), a["value"])
        return MatchCastForm(value, self.sinfo_of(a["struct_info"]))

    def _form_const(self, node: ast.Call) -> E.Expr:
        a = self.bind_args(node, "R.const", ["value", "dtype"], 1)
        data = _const_data(self, a["value"])
        dtype = self.eval(a["dtype"]) if "dtype" in a else None
        if dtype is not None and not isinstance(dtype, str):
            raise self.err(a["dtype"], "R.const's dtype must be a string such as \"float32\"")
        if dtype is None:
            kind = np.asarray(data).dtype.kind
            dtype = {"b": "bool", "i": "int32", "u": "int32", "f": "float32"}.get(kind)
        try:
            array = np.asarray(data, dtype=np.bool_ if dtype == "bool" else dtype)
        except (TypeError, ValueError) as e:
            raise self.err(node, f"R.const: cannot make a {dtype} array: {e}") from None
        return E.Constant(array, span=self.diag.span(node))

    # -- struct info -------------------------------------------------------
    def sinfo_call(self, name: str, node: ast.Call) -> S.StructInfo:
        fname = f"R.{name}"
        if name in ("Object", "Any"):
            self.bind_args(node, fname, [], 0)
            return S.ObjectStructInfo()
        if name == "Tensor":
            a = self.bind_args(node, fname, ["shape", "dtype", "vdevice", "ndim"], 0)
            shape = None
            first = a.get("shape")
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and "dtype" not in a:
                a["dtype"] = a.pop("shape")  # TVM: R.Tensor("float32") is a dtype
            elif "shape" in a and not is_none(a["shape"]):
                shape = self._tensor_shape(a["shape"])
                if isinstance(shape, int):
                    a.setdefault("ndim", ast.Constant(shape))
                    shape = None
            dtype = self._opt_literal(a, "dtype", str, fname)
            ndim = self._opt_literal(a, "ndim", int, fname)
            vdev = self._opt_literal(a, "vdevice", str, fname)
            vdevice = self.resolve_vdevice(vdev, a["vdevice"]) if vdev is not None else None
            try:
                return S.TensorStructInfo(shape, dtype, -1 if ndim is None else ndim, vdevice)
            except HetvmError as e:
                raise self.err(node, str(e)) from None
        if name == "Shape":
            a = self.bind_args(node, fname, ["values", "ndim"], 0)
            values = None
            if "values" in a and not is_none(a["values"]):
                values = self.shape_values(a["values"])
            ndim = self._opt_literal(a, "ndim", int, fname)
            try:
                return S.ShapeStructInfo(values, -1 if ndim is None else ndim)
            except HetvmError as e:
                raise self.err(node, str(e)) from None
        if name == "Tuple":
            if node.keywords:
                raise self.err(node, "R.Tuple(*fields) takes positional arguments only")
            fields = list(positional(self, node))
            if len(fields) == 1 and isinstance(fields[0], (ast.List, ast.Tuple)):
                fields = list(fields[0].elts)
            return S.TupleStructInfo([self.sinfo_of(f) for f in fields])
        if name == "Prim":
            a = self.bind_args(node, fname, ["dtype", "value"], 0)
            dtype = self._opt_literal(a, "dtype", str, fname)
            value = self.prim(a["value"], allow_float=True) if "value" in a else None
            if dtype is None and value is None:
                raise self.err(node, "R.Prim needs a dtype or a value")
            return S.PrimStructInfo(dtype or value.dtype, value)  # type: ignore[union-attr]
        # Callable
        a = self.bind_args(node, fname, ["params", "ret", "purity", "derive_func"], 0)
        params = None
        if "params" in a and not is_none(a["params"]):
            pnode = a["params"]
            elts = pnode.elts if isinstance(pnode, (ast.List, ast.Tuple)) else [pnode]
            params = [self.sinfo_of(p) for p in elts]
        ret = self.sinfo_of(a["ret"]) if "ret" in a and not is_none(a["ret"]) else None
        purity = self._opt_literal(a, "purity", bool, fname)
        if purity is None:  # TVM's defaults: an opaque callable may have effects
            purity = params is not None
        return S.FuncStructInfo(params, ret, purity)

    def _tensor_shape(self, node: ast.AST) -> tuple[P.PrimExpr, ...] | int:
        """A tensor's shape: dims, or a variable holding a shape (``R.Tensor(sh)``
        with ``sh: R.Shape([m, n])`` -> its values; only its rank when unknown)."""
        if isinstance(node, ast.Name) and self.scope.lookup(node.id) is not None:
            var = self.scope.lookup(node.id)
            sinfo = var.struct_info  # type: ignore[union-attr]
            if isinstance(sinfo, S.ShapeStructInfo):
                return sinfo.values if sinfo.values is not None else sinfo.ndim
            raise self.err(node, f"R.Tensor's shape '{node.id}' is not a shape, it is {S.describe(sinfo)}")
        return self.shape_values(node)

    def _opt_literal(self, a: dict[str, ast.AST], key: str, kind: type, fname: str) -> Any:
        if key not in a:
            return None
        value = self.eval(a[key])
        if value is None:
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.err(a[key], f"{fname}: '{key}' must be a {kind.__name__} literal, got {describe(value)}")
        return value

    # -- T and I -------------------------------------------------------------
    def tir_call(self, func: Namespace, node: ast.Call) -> Any:
        name = func.dotted
        if name in ("min", "max"):
            if len(node.args) != 2 or node.keywords:
                raise self.err(node, f"T.{name}(a, b) takes two arguments")
            a, b = self.prim(node.args[0]), self.prim(node.args[1])
            return P.min_(a, b) if name == "min" else P.max_(a, b)
        if is_dtype(name):
            if not node.args:
                raise self.err(
                    node, f"T.{name}() declares a shape variable: write 'n = T.{name}()' as a statement"
                )
            if len(node.args) != 1 or node.keywords:
                raise self.err(node, f"T.{name}(value) takes one argument")
            value = self.eval(node.args[0])
            if name.startswith(("float", "bfloat")):
                try:
                    return P.FloatImm(float(value), name)
                except (TypeError, ValueError):
                    raise self.err(node, f"T.{name} needs a number, got {describe(value)}") from None
            if isinstance(value, bool) or isinstance(value, int):
                return P.IntImm(int(value), name)
            raise self.err(node, f"T.{name} needs an integer literal, got {describe(value)}")
        raise self.err(node.func, f"unknown name T.{name} (only shape variables and T.min/T.max are supported)")

    def ir_call(self, func: Namespace, node: ast.Call) -> Any:
        if func.dotted == "StringType" and not node.args and not node.keywords:
            # TVM 0.27 annotates a string's binding `s: I.StringType() = R.str("a")`;
            # hetvm's strings are objects
            return S.ObjectStructInfo()
        if func.dotted == "vdevice":
            a = self.bind_args(node, "I.vdevice", ["target", "vdevice_id", "memory_scope"], 0)
            values = {k: self.eval(v) for k, v in a.items()}
            try:
                return make_vdevice(
                    values.get("target", "llvm"),
                    values.get("vdevice_id", 0),
                    values.get("memory_scope", "global"),
                )
            except HetvmError as e:
                raise self.err(node, str(e)) from None
        raise self.err(node.func, f"I.{func.dotted}(...) is not supported here")


def _const_data(ev: Any, node: ast.AST) -> Any:
    """Nested lists of numbers for R.const; "nan"/"inf" strings and float("nan") allowed."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_const_data(ev, e) for e in node.elts]
    value = ev.eval(node)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ev.err(node, f"R.const: cannot read a number from {value!r}") from None
    if isinstance(value, (bool, int, float)):
        return value
    raise ev.err(node, f"R.const takes numbers or nested lists of numbers, got {describe(value)}")


