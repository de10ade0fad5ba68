"""Statements of one ``@R.function`` -> a hetvm Function.

Bindings (``x = ...`` / ``x: ann = ...`` / a bare call), ``with R.dataflow()``
blocks ending in ``R.output(...)``, ``if``/``else`` whose branches end by
assigning the same name (an If binding, as in TVM), ``R.func_attr``,
``n = T.int64()`` shape-variable declarations, ``cls = Module`` and a final
``return``. Nested call arguments are bound to fresh variables first
(A-normal form), as TVM's parser does.
"""

from __future__ import annotations

import ast
from typing import Any

from ..errors import HetvmError, ParseError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.structural import structural_equal
from ._env import FunctionScope, ModuleEnv
from ._eval import Evaluator, MatchCastForm, Namespace, is_dtype
from ._local_functions import LocalFunction, bound_names, lifted_name, read_names
from ._print_values import without_prim_values
from ._values import plain_data_problem

FLAGS = ("pure", "private")


def decorator_flags(ev: Evaluator, fdef: ast.FunctionDef) -> dict[str, bool]:
    """``@R.function`` / ``@R.function(pure=False, private=True)``: literal flags only."""
    if len(fdef.decorator_list) != 1:
        raise ev.err(fdef, f"function '{fdef.name}' needs exactly one decorator, @R.function")
    deco = fdef.decorator_list[0]
    target = deco.func if isinstance(deco, ast.Call) else deco
    head = ev.eval(target)
    if not (isinstance(head, Namespace) and head.kind == "relax" and head.dotted == "function"):
        raise ev.err(deco, f"function '{fdef.name}' must be decorated with @R.function (TIR functions are not supported)")
    flags: dict[str, bool] = {}
    if isinstance(deco, ast.Call):
        if deco.args:
            raise ev.err(deco.args[0], "@R.function takes keyword flags only (pure=, private=)")
        for kw in deco.keywords:
            if kw.arg not in FLAGS:
                raise ev.err(kw.value, f"@R.function has no flag '{kw.arg}' (known: pure, private)")
            value = ev.eval(kw.value)
            if not isinstance(value, bool):
                raise ev.err(kw.value, f"@R.function's '{kw.arg}' must be True or False")
            flags[kw.arg] = value
    return flags


def _sym_declarations(ev: Evaluator, node: ast.stmt) -> list[tuple[str, str]] | None:
    """``n = T.int64()`` -> [("n", "int64")]; ``m, n = T.int64(), T.int64()`` ->
    both (TVM reads each target against its value); else None."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Name):
        dtype = _declared_dtype(ev, value)
        return [(target.id, dtype)] if dtype is not None else None
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
        if len(target.elts) != len(value.elts) or not all(isinstance(t, ast.Name) for t in target.elts):
            return None
        dtypes = [_declared_dtype(ev, v) for v in value.elts]
        if any(d is None for d in dtypes):
            return None
        return [(t.id, d) for t, d in zip(target.elts, dtypes)]  # type: ignore[attr-defined,misc]
    return None


def _signature_dim_names(fdef: ast.FunctionDef) -> list[str]:
    """Plain names written as string dims in the parameters' shapes
    (``R.Tensor(("n", "m * 2"))`` -> ["n"]), in order: TVM defines them all before
    reading any parameter, so an expression dim may use a name a later one defines."""
    names: list[str] = []
    for arg in fdef.args.args:
        if arg.annotation is None:
            continue
        for sub in ast.walk(arg.annotation):
            if not (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)):
                continue
            if sub.func.attr not in ("Tensor", "Shape"):
                continue
            shape = sub.args[0] if sub.args else next(
                (k.value for k in sub.keywords if k.arg in ("shape", "values")), None
            )
            if isinstance(shape, (ast.List, ast.Tuple)):
                for e in shape.elts:
                    if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.isidentifier():
                        if e.value not in names:
                            names.append(e.value)
    return names


def _declared_dtype(ev: Evaluator, value: ast.AST) -> str | None:
    """``T.int64()`` (no arguments) -> "int64"."""
    if not isinstance(value, ast.Call) or value.args or value.keywords:
        return None
    if not isinstance(value.func, ast.Attribute):
        return None
    base = value.func.value
    if isinstance(base, ast.Name) and ev.env.aliases.get(base.id) == "tir" and is_dtype(value.func.attr):
        return value.func.attr
    return None


class FunctionParser:
    """Parses one FunctionDef; ``parse()`` returns the Function."""

    def __init__(
        self,
        env: ModuleEnv,
        fdef: ast.FunctionDef,
        *,
        captured: list[tuple[str, S.StructInfo]] | None = None,
        outer: FunctionScope | None = None,
        private: bool = False,
    ) -> None:
        """``captured``/``outer``/``private``: for a lifted local function, the
        enclosing variables it takes as trailing parameters and the enclosing
        scope (its shape variables and local functions stay visible)."""
        self.env = env
        self.fdef = fdef
        self.scope = FunctionScope()
        self.captured = list(captured or [])
        self.force_private = private
        if outer is not None:
            self.scope.syms.update(outer.syms)
            self.scope.local_functions.update(outer.local_functions)
            self.scope.module_aliases.update(outer.module_aliases)
        self.ev = Evaluator(env, self.scope)
        self.attrs: dict[str, Any] = {}
        self.lifted_as: str | None = None  # the module name of a lifted local function
        self.sym_decls: list[tuple[str, str]] = []
        for node in ast.walk(fdef):  # one pass: names in use and shape-variable declarations
            if isinstance(node, ast.Name):
                self.scope.taken.add(node.id)
            elif isinstance(node, ast.Assign):
                decls = _sym_declarations(self.ev, node)
                if decls is not None:
                    self.sym_decls.extend(decls)

    def err(self, node: ast.AST | None, message: str) -> ParseError:
        return self.env.diag.error(node, message)

    # ------------------------------------------------------------------
    def signature(self) -> tuple[list[E.Var], S.StructInfo | None, dict[str, bool]]:
        fdef = self.fdef
        flags = decorator_flags(self.ev, fdef)
        for decl in self.sym_decls:
            self.ev.define_symbol(*decl)
        declared = dict(self.sym_decls)
        for name in _signature_dim_names(fdef):  # TVM: every plain string dim first
            if declared.get(name, "int64") != "int64":
                raise self.err(
                    fdef,
                    f"shape variable '{name}' is a dimension of the signature (int64) but is "
                    f"declared '{name} = T.{declared[name]}()' in the body: the dtypes must agree",
                )
            self.ev.define_symbol(name)
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.err(fdef, "@R.function parameters must be plain annotated names")
        params = []
        for arg in a.args:
            if arg.annotation is None:
                raise self.err(arg, f"parameter '{arg.arg}' needs a struct-info annotation, e.g. R.Tensor((n, 4), \"float32\")")
            sinfo = self.ev.sinfo_of(arg.annotation)
            var = E.Var(arg.arg, struct_info=sinfo, span=self.env.diag.span(arg))
            if self.scope.lookup(arg.arg) is not None:
                raise self.err(arg, f"duplicate parameter '{arg.arg}'")
            self.scope.bind(arg.arg, var)
            params.append(var)
        for name, sinfo in self.captured:  # a lifted local function's captured values
            var = E.Var(name, struct_info=sinfo, span=self.env.diag.span(fdef))
            self.scope.bind(name, var)
            params.append(var)
        ret = self.ev.sinfo_of(fdef.returns) if fdef.returns is not None else None
        if self.force_private:
            flags = {**flags, "private": True}
        return params, ret, flags

    def signature_sinfo(self) -> S.FuncStructInfo:
        """The function's struct info from its signature alone (for recursion)."""
        params, ret, flags = self.signature()
        if ret is None:
            raise self.err(self.fdef, f"function '{self.fdef.name}' calls itself (directly or not): annotate its return struct info")
        return S.FuncStructInfo([p.struct_info for p in params], ret, flags.get("pure", True))  # type: ignore[misc]

    def parse(self) -> E.Function:
        params, ret, flags = self.signature()
        body_stmts = list(self.fdef.body)
        if body_stmts and _is_docstring(body_stmts[0]):
            body_stmts = body_stmts[1:]
        if not body_stmts or not isinstance(body_stmts[-1], ast.Return):
            raise self.err(body_stmts[-1] if body_stmts else self.fdef, f"function '{self.fdef.name}' must end with a return statement")
        blocks: list[E.BindingBlock] = []
        current: list[E.Binding] = []
        for stmt in body_stmts[:-1]:
            if isinstance(stmt, ast.With):
                if current:
                    blocks.append(E.BindingBlock(current))
                    current = []
                blocks.append(self.dataflow(stmt))
            else:
                self.statement(stmt, current, in_dataflow=False, top=True)
        ret_stmt = body_stmts[-1]
        assert isinstance(ret_stmt, ast.Return)
        if ret_stmt.value is None:
            raise self.err(ret_stmt, "return needs a value")
        body = self.result_value(ret_stmt.value, current, "gv", in_dataflow=False)
        if ret is not None and body.struct_info is not None and self._checked_at_run_time(ret, body.struct_info):
            fresh = self.scope.fresh("gv")
            body = self._emit_checked(fresh, body, ret, current, False, ret_stmt, False)
        if current:
            blocks.append(E.BindingBlock(current))
        seq = E.SeqExpr(blocks, body, span=self.env.diag.span(ret_stmt))
        if ret is not None and body.struct_info is not None and not S.is_base_of(ret, body.struct_info, check_vdevice=False):
            raise self.err(
                ret_stmt,
                f"struct info mismatch: the function returns {S.describe(body.struct_info)}, "
                f"but its annotation says {S.describe(ret)}",
            )
        if ret is not None and seq.struct_info is not None:
            ret = _annotated(ret, seq.struct_info)
        attrs = dict(self.attrs)
        if flags.get("private"):
            if "global_symbol" in attrs:
                raise self.err(
                    self.fdef,
                    f"function '{self.fdef.name}' is private but R.func_attr gives it a "
                    f"global_symbol; a private function has none (drop one of the two)",
                )
            attrs["private"] = True
        return E.Function(
            params, seq, ret, flags.get("pure", True), E.Attrs(attrs), span=self.env.diag.span(self.fdef)
        )

    # ------------------------------------------------------------------
    # statements
    # ------------------------------------------------------------------
    def statement(self, stmt: ast.stmt, out: list[E.Binding], *, in_dataflow: bool, top: bool = False, outputs: frozenset[str] = frozenset()) -> None:
        if isinstance(stmt, ast.Pass) or _is_docstring(stmt):
            return
        if isinstance(stmt, ast.Expr):
            self.expression_statement(stmt, out, in_dataflow, top)
            return
        if isinstance(stmt, ast.Assign):
            if _sym_declarations(self.ev, stmt) is not None:
                return  # declared before the signature was read
            if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
                raise self.err(
                    stmt,
                    "an assignment must bind exactly one name (no unpacking; "
                    "only shape variables may be declared together: m, n = T.int64(), T.int64())",
                )
            name = stmt.targets[0].id
            if self._module_alias(stmt):
                self.scope.module_aliases.add(name)
                return
            self.binding(name, stmt.value, None, stmt, out, in_dataflow, outputs)
            return
        if isinstance(stmt, ast.AnnAssign):
            if not isinstance(stmt.target, ast.Name) or stmt.value is None:
                raise self.err(stmt, "an annotated binding looks like 'x: R.Tensor(...) = value'")
            self.binding(stmt.target.id, stmt.value, stmt.annotation, stmt, out, in_dataflow, outputs)
            return
        if isinstance(stmt, ast.If):
            if in_dataflow:
                raise self.err(stmt, "if/else is not allowed inside a dataflow block")
            self.if_binding(stmt, out)
            return
        if isinstance(stmt, ast.With):
            raise self.err(stmt, "with R.dataflow() blocks may only appear at the top level of a function")
        if isinstance(stmt, ast.Return):
            raise self.err(stmt, "return must be the last statement of the function")
        if isinstance(stmt, ast.FunctionDef):
            self.local_function(stmt)
            return
        raise self.err(stmt, f"unsupported Python syntax here: {type(stmt).__name__}")

    def local_function(self, stmt: ast.FunctionDef) -> None:
        """Lifts a local ``def`` to a private module function (see _local_functions.py)."""
        if stmt.name in self.scope.local_functions or self.scope.lookup(stmt.name) is not None:
            raise self.err(stmt, f"local function '{stmt.name}' reuses the name of a variable or function in scope")
        bound = bound_names(stmt)
        names: list[str] = []
        for name in read_names(stmt):
            if name in bound or name == stmt.name:
                continue
            other = self.scope.local_functions.get(name)
            extra = list(other.captured) if other is not None else [name]
            for n in extra:
                if n not in names and isinstance(self.scope.lookup(n), E.Var):
                    names.append(n)
        captured = [(n, self.scope.lookup(n).struct_info) for n in names]  # type: ignore[union-attr]
        outer_name = self.lifted_as or self.fdef.name
        taken = set(self.env.function_names) | set(self.env.lifted) | self.env.reserved
        name = lifted_name(outer_name, stmt.name, taken)
        self.env.reserved.add(name)

        def child() -> FunctionParser:
            parser = FunctionParser(self.env, stmt, captured=captured, outer=self.scope, private=True)
            parser.lifted_as = name
            return parser

        recursive = stmt.name in read_names(stmt) and stmt.name not in bound
        if recursive:
            sinfo = child().signature_sinfo()
            self.scope.local_functions[stmt.name] = LocalFunction(
                stmt.name, E.GlobalVar(name, struct_info=sinfo), tuple(names)
            )
        parser = child()
        if recursive:
            parser.scope.local_functions[stmt.name] = self.scope.local_functions[stmt.name]
        func = parser.parse()
        self.env.lifted[name] = func
        gv = E.GlobalVar(name, struct_info=func.struct_info, span=self.env.diag.span(stmt))
        self.scope.local_functions[stmt.name] = LocalFunction(stmt.name, gv, tuple(names))

    def _module_alias(self, stmt: ast.Assign) -> bool:
        value = stmt.value
        return isinstance(value, ast.Name) and value.id == self.env.class_name and self.scope.lookup(value.id) is None

    def expression_statement(self, stmt: ast.Expr, out: list[E.Binding], in_dataflow: bool, top: bool) -> None:
        call = stmt.value
        if isinstance(call, ast.Call):
            head = self.ev.eval(call.func) if isinstance(call.func, ast.Attribute) else None
            if isinstance(head, Namespace) and head.kind == "relax":
                if head.dotted == "func_attr":
                    if not top:
                        raise self.err(stmt, "R.func_attr must be at the top level of the function body")
                    self.func_attr(call)
                    return
                if head.dotted == "output":
                    raise self.err(stmt, "R.output(...) must be the last statement of a with R.dataflow() block")
        if not isinstance(call, ast.Call):
            raise self.err(stmt, "an expression statement must be a call (its result is bound to '_')")
        var = self.binding("_", call, None, stmt, out, in_dataflow, frozenset())
        sinfo = var.struct_info
        if not (isinstance(sinfo, S.TupleStructInfo) and not sinfo.fields):
            # TVM: only a void (empty tuple) result may be dropped; others must be named
            raise self.err(
                stmt,
                f"the result of this call is {S.describe(sinfo)}, not void (R.Tuple()): "
                f"bind it to a variable (e.g. '_ = ...' or 'y = ...')",
            )

    def func_attr(self, call: ast.Call) -> None:
        a = self.ev.bind_args(call, "R.func_attr", ["attrs"], 1)
        value = self.ev.eval(a["attrs"])
        if not isinstance(value, dict):
            raise self.err(a["attrs"], "R.func_attr takes a dict literal")
        problem = plain_data_problem(value, "R.func_attr")
        if problem is not None:
            raise self.err(a["attrs"], problem)
        self.attrs.update({str(k): _plain(v) for k, v in value.items()})

    # ------------------------------------------------------------------
    # bindings
    # ------------------------------------------------------------------
    def flatten(self, expr: E.Expr, out: list[E.Binding], in_dataflow: bool, node: ast.AST) -> E.Expr:
        """Binds non-leaf arguments of ``expr`` to fresh variables (A-normal form)."""
        if isinstance(expr, E.Call):
            args = tuple(self._leaf(a, out, in_dataflow, node) for a in expr.args)
            if any(a is not b for a, b in zip(args, expr.args)):
                return E.replace(expr, args=args)
        elif isinstance(expr, E.Tuple):
            fields = tuple(self._leaf(f, out, in_dataflow, node) for f in expr.fields)
            if any(a is not b for a, b in zip(fields, expr.fields)):
                return E.Tuple(fields, span=expr.span)
        elif isinstance(expr, E.TupleGetItem) and not E.is_leaf(expr.tuple_value):
            return E.TupleGetItem(self._leaf(expr.tuple_value, out, in_dataflow, node), expr.index, span=expr.span)
        return expr

    def _leaf(self, expr: E.Expr, out: list[E.Binding], in_dataflow: bool, node: ast.AST) -> E.Expr:
        if E.is_leaf(expr):
            return expr
        if isinstance(expr, E.Tuple):
            return self.flatten(expr, out, in_dataflow, node)
        expr = self.flatten(expr, out, in_dataflow, node)  # inner values are bound first
        return self.emit(self.scope.fresh("lv"), expr, out, in_dataflow, node)

    def flush_prim_values(self, out: list[E.Binding], in_dataflow: bool, node: ast.AST) -> None:
        """Emits the match_casts that bind integer R.Prim variables read as shape
        expressions (``n + 1``; Evaluator.prim_of_var) before the binding reading them."""
        pending, self.scope.pending = self.scope.pending, []
        span = self.env.diag.span(node)
        for value, sinfo in pending:
            cls = E.DataflowVar if in_dataflow else E.Var
            var = cls(self.scope.fresh(f"{value.name_hint}_v"), struct_info=sinfo, span=span)
            out.append(E.MatchCast(var, value, sinfo, span=span))

    def emit(self, name: str, expr: E.Expr, out: list[E.Binding], in_dataflow: bool, node: ast.AST, ann: S.StructInfo | None = None, dataflow_var: bool | None = None) -> E.Var:
        self.flush_prim_values(out, in_dataflow, node)
        expr = self.flatten(expr, out, in_dataflow, node)
        sinfo = expr.struct_info
        if sinfo is None:
            raise self.err(node, f"cannot infer the struct info of the value bound to '{name}'")
        if ann is not None and self._checked_at_run_time(ann, sinfo):
            return self._emit_checked(name, expr, ann, out, in_dataflow, node, dataflow_var)
        if ann is not None:
            self.check_annotation(ann, sinfo, name, node)
            sinfo = _annotated(ann, sinfo)
        is_df = in_dataflow if dataflow_var is None else dataflow_var
        cls = E.DataflowVar if is_df else E.Var
        span = self.env.diag.span(node)
        var = cls(name, struct_info=sinfo, span=span)
        out.append(E.VarBinding(var, expr, span=span))
        return var

    @staticmethod
    def _checked_at_run_time(ann: S.StructInfo, sinfo: S.StructInfo) -> bool:
        """An annotation more specific than what inference proves but that may hold
        (``lhs: R.Tensor((32, 16)) = R.concat(...)`` of symbolic parts, a result
        annotated ``R.Tensor((m, n))`` of a call returning ``R.Object``): TVM accepts
        it; hetvm checks it at run time with a match_cast."""
        return not S.is_base_of(ann, sinfo, check_vdevice=False) and S.could_match(ann, sinfo)

    def _emit_checked(self, name: str, expr: E.Expr, ann: S.StructInfo, out: list[E.Binding], in_dataflow: bool, node: ast.AST, dataflow_var: bool | None) -> E.Var:
        self.flush_prim_values(out, in_dataflow, node)
        value = self._leaf(expr, out, in_dataflow, node)
        is_df = in_dataflow if dataflow_var is None else dataflow_var
        cls = E.DataflowVar if is_df else E.Var
        span = self.env.diag.span(node)
        var = cls(name, struct_info=ann, span=span)
        out.append(E.MatchCast(var, value, ann, span=span))
        return var

    def check_annotation(self, ann: S.StructInfo, sinfo: S.StructInfo, name: str, node: ast.AST) -> None:
        if not S.is_base_of(ann, sinfo, check_vdevice=False):
            raise self.err(
                node,
                f"struct info mismatch for '{name}': the value is {S.describe(sinfo)}, "
                f"but the annotation says {S.describe(ann)}",
            )

    def binding(self, name: str, value_node: ast.AST, ann_node: ast.AST | None, stmt: ast.stmt, out: list[E.Binding], in_dataflow: bool, outputs: frozenset[str]) -> E.Var:
        ann = self.ev.sinfo_of(ann_node) if ann_node is not None else None
        value = self.ev.eval(value_node)
        dataflow_var = in_dataflow and name not in outputs
        if isinstance(value, MatchCastForm):
            var = self.match_cast(name, value, ann, stmt, out, in_dataflow, dataflow_var)
        else:
            if (
                isinstance(ann, S.PrimStructInfo)
                and isinstance(value, int)
                and not isinstance(value, bool)
                and ann.dtype.startswith(("int", "uint"))
            ):
                # TVM prints R.prim_value(T.int32(3)) as `c: T.int32 = 3`
                value = E.PrimValue(P.IntImm(value, ann.dtype), span=self.env.diag.span(value_node))
            expr = self.ev.to_expr(value, value_node)
            var = self.emit(name, expr, out, in_dataflow, stmt, ann, dataflow_var)
        self.scope.bind(name, var)
        return var

    def match_cast(self, name: str, form: MatchCastForm, ann: S.StructInfo | None, stmt: ast.stmt, out: list[E.Binding], in_dataflow: bool, dataflow_var: bool) -> E.Var:
        self.flush_prim_values(out, in_dataflow, stmt)
        value = self._leaf(form.value, out, in_dataflow, stmt)
        vsinfo = value.struct_info
        assert vsinfo is not None
        if not S.could_match(form.sinfo, vsinfo):
            raise self.err(
                stmt,
                f"R.match_cast can never succeed: the value is {S.describe(vsinfo)}, "
                f"the pattern is {S.describe(form.sinfo)}",
            )
        if ann is not None:
            self.check_annotation(ann, form.sinfo, name, stmt)
        cls = E.DataflowVar if dataflow_var else E.Var
        span = self.env.diag.span(stmt)
        var = cls(name, struct_info=form.sinfo, span=span)
        out.append(E.MatchCast(var, value, form.sinfo, span=span))
        return var

    def result_value(self, node: ast.AST, out: list[E.Binding], name: str, in_dataflow: bool) -> E.Expr:
        """The value ending a function or branch: a leaf as is, else bound to ``name``."""
        value = self.ev.eval(node)
        if isinstance(value, MatchCastForm):
            var = self.match_cast(self.scope.fresh(name), value, None, node, out, in_dataflow, False)  # type: ignore[arg-type]
            return var
        expr = self.ev.to_expr(value, node)
        self.flush_prim_values(out, in_dataflow, node)
        if E.is_leaf(expr):
            return self.flatten(expr, out, in_dataflow, node)
        fresh = name if name not in self.scope.taken else self.scope.fresh(name)
        self.scope.taken.add(fresh)
        return self.emit(fresh, expr, out, in_dataflow, node)

    # ------------------------------------------------------------------
    # dataflow blocks and if/else
    # ------------------------------------------------------------------
    def dataflow(self, stmt: ast.With) -> E.DataflowBlock:
        if len(stmt.items) != 1 or stmt.items[0].optional_vars is not None:
            raise self.err(stmt, "only 'with R.dataflow():' is supported")
        ctx = stmt.items[0].context_expr
        head = self.ev.eval(ctx.func) if isinstance(ctx, ast.Call) else None
        if not (isinstance(head, Namespace) and head.kind == "relax" and head.dotted == "dataflow"):
            raise self.err(ctx, "only 'with R.dataflow():' is supported")
        if ctx.args or ctx.keywords:  # type: ignore[union-attr]
            raise self.err(ctx, "R.dataflow() takes no arguments")
        body = list(stmt.body)
        outputs, out_nodes = self._outputs(stmt, body[-1])
        bindings: list[E.Binding] = []
        self.scope.frames.append({})
        for inner in body[:-1]:
            self.statement(inner, bindings, in_dataflow=True, outputs=frozenset(outputs))
        frame = self.scope.frames.pop()
        for name, node in zip(outputs, out_nodes):
            var = frame.get(name)
            if var is None and name in self.scope.local_functions:
                continue  # a local function listed as an output (TVM binds it to a variable)
            if var is None:
                raise self.err(node, f"R.output names '{name}', which this dataflow block does not bind")
            self.scope.bind(name, var)
        self.scope.left_dataflow.update(n for n in frame if n not in outputs)
        return E.DataflowBlock(bindings, span=self.env.diag.span(stmt))

    def _outputs(self, stmt: ast.With, last: ast.stmt) -> tuple[list[str], list[ast.AST]]:
        call = last.value if isinstance(last, ast.Expr) else None
        head = self.ev.eval(call.func) if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None
        if not (isinstance(head, Namespace) and head.kind == "relax" and head.dotted == "output"):
            raise self.err(last, "a with R.dataflow() block must end with R.output(...)")
        assert isinstance(call, ast.Call)
        names = []
        for arg in call.args:
            if not isinstance(arg, ast.Name):
                raise self.err(arg, "R.output(...) takes the names of variables bound in the block")
            names.append(arg.id)
        if call.keywords:
            raise self.err(call, "R.output(...) takes names only")
        return names, list(call.args)

    def if_binding(self, stmt: ast.If, out: list[E.Binding]) -> E.Var:
        cond_expr = self.ev.to_expr(self.ev.eval(stmt.test), stmt.test)
        self.flush_prim_values(out, False, stmt.test)
        cond = self._leaf(cond_expr, out, False, stmt.test)
        if not stmt.orelse:
            raise self.err(stmt, "an if needs an else branch (both branches must assign the result)")
        t_seq, t_name, t_ann, t_node = self.branch(stmt.body, "then", stmt)
        f_seq, f_name, f_ann, f_node = self.branch(stmt.orelse, "else", stmt)
        if t_name != f_name:
            raise self.err(f_node, f"both branches must end by assigning the same name: '{t_name}' and '{f_name}'")
        try:
            node = E.If(cond, t_seq, f_seq, span=self.env.diag.span(stmt))
            from ..ir.block_builder import normalize

            node = normalize(node)
        except HetvmError as e:
            raise self.err(stmt, str(e)) from None
        assert node.struct_info is not None
        sinfo = node.struct_info
        for ann, ann_node in ((t_ann, t_node), (f_ann, f_node)):
            if ann is not None:
                self.check_annotation(ann, sinfo, t_name, ann_node)
        ann = t_ann if t_ann is not None else f_ann
        span = self.env.diag.span(stmt)
        var = E.Var(t_name, struct_info=ann if ann is not None else sinfo, span=span)
        out.append(E.VarBinding(var, node, span=span))
        self.scope.bind(t_name, var)
        return var

    def branch(self, stmts: list[ast.stmt], label: str, if_stmt: ast.If) -> tuple[E.SeqExpr, str, S.StructInfo | None, ast.stmt]:
        last = stmts[-1]
        bindings: list[E.Binding] = []
        blocks: list[E.BindingBlock] = []
        self.scope.frames.append({})
        try:
            for stmt in stmts[:-1]:
                if isinstance(stmt, ast.With):  # a dataflow block inside a branch, as TVM allows
                    if bindings:
                        blocks.append(E.BindingBlock(bindings))
                        bindings = []
                    blocks.append(self.dataflow(stmt))
                    continue
                self.statement(stmt, bindings, in_dataflow=False)
            if isinstance(last, ast.If):
                var = self.if_binding(last, bindings)
                name, ann, body = var.name_hint, None, var
            else:
                name, ann_node, value_node = _branch_result(self, last, label)
                ann = self.ev.sinfo_of(ann_node) if ann_node is not None else None
                body = self.result_value(value_node, bindings, f"{name}_{label}", False)
        finally:
            self.scope.frames.pop()
        if bindings:
            blocks.append(E.BindingBlock(bindings))
        sinfo = None
        if body.struct_info is not None:
            # dims the enclosing scope defined (parameters, outer match_casts) stay
            # defined after a match_cast in the branch names them again
            outer = {v for frame in self.scope.frames for var in frame.values() for v in S.mentioned_vars(var.struct_info)}
            sinfo = E.scope_struct_info(blocks, body.struct_info, outer)
        return E.SeqExpr(blocks, body, struct_info=sinfo, span=self.env.diag.span(last)), name, ann, last


def _branch_result(fp: FunctionParser, last: ast.stmt, label: str) -> tuple[str, ast.AST | None, ast.AST]:
    if isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name):
        return last.targets[0].id, None, last.value
    if isinstance(last, ast.AnnAssign) and isinstance(last.target, ast.Name) and last.value is not None:
        return last.target.id, last.annotation, last.value
    raise fp.err(last, f"the {label} branch must end by assigning the if's result to a name")


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _plain(value: Any) -> Any:
    """func_attr values as plain data: lists become tuples."""
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _annotated(ann: S.StructInfo, sinfo: S.StructInfo) -> S.StructInfo:
    """The struct info a binding (or return) annotated ``ann`` takes: the
    annotation, except where it is the value's own struct info without prim
    values (TVM 0.27 prints ``T.int64`` for ``R.Prim(value=5)``); then the
    value's, so the values survive a trip through TVM's text."""
    if ann is not sinfo and structural_equal(ann, without_prim_values(sinfo), map_free_vars=False):
        return sinfo
    return ann
