"""ONNX ``Loop`` and ``Scan`` -> a function that calls itself in tail position.

Why this shape: hetvm's loop is TVM Relax's, a tail-recursive function (see
docs/DESIGN_NOTES.md, Loops), so every pass treats a loop as the function it
is. One iteration is::

    def loop(i, trips, cond, carried..., scans..., outer...):
        if i < trips and cond:
            <the body graph, its inputs bound to i, cond, carried...>
            return loop(i + 1, trips, cond_out, carried_out...,
                        scatter_nd(scans, [[i]], [scan_out]), outer...)
        else:
            return (carried..., scans...)

The body is another function, so the enclosing graph's run-time values it
reads become parameters (``outer``) passed unchanged from one iteration to
the next; constants stay constants. A carried value whose shape changes from
one iteration to the next gets fresh symbolic dims (the body is walked again
with them). ``Scan`` is the same loop with its trip count the scan inputs'
length and each iteration reading one slice.

Scan outputs: when the number of iterations is known before the loop (a
``Scan``; a ``Loop`` with a trip count and no condition), the stacked output
is allocated once before the loop (zeros of that many rows) and each
iteration writes its row into it (``scatter_nd`` at row ``i``), which
LoopCarriedInPlace turns into a write in place: linear time, the output's
bytes once. A ``Loop`` that a condition may end early keeps growing its
outputs by one row an iteration (``concat``: quadratic time, two copies at
the end); their final length is bound by a match_cast after the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ...ir.block_builder import BlockBuilder
from ..fold import SymArray
from ..onnx_context import ConvertContext, NodeView
from ..onnx_types import ident
from .registry import converter

#: (context, iteration counter, trip count, the loop's parameters for
#: ``_Loop.inputs``) -> values of the body's inputs after the carried ones
#: (Scan's slices), emitted inside the iteration
Slices = Callable[[ConvertContext, E.Var, "E.Var | None", list], list[Any]]


@dataclass
class _Loop:
    """What one Loop/Scan node asks for."""

    body: Any  # GraphProto
    trips: E.Expr | None
    cond: E.Expr | None
    carried: list[E.Expr]
    #: names of the body's inputs: (counter, condition) for Loop, none for Scan,
    #: then the carried values, then (Scan) the slices
    counter_name: str | None
    cond_name: str | None
    carried_names: list[str]
    slice_names: list[str] = field(default_factory=list)
    slices: Slices | None = None
    #: where the body's outputs start: 1 for Loop (cond_out first), 0 for Scan
    first_output: int = 1
    #: values of the enclosing scope ``slices`` reads (Scan's inputs): parameters
    inputs: list[E.Expr] = field(default_factory=list)
    #: the number of iterations when it is known before the loop (a Scan's
    #: length; a Loop's trip count when no condition can end it early): scan
    #: outputs are then preallocated and written row by row
    rows: P.PrimExpr | E.Expr | None = None


class _Retry(Exception):
    """A carried value's shape changed in an iteration: walk the body again."""

    def __init__(self, sinfo: list[S.TensorStructInfo]) -> None:
        super().__init__("retry")
        self.sinfo = sinfo


def _graph(node: NodeView, key: str, ctx: ConvertContext) -> Any:
    attr = node.attr(key)
    if attr is None or not attr.HasField("g"):
        raise ctx.error(f"attribute '{key}' (a graph) is missing")
    return attr.g


def free_names(graph: Any) -> list[str]:
    """Names ``graph`` (and the subgraphs inside it) reads from enclosing graphs."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    out: list[str] = []

    def read(name: str) -> None:
        if name and name not in defined and name not in out:
            out.append(name)

    for node in graph.node:
        for name in node.input:
            read(name)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                for name in free_names(sub):
                    read(name)
        defined.update(o for o in node.output if o)
    for vi in graph.output:
        read(vi.name)
    return out


def _scalar(ctx: ConvertContext, value: E.Expr, what: str, dtype: str) -> E.Expr:
    """``value`` as a 0-d tensor of ``dtype`` (ONNX allows shape [] or [1])."""
    sinfo = ctx.sinfo(value)
    if sinfo.dtype != dtype:
        raise ctx.error(f"{what} must be a {dtype} tensor, got {S.describe(sinfo)}")
    if sinfo.ndim == 0:
        return value
    if sinfo.shape is not None and all(P.const_value(d) == 1 for d in sinfo.shape):
        return ctx.call("reshape", value, (), hint=what)
    raise ctx.error(f"{what} must have one element, got {S.describe(sinfo)}")


def _tensor_sinfo(ctx: ConvertContext, value: Any, what: str) -> S.TensorStructInfo:
    expr = ctx.tensor(value)
    sinfo = expr.struct_info
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None:
        raise ctx.error(f"{what} must be a tensor of known rank and shape, got {S.describe(sinfo) if sinfo else '?'}")
    return sinfo


def _same_shape(a: S.TensorStructInfo, b: S.TensorStructInfo) -> list[bool] | None:
    """Per dim, whether ``b``'s fits ``a``'s (a symbolic dim of ``a`` takes any);
    None when the ranks or dtypes differ."""
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape) or a.dtype != b.dtype:
        return None
    return [isinstance(x, P.PrimVar) or P.prove_equal(x, y) for x, y in zip(a.shape, b.shape)]


def emit_loop(ctx: ConvertContext, node: NodeView, spec: _Loop) -> list[Any]:
    """Builds the loop function for ``spec``, calls it, and returns the node's
    outputs (carried values, then scan outputs) in the enclosing scope."""
    return emit_loop_calls(ctx, node, spec, [(spec.carried, spec.inputs)])[0]


def emit_loop_calls(
    ctx: ConvertContext, node: NodeView, spec: _Loop, calls: list[tuple[list[Any], list[E.Expr]]]
) -> list[list[Any]]:
    """Builds the loop function for ``spec`` once and calls it once per entry of
    ``calls`` -- (initial carried values, ``slices``' inputs), each of the types
    of ``spec.carried`` and ``spec.inputs`` (an opset-8 Scan: one call per batch
    entry) --, returning each call's outputs."""
    outer_names = [n for n in free_names(spec.body) if n not in _inner_inputs(spec)]
    captured: list[tuple[str, E.Expr]] = []
    assert ctx.lookup is not None
    for name in outer_names:
        value = ctx.lookup(name)
        if value is None or isinstance(value, np.ndarray):
            continue  # a constant (or a name the body defines itself, reported there)
        expr = ctx.tensor(value) if isinstance(value, SymArray) else value
        if isinstance(expr, E.Expr) and not isinstance(expr, E.Constant):
            captured.append((name, expr))
    captured.extend((f"\0input{j}", x) for j, x in enumerate(spec.inputs))  # no ONNX name
    carried_sinfo = [_tensor_sinfo(ctx, v, f"loop-carried input {j}") for j, v in enumerate(spec.carried)]
    for _attempt in range(2):
        built = _build(ctx, node, spec, carried_sinfo, captured)
        if isinstance(built, list):  # carried shapes changed between iterations: retry
            carried_sinfo = built
            continue
        break
    else:
        raise ctx.error("a loop-carried value changes shape between iterations in a way hetvm cannot follow")
    func, name, scan_sinfo, nested = built
    gv = _add(ctx.bb, func, name)
    for nested_name, nested_func in nested:
        _add(ctx.bb, nested_func, nested_name)
    outer = captured[: len(captured) - len(spec.inputs)]
    return [_call_loop(ctx, node, spec, gv, scan_sinfo, carried, outer + [("", x) for x in inputs])
            for carried, inputs in calls]  # fmt: skip


def _call_loop(
    ctx: ConvertContext, node: NodeView, spec: _Loop, gv: E.GlobalVar, scan_sinfo: list[S.TensorStructInfo],
    carried: list[Any], captured: list[tuple[str, E.Expr]],
) -> list[Any]:
    args: list[E.Expr] = [ctx.const(np.array(0, dtype=np.int64))]
    if spec.trips is not None:
        args.append(spec.trips)
    if spec.cond is not None:
        args.append(spec.cond)
    args.extend(ctx.tensor(v) for v in carried)
    rows = _row_count(ctx, spec.rows) if scan_sinfo and spec.rows is not None else None
    for sinfo in scan_sinfo:
        row = tuple(int(P.const_value(d)) for d in sinfo.shape)
        if rows is None:
            args.append(ctx.const(np.zeros((0,) + row, dtype=_np_dtype(sinfo.dtype))))
        else:
            args.append(ctx.call("zeros", (rows,) + row, sinfo.dtype, hint="scan_rows"))
    args.extend(expr for _, expr in captured)
    result = ctx.emit(E.Call(gv, tuple(args), span=ctx.node_span()), "loop")
    outs = []
    fields = result.struct_info.fields  # type: ignore[union-attr]
    for k, f in enumerate(fields):
        item = ctx.emit(E.TupleGetItem(result, k))
        outs.append(_rematch(ctx, item, f, scan_sinfo[k - len(spec.carried)] if k >= len(spec.carried) else None, node, k))
    return outs


def _row_count(ctx: ConvertContext, rows: P.PrimExpr | E.Expr) -> P.PrimExpr:
    """The preallocated scan outputs' length: ``rows`` itself when a dim, else
    the value of a 0-d int64 trip count (below 0: none) bound to a fresh dim."""
    if isinstance(rows, P.PrimExpr):
        return rows
    count = ctx.call("maximum", ctx.call("reshape", rows, (1,)), ctx.const(np.array([0], dtype=np.int64)), hint="rows")
    dim = P.PrimVar(ctx.names.unique("scan_rows_len"))
    ctx.bb.match_cast(ctx.call("tensor_to_shape", count), S.ShapeStructInfo([dim]), ctx.names.unique("scan_rows_shape"))
    return dim


def _inner_inputs(spec: _Loop) -> set[str]:
    names = set(spec.carried_names) | set(spec.slice_names)
    names |= {n for n in (spec.counter_name, spec.cond_name) if n}
    return names


def _np_dtype(dtype: str) -> Any:
    return np.bool_ if dtype == "bool" else np.dtype(dtype)


def _add(bb: BlockBuilder, func: E.Function, name: str) -> E.GlobalVar:
    gv = bb.add_func(func, name)
    assert gv.name_hint == name, (gv.name_hint, name)  # the function calls itself by it
    return gv


def _build(
    ctx: ConvertContext, node: NodeView, spec: _Loop, carried_sinfo: list[S.TensorStructInfo],
    captured: list[tuple[str, E.Expr]],
) -> Any:
    """The loop function, its name, its scan outputs' per-iteration struct info
    and the functions of loops nested in it; or, when a carried value's shape
    changes between iterations, the carried struct info to try again with."""
    name = ctx.names.unique(ident(f"loop_{node.name}"))
    bb = BlockBuilder()
    i = E.Var(ctx.names.unique("i"), struct_info=S.TensorStructInfo((), "int64"))
    trips = E.Var(ctx.names.unique("trips"), struct_info=S.TensorStructInfo((), "int64")) if spec.trips is not None else None
    cond = E.Var(ctx.names.unique("cond"), struct_info=S.TensorStructInfo((), "bool")) if spec.cond is not None else None
    carried = [E.Var(ctx.names.unique(ident(n)), struct_info=s) for n, s in zip(spec.carried_names, carried_sinfo)]
    outer = [E.Var(ctx.names.unique(ident(n.strip("\0"))), struct_info=e.struct_info) for n, e in captured]
    outer_bb, keep = ctx.bb, ctx.keep_params
    ctx.bb, ctx.keep_params = bb, False  # the body's constants stay constants of the loop
    try:
        with bb.function(name):
            go = _condition(ctx, i, trips, cond)
            bb.begin_scope()
            bindings: dict[str, Any] = {n: v for (n, _), v in zip(captured, outer) if not n.startswith("\0")}
            bindings.update(zip(spec.carried_names, carried))
            if spec.counter_name:
                bindings[spec.counter_name] = i
            if spec.cond_name:
                bindings[spec.cond_name] = cond if cond is not None else ctx.const(np.array(True))
            if spec.slices is not None:
                read = outer[len(outer) - len(spec.inputs):]
                bindings.update(zip(spec.slice_names, spec.slices(ctx, i, trips, read)))
            assert ctx.subgraph is not None
            values = ctx.subgraph(spec.body, node.name, bindings=bindings, isolated=True)
            n = len(spec.carried)
            first = spec.first_output
            if len(values) < first + n:
                raise ctx.error(f"the body has {len(values)} outputs, fewer than the {first + n} it must have")
            cond_out = values[0] if first == 1 else None
            outs = [_declared(ctx, ctx.tensor(v), vi) for v, vi in zip(values[first:], spec.body.output[first:])]
            carried_out, scan_out = outs[:n], outs[n:]
            retry = _changed_shapes(ctx, carried_sinfo, carried_out)
            if retry is not None:
                raise _Retry(retry)
            scan_sinfo = []
            for k, y in enumerate(scan_out):
                s = ctx.sinfo(y)
                if s.shape is None or any(P.const_value(d) is None for d in s.shape):
                    raise ctx.error(f"scan output {k} must have the same static shape in every iteration, got {S.describe(s)}")
                scan_sinfo.append(S.TensorStructInfo(s.shape, s.dtype))
            scans = [
                E.Var(ctx.names.unique(f"scan{k}"), struct_info=S.TensorStructInfo((P.PrimVar(ctx.names.unique(f"scan{k}_len")),) + tuple(s.shape), s.dtype))
                for k, s in enumerate(scan_sinfo)
            ]
            params = [i] + ([trips] if trips is not None else []) + ([cond] if cond is not None else []) + carried + scans + outer
            ret = S.TupleStructInfo(
                [_ret_field(s) for s in carried_sinfo]
                + [S.TensorStructInfo(ndim=len(s.shape) + 1, dtype=s.dtype) for s in scan_sinfo]
            )
            # the loop's signature, so the call of itself below is typed
            stub = E.Function(tuple(params), E.SeqExpr((), params[0]), ret, True)
            bb.update_func(name, stub)
            nxt: list[E.Expr] = [ctx.call("add", i, ctx.const(np.array(1, dtype=np.int64)), hint="i_next")]
            if trips is not None:
                nxt.append(trips)
            if cond is not None:
                assert cond_out is not None
                nxt.append(_scalar(ctx, ctx.tensor(cond_out), "cond_out", "bool"))
            nxt.extend(carried_out)
            for s, y in zip(scans, scan_out):
                row = ctx.call("expand_dims", y, [0], hint="scan_row")
                if spec.rows is None:
                    nxt.append(ctx.call("concat", (s, row), axis=0, hint="scan_acc"))
                else:
                    at = ctx.call("reshape", i, (1, 1), hint="scan_at")
                    nxt.append(ctx.call("scatter_nd", s, at, row, "update", hint="scan_acc"))
            nxt.extend(outer)
            again = ctx.emit(E.Call(E.GlobalVar(name), tuple(nxt), span=ctx.node_span()), "next")
            then = bb.end_scope(again)
            bb.begin_scope()
            done = bb.end_scope(E.Tuple(tuple(carried + scans)))
            out = ctx.emit(E.If(go, then, done, span=ctx.node_span()), "loop_out")
            bb.emit_func_output(out, params=params)
    except _Retry as again_with:
        return again_with.sinfo
    finally:
        ctx.bb, ctx.keep_params = outer_bb, keep
    mod = bb.get()
    func = E.replace(mod[name], ret_struct_info=ret)
    nested = [(n, f) for n, f in mod.functions.items() if n != name]
    return func, name, scan_sinfo, nested


def _condition(ctx: ConvertContext, i: E.Var, trips: E.Var | None, cond: E.Var | None) -> E.Expr:
    if trips is None:
        assert cond is not None
        return cond
    go = ctx.call("less", i, trips, hint="go")
    if cond is not None:
        go = ctx.call("logical_and", go, cond, hint="go")
    return go


def _ret_field(sinfo: S.TensorStructInfo) -> S.TensorStructInfo:
    """The loop's result type of a carried value: its shape when static, else its rank."""
    assert sinfo.shape is not None
    if all(P.const_value(d) is not None for d in sinfo.shape):
        return sinfo
    return S.TensorStructInfo(ndim=len(sinfo.shape), dtype=sinfo.dtype)


def _declared(ctx: ConvertContext, value: E.Expr, vi: Any) -> E.Expr:
    """A body output whose shape hetvm cannot prove static (a slice at the
    iteration counter) matched to the static shape the body graph declares for
    it, checked at run time; unchanged when either is not there."""
    sinfo = ctx.sinfo(value)
    if sinfo.shape is None or all(P.const_value(d) is not None for d in sinfo.shape):
        return value
    ttype = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if ttype is None or not ttype.HasField("shape"):
        return value
    dims = [d.dim_value if d.HasField("dim_value") else None for d in ttype.shape.dim]
    if len(dims) != len(sinfo.shape) or any(d is None for d in dims):
        return value
    return ctx.bb.match_cast(value, S.TensorStructInfo(tuple(dims), sinfo.dtype), ctx.names.unique(ident(vi.name)))


def _changed_shapes(
    ctx: ConvertContext, params: list[S.TensorStructInfo], outs: list[E.Expr]
) -> list[S.TensorStructInfo] | None:
    """None when each carried output fits its parameter; else the parameters with
    a fresh symbolic dim wherever an output provably differs (two constants) or
    its dim is symbolic while the parameter's is a constant (an error where the
    rank or dtype differs)."""
    changed = False
    new = []
    for j, (p, o) in enumerate(zip(params, outs)):
        so = ctx.sinfo(o)
        fits = _same_shape(p, so)
        if fits is None:
            raise ctx.error(f"loop-carried value {j} changes from {S.describe(p)} to {S.describe(so)} in an iteration")
        if all(fits):
            new.append(p)
            continue
        changed = True
        assert p.shape is not None
        dims = tuple(d if ok else P.PrimVar(ctx.names.unique(f"carried{j}_d{k}")) for k, (d, ok) in enumerate(zip(p.shape, fits)))
        new.append(S.TensorStructInfo(dims, p.dtype))
    return new if changed else None


def _rematch(
    ctx: ConvertContext, item: E.Var, sinfo: S.StructInfo, scan: S.TensorStructInfo | None, node: NodeView, k: int
) -> E.Var:
    """A result known by rank only, matched to fresh dims (a scan output's
    length, a carried value's changing dims) so later converters see a shape."""
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is not None:
        return item
    hint = ident(node.output_names[k] if k < len(node.output_names) and node.output_names[k] else f"{node.name}_{k}")
    if scan is not None:
        dims: tuple = (P.PrimVar(ctx.names.unique(f"{hint}_len")),) + tuple(scan.shape or ())
    else:
        dims = tuple(P.PrimVar(ctx.names.unique(f"{hint}_d{d}")) for d in range(sinfo.ndim))
    var = ctx.bb.match_cast(item, S.TensorStructInfo(dims, sinfo.dtype), ctx.names.unique(hint))
    ctx.node_of[var.name_hint] = (node.name, node.op_type)
    return var


@converter("Loop")
def convert_loop(ctx: ConvertContext, node: NodeView) -> list[Any]:
    body = _graph(node, "body", ctx)
    n = len(node.input_names) - 2
    if n < 0:
        raise ctx.error("needs the trip count and condition inputs (either may be empty)")
    if len(body.input) != n + 2:
        raise ctx.error(f"the body has {len(body.input)} inputs; a Loop with {n} carried value(s) needs {n + 2}")
    trips = _scalar(ctx, ctx.tensor(0, "M"), "trip_count", "int64") if node.input(0) is not None else None
    cond = _scalar(ctx, ctx.tensor(1, "cond"), "cond", "bool") if node.input(1) is not None else None
    if trips is None and cond is None:
        raise ctx.error("has neither a trip count nor a condition: it would never end")
    carried = [ctx.tensor(2 + j, f"v_initial {j}") for j in range(n)]
    spec = _Loop(
        body, trips, cond, carried, body.input[0].name, body.input[1].name, [vi.name for vi in body.input[2:]],
        rows=trips if cond is None else None,
    )
    return emit_loop(ctx, node, spec)


@converter("Scan", since=8)
def convert_scan(ctx: ConvertContext, node: NodeView) -> list[Any]:
    if node.opset < 9:
        return _convert_scan8(ctx, node)
    body = _graph(node, "body", ctx)
    m = node.attr("num_scan_inputs")
    if m is None:
        raise ctx.error("attribute 'num_scan_inputs' is missing")
    m = int(m)
    n = len(node.input_names) - m
    if n < 0 or len(body.input) != n + m:
        raise ctx.error(f"the body has {len(body.input)} inputs; {n} state(s) and {m} scan input(s) need {n + m}")
    xs = [ctx.tensor(n + j, f"scan input {j}") for j in range(m)]
    in_axes = _axes(ctx, node, "scan_input_axes", m, [ctx.rank(x) for x in xs])
    in_dirs = list(node.attr("scan_input_directions") or [0] * m)
    lengths = [ctx.known_shape(x, f"scan input {j}")[a] for j, (x, a) in enumerate(zip(xs, in_axes))]
    if m == 0:
        raise ctx.error("needs at least one scan input")
    for j, d in enumerate(lengths[1:], 1):
        if not P.prove_equal(d, lengths[0]):
            raise ctx.error(f"scan input {j} has length {P.to_str(d)} along its axis, scan input 0 {P.to_str(lengths[0])}")
    length = lengths[0]
    if P.const_value(length) is not None:
        trips: E.Expr = ctx.const(np.array(int(P.const_value(length)), dtype=np.int64))
    else:
        shape = ctx.call("shape_of", xs[0])
        tensor = ctx.call("shape_to_tensor", shape)
        trips = ctx.call("take", tensor, ctx.const(np.array(in_axes[0], dtype=np.int64)), axis=0, hint="scan_len")
    names = [vi.name for vi in body.input]
    states = [ctx.tensor(j, f"initial state {j}") for j in range(n)]
    spec = _Loop(body, trips, None, states, None, None, names[:n], names[n:],
                 _scan_slices(in_axes, in_dirs), first_output=0, inputs=xs, rows=length)  # fmt: skip
    outs = emit_loop(ctx, node, spec)
    k = len(outs) - n
    out_axes = _axes(ctx, node, "scan_output_axes", k, [ctx.rank(o) for o in outs[n:]])
    out_dirs = list(node.attr("scan_output_directions") or [0] * k)
    for j in range(k):
        y = outs[n + j]
        if out_dirs[j]:
            y = ctx.call("flip", y, axis=0) if ctx.has_op("flip") else _reverse(ctx, y)
        if out_axes[j] != 0:
            rank = ctx.rank(y)
            perm = list(range(1, rank))
            perm.insert(out_axes[j], 0)
            y = ctx.call("permute_dims", y, perm)
        outs[n + j] = y
    return outs


def _convert_scan8(ctx: ConvertContext, node: NodeView) -> list[Any]:
    """Opset-8 ``Scan``: every input has a batch axis 0 (the scan axis is 1) and
    the body sees one batch entry, so the loop runs once per entry -- one loop
    function, called for each of the (static) batch entries -- and the entries'
    results are stacked back on axis 0. ``sequence_lens``, when given, must be a
    constant of full lengths (shorter ones would make ragged scan outputs)."""
    body = _graph(node, "body", ctx)
    m = node.attr("num_scan_inputs")
    if m is None:
        raise ctx.error("attribute 'num_scan_inputs' is missing")
    m = int(m)
    n = len(node.input_names) - 1 - m
    if m <= 0 or n < 0 or len(body.input) != n + m:
        raise ctx.error(f"the body has {len(body.input)} inputs; {max(n, 0)} state(s) and {m} scan input(s) need {max(n, 0) + m}")
    states = [ctx.tensor(1 + j, f"initial state {j}") for j in range(n)]
    xs = [ctx.tensor(1 + n + j, f"scan input {j}") for j in range(m)]
    shapes = [ctx.known_shape(x, f"scan input {j}") for j, x in enumerate(xs)]
    if any(len(sh) < 2 for sh in shapes):
        raise ctx.error("opset-8 scan inputs need a batch axis and a sequence axis")
    batch = P.const_value(shapes[0][0])
    if batch is None:
        raise ctx.error(f"needs a static batch size (axis 0 of the scan inputs), got {P.to_str(shapes[0][0])}")
    length = shapes[0][1]
    for j, sh in enumerate(shapes[1:], 1):
        if not (P.prove_equal(sh[0], shapes[0][0]) and P.prove_equal(sh[1], length)):
            raise ctx.error(f"scan input {j} has batch and length {P.to_str(sh[0])}, {P.to_str(sh[1])}; "
                            f"scan input 0 {batch}, {P.to_str(length)}")  # fmt: skip
    if node.input(0) is not None:
        lens = ctx.folded(0)
        full = P.const_value(length)
        if lens is None or full is None or not np.all(np.asarray(lens).reshape(-1) == full):
            raise ctx.error("sequence_lens other than a constant of full lengths is not supported "
                            "(shorter entries would make ragged scan outputs)")  # fmt: skip
    if P.const_value(length) is not None:
        trips: E.Expr = ctx.const(np.array(int(P.const_value(length)), dtype=np.int64))
    else:
        sizes = ctx.call("shape_to_tensor", ctx.call("shape_of", xs[0]))
        trips = ctx.call("take", sizes, ctx.const(np.array(1, dtype=np.int64)), axis=0, hint="scan_len")
    dirs = list(node.attr("directions") or [0] * m)
    if len(dirs) != m:
        raise ctx.error(f"'directions' has {len(dirs)} entries for {m} scan inputs")

    def entry(values: list[Any], b: int) -> list[Any]:
        return [ctx.call("take", v, ctx.const(np.array(b, dtype=np.int64)), axis=0, hint="entry") for v in values]

    names = [vi.name for vi in body.input]
    calls = [(entry(states, b), entry(xs, b)) for b in range(int(batch))]
    spec = _Loop(body, trips, None, calls[0][0], None, None, names[:n], names[n:],
                 _scan_slices([0] * m, dirs), first_output=0, inputs=calls[0][1], rows=length)  # fmt: skip
    results = emit_loop_calls(ctx, node, spec, calls)
    stacked = []
    for k in range(len(results[0])):
        rows = [ctx.call("expand_dims", r[k], [0], hint="entry_out") for r in results]
        stacked.append(rows[0] if len(rows) == 1 else ctx.call("concat", tuple(rows), axis=0))
    return stacked


def _reverse(ctx: ConvertContext, y: E.Expr) -> E.Expr:
    return ctx.call("strided_slice", y, [0], [-1], [-(2**62)], [-1], hint="reversed")


def _axes(ctx: ConvertContext, node: NodeView, key: str, count: int, ranks: list[int]) -> list[int]:
    axes = list(node.attr(key) or [0] * count)
    if len(axes) != count:
        raise ctx.error(f"'{key}' has {len(axes)} entries for {count} tensors")
    out = []
    for a, r in zip(axes, ranks):
        a = int(a)
        if not -r <= a < r:
            raise ctx.error(f"'{key}' entry {a} is out of range for rank {r}")
        out.append(a % r)
    return out


def _scan_slices(axes: list[int], dirs: list[int]) -> Slices:
    """Each iteration's slices of the scan inputs (reversed ones from the end)."""

    def slices(ctx: ConvertContext, i: E.Var, trips: E.Var | None, xs: list) -> list[Any]:
        out = []
        for x, axis, rev in zip(xs, axes, dirs):
            index: E.Expr = i
            if rev:
                assert trips is not None
                last = ctx.call("subtract", trips, ctx.const(np.array(1, dtype=np.int64)), hint="last")
                index = ctx.call("subtract", last, i, hint="rev_index")
            out.append(ctx.call("take", x, index, axis=axis, hint="slice"))
        return out

    return slices
