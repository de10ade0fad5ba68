"""InplaceElementwise: an element-wise kernel writes into an input that dies there.

Why: ``y = relu(x)`` where ``x`` is read by nothing after it needs no second
buffer -- ONNX Runtime's planner reuses such inputs in place (its ``MayInplace``
kernels), and TVM's ``DataflowUseInplaceCalls`` does the same for Relax. Here
the output's ``builtin.alloc_tensor`` becomes ``vm.builtin.view_at(x, 0,
shape)``: one buffer, which the planner, KillAfterLastUse and the peak
simulation all see as an alias (``x``'s bytes live on until the output's last
use).

Runs after ConcatInPlace (which needs fresh allocations for its inputs) and
before StaticPlanBlockMemory. The proof that it is safe is the liveness
analysis (:mod:`hetvm.analysis.liveness`), the one the planner packs with. An
output ``out`` of the kernel call at position ``p`` may take input ``x`` when:

* the kernel is element-wise and reads each input element before writing the
  output element at the same index (``INPLACE_SAFE``: one ufunc with
  ``out=``, or a value computed whole and then stored; ``nn.gelu`` and ``erf``,
  which write partial results into the output and read the input again, are
  not in it; a ``fused_elementwise`` only when its last step is, since the
  NumPy runner writes only the last step into the output and generated kernels
  compute each element in one go);
* ``x`` has the output's shape and dtype (no broadcast of ``x`` into a larger
  output), and its bytes are one location that is a fresh allocation of the
  function's own body, on the output's device and memory scope: not a
  parameter, a constant, a returned value or a field of a tuple;
* that location -- together with everything already made an alias of it --
  is live at no position after ``p``: no later read of ``x`` or of any view of
  it (a reshape of ``x``, ``x`` as a slice of a concat's buffer that is still
  read, ...);
* no other input of the call may be those bytes (a second view of ``x`` read at
  other indices), and the output is not returned (results never alias).

* the output is not tiny: one whose size is known at compile time and is below
  ``min_bytes`` (``PassContext`` config ``"hetvm.inplace.min_bytes"``, default
  :data:`MIN_BYTES`) keeps its own allocation. Measured with NumPy 2.4 (a chain
  of adds, benchmarks/vm_dispatch.py): a ufunc whose ``out=`` overlaps an input
  takes NumPy's overlap-checking path, about 0.05 us more per call up to a few
  thousand elements and twice the call (0.55 us against 0.26) for one element,
  while the bytes it saves are at most a few cache lines; from about 16 KiB on
  in place is faster (the output is already in cache). A symbolic size may be
  large: it is rewritten.

Only the function body's own top-level bindings are rewritten (not the branches
of an ``If``). A chain ``relu(add(exp(x), y))`` becomes one buffer: each rewrite
merges the output's location into its input's before the next call is judged.
"""

from __future__ import annotations

from typing import Any

from ..analysis.liveness import analyze_liveness
from ..analysis.values import Loc, LocKind
from ..errors import HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..op.effects import kernel_op_of
from .concat_in_place import PURE_VIEW_AT
from .pass_infra import Pass, PassContext
from .static_plan_block_memory import ALLOC_OP

__all__ = ["InplaceElementwise", "INPLACE_SAFE", "MIN_BYTES", "MIN_BYTES_KEY"]

#: outputs of a static size below this many bytes are not rewritten (see the docstring)
MIN_BYTES = 1024
MIN_BYTES_KEY = "hetvm.inplace.min_bytes"

#: kernels (hetvm/kernels) whose output may be one of their inputs, element for element
INPLACE_SAFE = frozenset(
    {
        "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum",
        "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "negative", "abs", "sin", "cos",
        "floor", "ceil", "round", "sign", "reciprocal", "clip",
        "nn.relu", "nn.leakyrelu", "nn.gelu_tanh", "nn.silu", "nn.scale_shift_act",
    }
)  # fmt: skip
FUSED = "fused_elementwise"


def _kernel_op(value: Any) -> str | None:
    if isinstance(value, E.Call) and isinstance(value.op, E.ExternFunc):
        return kernel_op_of(value.op.global_symbol)
    return None


def _attr(call: E.Call, key: str) -> Any:
    attrs = call.attrs
    return attrs.get(key) if hasattr(attrs, "get") else None


def inplace_safe(call: E.Call) -> bool:
    """Whether this lowered kernel call may write its output over an input."""
    op = _kernel_op(call)
    if op in INPLACE_SAFE:
        return True
    if op != FUSED:
        return False
    program = (_attr(call, "op_attrs") or {}).get("program")
    if not isinstance(program, (list, tuple)) or not program:
        return False
    last = program[-1]
    return isinstance(last, (list, tuple)) and bool(last) and last[0] in INPLACE_SAFE


def _alloc_where(value: Any) -> tuple | None:
    """(device index, scope) of a ``builtin.alloc_tensor`` call, else None."""
    if not (isinstance(value, E.Call) and isinstance(value.op, E.Op) and value.op.name == ALLOC_OP):
        return None
    dev = value.args[2] if len(value.args) > 2 else None
    scope = value.args[3] if len(value.args) > 3 else None
    dev_v = P.const_value(dev.value) if isinstance(dev, E.PrimValue) else None
    scope_v = scope.value if isinstance(scope, E.StringImm) else "global"
    return None if dev_v is None else (dev_v, scope_v)


def _static_nbytes(sinfo: S.StructInfo | None) -> int | None:
    """Bytes of a tensor whose shape and dtype are known at compile time, else None."""
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.dtype is None or sinfo.shape is None:
        return None
    dims = [P.const_value(d) for d in sinfo.shape]
    if any(type(d) is not int for d in dims):
        return None
    n = S.dtype_nbytes(sinfo.dtype)
    for d in dims:
        n *= d
    return n


def _same_tensor_type(a: S.StructInfo | None, b: S.StructInfo | None) -> bool:
    if not (isinstance(a, S.TensorStructInfo) and isinstance(b, S.TensorStructInfo)):
        return False
    if a.dtype is None or a.dtype != b.dtype or a.shape is None or b.shape is None:
        return False
    if len(a.shape) != len(b.shape):
        return False
    return all(P.const_value(P.simplify(P.sub(x, y))) == 0 for x, y in zip(a.shape, b.shape))


class _Groups:
    """Locations merged by rewrites: a representative per group, its last live
    position, and the (device, scope) of the allocation that owns the bytes."""

    def __init__(self) -> None:
        self.parent: dict[Loc, Loc] = {}
        self.end: dict[Loc, int] = {}

    def find(self, loc: Loc) -> Loc:
        while loc in self.parent:
            loc = self.parent[loc]
        return loc

    def merge(self, child: Loc, root: Loc, child_end: int) -> None:
        self.parent[child] = root
        self.end[root] = max(self.end[root], child_end)


def _rewrite_function(
    name: str, func: E.Function, mod: IRModule, min_bytes: int
) -> tuple[E.Function, int]:
    live = analyze_liveness(func, mod, name)
    values = live.values
    escaping = values.escaping()
    body = func.body
    groups = _Groups()
    where_of: dict[Loc, tuple] = {}
    bindings = [b for block in body.blocks for b in block.bindings]
    for b in bindings:
        if values.frame_of.get(b.var) is not body:
            continue
        where = _alloc_where(getattr(b, "value", None))
        loc = values.loc_of.get(b.var)
        if where is not None and loc is not None:
            where_of[loc] = where
            groups.end[loc] = live.end(loc)
    alloc_binding = {b.var: b for b in bindings if b.var in values.loc_of and values.loc_of[b.var] in where_of}
    views: dict[E.Var, E.VarBinding] = {}
    for b in bindings:
        call = getattr(b, "value", None)
        if not (isinstance(call, E.Call) and inplace_safe(call)) or _attr(call, "num_outputs") != 1:
            continue
        out = call.args[-1] if call.args else None
        if not isinstance(out, E.Var) or out not in alloc_binding or out in views:
            continue
        out_loc = values.loc_of[out]
        if out_loc in escaping:
            continue
        nbytes = _static_nbytes(out.struct_info)
        if nbytes is not None and nbytes < min_bytes:
            continue
        pos = live.def_pos.get(b.var)
        if pos is None:
            continue
        source = _pick_input(call, out, out_loc, pos, live, groups, where_of, escaping)
        if source is None:
            continue
        x, root = source
        sinfo = out.struct_info
        alloc = alloc_binding[out]
        views[out] = E.VarBinding(
            out,
            E.Call(PURE_VIEW_AT, (x, E.PrimValue(0), alloc.value.args[0]),  # type: ignore[attr-defined]
                   sinfo_args=(sinfo,), struct_info=sinfo, span=alloc.value.span),  # fmt: skip
            span=alloc.span,
        )
        groups.merge(out_loc, root, groups.end[out_loc])
    if not views:
        return func, 0
    blocks = []
    for block in body.blocks:
        new = tuple(views.get(b.var, b) for b in block.bindings)
        blocks.append(block if all(x is y for x, y in zip(new, block.bindings)) else type(block)(new, span=block.span))
    new_body = E.SeqExpr(tuple(blocks), body.body, struct_info=body.struct_info, span=body.span)
    return E.replace(func, body=new_body), len(views)


def _pick_input(call, out, out_loc, pos, live, groups, where_of, escaping):  # noqa: ANN001, ANN202
    """The first input whose bytes may become the output's, and its group."""
    values = live.values
    inputs = [a for a in call.args[:-1] if isinstance(a, E.Var)]
    out_where = where_of[out_loc]
    for x in inputs:
        if not _same_tensor_type(x.struct_info, out.struct_info):
            continue
        locs = values.of(x)
        if len(locs) != 1:
            continue
        (loc,) = locs
        if loc.kind is not LocKind.ALLOC or loc in escaping or loc not in where_of:
            continue
        root = groups.find(loc)
        if where_of[root] != out_where or groups.end[root] != pos:
            continue
        if live.def_pos.get(x, pos) >= live.def_pos.get(out, -1):
            continue  # the view must come after x exists
        others = [a for a in inputs if a is not x]
        if any(groups.find(o) is root for a in others for o in values.of(a)):
            continue
        return x, root
    return None


class InplaceElementwise(Pass):
    """See the module docstring. ``mod.attrs["inplace_elementwise"]``: rewrites per function.

    ``min_bytes``: outputs of a static size below it keep their allocation; None
    (the default) reads the ``PassContext`` config ``"hetvm.inplace.min_bytes"``,
    else :data:`MIN_BYTES`."""

    def __init__(self, min_bytes: int | None = None) -> None:
        super().__init__("InplaceElementwise")
        where = "InplaceElementwise(min_bytes=...)"
        self.min_bytes = None if min_bytes is None else _check_min_bytes(min_bytes, where)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        min_bytes = self.min_bytes
        if min_bytes is None:
            value = ctx.config.get(MIN_BYTES_KEY, MIN_BYTES)
            min_bytes = _check_min_bytes(value, f"PassContext config '{MIN_BYTES_KEY}'")
        funcs: dict[str, E.Function] = {}
        counts: dict[str, int] = {}
        for name, func in mod.functions.items():
            funcs[name], counts[name] = _rewrite_function(name, func, mod, min_bytes)
        if not any(counts.values()):
            return mod
        out = mod.with_functions(funcs)
        out.attrs["inplace_elementwise"] = {k: v for k, v in counts.items() if v}
        return out


def _check_min_bytes(value: Any, where: str) -> int:
    if type(value) is not int or value < 0:
        raise HetvmError(f"{where} must be a non-negative int (bytes), got {value!r}")
    return value
