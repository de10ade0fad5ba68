"""KillAfterLastUse: free every intermediate right after its last use.

Semantics follow TVM's pass: bindings are canonicalised first (``y = x`` and
no-op match_casts are dropped, so uses through them count for ``x``); then a
value is killed right after the binding that reads it last — storage with
``memory.kill_storage``, tensors with ``memory.kill_tensor``, other register
objects (tuples, opaque objects) with ``vm.kill_object``. Constants, shapes,
prim values, functions, parameters, outputs, unused values and values that
already have a kill are left alone.

Where hetvm differs from TVM 0.27:
* a function containing an ``If`` still gets the kills of its outer body; a
  value read inside a branch counts as read by the ``If`` binding, and values
  local to a branch are killed inside it (the branch result is not);
* aliases are tracked: a value reached through ``TupleGetItem`` of a literal
  tuple, a ``vm.builtin.reshape`` or ``vm.builtin.view_at`` view or a ``match_cast`` that defines new
  symbolic vars (kept by canonicalisation) shares its root's bytes, so the root
  is killed after the last use of any alias (killing an alias alone would
  poison bytes still in use), and the alias registers are cleared then with
  ``vm.kill_object``. Aliases of parameters and outputs are never killed;
* an ``If`` result may be a value of the enclosing scope (a branch returns
  it): reading the result counts as reading every value a branch returns;
* a value that may be another one (an ``If`` result, or a call result that a
  callee may return from its arguments) is never killed when it may be a
  parameter or an output, nor inside a branch when it may be a value of an
  enclosing scope (that scope kills it), and otherwise no earlier than that
  value's last use -- except an ``If`` result (or a value that may be one) that
  would have to wait for such a value: it may also be a branch's own value whose
  bytes the planner reuses after the result's last read, so it is not killed.
"""

from __future__ import annotations

from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import get_op
from ..op.effects import Result, is_kill, is_storage_alloc, symbol_effects
from ._util import uses_of
from .canonicalize_bindings import CanonicalizeBindings
from .pass_infra import FunctionPass, PassContext

UNIT = S.TupleStructInfo([])


def _op_name(value: E.Expr) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.Op):
        return value.op.name
    return None


class _FunctionFacts:
    """Definitions, alias roots, outputs and existing kills of one function."""

    def __init__(self, func: E.Function, mod: IRModule | None = None, _active: tuple = ()) -> None:
        self.mod = mod
        self._active = _active  # functions being analysed up the call chain (recursion guard)
        self.value_of: dict[E.Var, E.Expr] = {}
        self.killed: set[E.Var] = set()
        self.params = set(func.params)
        self._param_list = list(func.params)
        self._returned_params: dict[str, list[int]] = {}
        self._collect(func.body)
        self.outputs: set[E.Var] = set()
        self._mark_outputs(func.body.body, self.outputs)

    def _collect(self, seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                value = b.value  # type: ignore[attr-defined]
                self.value_of[b.var] = value
                if is_kill(value) and isinstance(value.args[0], E.Var):
                    self.killed.add(value.args[0])
                if isinstance(value, E.If):
                    self._collect(value.true_branch)
                    self._collect(value.false_branch)

    def root(self, var: E.Var) -> E.Var:
        """The variable whose bytes ``var`` shares (itself when it owns them)."""
        seen = 0
        while seen < 10_000:
            seen += 1
            value = self.value_of.get(var)
            source = _same_object_as(value)
            if source is not None:
                var = source
                continue
            if isinstance(value, E.TupleGetItem) and isinstance(value.tuple_value, E.Var):
                tup = self.value_of.get(value.tuple_value)
                if isinstance(tup, E.Tuple):
                    field = tup.fields[value.index]
                    if isinstance(field, E.Var):
                        var = field
                        continue
                var = value.tuple_value
                continue
            return var
        return var

    def expand_tuple_uses(self, uses: list[E.Var]) -> list[E.Var]:
        """Uses plus, for a literal tuple, its fields (reading a tuple reads them)."""
        out: list[E.Var] = []
        stack = list(reversed(uses))
        seen: set[E.Var] = set()
        while stack:
            v = stack.pop()
            out.append(v)
            value = self.value_of.get(v)
            source = _same_object_as(value)
            if source is not None and v not in seen:
                # reading a match_cast, re-binding or view reads its source, and through
                # it what the source may be (a call that returns its argument)
                seen.add(v)
                stack.append(source)
            elif isinstance(value, E.Tuple) and v not in seen:
                seen.add(v)
                stack.extend(f for f in reversed(value.fields) if isinstance(f, E.Var))
            elif isinstance(value, E.If) and v not in seen:
                # an If result may be a value of the enclosing scope: reading it reads that
                seen.add(v)
                stack.extend(reversed(_result_vars(value)))
            elif isinstance(value, E.Call) and v not in seen:
                # a call may return one of its arguments: reading the result reads it
                seen.add(v)
                stack.extend(reversed(self.call_aliases(value)))
            elif isinstance(value, E.TupleGetItem) and isinstance(value.tuple_value, E.Var) and v not in seen:
                seen.add(v)
                tup = self.value_of.get(value.tuple_value)
                if isinstance(tup, E.Tuple):
                    # a field of a literal tuple: reading it reads that field only (the
                    # memory planner frees the other fields' bytes after their own uses)
                    field = tup.fields[value.index]
                    if isinstance(field, E.Var):
                        stack.append(field)
                else:
                    # a field of a call's result may be an argument: reading it reads the call's
                    stack.append(value.tuple_value)
        return out

    def call_aliases(self, call: E.Call) -> list[E.Var]:
        """Variable arguments a call's result may share bytes with."""
        return [a for a in self.returnable_args(call) if isinstance(a, E.Var)]

    def returnable_args(self, call: E.Call) -> list[E.Expr]:
        """Arguments (variables or constants) a call's result may share bytes with.

        A module function is analysed (which parameters can flow into its
        result); a user packed function is opaque, so any tensor argument may.
        Kernels, builtins and ops write fresh outputs.
        """
        if not _may_hold_tensor(call.struct_info):
            return []
        callee = call.op
        if isinstance(callee, E.GlobalVar):
            indices = self.returned_params_of(callee.name_hint)
            return [a for i, a in enumerate(call.args) if i in indices]
        if isinstance(callee, E.ExternFunc):
            # an outright alias (a view) is followed through ``root`` instead
            if symbol_effects(callee.global_symbol).result is Result.OPAQUE:
                return list(call.args)
        return []

    def may_be_constant(self, var: E.Var, sources: set[E.Var]) -> bool:
        """Whether ``var`` (which may be any of ``sources``, see ``alias_sources``)
        may share a constant's bytes: a callee that returns its argument was passed
        a constant, an ``If`` branch returns one, or a view of one (transitively).
        Constants live across calls: never killed."""
        for v in {self.root(var)} | sources:
            value = self.value_of.get(v)
            if isinstance(value, E.Constant):
                return True
            if isinstance(value, E.Call):
                args = list(self.returnable_args(value))
                source = _alias_argument(value)
                if source is not None:
                    args = [source]
                if any(isinstance(a, E.Constant) for a in args):
                    return True
            elif isinstance(value, E.If) and _returns_constant(value):
                return True
        return False

    def returned_params_of(self, name: str) -> list[int]:
        if name not in self._returned_params:
            if self.mod is None or name not in self.mod or name in self._active:
                # unknown or recursive: assume any parameter may come back
                n = len(self.mod[name].params) if self.mod is not None and name in self.mod else 64
                self._returned_params[name] = list(range(n))
            else:
                callee = self.mod[name]
                facts = _FunctionFacts(callee, self.mod, self._active + (name,))
                outs = facts.outputs
                self._returned_params[name] = [
                    i for i, p in enumerate(callee.params) if p in outs
                ]
        return self._returned_params[name]

    def _mark_outputs(self, expr: E.Expr, out: set[E.Var]) -> None:
        """Everything the result refers to, through tuples and aliases."""
        stack = [expr]
        while stack:
            e = stack.pop()
            if isinstance(e, E.Tuple):
                stack.extend(e.fields)
            elif isinstance(e, E.Var):
                if e in out:
                    continue
                out.add(e)
                out.add(self.root(e))
                value = self.value_of.get(e)
                if isinstance(value, E.Tuple):
                    stack.extend(value.fields)
                elif isinstance(value, E.If):
                    stack.extend(_result_vars(value))
                elif isinstance(value, E.Call):
                    stack.extend(self.call_aliases(value))
                root_value = self.value_of.get(self.root(e))
                if isinstance(root_value, E.Tuple):
                    stack.extend(root_value.fields)
                elif isinstance(root_value, E.Call):
                    # a field of a call's result may be an argument the callee returned
                    stack.extend(self.call_aliases(root_value))
                elif isinstance(root_value, E.If):
                    stack.extend(_result_vars(root_value))

    def alias_sources(self, var: E.Var) -> set[E.Var]:
        """Roots of the values ``var`` may be, other than itself: arguments a call
        may return and values an ``If`` branch may return (transitively)."""
        out: set[E.Var] = set()
        stack = [var]
        seen: set[E.Var] = set()
        while stack:
            v = self.root(stack.pop())
            if v in seen:
                continue
            seen.add(v)
            if v is not var:
                out.add(v)
            value = self.value_of.get(v)
            if isinstance(value, E.Call):
                stack.extend(self.call_aliases(value))
            elif isinstance(value, E.If):
                stack.extend(_result_vars(value))
        return out

    def kill_call(self, var: E.Var) -> E.Call | None:
        """The kill for a root variable, or None when it must stay."""
        if var in self.params or var in self.outputs or var in self.killed:
            return None
        sources = self.alias_sources(var)
        if any(s in self.params or s in self.outputs for s in sources):
            return None  # it may be a parameter or an output (a callee returned its argument)
        value = self.value_of.get(var)
        if value is None or isinstance(value, E.Constant):
            return None
        if self.may_be_constant(var, sources):
            return None  # its bytes may be a constant's, kept across calls
        sinfo = var.struct_info
        if isinstance(sinfo, (S.ShapeStructInfo, S.PrimStructInfo, S.FuncStructInfo)):
            return None
        if is_storage_alloc(value):
            op = "memory.kill_storage"
        elif isinstance(sinfo, S.TensorStructInfo):
            op = "memory.kill_tensor"
        else:
            op = "vm.kill_object"
        return E.Call(get_op(op), (var,), struct_info=UNIT)


def _may_hold_tensor(sinfo: S.StructInfo | None) -> bool:
    """False for results that cannot be (or contain) a tensor: shapes, prims, ()."""
    if isinstance(sinfo, (S.ShapeStructInfo, S.PrimStructInfo, S.FuncStructInfo)):
        return False
    if isinstance(sinfo, S.TupleStructInfo):
        return any(_may_hold_tensor(f) for f in sinfo.fields)
    return True


def _same_object_as(value: E.Expr | None) -> E.Var | None:
    """The variable a binding's value shares its bytes with outright: ``y = x``, a
    match_cast of ``x`` that canonicalisation kept, or a ``reshape``/``view_at`` of ``x``."""
    if isinstance(value, E.Var):
        return value
    source = _alias_argument(value)
    return source if isinstance(source, E.Var) else None


def _alias_argument(value: E.Expr | None) -> E.Expr | None:
    """The argument a packed call's result is outright (a view builtin's source)."""
    if isinstance(value, E.Call) and isinstance(value.op, E.ExternFunc):
        eff = symbol_effects(value.op.global_symbol)
        if eff.is_alias(len(value.args)):
            return value.args[eff.source]
    return None


def _branch_results(node: E.If) -> list[E.Expr]:
    """What the branches of ``node`` return, through literal tuples."""
    out: list[E.Expr] = []
    stack: list[E.Expr] = [node.true_branch.body, node.false_branch.body]
    while stack:
        e = stack.pop()
        if isinstance(e, E.Tuple):
            stack.extend(e.fields)
        else:
            out.append(e)
    return out


def _result_vars(node: E.If) -> list[E.Var]:
    """Variables the branches of ``node`` return (through literal tuples)."""
    return [e for e in _branch_results(node) if isinstance(e, E.Var)]


def _returns_constant(node: E.If) -> bool:
    """Whether a branch of ``node`` returns a constant (through literal tuples)."""
    return any(isinstance(e, E.Constant) for e in _branch_results(node))


def _kill_binding(call: E.Call) -> E.VarBinding:
    return E.VarBinding(E.Var("_", struct_info=UNIT), call)


def _process_seq(
    seq: E.SeqExpr, facts: _FunctionFacts, branch_outputs: set[E.Var], outer: frozenset = frozenset()
) -> E.SeqExpr:
    """Kills for one SeqExpr; ``outer`` holds the variables its enclosing scopes
    define (their kills are theirs)."""
    flat: list[tuple[int, E.Binding]] = []
    for bi, block in enumerate(seq.blocks):
        for b in block.bindings:
            flat.append((bi, b))
    defined = {b.var for _, b in flat}
    # last position at which each root (defined here) or alias is read
    last_use: dict[E.Var, int] = {}
    aliases: dict[E.Var, list[E.Var]] = {}
    for pos, (_, b) in enumerate(flat):
        for v in facts.expand_tuple_uses(uses_of(b.value)):  # type: ignore[attr-defined]
            root = facts.root(v)
            if root in defined:
                last_use[root] = pos
                if v is not root:
                    aliases.setdefault(root, [])
                    if v not in aliases[root]:
                        aliases[root].append(v)
    kills_after: dict[int, list[E.Binding]] = {}
    order = {b.var: i for i, (_, b) in enumerate(flat)}
    sources = {root: facts.alias_sources(root) for root in last_use}
    unkillable: set[E.Var] = set()
    for root, srcs in sources.items():
        # a value that may be another one (a call returning its argument, an If
        # returning an outer value) is killed no earlier than that one's last use
        later = [last_use[s] for s in srcs if s in last_use]
        if later and max(later) > last_use[root]:
            if any(isinstance(facts.value_of.get(v), E.If) for v in (root, *srcs)):
                # it may be an If branch's own value, whose bytes the memory planner
                # reuses after the If result's last read: a kill this late would
                # release (and poison) bytes already given to a later value, and an
                # earlier one would release the outer value it may also be
                unkillable.add(root)
            last_use[root] = max(later)
    for root in sorted(last_use, key=lambda v: order[v]):
        if root in unkillable or root in branch_outputs or facts.root(root) in branch_outputs:
            continue
        if any(s in branch_outputs or s in outer for s in sources[root]):
            # it may be a value of an enclosing scope (a callee returned its
            # argument): killing it here would release that value before the
            # enclosing scope's own last use of it
            continue
        call = facts.kill_call(root)
        if call is None:
            continue
        # alias registers cleared with the root; an alias bound inside a branch (an
        # If result read here may be it) is not in scope here and is left alone
        extra = [
            _kill_binding(E.Call(get_op("vm.kill_object"), (a,), struct_info=UNIT))
            for a in aliases.get(root, [])
            if a not in facts.outputs and a not in branch_outputs and (a in defined or a in outer)
        ]
        kills_after.setdefault(last_use[root], []).extend(extra + [_kill_binding(call)])
    # rebuild, recursing into If branches
    new_blocks: list[list[E.Binding]] = [[] for _ in seq.blocks]
    for pos, (bi, b) in enumerate(flat):
        value = b.value  # type: ignore[attr-defined]
        if isinstance(value, E.If):
            scope = outer | defined
            tb = _process_seq(value.true_branch, facts, _branch_outputs(value.true_branch, facts), scope)
            fb = _process_seq(value.false_branch, facts, _branch_outputs(value.false_branch, facts), scope)
            if tb is not value.true_branch or fb is not value.false_branch:
                b = E.replace(b, value=E.If(value.cond, tb, fb, struct_info=value.struct_info, span=value.span))
        new_blocks[bi].append(b)
        new_blocks[bi].extend(kills_after.get(pos, ()))
    blocks = [type(block)(tuple(bs), span=block.span) for block, bs in zip(seq.blocks, new_blocks)]
    return E.SeqExpr(blocks, seq.body, struct_info=seq.struct_info, span=seq.span)


def _branch_outputs(seq: E.SeqExpr, facts: _FunctionFacts) -> set[E.Var]:
    out: set[E.Var] = set()
    facts._mark_outputs(seq.body, out)
    return out


class KillAfterLastUse(FunctionPass):
    def __init__(self) -> None:
        super().__init__("KillAfterLastUse")

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        canon = CanonicalizeBindings().transform_function(func, mod, ctx)
        facts = _FunctionFacts(canon, mod)
        body = _process_seq(canon.body, facts, set())
        return E.replace(canon, body=body)
