"""Expressions of a script -> IR values, by reading the AST (nothing is executed).

Only literals, variables defined earlier in the script and the known
``R.`` / ``I.`` / ``T.`` names are understood. ``R.<op>(...)`` calls the op's
constructor in ``hetvm.op`` with the parsed values (how an op call becomes
IR), so inference errors surface as ParseErrors at the call.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import HetvmError, ParseError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.block_builder import normalize
from ._diag import did_you_mean
from ._env import FunctionScope, ModuleEnv
from ._eval_forms import FormsMixin
from ._eval_ops import OpCallMixin
from ._local_functions import LocalFunction
from ._values import (
    FLOAT,
    MODULE_REF,
    SINFO_NAMES,
    MatchCastForm,
    Namespace,
    describe,
    is_dtype,
)

__all__ = ["Evaluator", "MatchCastForm", "Namespace", "is_dtype"]


class Evaluator(OpCallMixin, FormsMixin):
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
        local = self.scope.local_functions.get(name)
        if local is not None:
            return local
        if name in self.env.aliases:
            return Namespace(self.env.aliases[name])
        if name == "relax":  # `from tvm import relax`: relax.const(...) is R.const(...)
            return Namespace("relax")
        if name in self.scope.module_aliases or name == self.env.class_name:
            return MODULE_REF
        sym = self.symbol(name)
        if sym is not None:
            return sym
        if name == "float":
            return FLOAT
        raise self.undefined(node, name)

    def _tvm_device_call(self, node: ast.Call) -> Any:
        """``tvm.cpu()``, ``tvm.cuda(1)``, ``tvm.device("cuda", 0)`` (as ``R.device``)
        and ``tvm.ir.VDevice("cuda", 0, "global")`` (as ``I.vdevice``): Python
        objects TVM's tests pass to ``R.hint_on_device`` / ``R.to_vdevice``."""
        parts: list[str] = []
        cur: ast.AST = node.func
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if not (isinstance(cur, ast.Name) and cur.id == "tvm" and self.scope.lookup("tvm") is None):
            return None
        dotted = ".".join(reversed(parts))
        if dotted not in ("cpu", "cuda", "device", "ir.VDevice"):
            return None
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.err(node, f"tvm.{dotted}(...) takes positional literals here")
        args = [self.eval(a) for a in node.args]
        from ..op.device import device as make_device
        from ._vdevice import make_vdevice, resolve_device

        try:
            if dotted == "ir.VDevice":
                vdev = make_vdevice(*args)
            elif dotted == "device":
                vdev = make_device(*args)
            else:
                vdev = make_device(dotted, *args)
        except (HetvmError, TypeError) as e:
            raise self.err(node, f"tvm.{dotted}: {e}") from None
        return resolve_device(vdev, self.env.vdevices)

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
        spelled = _tvm_script_namespace(node, self.scope)
        if spelled is not None:
            return spelled
        base = self.eval(node.value)
        if isinstance(base, Namespace):
            return base.child(node.attr)
        if base is MODULE_REF:
            if self.env.global_var is None:
                raise self.err(node, f"no module to look up function '{node.attr}' in")
            return self.env.global_var(node.attr, node)
        if isinstance(base, E.Expr) and node.attr in ("struct_info", "ty") and base.struct_info is not None:
            return base.struct_info  # `ty_args=[x.struct_info]` (TVM 0.27) / `[x.ty]` (TVM's main)
        raise self.err(node, f"cannot take attribute '{node.attr}' of {describe(base)}")

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
                raise self.err(k, f"dict keys must be strings, got {describe(key)}")
            out[key] = self.eval(v)
        return out

    def _eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        value = self.eval(node.operand)
        if isinstance(node.op, ast.USub) and _is_int_prim_var(value):
            value = self.prim_of_var(value)
        if isinstance(node.op, ast.USub) and isinstance(value, E.Expr):
            return self._relax_operator(node, "negative", value)
        numeric = isinstance(value, (int, float, P.PrimExpr)) and not isinstance(value, bool)
        if isinstance(node.op, ast.USub) and numeric:
            return -value
        if isinstance(node.op, ast.UAdd) and numeric:
            return value
        raise self.err(node, f"unsupported unary operator on {describe(value)}")

    def _eval_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self._prim_operands(self.eval(node.left), self.eval(node.right))
        return self._arith(node, a, b)

    def _eval_Compare(self, node: ast.Compare) -> Any:
        if len(node.ops) != 1:
            raise self.err(node, "chained comparisons are not supported")
        a, b = self._prim_operands(self.eval(node.left), self.eval(node.comparators[0]))
        symbol = _PRIM_COMPARE.get(type(node.ops[0]))
        if _is_integer_expr(a) and _is_integer_expr(b) and symbol is not None:
            # a comparison of shape expressions is a bool prim value (TVM's tir.EQ ...):
            # `if N % 16 == 0:`, `R.assert_op(N == 16)`
            try:
                return P.compare(symbol, a, b)
            except HetvmError as e:
                raise self.err(node, str(e)) from None
        name = _COMPARE_OPS.get(type(node.ops[0]))
        if not (isinstance(a, E.Expr) and isinstance(b, E.Expr)) or name is None:
            raise self.err(
                node,
                "comparisons are supported between Relax values (<, <=, >, >=: R.less ...; "
                "TVM does not overload == and != on them, use R.equal / R.not_equal) and "
                "between shape expressions (N % 16 == 0)",
            )
        return self._relax_operator(node, name, a, b)

    def _prim_operands(self, a: Any, b: Any) -> tuple[Any, Any]:
        """Integer ``R.Prim`` variables in arithmetic with integers or shape
        expressions stand for their values (TVM's parser: ``n + 1`` for
        ``n: R.Prim("int64")`` is a prim expression)."""
        if not any(_is_int_prim_var(v) for v in (a, b)):
            return a, b
        if not all(_is_int_prim_var(v) or _is_integer_expr(v) for v in (a, b)):
            return a, b  # a tensor operand: the Relax operator (R.add(x, n) ...)
        return tuple(self.prim_of_var(v) if _is_int_prim_var(v) else v for v in (a, b))  # type: ignore[return-value]

    def prim_of_var(self, var: E.Var) -> P.PrimExpr:
        """The value of an integer ``R.Prim`` variable as a shape expression: the one
        its struct info knows, else a fresh shape variable bound to it by a
        ``R.match_cast(var, R.Prim(value=k))`` the statement parser emits before the
        binding being read (one per variable and scope)."""
        sinfo = var.struct_info
        assert isinstance(sinfo, S.PrimStructInfo)
        if sinfo.value is not None:
            return sinfo.value
        key = (var, id(self.scope.frames[-1]))
        known = self.scope.prim_values.get(key)
        if known is not None:
            return known
        base = f"{var.name_hint}_value"
        name, i = base, 0
        while name in self.scope.syms or name in self.scope.taken:
            i += 1
            name = f"{base}_{i}"
        self.scope.taken.add(name)
        sym = P.PrimVar(name, sinfo.dtype)
        self.scope.prim_values[key] = sym
        self.scope.pending.append((var, S.PrimStructInfo(sinfo.dtype, value=sym)))
        return sym

    def _relax_operator(self, node: ast.AST, name: str, *operands: Any) -> E.Expr:
        """``x + y`` on Relax values is ``R.add(x, y)``, as TVM's ``Expr`` operators."""
        for value in operands[:1] if name == "astype" else operands:
            if not isinstance(value, E.Expr):
                raise self.err(
                    node,
                    f"the operator on Relax values needs Relax operands (TVM: convert "
                    f"{describe(value)} with R.const(...) first)",
                )
        from ._ops import resolve_ctor

        ctor = resolve_ctor(name)
        assert ctor is not None
        try:
            return self.span_of(ctor(*operands), node)
        except HetvmError as e:
            raise self.err(node, f"R.{name}: {e}") from None

    def _arith(self, node: ast.BinOp, a: Any, b: Any) -> Any:
        ok = (int, P.PrimExpr)
        if isinstance(a, bool) or isinstance(b, bool) or not (isinstance(a, ok) and isinstance(b, ok)):
            if isinstance(a, (E.Expr)) or isinstance(b, E.Expr):
                name = _RELAX_BINOPS.get(type(node.op))
                if name is None:
                    raise self.err(node, f"unsupported operator {type(node.op).__name__} on Relax values")
                return self._relax_operator(node, name, a, b)
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
            raise self.err(node, f"cannot index {describe(base)}")
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.err(node.slice, "a tuple index must be an integer literal")
        try:
            return E.TupleGetItem(base, index, span=self.diag.span(node))
        except HetvmError as e:
            raise self.err(node, str(e)) from None

    def _eval_Call(self, node: ast.Call) -> Any:
        device = self._tvm_device_call(node)
        if device is not None:
            return device
        if isinstance(node.func, ast.Attribute) and node.func.attr == "astype":
            base = self.eval(node.func.value)
            if isinstance(base, E.Expr):  # TVM's Expr.astype(dtype) is R.astype
                if len(node.args) != 1 or node.keywords:
                    raise self.err(node, "x.astype(dtype) takes one dtype")
                return self._relax_operator(node, "astype", base, self.eval(node.args[0]))
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
        if isinstance(func, LocalFunction):  # a lifted local def: pass what it captured
            return self.function_call(func.gv, node, self._captured_values(func, node))
        raise self.err(node.func, f"cannot call {describe(func)}")

    def _captured_values(self, func: LocalFunction, node: ast.AST) -> tuple[E.Expr, ...]:
        values = []
        for name in func.captured:
            var = self.scope.lookup(name)
            if var is None:
                raise self.err(
                    node,
                    f"local function '{func.name}' reads '{name}', which is not visible here "
                    f"(hetvm passes it to the lifted function {func.gv.name_hint} at each use)",
                )
            values.append(var)
        return tuple(values)

    def local_function_value(self, func: LocalFunction, node: ast.AST) -> E.Expr:
        """A local function used as a value: its module function, or a closure of it."""
        captured = self._captured_values(func, node)
        if not captured:
            return func.gv
        from ..op.closure import make_closure

        try:
            return self.span_of(make_closure(func.gv, E.Tuple(captured)), node)
        except HetvmError as e:
            raise self.err(node, str(e)) from None

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
        if isinstance(value, LocalFunction):
            return self.local_function_value(value, node)
        raise self.err(node, f"expected a Relax expression, got {describe(value)}")

    def to_sinfo(self, value: Any, node: ast.AST) -> S.StructInfo:
        if isinstance(value, S.StructInfo):
            return value
        if isinstance(value, Namespace):
            if value.kind == "relax" and value.dotted in SINFO_NAMES:
                return self.sinfo_call(value.dotted, ast.Call(func=node, args=[], keywords=[]))
            if value.kind == "tir" and len(value.path) == 1 and is_dtype(value.path[0]):
                return S.PrimStructInfo(value.path[0])
        raise self.err(node, f"expected struct info such as R.Tensor(...), got {describe(value)}")

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
        if isinstance(value, LocalFunction):
            return self.local_function_value(value, node)
        if isinstance(value, MatchCastForm) or value is MODULE_REF or value is FLOAT:
            raise self.err(node, f"{describe(value)} cannot be an argument")
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
                return self._string_dim(v, node)
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
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _PRIM_COMPARE:
            try:
                return P.compare(_PRIM_COMPARE[type(node.ops[0])], self.prim(node.left), self.prim(node.comparators[0]))
            except HetvmError as e:
                raise self.err(node, str(e)) from None
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

    def _string_dim(self, text: str, node: ast.AST) -> P.PrimExpr:
        """``"n"`` names (and defines) a shape variable; ``"n * 2"`` is an expression
        over variables defined already (TVM: the signature's plain names), never a
        new variable, so ``("m + 1", "m * 2")`` alone is an error as in TVM."""
        if text.isidentifier():
            return self.define_symbol(text)
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise self.err(node, f"cannot read the dimension {text!r} as a shape expression") from None
        for sub in ast.walk(tree):
            if isinstance(sub, ast.Name) and self.symbol(sub.id) is None:
                raise self.err(
                    node,
                    f"the dimension {text!r} uses '{sub.id}', which is not defined; a string "
                    f"dimension that is an expression reads variables defined elsewhere "
                    f"(e.g. by a plain \"{sub.id}\" dimension)",
                )
        try:
            return self.prim(tree.body)
        except ParseError as e:
            raise self.err(node, f"in the dimension {text!r}: {e.raw_message}") from None

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

    def function_call(self, func: E.Expr, node: ast.Call, extra: tuple[E.Expr, ...] = ()) -> E.Expr:
        if node.keywords:
            raise self.err(node.keywords[0].value, "calls of functions take positional arguments only")
        args = tuple(self.to_expr(self.eval(a), a) for a in node.args) + extra
        call = E.Call(func, args, span=self.diag.span(node))
        try:
            return normalize(call)
        except HetvmError as e:
            raise self.err(node, str(e)) from None


# TVM's ``Expr`` operator overloads (relax/expr.py); == and != are not overloaded
_RELAX_BINOPS = {
    ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
    ast.FloorDiv: "floor_divide", ast.Mod: "mod", ast.Pow: "power",
}  # fmt: skip
_COMPARE_OPS = {ast.Lt: "less", ast.Gt: "greater", ast.LtE: "less_equal", ast.GtE: "greater_equal"}

_PRIM_COMPARE = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
}  # fmt: skip


def _is_int_prim_var(value: Any) -> bool:
    """A Relax variable holding an integer prim value (``n: R.Prim("int64")``)."""
    sinfo = value.struct_info if isinstance(value, E.Var) else None
    return isinstance(sinfo, S.PrimStructInfo) and sinfo.dtype.startswith(("int", "uint"))


def _is_integer_expr(value: Any) -> bool:
    """An int or an integer shape expression (not a bool, float or Relax value)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, P.PrimExpr) and not isinstance(value, P.FloatImm) and value.dtype != "bool"


_TVM_SCRIPT_KINDS = {"relax": "relax", "ir": "ir", "tir": "tir", "tirx": "tir"}


def _tvm_script_namespace(node: ast.Attribute, scope: FunctionScope) -> Namespace | None:
    """``tvm.script.ir_module``, ``tvm.script.relax.function`` ...: TVM's fully
    qualified spellings of the dialect names (``import tvm`` in a test file)."""
    parts: list[str] = []
    cur: ast.AST = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not (isinstance(cur, ast.Name) and cur.id == "tvm" and scope.lookup("tvm") is None):
        return None
    parts.reverse()
    if len(parts) < 2 or parts[0] != "script":
        return None
    if parts[1] == "ir_module":
        return Namespace("ir", tuple(parts[1:]))
    kind = _TVM_SCRIPT_KINDS.get(parts[1])
    return Namespace(kind, tuple(parts[2:])) if kind is not None else None
