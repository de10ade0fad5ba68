"""ONNX ``RNN``, ``GRU`` and ``LSTM``: per direction, the input projection of every
step as one matmul, then the recurrence as one ``nn.recurrent_scan`` call, or
(``from_onnx(unroll_recurrent=True)``) unrolled into plain ops.

Why a scan op by default: unrolled, each step is several VM instructions (a slice,
``H R^T``, an add, a split, fused gate kernels, their allocations and kills), and
that cost dominates recurrent layers: measured, the one-call kernel was faster at
every length (``benchmarks/recurrent.py``; 1.1x at one step, 8-20x from 16) and it
takes a symbolic sequence length. The unrolled form is kept because it shows every
step to the passes (planning, placement) and needs no kernel of its own; it refuses
a symbolic length with an error naming the node.

What each node computes (the specification's equations, gates in ONNX order)::

    RNN   h = f(x W^T + H R^T + Wb + Rb)
    GRU   z, r = f(x W[z,r]^T + H R[z,r]^T + b);   H' = (1 - z) h + z H
          h = g(x Wh^T + (r H) Rh^T + Rbh + Wbh)        linear_before_reset = 0
          h = g(x Wh^T + r (H Rh^T + Rbh) + Wbh)        linear_before_reset = 1
    LSTM  i, f = f(x W^T + H R^T + b + P[i,f] C)   (f = 1 - i with input_forget)
          c = g(...);  C' = f C + i c;  o = f(... + P[o] C');  H' = o h(C')

``clip`` bounds every activation's input (not ``h(C')``'s), as ONNX Runtime
does. ``sequence_lens`` masks each step with ``t < len[b]``: past a batch
entry's length its state is held and its ``Y`` rows are zero; the reverse
direction starts at each entry's own last step, which is what the mask gives
when the steps run from ``seq_length - 1`` down to 0. ``activation_alpha`` and
``activation_beta`` are consumed only by the activations that take them, in the
order the activations are listed (ONNX Runtime's reading of the specification);
``Affine`` and ``ScaledTanh`` need their values given (ONNX Runtime would read
missing ones as 0, the deprecated ops' defaults were 1 and 0; which one a model
means cannot be told, so hetvm asks).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ...ir import expr as E
from ...ir import prim as P
from ..onnx_context import ConvertContext, NodeView
from .activation import softplus
from .registry import converter

_FLOATS = ("float16", "float32", "float64")

#: op type -> (gates in W's rows, activations per direction, their defaults)
_KINDS: dict[str, tuple[int, tuple[str, ...]]] = {
    "RNN": (1, ("Tanh",)),
    "GRU": (3, ("Sigmoid", "Tanh")),
    "LSTM": (4, ("Sigmoid", "Tanh", "Tanh")),
}

Act = Callable[[E.Expr], E.Expr]


# --------------------------------------------------------------------------
# activations
# --------------------------------------------------------------------------

#: lower-case name -> (spelling, alpha default, beta default); None: no parameter,
#: a string: the parameter must be given (the message says why)
_ACTIVATIONS: dict[str, tuple[str, Any, Any]] = {
    "relu": ("Relu", None, None),
    "tanh": ("Tanh", None, None),
    "sigmoid": ("Sigmoid", None, None),
    "affine": ("Affine", "required", "required"),
    "leakyrelu": ("LeakyRelu", 0.01, None),
    "thresholdedrelu": ("ThresholdedRelu", 1.0, None),
    "scaledtanh": ("ScaledTanh", "required", "required"),
    "hardsigmoid": ("HardSigmoid", 0.2, 0.5),
    "elu": ("Elu", 1.0, None),
    "softsign": ("Softsign", None, None),
    "softplus": ("Softplus", None, None),
}


def _take(values: Iterator[float], default: Any, ctx: ConvertContext, name: str, which: str) -> float | None:
    if default is None:
        return None
    value = next(values, None)
    if value is not None:
        return float(value)
    if default == "required":
        raise ctx.error(
            f"activation {name} needs its {which} in activation_{which} (ONNX Runtime reads a missing "
            f"one as 0, the deprecated {name} op's default differs; give it explicitly)"
        )
    return float(default)


Spec = tuple[str, "float | None", "float | None"]  # (ONNX spelling, alpha, beta)


def _activations(ctx: ConvertContext, node: NodeView, count: int, directions: int) -> list[list[Spec]]:
    """The activation functions of each direction, ``count`` per direction, as
    (name, alpha, beta) with the defaults filled in."""
    defaults = _KINDS[node.op_type][1]
    names = node.attr("activations")
    if names is None:
        names = list(defaults) * directions
    names = [str(n) for n in names]
    if len(names) != count * directions:
        raise ctx.error(
            f"activations lists {len(names)} function(s) {names}; a {'bidirectional ' if directions == 2 else ''}"
            f"{node.op_type} needs {count * directions}"
        )
    alphas = iter(float(a) for a in node.attr("activation_alpha", []) or [])
    betas = iter(float(b) for b in node.attr("activation_beta", []) or [])
    clip = node.attr("clip")
    if clip is not None and not float(clip) > 0:
        raise ctx.error(f"clip must be positive, got {clip}")
    funcs: list[Spec] = []
    for name in names:
        entry = _ACTIVATIONS.get(name.lower())
        if entry is None:
            raise ctx.error(
                f"unsupported activation '{name}' (supported: {', '.join(e[0] for e in _ACTIVATIONS.values())})"
            )
        spelled, alpha_default, beta_default = entry
        alpha = _take(alphas, alpha_default, ctx, spelled, "alpha")
        beta = _take(betas, beta_default, ctx, spelled, "beta")
        funcs.append((spelled, alpha, beta))
    return [funcs[d * count : (d + 1) * count] for d in range(directions)]


def _activation(ctx: ConvertContext, name: str, alpha: float | None, beta: float | None, dtype: str) -> Act:
    def c(v: float) -> E.Constant:
        return ctx.const(v, dtype)

    def f(x: E.Expr) -> E.Expr:
        if name == "Relu":
            return ctx.call("nn.relu", x)
        if name in ("Tanh", "Sigmoid"):
            return ctx.call(name.lower(), x)
        if name == "Affine":
            return ctx.call("add", ctx.call("multiply", x, c(alpha)), c(beta))
        if name == "LeakyRelu":
            return ctx.call("nn.leakyrelu", x, alpha)
        if name == "ThresholdedRelu":
            return ctx.call("where", ctx.call("greater", x, c(alpha)), x, c(0.0))
        if name == "ScaledTanh":
            return ctx.call("multiply", ctx.call("tanh", ctx.call("multiply", x, c(beta))), c(alpha))
        if name == "HardSigmoid":
            lin = ctx.call("add", ctx.call("multiply", x, c(alpha)), c(beta))
            return ctx.call("clip", lin, 0.0, 1.0)
        if name == "Elu":
            neg = ctx.call("subtract", ctx.call("exp", ctx.call("minimum", x, c(0.0))), c(1.0))
            return ctx.call("where", ctx.call("greater_equal", x, c(0.0)), x, ctx.call("multiply", neg, c(alpha)))
        if name == "Softsign":
            return ctx.call("divide", x, ctx.call("add", ctx.call("abs", x), c(1.0)))
        assert name == "Softplus"
        return softplus(ctx, x)

    return f


# --------------------------------------------------------------------------
# operands: constants are sliced and transposed with NumPy at import time,
# run-time weights (a graph input, keep_params) with ops
# --------------------------------------------------------------------------

Val = Any  # np.ndarray (a constant the importer may transform) | E.Expr


def _operand(ctx: ConvertContext, index: int, what: str) -> Val:
    known = ctx.folded(index)
    return known if known is not None else ctx.tensor(index, what)


def _expr(ctx: ConvertContext, value: Val, dtype: str) -> E.Expr:
    return ctx.const(value, dtype) if isinstance(value, np.ndarray) else value


def _int(dim: Any) -> int:
    value = P.const_value(dim) if isinstance(dim, P.PrimExpr) else dim
    if value is None:
        raise TypeError("a symbolic dim of a constant")  # pragma: no cover - constants have static shapes
    return int(value)


def _pick(ctx: ConvertContext, value: Val, axis: int, index: int, out_shape: tuple[Any, ...]) -> Val:
    """``value`` at ``index`` of ``axis``, that axis dropped (reshaped to ``out_shape``)."""
    if isinstance(value, np.ndarray):
        return np.take(value, index, axis=axis).reshape([_int(d) for d in out_shape])
    piece = ctx.call("strided_slice", value, [axis], [index], [index + 1])
    return ctx.call("reshape", piece, out_shape)


def _columns(ctx: ConvertContext, value: Val, begin: int, end: int) -> Val:
    """``value[..., begin:end]`` (last axis)."""
    if isinstance(value, np.ndarray):
        return value[..., begin:end]
    return ctx.call("strided_slice", value, [ctx.rank(value) - 1], [begin], [end])


def _transposed(ctx: ConvertContext, value: Val) -> Val:
    return value.T if isinstance(value, np.ndarray) else ctx.call("permute_dims", value, [1, 0])


def _sum(ctx: ConvertContext, a: Val, b: Val) -> Val:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a + b
    return ctx.call("add", _expr(ctx, a, ctx.dtype(b if isinstance(a, np.ndarray) else a)),
                    _expr(ctx, b, ctx.dtype(a if isinstance(b, np.ndarray) else b)))  # fmt: skip


@dataclass
class _Recurrence:
    """What every kind shares: sizes, dtype, layout and clip."""

    kind: str
    gates: int
    steps: int | None  # None: a symbolic sequence length (the scan op only)
    seq: P.PrimExpr
    batch: P.PrimExpr
    hidden: int
    input_size: int
    directions: int
    dtype: str
    layout: int
    clip: float | None


@dataclass
class _Weights:
    """One direction's operands, sliced (and transposed) once before the steps."""

    acts: Any  # the (name, alpha, beta) specs; unrolled: the functions
    w_t: Val  # W^T (input, gates * hidden)
    bias: Val  # what the input projection adds: Wb + Rb, less GRU's Rbh with linear_before_reset
    r_full: Val  # R^T (hidden, gates * hidden)
    r_t: Val  # R^T, or (GRU without linear_before_reset) its z, r columns only
    r_h: Val = None  # GRU without linear_before_reset: Rh^T, applied to r * H
    rec_bias: Val = None  # GRU with linear_before_reset: Rbh, added to H Rh^T inside the reset gate
    peep: list[Val] | None = None  # LSTM: Pi, Po, Pf


# --------------------------------------------------------------------------
# the node's shape and attributes
# --------------------------------------------------------------------------


def _direction_count(ctx: ConvertContext, node: NodeView) -> tuple[int, list[bool]]:
    """(number of directions, whether each runs backwards)."""
    direction = str(node.attr("direction", "forward"))
    table = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}
    if direction not in table:
        raise ctx.error(f"direction must be forward, reverse or bidirectional, got '{direction}'")
    return len(table[direction]), table[direction]


def _shape_of_x(ctx: ConvertContext, node: NodeView, x: E.Expr, layout: int) -> tuple[P.PrimExpr, P.PrimExpr, int]:
    shape = ctx.known_shape(x, "X")
    if len(shape) != 3:
        raise ctx.error(f"X must be 3-D, got rank {len(shape)}")
    seq, batch = (shape[0], shape[1]) if layout == 0 else (shape[1], shape[0])
    if P.const_value(seq) is None and ctx.unroll_recurrent:
        raise ctx.error(
            f"the sequence length of X is symbolic ({P.to_str(seq)}); unroll_recurrent=True unrolls "
            f"{node.op_type} over a static number of steps (give the length with shape_dict, or "
            f"import without unroll_recurrent: one nn.recurrent_scan call takes any length)"
        )
    size = ctx.static_dim(shape[2], "the input size of X")
    return seq, batch, size


def _weight_shape(ctx: ConvertContext, index: int, what: str, expected: list[int | None]) -> list[int]:
    w = ctx.tensor(index, what)
    shape = ctx.known_shape(w, what)
    dims = [ctx.static_dim(d, f"{what}'s shape") for d in shape]
    if len(dims) != len(expected) or any(e is not None and d != e for d, e in zip(dims, expected)):
        want = "[" + ", ".join("?" if e is None else str(e) for e in expected) + "]"
        raise ctx.error(f"{what} has shape {dims}, expected {want}")
    return dims


def _check_attributes(ctx: ConvertContext, node: NodeView) -> None:
    kind = node.op_type
    extras = {"input_forget": kind == "LSTM", "linear_before_reset": kind == "GRU"}
    for attr, allowed in extras.items():
        value = int(node.attr(attr, 0))
        if value not in (0, 1) or (value and not allowed):
            raise ctx.error(f"attribute {attr}={value} is not valid for {kind}")


# --------------------------------------------------------------------------
# the converter
# --------------------------------------------------------------------------


@converter("RNN", "GRU", "LSTM")
def _recurrent(ctx: ConvertContext, node: NodeView) -> Any:
    kind = node.op_type
    gates, defaults = _KINDS[kind]
    layout = int(node.attr("layout", 0)) if node.opset >= 14 else 0
    if layout not in (0, 1):
        raise ctx.error(f"layout must be 0 or 1, got {layout}")
    x = ctx.tensor(0, "X")
    dtype = ctx.dtype(x)
    if dtype not in _FLOATS:
        raise ctx.error(f"X has dtype {dtype}; {kind} needs float16, float32 or float64")
    seq, batch, input_size = _shape_of_x(ctx, node, x, layout)
    steps = None if P.const_value(seq) is None else int(P.const_value(seq))
    directions, backwards = _direction_count(ctx, node)
    w_dims = _weight_shape(ctx, 1, "W", [directions, None, input_size])
    if w_dims[1] % gates:
        raise ctx.error(f"W's second dim {w_dims[1]} is not {gates} x hidden_size")
    hidden = int(node.attr("hidden_size", w_dims[1] // gates))
    if hidden <= 0 or w_dims[1] != gates * hidden:
        raise ctx.error(
            f"W has shape {w_dims}, expected [{directions}, {gates * hidden}, {input_size}] for hidden_size={hidden}"
        )
    _weight_shape(ctx, 2, "R", [directions, gates * hidden, hidden])
    for i, what in ((1, "W"), (2, "R"), (3, "B"), (5, "initial_h"), (6, "initial_c"), (7, "P")):
        if node.input(i) is not None and ctx.dtype(ctx.tensor(i, what)) != dtype:
            raise ctx.error(f"{what} has dtype {ctx.dtype(ctx.tensor(i, what))}, X has {dtype}")
    _check_attributes(ctx, node)
    acts = _activations(ctx, node, len(defaults), directions)
    clip = node.attr("clip")
    rec = _Recurrence(kind, gates, steps, seq, batch, hidden, input_size, directions, dtype, layout,
                      None if clip is None else float(clip))  # fmt: skip
    x_tbi = x if layout == 0 else ctx.call("permute_dims", x, [1, 0, 2])
    rows = ctx.call("reshape", x_tbi, (P.mul(seq, batch), input_size), hint="x_rows")
    states = _initial_states(ctx, node, rec)
    wants_y = bool(node.output_names and node.output_names[0])
    ys, finals_h, finals_c = [], [], []
    if not ctx.unroll_recurrent:
        for d in range(directions):
            w = _direction_weights(ctx, node, rec, d, acts[d])
            y, h, c = _scan(ctx, node, rec, rows, w, states[d], backwards[d])
            ys.append(y)
            finals_h.append(h)
            finals_c.append(c)
        return _outputs(ctx, node, rec, ys, finals_h, finals_c)
    assert steps is not None
    masks = _step_masks(ctx, node, rec)
    for d in range(directions):
        w = _direction_weights(ctx, node, rec, d, acts[d])
        w.acts = [_activation(ctx, *spec, dtype) for spec in acts[d]]
        x_parts = _input_projection(ctx, rec, rows, w)
        h, c = states[d]
        outs: list[E.Expr] = []
        for t in range(steps - 1, -1, -1) if backwards[d] else range(steps):
            new_h, new_c = _STEPS[kind](ctx, node, rec, w, x_parts(t), h, c)
            mask = masks(t) if masks is not None else None
            if mask is not None:
                outs.append(ctx.call("where", mask, new_h, ctx.const(0.0, dtype), hint="y_step"))
                h = ctx.call("where", mask, new_h, h, hint="h_step")
                c = None if c is None else ctx.call("where", mask, new_c, c, hint="c_step")
            else:
                h, c = new_h, new_c
                outs.append(h)
        if backwards[d]:
            outs.reverse()
        ys.append(_stack(ctx, outs, 0) if wants_y else None)
        finals_h.append(h)
        finals_c.append(c)
    return _outputs(ctx, node, rec, ys, finals_h, finals_c)


def _direction_weights(ctx: ConvertContext, node: NodeView, rec: _Recurrence, d: int, acts: list[Act]) -> _Weights:
    n, width = rec.hidden, rec.gates * rec.hidden
    w_t = _transposed(ctx, _pick(ctx, _operand(ctx, 1, "W"), 0, d, (width, rec.input_size)))
    r_t = _transposed(ctx, _pick(ctx, _operand(ctx, 2, "R"), 0, d, (width, n)))
    if node.input(3) is None:
        w_b: Val = np.zeros(width, rec.dtype)
        r_b: Val = np.zeros(width, rec.dtype)
    else:
        _weight_shape(ctx, 3, "B", [rec.directions, 2 * width])
        b = _pick(ctx, _operand(ctx, 3, "B"), 0, d, (2 * width,))
        w_b, r_b = _columns(ctx, b, 0, width), _columns(ctx, b, width, 2 * width)
    weights = _Weights(acts, w_t, None, r_t, r_t)
    if rec.kind == "GRU" and int(node.attr("linear_before_reset", 0)):
        # Rbh stays inside the reset gate's product; z's and r's fold into the projection
        zr = _columns(ctx, r_b, 0, 2 * n)
        if isinstance(zr, np.ndarray):
            r_in: Val = np.concatenate([zr, np.zeros(n, zr.dtype)])
        else:
            r_in = ctx.call("concat", E.Tuple((zr, ctx.const(np.zeros(n), rec.dtype))), 0)
        weights.bias = _sum(ctx, w_b, r_in)
        weights.rec_bias = _columns(ctx, r_b, 2 * n, 3 * n)
    else:
        weights.bias = _sum(ctx, w_b, r_b)
    if rec.kind == "GRU" and weights.rec_bias is None:
        weights.r_t, weights.r_h = _columns(ctx, r_t, 0, 2 * n), _columns(ctx, r_t, 2 * n, 3 * n)
    if rec.kind == "LSTM" and node.input(7) is not None:
        _weight_shape(ctx, 7, "P", [rec.directions, 3 * n])
        p = _pick(ctx, _operand(ctx, 7, "P"), 0, d, (3 * n,))
        weights.peep = [_columns(ctx, p, k * n, (k + 1) * n) for k in range(3)]
    return weights


def _projected(ctx: ConvertContext, rec: _Recurrence, rows: E.Expr, w: _Weights) -> E.Expr:
    """``x W^T + b`` of every step at once, as (steps, batch, gates * hidden)."""
    xw = ctx.call("matmul", rows, _expr(ctx, w.w_t, rec.dtype), hint="x_proj")
    if not (isinstance(w.bias, np.ndarray) and not w.bias.any()):
        xw = ctx.call("add", xw, _expr(ctx, w.bias, rec.dtype), hint="x_proj")
    return ctx.call("reshape", xw, (rec.seq, rec.batch, rec.gates * rec.hidden), hint="x_blocks")


def _scan(ctx: ConvertContext, node: NodeView, rec: _Recurrence, rows: E.Expr, w: _Weights,
          state: tuple[E.Expr, Any], backwards: bool) -> tuple[E.Expr, E.Expr, E.Expr]:  # fmt: skip
    """One direction as one ``nn.recurrent_scan`` call: (Y, h_n, c_n)."""
    h0, c0 = state
    extra: Val = np.zeros(1, rec.dtype)
    if w.peep is not None:
        extra = np.concatenate(w.peep) if all(isinstance(p, np.ndarray) for p in w.peep) else \
            ctx.call("concat", E.Tuple(tuple(_expr(ctx, p, rec.dtype) for p in w.peep)), 0)
    elif w.rec_bias is not None:
        extra = w.rec_bias
    lens = _lengths(ctx, node, rec)
    names, alphas, betas = zip(*w.acts)
    result = ctx.call(
        "nn.recurrent_scan", _projected(ctx, rec, rows, w), _expr(ctx, w.r_full, rec.dtype),
        _expr(ctx, extra, rec.dtype), h0, h0 if c0 is None else c0,
        ctx.const(np.zeros(1, np.int32)) if lens is None else _expr(ctx, lens, str(getattr(lens, "dtype", ""))),
        kind=rec.kind, activations=names, alphas=[a or 0.0 for a in alphas], betas=[b or 0.0 for b in betas],
        clip=rec.clip, reverse=backwards, linear_before_reset=w.rec_bias is not None,
        input_forget=bool(int(node.attr("input_forget", 0))), peepholes=w.peep is not None,
        masked=lens is not None, hint="scan",
    )  # fmt: skip
    y, h, c = (ctx.emit(E.TupleGetItem(result, k), hint) for k, hint in enumerate(("y_dir", "h_n", "c_n")))
    return y, h, c


def _input_projection(ctx: ConvertContext, rec: _Recurrence, rows: E.Expr, w: _Weights) -> Callable[[int], E.Expr]:
    """Unrolled: the projection of every step at once, and a function giving step
    ``t``'s (batch, gates * hidden) rows, sliced where first read (a slice per step
    rather than one split into every step's piece: those would all live from the
    split to their step, and long-lived buffers make the planner's conflict lists
    long)."""
    blocks = _projected(ctx, rec, rows, w)
    b, width = rec.batch, rec.gates * rec.hidden

    def step(t: int) -> E.Expr:
        block = blocks if rec.steps == 1 else ctx.call("strided_slice", blocks, [0], [t], [t + 1], hint="x_part")
        return ctx.call("reshape", block, (b, width), hint="x_step")

    return step


def _lengths(ctx: ConvertContext, node: NodeView, rec: _Recurrence) -> Val:
    """``sequence_lens`` (a constant or a run-time tensor), or None when every entry
    runs the whole sequence (no input, or a constant of ``seq_length``s)."""
    if node.input(4) is None:
        return None
    lens_dtype = ctx.dtype(node.input(4))
    if lens_dtype not in ("int32", "int64"):
        raise ctx.error(f"sequence_lens must be int32 (or int64), got {lens_dtype}")
    known = ctx.folded(4)
    if known is None:
        return ctx.tensor(4, "sequence_lens")
    known = known.reshape(-1)
    top = rec.steps if rec.steps is not None else None
    if known.size and (known.min() < 0 or (top is not None and known.max() > top)):
        raise ctx.error(f"sequence_lens {known.tolist()} must lie in [0, {P.to_str(rec.seq)}]")
    return None if top is not None and np.all(known == top) else known


def _step_masks(ctx: ConvertContext, node: NodeView, rec: _Recurrence) -> Callable[[int], E.Expr] | None:
    """Unrolled: a function giving step ``t``'s ``t < sequence_lens`` as a (batch, 1)
    bool tensor, computed where it is read (so it lives one step); None when no
    entry is masked."""
    lens = _lengths(ctx, node, rec)
    if lens is None:
        return None
    if isinstance(lens, np.ndarray):
        return lambda t: ctx.const((t < lens).reshape(-1, 1))
    column = ctx.call("reshape", lens, (rec.batch, 1), hint="seq_lens")
    lens_dtype = ctx.dtype(lens)
    return lambda t: ctx.call("less", ctx.const(t, lens_dtype), column, hint="step_mask")


def _initial_states(ctx: ConvertContext, node: NodeView, rec: _Recurrence) -> list[tuple[E.Expr, E.Expr | None]]:
    """(H0, C0) per direction, each (batch, hidden); zeros when not given."""

    def state(index: int, what: str, d: int) -> E.Expr:
        if node.input(index) is None:
            return ctx.call("zeros", (rec.batch, rec.hidden), rec.dtype, hint=f"{what}_zero")
        value = ctx.tensor(index, what)
        shape = ctx.known_shape(value, what)
        lead = (rec.directions, rec.batch) if rec.layout == 0 else (rec.batch, rec.directions)
        expected = (*lead, P.IntImm(rec.hidden))
        if len(shape) != 3 or any(not P.prove_equal(a, b) for a, b in zip(shape, expected)):
            raise ctx.error(
                f"{what} has shape [{', '.join(P.to_str(s) for s in shape)}], expected "
                f"[{', '.join(P.to_str(s) for s in expected)}] (layout={rec.layout})"
            )
        return _expr(ctx, _pick(ctx, value, rec.layout, d, (rec.batch, rec.hidden)), rec.dtype)

    out = []
    for d in range(rec.directions):
        h = state(5, "initial_h", d)
        c = state(6, "initial_c", d) if rec.kind == "LSTM" else None
        out.append((h, c))
    return out


def _stack(ctx: ConvertContext, values: list[E.Expr], axis: int) -> E.Expr:
    parts = [ctx.call("expand_dims", v, axis) for v in values]
    return parts[0] if len(parts) == 1 else ctx.call("concat", E.Tuple(tuple(parts)), axis)


def _outputs(ctx: ConvertContext, node: NodeView, rec: _Recurrence, ys: list[Any],
             finals_h: list[E.Expr], finals_c: list[Any]) -> list[Any]:  # fmt: skip
    """Y (steps, directions, batch, hidden) from each direction's (steps, batch, hidden),
    Y_h and Y_c (directions, batch, hidden), or their layout-1 forms; only the outputs
    the graph names are built."""
    wanted = [bool(n) for n in node.output_names] + [False] * 3
    results: list[Any] = [None, None, None]
    stack = functools.partial(_stack, ctx)
    if wanted[0]:
        y = stack(ys, 1)  # (steps, directions, batch, hidden)
        results[0] = y if rec.layout == 0 else ctx.call("permute_dims", y, [2, 0, 1, 3], hint="Y")
    for index, finals in ((1, finals_h), (2, finals_c)):
        if not wanted[index] or (index == 2 and rec.kind != "LSTM"):
            continue
        state = stack(finals, 0)
        results[index] = state if rec.layout == 0 else ctx.call("permute_dims", state, [1, 0, 2])
    return results[: 3 if rec.kind == "LSTM" else 2]


# --------------------------------------------------------------------------
# one time step of each kind
# --------------------------------------------------------------------------


def _clipped(ctx: ConvertContext, rec: _Recurrence, x: E.Expr) -> E.Expr:
    return x if rec.clip is None else ctx.call("clip", x, -rec.clip, rec.clip)


def _recurrent_gates(ctx: ConvertContext, rec: _Recurrence, h: E.Expr, r_t: Val, count: int,
                     x: E.Expr | None = None) -> list[E.Expr]:  # fmt: skip
    """``H R^T`` (plus ``x``) as ``count`` (batch, hidden) pieces: one matmul, one split."""
    m = ctx.call("matmul", h, _expr(ctx, r_t, rec.dtype), hint="h_proj")
    if x is not None:
        m = ctx.call("add", x, m, hint="gates")
    if count == 1:
        return [m]
    pieces = ctx.call("split", m, count, 1, hint="h_gates")
    return [ctx.emit(E.TupleGetItem(pieces, k), "h_gate") for k in range(count)]


def _gate(ctx: ConvertContext, rec: _Recurrence, act: Act, *terms: E.Expr) -> E.Expr:
    total = terms[0]
    for term in terms[1:]:
        total = ctx.call("add", total, term)
    return act(_clipped(ctx, rec, total))


def _pieces(ctx: ConvertContext, value: E.Expr, count: int) -> list[E.Expr]:
    parts = ctx.call("split", value, count, 1, hint="x_gates")
    return [ctx.emit(E.TupleGetItem(parts, k), "x_gate") for k in range(count)]


def _rnn_step(ctx: ConvertContext, node: NodeView, rec: _Recurrence, w: _Weights, x: E.Expr,
              h: E.Expr, c: Any) -> tuple[E.Expr, None]:  # fmt: skip
    (pre,) = _recurrent_gates(ctx, rec, h, w.r_t, 1, x)
    return _gate(ctx, rec, w.acts[0], pre), None


def _gru_step(ctx: ConvertContext, node: NodeView, rec: _Recurrence, w: _Weights, x: E.Expr,
              h: E.Expr, c: Any) -> tuple[E.Expr, None]:  # fmt: skip
    f, g = w.acts
    x_z, x_r, x_h = _pieces(ctx, x, 3)
    if w.rec_bias is not None:  # linear_before_reset: one product of H with all of R
        m_z, m_r, m_h = _recurrent_gates(ctx, rec, h, w.r_t, 3)
        z, r = _gate(ctx, rec, f, x_z, m_z), _gate(ctx, rec, f, x_r, m_r)
        reset = ctx.call("multiply", r, ctx.call("add", m_h, _expr(ctx, w.rec_bias, rec.dtype)))
    else:
        m_z, m_r = _recurrent_gates(ctx, rec, h, w.r_t, 2)
        z, r = _gate(ctx, rec, f, x_z, m_z), _gate(ctx, rec, f, x_r, m_r)
        reset = ctx.call("matmul", ctx.call("multiply", r, h), _expr(ctx, w.r_h, rec.dtype), hint="h_proj")
    cand = _gate(ctx, rec, g, x_h, reset)
    # (1 - z) * cand + z * h  ==  cand + z * (h - cand)
    return ctx.call("add", cand, ctx.call("multiply", z, ctx.call("subtract", h, cand))), None


def _lstm_step(ctx: ConvertContext, node: NodeView, rec: _Recurrence, w: _Weights, x: E.Expr,
               h: E.Expr, c: Any) -> tuple[E.Expr, E.Expr]:  # fmt: skip
    f, g, h_act = w.acts
    pre_i, pre_o, pre_f, pre_c = _recurrent_gates(ctx, rec, h, w.r_t, 4, x)
    peep = None if w.peep is None else [_expr(ctx, p, rec.dtype) for p in w.peep]
    extra_i = [] if peep is None else [ctx.call("multiply", peep[0], c)]
    i = _gate(ctx, rec, f, pre_i, *extra_i)
    if int(node.attr("input_forget", 0)):
        forget = ctx.call("subtract", ctx.const(1.0, rec.dtype), i)
    else:
        extra_f = [] if peep is None else [ctx.call("multiply", peep[2], c)]
        forget = _gate(ctx, rec, f, pre_f, *extra_f)
    cell = _gate(ctx, rec, g, pre_c)
    new_c = ctx.call("add", ctx.call("multiply", forget, c), ctx.call("multiply", i, cell), hint="c_new")
    extra_o = [] if peep is None else [ctx.call("multiply", peep[1], new_c)]
    o = _gate(ctx, rec, f, pre_o, *extra_o)
    return ctx.call("multiply", o, h_act(new_c), hint="h_new"), new_c


_STEPS = {"RNN": _rnn_step, "GRU": _gru_step, "LSTM": _lstm_step}
