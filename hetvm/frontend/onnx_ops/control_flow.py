"""ONNX ``If`` -> the IR's ``If``, or only the taken branch when the condition
is known at import time.

Why this shape: ONNX branches are subgraphs that read the enclosing graph's
values by name, so each branch is walked by the importer itself (folding and
all converters apply inside) into a nested scope of the BlockBuilder; the
scope becomes the branch's SeqExpr. A condition that is a constant, or a shape
comparison the importer folds, picks a branch at import time and that branch
is inlined: no If is emitted. Outputs whose shapes differ between the branches
are matched to fresh symbolic dims right after the If (what MatchJoinedShapes
does for one tensor; here for every output, so later converters see shapes).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ...ir import struct_info as S
from ..fold import SymArray
from ..onnx_context import ConvertContext, NeedsControlFlow, NodeView
from ..onnx_types import ident
from .registry import converter


def _branch(node: NodeView, key: str) -> Any:
    attr = node.attr(key)
    if attr is None or not attr.HasField("g"):
        raise ValueError(f"attribute '{key}' (a graph) is missing")
    return attr.g


@converter("If")
def convert_if(ctx: ConvertContext, node: NodeView) -> list[Any]:
    try:
        then_g, else_g = _branch(node, "then_branch"), _branch(node, "else_branch")
    except ValueError as err:
        raise ctx.error(str(err)) from None
    assert ctx.subgraph is not None
    cond = node.input(0)
    if isinstance(cond, SymArray):
        cond = cond.data if cond.data.dtype == np.bool_ else None
    if isinstance(cond, np.ndarray):
        if cond.size != 1:
            raise ctx.error(f"the condition must have one element, got shape {cond.shape}")
        return ctx.subgraph(then_g if bool(cond.reshape(-1)[0]) else else_g, node.name)
    if ctx.bb.in_dataflow:
        raise NeedsControlFlow
    cond_e = _scalar_condition(ctx)
    seqs = [_scope(ctx, g, node) for g in (then_g, else_g)]
    if len(_fields(seqs[0])) != len(_fields(seqs[1])):
        raise ctx.error(
            f"the branches have {len(_fields(seqs[0]))} and {len(_fields(seqs[1]))} outputs"
        )
    result = ctx.emit(E.If(cond_e, seqs[0], seqs[1], span=ctx.node_span()))
    n = len(_fields(seqs[0]))
    outs = [result] if n == 1 else [ctx.emit(E.TupleGetItem(result, i)) for i in range(n)]
    return [_rematch(ctx, out, [_fields(s)[i] for s in seqs], node, i) for i, out in enumerate(outs)]


def _scalar_condition(ctx: ConvertContext) -> E.Expr:
    cond = ctx.tensor(0, "cond")
    sinfo = ctx.sinfo(cond)
    if sinfo.ndim == 0:
        return cond
    if sinfo.shape is not None and all(P.const_value(d) == 1 for d in sinfo.shape):
        return ctx.call("reshape", cond, (), hint="cond")
    raise ctx.error(f"the condition must have one element, got {S.describe(sinfo)}")


def _scope(ctx: ConvertContext, graph: Any, node: NodeView) -> E.SeqExpr:
    ctx.bb.begin_scope()
    assert ctx.subgraph is not None
    values = ctx.subgraph(graph, node.name)
    exprs = []
    for v in values:
        e = ctx.tensor(v)
        exprs.append(e if E.is_leaf(e) else ctx.emit(e, "branch_out"))
    body: E.Expr = exprs[0] if len(exprs) == 1 else E.Tuple(tuple(exprs))
    return ctx.bb.end_scope(body)


def _fields(seq: E.SeqExpr) -> list[S.StructInfo | None]:
    sinfo = seq.struct_info
    return list(sinfo.fields) if isinstance(sinfo, S.TupleStructInfo) else [sinfo]


def _rematch(ctx: ConvertContext, out: E.Var, branches: list[Any], node: NodeView, i: int) -> E.Var:
    """``out`` matched to a shape again when the branches' shapes differ: a dim
    both agree on (a constant) is kept, every other one is a fresh PrimVar."""
    sinfo = out.struct_info
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is not None or sinfo.ndim < 0:
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.ndim < 0:
            raise ctx.error(f"output {i}: the branches return tensors of different ranks")
        return out
    a, b = branches
    dims: list[P.PrimExpr] = []
    hint = ident(node.output_names[i] or f"{node.name}_{i}")
    for d in range(sinfo.ndim):
        x = a.shape[d] if isinstance(a, S.TensorStructInfo) and a.shape is not None else None
        y = b.shape[d] if isinstance(b, S.TensorStructInfo) and b.shape is not None else None
        if x is not None and y is not None and P.const_value(x) is not None and P.prove_equal(x, y):
            dims.append(x)
        else:
            dims.append(P.PrimVar(ctx.names.unique(f"{hint}_d{d}")))
    var = ctx.bb.match_cast(out, S.TensorStructInfo(tuple(dims), sinfo.dtype), ctx.names.unique(hint))
    ctx.node_of[var.name_hint] = (node.name, node.op_type)
    return var
