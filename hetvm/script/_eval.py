"""Expressions of a script -> IR values, by reading the AST (nothing is executed).

Only literals, variables defined earlier in the script and the known
``R.`` / ``I.`` / ``T.`` names are understood. ``R.<op>(...)`` calls the op's
constructor in ``hetvm.op`` with the parsed values (how an op call becomes
IR), so inference errors surface as ParseErrors at the call.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import HetvmError, ParseError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.block_builder import normalize
from ..ir.op_registry import get_op
from ..ir.vdevice import VDevice
from ._diag import did_you_mean
from ._env import FunctionScope, ModuleEnv
from ._ops import (
    KEYWORD_ALIASES,
    SINFO_KEYWORDS,
    ctor_params,
    known_op_names,
    resolve_ctor,
    signature_of,
)
from ._vdevice import make_vdevice

SINFO_NAMES = ("Tensor", "Shape", "Tuple", "Object", "Any", "Prim", "Callable")
STATEMENT_FORMS = ("dataflow", "output", "func_attr", "function")
VALUE_FORMS = ("shape", "prim_value", "str", "dtype", "const", "tuple", "match_cast", "ExternFunc")
_DTYPE = re.compile(r"^(u?int\d+|float\d+|bfloat16|bool)$")


@dataclass(frozen=True)
class Namespace:
    """``R``, ``R.nn``, ``T``, ``I`` ... : a dotted name inside a dialect."""

    kind: str  # "relax" | "ir" | "tir"
    path: tuple[str, ...] = ()

    def child(self, name: str) -> Namespace:
        return Namespace(self.kind, self.path + (name,))

    @property
    def dotted(self) -> str:
        return ".".join(self.path)

    def __str__(self) -> str:
        prefix = {"relax": "R", "ir": "I", "tir": "T"}[self.kind]
        return ".".join((prefix, *self.path))


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


MODULE_REF = _Marker("the module")
FLOAT = _Marker("float")


@dataclass
class MatchCastForm:
    """``R.match_cast(value, sinfo)``: only valid as the value of a binding."""

    value: E.Expr
    sinfo: S.StructInfo


def is_dtype(name: str) -> bool:
    return bool(_DTYPE.match(name))


class Evaluator:
    """Reads expressions of one function (or of the module's class body)."""

    def __init__(self, env: ModuleEnv, scope: FunctionScope | None = None) -> None:
        self.env = env
        self.diag = env.diag
        self.scope = scope if scope is not None else FunctionScope()

    def err(self, node: ast.AST | None, message: str) -> ParseError:
        return self.diag.error(node, message)

    def span_of(self, expr: Any, node: ast.AST) -> Any:
        """``expr`` with a span at ``node`` when it is a node made here."""
        if isinstance(expr, E.Expr) and not isinstance(expr, (E.Var, E.GlobalVar, E.Op)):
            if expr.span is None:
                return E.replace(expr, span=self.diag.span(node))
        return expr

    # ------------------------------------------------------------------
    # generic evaluation
    # ------------------------------------------------------------------
    def eval(self, node: ast.AST) -> Any:
        method = getattr(self, "_eval_" + type(node).__name__, None)
        if method is None:
            raise self.err(node, f"unsupported Python syntax here: {type(node).__name__}")
        return method(node)

    def _eval_Constant(self, node: ast.Constant) -> Any:
        if node.value is Ellipsis or isinstance(node.value, (bytes, complex)):
            raise self.err(node, f"unsupported literal {node.value!r}")
        return node.value

    def _eval_Name(self, node: ast.Name) -> Any:
        name = node.id
        var = self.scope.lookup(name)
        if var is not None:
            return var
        if name in self.env.aliases:
            return Namespace(self.env.aliases[name])
        if name in self.scope.module_aliases or name == self.env.class_name:
            return MODULE_REF
        sym = self.symbol(name)
        if sym is not None:
            return sym
        if name == "float":
            return FLOAT
        raise self.undefined(node, name)

    def undefined(self, node: ast.AST, name: str) -> ParseError:
        if name in self.scope.left_dataflow:
            return self.err(
                node,
                f"variable '{name}' is local to its dataflow block; "
                f"list it in R.output(...) to use it after the block",
            )
        if name == "metadata":
            return self.err(
                node,
                "metadata[...] constants are not supported; write the constant inline "
                "as R.const(value, dtype) (hetvm prints constants that way)",
            )
        return self.err(
            node, f"undefined variable '{name}'" + did_you_mean(name, self.scope.visible_names())
        )

    def _eval_Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        if isinstance(base, Namespace):
            return base.child(node.attr)
        if base is MODULE_REF:
            if self.env.global_var is None:
                raise self.err(node, f"no module to look up function '{node.attr}' in")
            return self.env.global_var(node.attr, node)
        raise self.err(node, f"cannot take attribute '{node.attr}' of {_describe(base)}")

    def _eval_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self._elements(node.elts))

    def _eval_List(self, node: ast.List) -> list:
        return self._elements(node.elts)

    def _elements(self, elts: list[ast.expr]) -> list:
        for e in elts:
            if isinstance(e, ast.Starred):
                raise self.err(e, "unsupported Python syntax here: starred argument")
        return [self.eval(e) for e in elts]

    def _eval_Dict(self, node: ast.Dict) -> dict:
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                raise self.err(v, "unsupported Python syntax here: ** in a dict")
            key = self.eval(k)
            if not isinstance(key, (str, int)):
                raise self.err(k, f"dict keys must be strings, got {_describe(key)}")
            out[key] = self.eval(v)
        return out

    def _eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        numeric = isinstance(value, (int, float, P.PrimExpr)) and not isinstance(value, bool)
        if isinstance(node.op, ast.USub) and numeric:
            return -value
        if isinstance(node.op, ast.UAdd) and numeric:
            return value
        raise self.err(node, f"unsupported unary operator on {_describe(value)}")

    def _eval_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.eval(node.left), self.eval(node.right)
        return self._arith(node, a, b)

    def _arith(self, node: ast.BinOp, a: Any, b: Any) -> Any:
        ok = (int, P.PrimExpr)
        if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, ok) and isinstance(b, ok)):
            if isinstance(a, (E.Expr)) or isinstance(b, E.Expr):
                raise self.err(
                    node, "arithmetic operators on Relax values are not supported; use R.add, R.multiply ..."
                )
            raise self.err(node, "arithmetic is only supported on integers and shape variables")
        ops = {
            ast.Add: P.add, ast.Sub: P.sub, ast.Mult: P.mul, ast.FloorDiv: P.floordiv,
            ast.Mod: P.floormod,
        }  # fmt: skip
        fn = ops.get(type(node.op))
        if fn is None:
            raise self.err(node, f"unsupported operator {type(node.op).__name__} in a shape expression")
        try:
            result = fn(a, b)
        except HetvmError as e:
            raise self.err(node, str(e)) from None
        c = P.const_value(result) if isinstance(a, int) and isinstance(b, int) else None
        return c if c is not None else result

    def _eval_Subscript(self, node: ast.Subscript) -> Any:
        base = self.eval(node.value)
        index = self.eval(node.slice)
        if not isinstance(base, E.Expr):
            raise self.err(node, f"cannot index {_describe(base)}")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.err(node.slice, "a tuple index must be an integer literal")
        try:
            return E.TupleGetItem(base, index, span=self.diag.span(node))
        except HetvmError as e:
            raise self.err(node, str(e)) from None

    def _eval_Call(self, node: ast.Call) -> Any:
        func = self.eval(node.func)
        if func is FLOAT:
            args = [self.eval(a) for a in node.args]
            if len(args) != 1 or not isinstance(args[0], (str, int, float)) or node.keywords:
                raise self.err(node, 'float(...) takes one literal, e.g. float("nan")')
            try:
                return float(args[0])
            except ValueError:
                raise self.err(node, f"cannot read a float from {args[0]!r}") from None
        if isinstance(func, Namespace):
            handler = {"relax": self.relax_call, "tir": self.tir_call, "ir": self.ir_call}
            return handler[func.kind](func, node)
        if isinstance(func, (E.GlobalVar, E.Var)):
            return self.function_call(func, node)
        raise self.err(node.func, f"cannot call {_describe(func)}")

    # ------------------------------------------------------------------
    # conversions
    # ------------------------------------------------------------------
    def to_expr(self, value: Any, node: ast.AST) -> E.Expr:
        """A Relax expression from a parsed value (literals become PrimValue / StringImm)."""
        if isinstance(value, E.Expr):
            return value
        if isinstance(value, bool):
            return E.PrimValue(P.IntImm(int(value), "bool"), span=self.diag.span(node))
        if isinstance(value, (int, float, P.PrimExpr)):
            return E.PrimValue(value, span=self.diag.span(node))  # type: ignore[arg-type]
        if isinstance(value, str):
            return E.StringImm(value, span=self.diag.span(node))
        if isinstance(value, (list, tuple)):
            elts = getattr(node, "elts", None) or [node] * len(value)
            fields = tuple(self.to_expr(v, n) for v, n in zip(value, elts))
            return E.Tuple(fields, span=self.diag.span(node))
        if isinstance(value, MatchCastForm):
            raise self.err(node, "R.match_cast(...) can only be the whole value of a binding")
        raise self.err(node, f"expected a Relax expression, got {_describe(value)}")

    def to_sinfo(self, value: Any, node: ast.AST) -> S.StructInfo:
        if isinstance(value, S.StructInfo):
            return value
        if isinstance(value, Namespace):
            if value.kind == "relax" and value.dotted in SINFO_NAMES:
                return self.sinfo_call(value.dotted, ast.Call(func=node, args=[], keywords=[]))
            if value.kind == "tir" and len(value.path) == 1 and is_dtype(value.path[0]):
                return S.PrimStructInfo(value.path[0])
        raise self.err(node, f"expected struct info such as R.Tensor(...), got {_describe(value)}")

    def sinfo_of(self, node: ast.AST) -> S.StructInfo:
        return self.to_sinfo(self.eval(node), node)

    def arg_value(self, node: ast.AST) -> Any:
        """An op argument: IR where the script has IR, Python data otherwise."""
        return self._arg(self.eval(node), node)

    def _arg(self, value: Any, node: ast.AST) -> Any:
        if isinstance(value, (list, tuple)):
            elts = getattr(node, "elts", None) or [node] * len(value)
            items = [self._arg(v, n) for v, n in zip(value, elts)]
            if any(isinstance(i, E.Expr) for i in items):
                return self.to_expr(items, node)
            return tuple(items)
        if isinstance(value, Namespace):
            return self.to_sinfo(value, node)
        if isinstance(value, MatchCastForm) or value is MODULE_REF or value is FLOAT:
            raise self.err(node, f"{_describe(value)} cannot be an argument")
        if isinstance(value, dict):
            return {k: self._arg(v, node) for k, v in value.items()}
        return value

    # ------------------------------------------------------------------
    # shape variables and integer expressions
    # ------------------------------------------------------------------
    def symbol(self, name: str) -> P.PrimVar | None:
        """The function's shape variable ``name`` (module-level names made per function)."""
        if name in self.scope.syms:
            return self.scope.syms[name]
        if name in self.env.typevars:
            var = P.PrimVar(name, self.env.typevars[name])
            self.scope.syms[name] = var
            return var
        return None

    def define_symbol(self, name: str, dtype: str = "int64") -> P.PrimVar:
        var = self.symbol(name)
        if var is None:
            var = P.PrimVar(name, dtype)
            self.scope.syms[name] = var
        return var

    def prim(self, node: ast.AST, *, allow_float: bool = False) -> P.PrimExpr:
        """A shape expression: ints, shape variables (names or strings), + - * // %, T.min."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                return self.define_symbol(v)
            if isinstance(v, bool):
                return P.IntImm(int(v), "bool")
            if isinstance(v, int):
                return P.IntImm(v)
            if isinstance(v, float) and allow_float:
                return P.FloatImm(v)
            raise self.err(node, f"expected an integer or a shape variable, got {v!r}")
        if isinstance(node, ast.Name):
            var = self.symbol(node.id)
            if var is None:
                raise self.err(
                    node,
                    f"undefined shape variable '{node.id}'; declare it with "
                    f"'{node.id} = T.int64()' or write it as the string \"{node.id}\" in the signature",
                )
            return var
        if isinstance(node, ast.BinOp):
            return P.as_prim(self._arith(node, self.prim(node.left), self.prim(node.right)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.prim(node.operand, allow_float=allow_float)
            if isinstance(inner, P.IntImm):
                return P.IntImm(-inner.value, inner.dtype)
            if isinstance(inner, P.FloatImm):
                return P.FloatImm(-inner.value, inner.dtype)
            return P.mul(inner, -1)
        if isinstance(node, ast.Call):
            value = self.eval(node)
            if isinstance(value, P.PrimExpr):
                return value
            if isinstance(value, int) and not isinstance(value, bool):
                return P.IntImm(value)
        raise self.err(node, "expected a shape expression (integers, shape variables, + - * // %)")

    def shape_values(self, node: ast.AST) -> tuple[P.PrimExpr, ...]:
        if not isinstance(node, (ast.List, ast.Tuple)):
            raise self.err(node, "expected a shape: a list or tuple of dimensions")
        return tuple(self.prim(e) for e in node.elts)

    # ------------------------------------------------------------------
    # calls
    # ------------------------------------------------------------------
    def bind_args(
        self, node: ast.Call, name: str, params: list[str], required: int
    ) -> dict[str, ast.AST]:
        """Maps a special form's arguments to its parameter names, checking arity."""
        sig = f"{name}({', '.join(params)})"
        if len(node.args) > len(params):
            raise self.err(
                node, f"{sig} takes at most {len(params)} argument(s), got {len(node.args)}"
            )
        out: dict[str, ast.AST] = dict(zip(params, node.args))
        for kw in node.keywords:
            if kw.arg is None or kw.arg not in params:
                raise self.err(kw.value, f"{sig} has no parameter '{kw.arg}'")
            if kw.arg in out:
                raise self.err(kw.value, f"{sig} got '{kw.arg}' twice")
            out[kw.arg] = kw.value
        missing = [p for p in params[:required] if p not in out]
        if missing:
            raise self.err(node, f"{sig} is missing argument '{missing[0]}'")
        return out

    def function_call(self, func: E.Expr, node: ast.Call) -> E.Expr:
        if node.keywords:
            raise self.err(node.keywords[0].value, "calls of functions take positional arguments only")
        args = tuple(self.to_expr(self.eval(a), a) for a in node.args)
        call = E.Call(func, args, span=self.diag.span(node))
        try:
            return normalize(call)
        except HetvmError as e:
            raise self.err(node, str(e)) from None

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

    def op_call(self, name: str, node: ast.Call) -> Any:
        ctor = resolve_ctor(name)
        ops = known_op_names()
        if ctor is None and name not in ops:
            hint = did_you_mean(name, [*ops, *VALUE_FORMS, *SINFO_NAMES, "call_packed"])
            raise self.err(node.func, f"unknown op 'R.{name}'{hint}")
        args = [self.arg_value(a) for a in _positional(self, node)]
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
        return self._call_ctor(name, ctor, args, kwargs, node)

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

    # -- special forms of R -----------------------------------------------
    def _form_shape(self, node: ast.Call) -> E.Expr:
        a = self.bind_args(node, "R.shape", ["value"], 1)
        return E.ShapeExpr(self.shape_values(a["value"]), span=self.diag.span(node))

    def _form_prim_value(self, node: ast.Call) -> E.Expr:
        a = self.bind_args(node, "R.prim_value", ["value"], 1)
        return E.PrimValue(self.prim(a["value"], allow_float=True), span=self.diag.span(node))

    def _literal_str(self, node: ast.Call, fname: str) -> str:
        a = self.bind_args(node, fname, ["value"], 1)
        value = self.eval(a["value"])
        if not isinstance(value, str):
            raise self.err(a["value"], f"{fname} takes a string literal, got {_describe(value)}")
        return value

    def _form_str(self, node: ast.Call) -> E.Expr:
        return E.StringImm(self._literal_str(node, "R.str"), span=self.diag.span(node))

    def _form_dtype(self, node: ast.Call) -> E.Expr:
        return E.DataTypeImm(self._literal_str(node, "R.dtype"), span=self.diag.span(node))

    def _form_ExternFunc(self, node: ast.Call) -> E.Expr:
        return E.ExternFunc(self._literal_str(node, "R.ExternFunc"), span=self.diag.span(node))

    def _form_tuple(self, node: ast.Call) -> E.Expr:
        if node.keywords:
            raise self.err(node, "R.tuple(*fields) takes positional arguments only")
        fields = tuple(self.to_expr(self.eval(a), a) for a in _positional(self, node))
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
            if "shape" in a and not _is_none(a["shape"]):
                shape = self.shape_values(a["shape"])
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
            if "values" in a and not _is_none(a["values"]):
                values = self.shape_values(a["values"])
            ndim = self._opt_literal(a, "ndim", int, fname)
            try:
                return S.ShapeStructInfo(values, -1 if ndim is None else ndim)
            except HetvmError as e:
                raise self.err(node, str(e)) from None
        if name == "Tuple":
            if node.keywords:
                raise self.err(node, "R.Tuple(*fields) takes positional arguments only")
            fields = list(_positional(self, node))
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
        if "params" in a and not _is_none(a["params"]):
            pnode = a["params"]
            elts = pnode.elts if isinstance(pnode, (ast.List, ast.Tuple)) else [pnode]
            params = [self.sinfo_of(p) for p in elts]
        ret = self.sinfo_of(a["ret"]) if "ret" in a and not _is_none(a["ret"]) else None
        purity = self._opt_literal(a, "purity", bool, fname)
        return S.FuncStructInfo(params, ret, True if purity is None else purity)

    def _opt_literal(self, a: dict[str, ast.AST], key: str, kind: type, fname: str) -> Any:
        if key not in a:
            return None
        value = self.eval(a[key])
        if value is None:
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.err(a[key], f"{fname}: '{key}' must be a {kind.__name__} literal, got {_describe(value)}")
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
                    raise self.err(node, f"T.{name} needs a number, got {_describe(value)}") from None
            if isinstance(value, bool) or isinstance(value, int):
                return P.IntImm(int(value), name)
            raise self.err(node, f"T.{name} needs an integer literal, got {_describe(value)}")
        raise self.err(node.func, f"unknown name T.{name} (only shape variables and T.min/T.max are supported)")

    def ir_call(self, func: Namespace, node: ast.Call) -> Any:
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


def _positional(ev: Evaluator, node: ast.Call) -> list[ast.expr]:
    for a in node.args:
        if isinstance(a, ast.Starred):
            raise ev.err(a, "unsupported Python syntax here: starred argument")
    return list(node.args)


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _const_data(ev: Evaluator, node: ast.AST) -> Any:
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
    raise ev.err(node, f"R.const takes numbers or nested lists of numbers, got {_describe(value)}")


def _describe(value: Any) -> str:
    if isinstance(value, Namespace):
        return str(value)
    if isinstance(value, E.Var):
        return f"variable '{value.name_hint}'"
    if isinstance(value, E.Expr):
        return type(value).__name__
    if isinstance(value, S.StructInfo):
        return S.describe(value)
    if isinstance(value, MatchCastForm):
        return "R.match_cast(...)"
    if isinstance(value, _Marker):
        return value.name
    return repr(value)
