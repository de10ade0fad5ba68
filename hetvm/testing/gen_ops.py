"""The op catalog of the program generator: which ops, on which operands, how.

Each entry builds one op call from values already in scope, drawing every
choice from Hypothesis so failures shrink. An entry returns ``None`` when no
value in scope fits it (the generator then tries another op). Only ops with a
CPU kernel (or view ops, which need none) are offered, so the catalog grows by
itself as kernels land. Operands are chosen so every program is well typed
and numerically tame: values stay small, divisors are kept away from zero and
no op is fed values outside its domain, so NaN (the poison pattern) appears
only where memory was used after its kill.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from .. import op as R
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S

if TYPE_CHECKING:
    from .generators import FunctionGen

FLOATS = ("float32", "float16")
INTS = ("int32", "int64")
NUMERIC = FLOATS + INTS

UNARY_FLOAT = ("exp", "tanh", "sigmoid", "sin", "cos", "floor", "ceil", "round", "sign", "erf")
UNARY_NUMERIC = ("abs", "negative")
ACTIVATIONS = ("nn.relu", "nn.silu", "nn.gelu", "nn.gelu_tanh")
POSITIVE_DOMAIN = ("sqrt", "log", "rsqrt", "reciprocal")
BINARY_NUMERIC = ("add", "subtract", "multiply", "maximum", "minimum")
DIVISIONS = ("divide", "floor_divide")
COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
LOGICAL = ("logical_and", "logical_or")
REDUCTIONS = ("sum", "max", "min", "mean")
ARG_REDUCTIONS = ("argmax", "argmin")

#: elements any generated tensor may have, so programs stay fast
MAX_ELEMENTS = 512


def kernel_available(op: str) -> bool:
    """Whether the CPU can run ``op`` (view ops are lowered without a kernel)."""
    from ..kernels import has_kernel
    from ..op.effects import is_view_op

    return is_view_op(op) or has_kernel(op, "cpu")


# --------------------------------------------------------------------------
# shape helpers (shapes are tuples of PrimExpr)
# --------------------------------------------------------------------------


def static_dims(shape: Sequence[P.PrimExpr]) -> tuple[int, ...] | None:
    dims = [P.const_value(d) for d in shape]
    return None if any(d is None for d in dims) else tuple(dims)  # type: ignore[return-value]


def is_one(d: P.PrimExpr) -> bool:
    return P.const_value(d) == 1


def dims_equal(a: P.PrimExpr, b: P.PrimExpr) -> bool:
    return P.prove_equal(a, b)


def broadcast(a: Sequence[P.PrimExpr], b: Sequence[P.PrimExpr]) -> tuple[P.PrimExpr, ...] | None:
    """NumPy broadcasting when provable from the shapes alone, else None."""
    out: list[P.PrimExpr] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else P.IntImm(1)
        y = b[-i] if i <= len(b) else P.IntImm(1)
        if is_one(x):
            out.append(y)
        elif is_one(y) or dims_equal(x, y):
            out.append(x)
        else:
            return None
    return tuple(reversed(out))


def shapes_equal(a: Sequence[P.PrimExpr], b: Sequence[P.PrimExpr]) -> bool:
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b))


def tinfo(v: E.Expr) -> S.TensorStructInfo:
    sinfo = v.struct_info
    assert isinstance(sinfo, S.TensorStructInfo)
    return sinfo


def shape_of(v: E.Expr) -> tuple[P.PrimExpr, ...]:
    shape = tinfo(v).shape
    assert shape is not None
    return shape


def dtype_of(v: E.Expr) -> str:
    dtype = tinfo(v).dtype
    assert dtype is not None
    return dtype


def element_bound(shape: Sequence[P.PrimExpr], bounds: dict) -> int:
    """An upper bound of the element count (symbolic dims at their bound, or 8)."""
    total = 1
    for d in shape:
        c = P.const_value(d)
        if c is None:
            c = P.upper_bound(d, bounds) or 8
        total *= max(int(c), 1)
    return total


# --------------------------------------------------------------------------
# the catalog
# --------------------------------------------------------------------------

OpBuilder = Callable[["FunctionGen"], "E.Expr | None"]


def op_unary(g: FunctionGen) -> E.Expr | None:
    names = [n for n in UNARY_FLOAT + ACTIVATIONS + UNARY_NUMERIC + ("logical_not", "clip")]
    name = g.choose_op(names)
    if name is None:
        return None
    if name == "logical_not":
        x = g.pick(dtypes=("bool",))
        return None if x is None else R.logical_not(x)
    if name in UNARY_NUMERIC or name == "clip":
        x = g.pick(dtypes=NUMERIC)
        if x is None:
            return None
        if name == "clip":
            lo = g.draw_int(-3, 0)
            return R.clip(x, float(lo), float(lo + g.draw_int(1, 4)))
        return getattr(R, name)(x)
    x = g.pick(dtypes=FLOATS)
    if x is None:
        return None
    if name == "exp":  # keep exp in range: exp(tanh(x))
        x = g.emit(R.tanh(x))
    if name.startswith("nn."):
        return getattr(R.nn, name[3:])(x)
    return getattr(R, name)(x)


def op_positive_domain(g: FunctionGen) -> E.Expr | None:
    name = g.choose_op(POSITIVE_DOMAIN)
    x = g.pick(dtypes=FLOATS)
    if name is None or x is None:
        return None
    return getattr(R, name)(g.positive(x))


def op_binary(g: FunctionGen) -> E.Expr | None:
    name = g.choose_op(BINARY_NUMERIC + DIVISIONS + COMPARISONS + LOGICAL)
    if name is None:
        return None
    dtypes = ("bool",) if name in LOGICAL else NUMERIC
    if name in ("equal", "not_equal"):
        dtypes = NUMERIC + ("bool",)
    x = g.pick(dtypes=dtypes)
    if x is None:
        return None
    y = g.partner(x)
    if name in DIVISIONS:
        y = g.positive(y)
    if name not in DIVISIONS and g.draw_bool():
        x, y = y, x
    return getattr(R, name)(x, y)


def op_where(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("where"):
        return None
    x = g.pick(dtypes=NUMERIC + ("bool",))
    if x is None:
        return None
    y = g.partner(x)
    cond = g.pick(dtypes=("bool",), broadcasts_to=shape_of(x))
    if cond is None:
        cond = g.emit(R.greater(x, g.fresh_operand(shape_of(x), dtype_of(x), broadcast_ok=True)))
    return R.where(cond, x, y)


def op_astype(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("astype"):
        return None
    x = g.pick()
    if x is None:
        return None
    target = g.draw_choice(g.config.dtypes)
    if dtype_of(x) in FLOATS and target in INTS:
        x = g.emit(R.round(R.clip(x, -100.0, 100.0)) if kernel_available("clip") else R.round(x))
    return R.astype(x, target)


def op_matmul(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("matmul"):
        return None
    x = g.pick(dtypes=FLOATS, min_rank=1, max_rank=3)
    if x is None:
        return None
    k = shape_of(x)[-1]
    j = g.draw_int(1, 5)
    w_shape = (k,) if g.draw_bool(0.2) else (k, P.IntImm(j))
    w = g.operand_exact(w_shape, dtype_of(x))
    if w is None:
        return None
    return R.matmul(x, w)


def _surely_nonempty(v: E.Var) -> bool:
    """Every dimension a positive constant: ``max``, ``min``, ``argmax`` and
    ``argmin`` of an empty tensor have no value (NumPy raises, and the reference
    interpreter with it), and ``split``, ``strided_slice`` or a helper's symbolic
    parameter can make a tensor empty (the long fuzz run drew both)."""
    return all((P.const_value(d) or 0) > 0 for d in shape_of(v))


def op_reduce(g: FunctionGen) -> E.Expr | None:
    name = g.choose_op(REDUCTIONS + ARG_REDUCTIONS)
    if name is None:
        return None
    needs_values = name not in ("sum", "mean")
    x = g.pick(dtypes=FLOATS if name == "mean" else NUMERIC, where=_surely_nonempty if needs_values else None)
    if x is None:
        return None
    rank = len(shape_of(x))
    keepdims = g.draw_bool()
    if name in ARG_REDUCTIONS:
        axis = g.draw_int(-rank, rank - 1) if rank and g.draw_bool(0.7) else None
        return getattr(R, name)(x, axis=axis, keepdims=keepdims)
    if rank == 0 or g.draw_bool(0.25):
        axes = None
    else:
        axes = sorted(set(g.draw_int(0, rank - 1) for _ in range(g.draw_int(1, rank))))
    return getattr(R, name)(x, axis=axes, keepdims=keepdims)


def op_softmax(g: FunctionGen) -> E.Expr | None:
    name = g.choose_op(("nn.softmax", "nn.log_softmax"))
    x = g.pick(dtypes=FLOATS, min_rank=1)
    if name is None or x is None:
        return None
    rank = len(shape_of(x))
    return getattr(R.nn, name[3:])(x, axis=g.draw_int(-rank, rank - 1))


def op_layer_norm(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("nn.layer_norm"):
        return None
    x = g.pick(dtypes=FLOATS, min_rank=1)
    if x is None:
        return None
    last = shape_of(x)[-1]
    gamma = g.operand_exact((last,), dtype_of(x))
    beta = g.operand_exact((last,), dtype_of(x))
    if gamma is None or beta is None:
        return None
    return R.nn.layer_norm(x, gamma, beta, axes=[-1])


def op_view(g: FunctionGen) -> E.Expr | None:
    name = g.choose_op(("reshape", "flatten", "expand_dims", "squeeze", "permute_dims", "broadcast_to"))
    x = g.pick()
    if name is None or x is None:
        return None
    shape = shape_of(x)
    rank = len(shape)
    if name == "reshape":
        dims = static_dims(shape)
        if dims is None:
            return R.flatten(x) if rank else None
        return R.reshape(x, _factorise(g, int(np.prod(dims, dtype=np.int64))))
    if name == "flatten":
        return R.flatten(x)
    if name == "expand_dims":
        return R.expand_dims(x, g.draw_int(-rank - 1, rank)) if rank < 4 else None
    if name == "squeeze":
        ones = [i for i, d in enumerate(shape) if is_one(d)]
        if not ones:
            return None
        # axis=None over symbolic dims has a result of unknown rank, which cannot be
        # allocated (LegalizeOps refuses it with a StructInfoError): name an axis then
        every = static_dims(shape) is not None and g.draw_bool()
        return R.squeeze(x, axis=None if every else [g.draw_choice(ones)])
    if name == "permute_dims":
        if rank < 2:
            return None
        perm = list(g.draw_permutation(rank))
        return R.permute_dims(x, axes=perm if g.draw_bool(0.8) else None)
    # broadcast_to: grow a dimension of 1 or add a leading one
    target = list(shape)
    ones = [i for i, d in enumerate(shape) if is_one(d)]
    if ones and g.draw_bool():
        target[g.draw_choice(ones)] = P.IntImm(g.draw_int(2, 3))
    elif rank < 4:
        target.insert(0, P.IntImm(g.draw_int(1, 3)))
    else:
        return None
    return R.broadcast_to(x, tuple(target))


def _factorise(g: FunctionGen, total: int) -> tuple[int, ...]:
    if total == 0:  # an empty tensor (a split can make one): any shape with a zero
        return (0, g.draw_int(1, 3)) if g.draw_bool() else (g.draw_int(1, 3), 0)
    divisors = [d for d in range(1, total + 1) if total % d == 0]
    a = g.draw_choice(divisors)
    rest = total // a
    if g.draw_bool():
        return (a, rest)
    divisors = [d for d in range(1, rest + 1) if rest % d == 0]
    b = g.draw_choice(divisors)
    return (a, b, rest // b)


def op_concat(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("concat"):
        return None
    x = g.pick(min_rank=1)
    if x is None:
        return None
    shape = shape_of(x)
    axis = g.draw_int(0, len(shape) - 1)

    def fits(v: E.Expr) -> bool:
        s = shape_of(v)
        return len(s) == len(shape) and all(
            i == axis or dims_equal(a, b) for i, (a, b) in enumerate(zip(s, shape))
        )

    y = g.pick(dtypes=(dtype_of(x),), where=fits) or x
    parts = [x, y] if g.draw_bool() else [y, x]
    if g.draw_bool(0.3):
        parts.append(x)
    elif g.draw_bool(0.5):
        # fresh copies of x on axis 0, whose slices are contiguous: what ConcatInPlace
        # computes straight into the output (permute_dims: a copy kernel for every dtype)
        axis = 0
        identity = tuple(range(len(shape)))
        count = g.draw_int(2, 3)
        parts = [g.emit(R.permute_dims(x, identity)) if g.draw_bool(0.8) else x for _ in range(count)]
    return R.concat(E.Tuple(tuple(parts)), axis=axis if g.draw_bool(0.8) else axis - len(shape))


def op_split(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("split"):
        return None
    x = g.pick(min_rank=1, where=lambda v: any(P.const_value(d) for d in shape_of(v)))
    if x is None:
        return None
    shape = shape_of(x)
    axes = [i for i, d in enumerate(shape) if P.const_value(d)]
    axis = g.draw_choice(axes)
    dim = int(P.const_value(shape[axis]))  # type: ignore[arg-type]
    if g.draw_bool():
        sections: Any = g.draw_int(1, min(dim, 3))
    else:
        cuts = sorted(set(g.draw_int(0, dim) for _ in range(g.draw_int(1, 2))))
        sections = tuple(cuts)
    return R.split(x, sections, axis=axis)


def op_take(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("take"):
        return None
    x = g.pick(min_rank=1, where=lambda v: any(P.const_value(d) for d in shape_of(v)))
    if x is None:
        return None
    shape = shape_of(x)
    axis = g.draw_choice([i for i, d in enumerate(shape) if P.const_value(d)])
    dim = int(P.const_value(shape[axis]))  # type: ignore[arg-type]
    count = g.draw_int(1, 4)
    indices = g.rng.integers(0, dim, size=(count,)).astype(g.draw_choice(INTS))
    return R.take(x, E.const(indices), axis=axis)


def op_strided_slice(g: FunctionGen) -> E.Expr | None:
    if not kernel_available("strided_slice"):
        return None
    x = g.pick(min_rank=1, where=lambda v: any(P.const_value(d) for d in shape_of(v)))
    if x is None:
        return None
    shape = shape_of(x)
    axis = g.draw_choice([i for i, d in enumerate(shape) if P.const_value(d)])
    dim = int(P.const_value(shape[axis]))  # type: ignore[arg-type]
    begin = g.draw_int(0, dim - 1)
    end = g.draw_int(begin + 1, dim)
    stride = g.draw_int(1, 2)
    return R.strided_slice(x, axes=[axis], begin=[begin], end=[end], strides=[stride])


def op_create(g: FunctionGen) -> E.Expr | None:
    name = g.choose_op(("zeros_like", "ones_like", "full_like", "zeros", "ones", "full"))
    if name is None:
        return None
    dtype = g.draw_choice(g.config.dtypes)
    if name.endswith("_like"):
        x = g.pick()
        if x is None:
            return None
        if name == "full_like":
            fill = E.const(np.asarray(g.draw_int(-2, 2), dtype=dtype_of(x)))
            return R.full_like(x, fill)
        return getattr(R, name)(x, dtype=dtype if g.draw_bool() else None)
    x = g.pick()
    shape = shape_of(x) if x is not None and g.draw_bool() else tuple(
        g.draw_int(1, 4) for _ in range(g.draw_int(0, 3))
    )
    if name == "full":
        return R.full(shape, E.const(np.asarray(g.draw_int(-2, 2), dtype=dtype)), dtype)
    return getattr(R, name)(shape, dtype)


CATALOG: dict[str, OpBuilder] = {
    "unary": op_unary,
    "positive_domain": op_positive_domain,
    "binary": op_binary,
    "where": op_where,
    "astype": op_astype,
    "matmul": op_matmul,
    "reduce": op_reduce,
    "softmax": op_softmax,
    "layer_norm": op_layer_norm,
    "view": op_view,
    "concat": op_concat,
    "split": op_split,
    "take": op_take,
    "strided_slice": op_strided_slice,
    "create": op_create,
}
