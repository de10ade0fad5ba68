"""Segment bodies of normalisations, softmax, reductions and the element-wise
ops with parameters (``clip``, ``nn.leakyrelu``); ``nn.group_norm`` has none.

Why: after the element-wise ops and small matmuls compiled, a transformer's
segments were still split at every ``nn.layer_norm`` and ``nn.softmax`` (and
llama's ``mean``), each running its NumPy kernel between two compiled
stretches. Each body here is a loop nest over the output's kept dimensions
with the reduced ones innermost, specialised to the call's rank and axes.

Arithmetic, op by op (the NumPy kernels in ``hetvm/kernels`` are the reference):

* ``nn.layer_norm``: float32 over trailing axes calls the direct row loop of
  :mod:`..norm_direct` (``_norm_jit.layer_norm32``, what the NumPy kernel runs
  with Numba on, at any size: float64 mean and variance, the scaling in
  float32); other axes and float64 the loop nest here: two passes, sums in
  float64, the scale and shift applied in float64, one rounding at the store.
  NumPy's passes (Numba off) sum in the input's dtype: results agree within
  its rounding.
* ``nn.rms_norm``: the NumPy kernel's float64 throughout; inference
  ``nn.batch_norm`` and ``nn.scale_shift_act``: per-channel scale and shift in
  the input's dtype, rounded where the NumPy kernel rounds.
* ``nn.softmax``: float32 over the last axis calls the direct row loop
  (``_norm_jit.softmax32``: its own float32 exp, within 3 ulp of the float64
  softmax); otherwise the nest (NaN-propagating max, exps in the input's
  dtype, their sum in float64); ``nn.log_softmax`` the nest's sum, then
  ``(x - max) - log(sum)`` in the input's dtype, as the NumPy passes.
  A direct row loop takes views of C-contiguous arrays (in place allowed), and
  a contiguous copy of a strided input, its result copied into the output.
* ``sum`` / ``mean``: floats summed in float64 (NumPy sums pairwise in the
  input's dtype: agreement within its rounding), integers in int64 / uint64
  wrapping as NumPy's, the mean of integers in float64; ``prod`` multiplies in
  the input's float dtype in NumPy's order, integers in int64 / uint64;
  ``max`` / ``min`` propagate NaN and give the NumPy kernel's identity
  (-inf/+inf, the integer type's extremes) for an empty reduction.

Declined (the call keeps its NumPy kernel): float16, an output dtype other
than the NumPy kernel's result dtype (float inputs) or an integer one
(integer sums and products, which wrap alike), axes NumPy would refuse (out of
range, repeated), parameters given as something other than 1-D arrays of the
input's dtype, a 0-d result written into an output of another rank (which
the NumPy kernel broadcasts), and
inputs of the loop nests above :data:`SOFTMAX_MAX` / :data:`NORM_MAX` /
:data:`REDUCE_MAX` elements at the first call, where NumPy's vectorised passes
are faster (the direct float32 row loops are taken at any size).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from . import FLOATS, INTS, Arg, Arr, Body, Lines, check_same_shape, index, literal, register
from .elementwise import _program_lines

#: the most input elements (at the segment's first call) each loop nest is used
#: for: above them NumPy's SIMD passes beat the scalar loops by more than the
#: cost of splitting the segment. Measured one thread, CPU time, float32, last
#: axis, a one-call segment / the NumPy kernel: softmax (1, 4, 32, 32) 14 / 15 us,
#: (1, 4, 64, 64) 64 / 51; layer norm (1, 64, 256) 24 / 27, (1, 64, 512) 47 / 42;
#: mean (1, 16, 256) 2.3 / 5.6, (1, 64, 256) 8.5 / 7.8, (1, 64, 512) 18 / 10
#: (float64 sums do not vectorise). Not a limit of the direct float32 row loops
#: (softmax over the last axis, layer norm over trailing axes), which vectorise:
#: a one-call segment / the NumPy kernel, softmax (1, 4, 64, 64) 10 / 51 us,
#: (1, 4, 128, 128) 32 / 135, (1, 12, 197, 197) 264 / 824, (1, 197, 768) 78 / 219;
#: layer norm (1, 64, 512) 9 / 52, (1, 128, 256) 11 / 60, (1, 197, 768) 44 / 230
SOFTMAX_MAX = 8192
NORM_MAX = 24576
REDUCE_MAX = 16384

#: a Body helper: ``_flat(a)`` is (True, ``a`` as a 1-D view in C order) for an
#: array *typed* C-contiguous, else (False, an empty array), so a body can take
#: a flat loop where the layout allows it and its nest elsewhere (Numba's
#: ``ravel`` copies an array not typed C, whose writes would be lost)
FLAT_VIEW = '''\
from numba.extending import overload


def _flat(a):
    raise NotImplementedError("compiled code only")


@overload(_flat)
def _flat_typed(a):
    if a.layout == "C":
        return lambda a: (True, a.reshape(a.size))
    return lambda a: (False, np.empty(0, a.dtype))
'''

_SIGNED = frozenset({"int8", "int16", "int32", "int64"})
_UNSIGNED = frozenset({"uint8", "uint16", "uint32", "uint64"})


# -- helpers ----------------------------------------------------------------------
def _arrays(args: Sequence[Arg], n: int) -> bool:
    return len(args) == n and all(isinstance(a, Arr) for a in args)


def _small(a: Arg, limit: int) -> bool:
    """Whether ``a`` had at most ``limit`` elements at the first call (unknown: yes)."""
    return not isinstance(a, Arr) or a.shape is None or math.prod(a.shape) <= limit


def _numpy_axes(raw: Any, ndim: int) -> tuple[int, ...] | None:
    """``raw`` (None, an int or a sequence of ints) as sorted non-negative axes
    NumPy accepts (None: all of them); None where NumPy would raise (an axis
    out of range or repeated) or ``raw`` is not integers."""
    if raw is None:
        return tuple(range(ndim))
    items = raw if isinstance(raw, (list, tuple)) else [raw]
    axes = []
    for a in items:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            return None
        a = int(a)
        if not -ndim <= a < ndim:
            return None
        axes.append(a % ndim)
    if len(set(axes)) != len(axes):
        return None
    return tuple(sorted(axes))


def _nest(dims: Sequence[int], shape_of: str, inner: Lines, first: dict[int, str] | None = None) -> Lines:
    """``inner`` inside loops over ``dims`` of ``shape_of`` (index ``i<d>``), in
    order; ``first[d]`` replaces dimension d's start (default 0)."""
    lines: Lines = []
    pad = ""
    for d in dims:
        start = (first or {}).get(d)
        rng = f"range({start}, {shape_of}.shape[{d}])" if start else f"range({shape_of}.shape[{d}])"
        lines.append(f"{pad}for i{d} in {rng}:")
        pad += "    "
    return lines + [pad + line for line in inner]


def _idx(ndim: int, fixed: dict[int, str] | None = None) -> list[str]:
    return [(fixed or {}).get(d, f"i{d}") for d in range(ndim)]


# -- the direct float32 row loops ---------------------------------------------------
def _direct_module() -> str:
    """Helper source binding ``_softmax32`` / ``_layer_norm32`` to the direct
    loops of :mod:`..norm_direct` (``_norm_jit``, loaded now). Its module's name
    is the hash of its text, so a change of the loops changes this source and
    the kernel's cache with it."""
    from .. import norm_direct

    name = norm_direct._loops().__name__
    return (f"\n\nimport sys\n\n_softmax32 = sys.modules[{name!r}].softmax32\n"
            f"_layer_norm32 = sys.modules[{name!r}].layer_norm32\n")  # fmt: skip


def _direct_rows(X: str, O: str, nd: int, cols: str, call: str) -> Lines:
    """Lines running ``call`` on ``x2`` / ``o2``, ``X`` and ``O`` as (rows, ``cols``)
    C arrays: views where both are typed C-contiguous, else a contiguous copy of
    ``X`` and a scratch output copied into ``O`` after (``X`` may be ``O``)."""
    copy_out = _nest(list(range(nd)), X, [f"{index(O, _idx(nd))} = {index('oc', _idx(nd))}"])
    return [f"cols = {cols}", f"okx, xf = _flat({X})", f"oko, of = _flat({O})", "if okx and oko:",
            "    x2 = xf.reshape(xf.size // cols, cols)", "    o2 = of.reshape(of.size // cols, cols)",
            f"    {call}", "else:", f"    xc = np.ascontiguousarray({X})", "    oc = np.empty_like(xc)",
            "    x2 = xc.reshape(xc.size // cols, cols)", "    o2 = oc.reshape(oc.size // cols, cols)",
            f"    {call}"] + ["    " + line for line in copy_out]  # fmt: skip


# -- layer norm -------------------------------------------------------------------
@register("nn.layer_norm")
def _layer_norm(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 4 or not isinstance(args[0], Arr) or not isinstance(args[3], Arr):
        return None
    x, gamma, beta, out = args
    X, G, B, O = names
    if x.dtype not in FLOATS or out.dtype != x.dtype or x.ndim == 0 or out.ndim != x.ndim:  # type: ignore[union-attr]
        return None
    nd = x.ndim  # type: ignore[union-attr]
    raw = attrs.get("axes", (-1,))
    if not isinstance(raw, (list, tuple)) or not all(isinstance(a, (int, np.integer)) for a in raw):
        return None
    axes = tuple(int(a) % nd for a in raw)  # the NumPy kernel's wrap
    if not axes or len(set(axes)) != len(axes):
        return None
    axes = tuple(sorted(axes))
    rows32 = x.dtype == "float32" and axes == tuple(range(nd - len(axes), nd))  # type: ignore[union-attr]
    if not rows32 and not _small(x, NORM_MAX):
        return None
    eps = float(attrs.get("epsilon", 1e-5))
    scale, center = bool(attrs.get("scale", True)), bool(attrs.get("center", True))
    if not math.isfinite(eps):
        return None
    for used, p in ((scale, gamma), (center, beta)):
        if used and not (isinstance(p, Arr) and p.ndim == 1 and p.dtype == x.dtype):  # type: ignore[union-attr]
            return None
    outer = [d for d in range(nd) if d not in axes]
    at = index(X, _idx(nd))
    lines = check_same_shape(X, O, nd, "nn.layer_norm")
    lines.append("cols = " + " * ".join(f"{X}.shape[{d}]" for d in axes))
    for used, p, what in ((scale, G, "gamma"), (center, B, "beta")):
        if used:
            lines += [f"if {p}.shape[0] != cols:",
                      f"    raise ValueError('nn.layer_norm: {what} does not have one value per normalised item')"]
    lines += [f"if {X}.size == 0:", "    return"]
    flat = f"i{axes[0]}" if len(axes) == 1 else "j"
    apply = [f"v = ({at} - mean) * inv"]
    if scale:
        apply.append(f"v = v * {G}[{flat}]")
    if center:
        apply.append(f"v = v + {B}[{flat}]")
    apply.append(f"{index(O, _idx(nd))} = v")
    if len(axes) > 1:
        apply.append("j += 1")
    row = ["total = 0.0"]
    row += _nest(axes, X, [f"total += {at}"])
    row += ["mean = total / cols", "squares = 0.0"]
    row += _nest(axes, X, [f"d = {at} - mean", "squares += d * d"])
    row += [f"inv = 1.0 / math.sqrt(squares / cols + {literal(eps)})"]
    row += (["j = 0"] if len(axes) > 1 else []) + _nest(axes, X, apply)
    if not rows32:
        return lines + _nest(outer, X, row)
    g = f"{G}" if scale else "x2[0]"  # not read where unused
    b = f"{B}" if center else "x2[0]"
    # the flags as typed values, not literals: the call then takes the signature
    # the build compiles for the direct kernel, not a specialisation of its own
    call = f"_layer_norm32(x2, {g}, {b}, {literal(eps)}, np.bool_({scale}), np.bool_({center}), o2)"
    return Body(lines + _direct_rows(X, O, nd, "cols", call), FLAT_VIEW + _direct_module())


@register("nn.rms_norm")
def _rms_norm(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    """The NumPy kernel's float64 arithmetic: ``x / sqrt(mean(x * x) + eps) * w``,
    one rounding at the store."""
    if not _arrays(args, 3):
        return None
    x, w, out = args
    X, W, O = names
    if x.dtype not in FLOATS or w.dtype not in FLOATS or out.dtype not in FLOATS or w.ndim != 1:  # type: ignore[union-attr]
        return None
    if not _small(x, NORM_MAX):
        return None
    nd = x.ndim  # type: ignore[union-attr]
    axes = _wrapped_axes(attrs.get("axes"), nd)
    eps = attrs.get("epsilon")
    if axes is None or out.ndim != nd or isinstance(eps, bool) or not isinstance(eps, (int, float)):  # type: ignore[union-attr]
        return None
    if not math.isfinite(float(eps)):
        return None
    at = index(X, _idx(nd))
    flat = f"i{axes[0]}" if len(axes) == 1 else "j"
    apply = [f"{index(O, _idx(nd))} = (np.float64({at}) / r) * np.float64({W}[{flat}])"]
    if len(axes) > 1:
        apply.append("j += 1")
    row = ["squares = 0.0"] + _nest(axes, X, [f"v = np.float64({at})", "squares += v * v"])
    row += [f"r = math.sqrt(squares / cols + {literal(float(eps))})"]
    row += (["j = 0"] if len(axes) > 1 else []) + _nest(axes, X, apply)
    lines = check_same_shape(X, O, nd, "nn.rms_norm")
    lines.append("cols = " + " * ".join(f"{X}.shape[{d}]" for d in axes))
    lines += [f"if {W}.shape[0] != cols:",
              "    raise ValueError('nn.rms_norm: the weight does not have one value per normalised item')"]
    return lines + _nest([d for d in range(nd) if d not in axes], X, row)


def _wrapped_axes(raw: Any, ndim: int) -> tuple[int, ...] | None:
    """Sorted axes wrapped as the norm kernels wrap them (``a % ndim``); None
    for none, a repeated one (NumPy's error) or a rank-0 input."""
    if ndim == 0 or not isinstance(raw, (list, tuple)) or not raw:
        return None
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in raw):
        return None
    axes = tuple(int(a) % ndim for a in raw)
    return tuple(sorted(axes)) if len(set(axes)) == len(axes) else None


@register("nn.batch_norm")
def _batch_norm(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    """Inference (``training`` false): the NumPy kernel's per-channel scale and
    shift in the input's dtype (``1 / sqrt(var + eps) * gamma``, ``-mean * scale
    + beta``), then ``x * scale + shift``; the moving statistics pass through.
    Per-channel vectors of one value broadcast, as in the kernel."""
    if len(args) < 6 or len(args) > 8 or not all(isinstance(a, Arr) for a in args) or attrs.get("training", False):
        return None
    x, gamma, beta, mean, var, out = args[:6]
    X, G, B, M, V, O = names[:6]
    dt = x.dtype  # type: ignore[union-attr]
    if dt not in FLOATS or x.ndim == 0 or out.dtype != dt or out.ndim != x.ndim:  # type: ignore[union-attr]
        return None
    if any(v.dtype != dt or v.ndim != 1 for v in (gamma, beta, mean, var)):  # type: ignore[union-attr]
        return None
    stats = list(zip(args[6:], names[6:], (mean, var), (M, V)))
    if any(o.dtype != v.dtype or o.ndim != 1 for o, _, v, _ in stats):  # type: ignore[union-attr]
        return None
    axis = attrs.get("axis", 1)
    eps = attrs.get("epsilon", 1e-5)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or isinstance(eps, bool):
        return None
    if not isinstance(eps, (int, float)) or not math.isfinite(float(eps)):
        return None
    nd = x.ndim  # type: ignore[union-attr]
    axis = int(axis) % nd
    scale, center = bool(attrs.get("scale", True)), bool(attrs.get("center", True))
    lines = check_same_shape(X, O, nd, "nn.batch_norm") + [f"channels = {X}.shape[{axis}]"]
    used = [(V, "var"), (M, "mean")] + ([(G, "gamma")] if scale else []) + ([(B, "beta")] if center else [])
    for name, what in used:
        lines += [f"if {name}.shape[0] != 1 and {name}.shape[0] != channels:",
                  f"    raise ValueError('nn.batch_norm: {what} does not broadcast over the channels')",
                  f"s{what} = 0 if {name}.shape[0] == 1 else 1"]
    one, e = f"np.{dt}(1.0)", literal(float(eps), dt)
    per = [f"sc = {one} / np.sqrt({V}[c * svar] + {e})"]
    if scale:
        per.append(f"sc = sc * {G}[c * sgamma]")
    per.append(f"sh = -{M}[c * smean] * sc")
    if center:
        per.append(f"sh = sh + {B}[c * sbeta]")
    at = _idx(nd, {axis: "c"})
    body = per + _nest([d for d in range(nd) if d != axis], X, [f"{index(O, at)} = {index(X, at)} * sc + sh"])
    lines += [f"for c in range({X}.shape[{axis}]):"] + ["    " + line for line in body]
    for _, oname, _, vname in stats:  # moving statistics, stored as the kernel's store() does
        lines += [f"if {oname}.shape[0] != {vname}.shape[0]:",
                  "    raise ValueError('nn.batch_norm: a statistics output has the wrong shape')",
                  f"for c in range({vname}.shape[0]):", f"    {oname}[c] = {vname}[c]"]
    return lines


@register("nn.scale_shift_act")
def _scale_shift_act(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    """``act(x * scale[c] + shift[c])`` with ``c`` on axis 1, in the input's
    float dtype (the kernel's skipped multiply by ones or add of zeros changes
    no value)."""
    if not _arrays(args, 4):
        return None
    x, scale, shift, out = args
    X, S, T, O = names
    act = attrs.get("activation", "none")
    if act not in ("none", "relu") or x.dtype not in FLOATS or x.ndim < 2:  # type: ignore[union-attr]
        return None
    if any(a.dtype != x.dtype for a in (scale, shift, out)) or scale.ndim != 1 or shift.ndim != 1:  # type: ignore[union-attr]
        return None
    nd = x.ndim  # type: ignore[union-attr]
    if out.ndim != nd:  # type: ignore[union-attr]
        return None
    lines = check_same_shape(X, O, nd, "nn.scale_shift_act")
    lines += [f"if {S}.shape[0] != {X}.shape[1] or {T}.shape[0] != {X}.shape[1]:",
              "    raise ValueError('nn.scale_shift_act: scale and shift need one value per channel (axis 1)')"]
    at = _idx(nd, {1: "c"})

    def value(v: str) -> str:
        v = f"{v} * sc + sh"
        return f"np.maximum({v}, np.{x.dtype}(0))" if act == "relu" else v  # type: ignore[union-attr]

    body = [f"sc = {S}[c]", f"sh = {T}[c]"]
    body += _nest([d for d in range(nd) if d != 1], X, [f"{index(O, at)} = {value(index(X, at))}"])
    nest = [f"for c in range({X}.shape[1]):"] + ["    " + line for line in body]
    # C-contiguous data and output (by type): one loop over each (image, channel)
    # plane instead of a loop per row, which vectorised badly on small planes
    # (DenseNet's BN-ReLUs over 1024x14x14: 47 -> 21 us, 1024x7x7: 27 -> 6)
    plane = " * ".join(f"{X}.shape[{d}]" for d in range(2, nd)) or "1"
    flat = [f"okx, xf = _flat({X})", f"oko, of = _flat({O})", "if okx and oko:",
            f"    plane = {plane}", f"    for n in range({X}.shape[0]):", f"        for c in range({X}.shape[1]):",
            f"            sc = {S}[c]", f"            sh = {T}[c]", f"            base = (n * {X}.shape[1] + c) * plane",
            "            xr = xf[base:base + plane]", "            orow = of[base:base + plane]",
            "            for p in range(plane):", f"                orow[p] = {value('xr[p]')}", "else:"]  # fmt: skip
    return Body(lines + flat + ["    " + line for line in nest], FLAT_VIEW)


# -- softmax ----------------------------------------------------------------------
def _softmax_axis(attrs: dict, args: Sequence[Arg], rows32: bool = False) -> int | None:
    """The call's axis, non-negative; None where the body declines it. Above
    :data:`SOFTMAX_MAX` elements only a float32 call over the last axis (with
    ``rows32``: softmax's direct loop) is taken."""
    if not _arrays(args, 2):
        return None
    x, out = args
    if x.dtype not in FLOATS or out.dtype != x.dtype or x.ndim == 0 or out.ndim != x.ndim:  # type: ignore[union-attr]
        return None
    axis = attrs.get("axis", -1)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -x.ndim <= int(axis) < x.ndim:  # type: ignore[union-attr]
        return None
    axis = int(axis) % x.ndim  # type: ignore[union-attr]
    last32 = rows32 and x.dtype == "float32" and axis == x.ndim - 1  # type: ignore[union-attr]
    return axis if last32 or _small(x, SOFTMAX_MAX) else None


def _row_max(X: str, nd: int, axis: int) -> Lines:
    """``top``: the row's max, NaN if the row has one (NumPy's ``max``)."""
    return [f"top = {index(X, _idx(nd, {axis: '0'}))}"] + _nest(
        [axis], X, [f"v = {index(X, _idx(nd))}", "if v > top or v != v:", "    top = v",
                    "    if v != v:", "        break"], {axis: "1"})  # fmt: skip


@register("nn.softmax")
def _softmax(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    axis = _softmax_axis(attrs, args, rows32=True)
    if axis is None:
        return None
    X, O = names
    nd = args[0].ndim  # type: ignore[union-attr]
    if args[0].dtype == "float32" and axis == nd - 1:  # type: ignore[union-attr]
        lines = check_same_shape(X, O, nd, "nn.softmax") + [f"if {X}.size == 0:", "    return"]
        body = _direct_rows(X, O, nd, f"{X}.shape[{nd - 1}]", "_softmax32(x2, o2)")
        return Body(lines + body, FLAT_VIEW + _direct_module())
    at, ot = index(X, _idx(nd)), index(O, _idx(nd))
    row = _row_max(X, nd, axis) + ["total = 0.0"]
    row += _nest([axis], X, [f"e = math.exp({at} - top)", f"{ot} = e", "total += e"])
    row += _nest([axis], X, [f"{ot} = {ot} / total"])
    lines = check_same_shape(X, O, nd, "nn.softmax") + [f"if {X}.size == 0:", "    return"]
    return lines + _nest([d for d in range(nd) if d != axis], X, row)


@register("nn.log_softmax")
def _log_softmax(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    axis = _softmax_axis(attrs, args)
    if axis is None:
        return None
    X, O = names
    x = args[0]
    nd = x.ndim  # type: ignore[union-attr]
    at, ot = index(X, _idx(nd)), index(O, _idx(nd))
    row = _row_max(X, nd, axis) + ["total = 0.0"]
    row += _nest([axis], X, [f"total += math.exp({at} - top)"])
    row += [f"lse = np.{x.dtype}(math.log(total))"]  # type: ignore[union-attr]
    row += _nest([axis], X, [f"{ot} = ({at} - top) - lse"])
    lines = check_same_shape(X, O, nd, "nn.log_softmax") + [f"if {X}.size == 0:", "    return"]
    return lines + _nest([d for d in range(nd) if d != axis], X, row)


# -- reductions ---------------------------------------------------------------------
def _extreme(op: str, dtype: str) -> str:
    """Source of the identity of max/min over ``dtype`` (the NumPy kernel's
    value for an empty reduction)."""
    if dtype == "bool":
        return "False" if op == "max" else "True"
    if dtype in FLOATS:
        return f"np.{dtype}(-np.inf)" if op == "max" else f"np.{dtype}(np.inf)"
    info = np.iinfo(dtype)
    return literal(info.min if op == "max" else info.max, dtype)


def _reduction_plan(op: str, dtype: str, out_dtype: str) -> tuple[str, Callable[[str], Lines], str] | None:
    """(initial accumulator, lines folding element ``v`` into ``acc``, the
    value stored) for ``op`` over ``dtype`` into ``out_dtype``; None if not
    covered."""
    wide = "np.int64" if dtype in _SIGNED or dtype == "bool" else "np.uint64"
    if op in ("max", "min"):
        if out_dtype != dtype:
            return None
        if dtype == "bool":
            fold = ["if v:", "    acc = True"] if op == "max" else ["if not v:", "    acc = False"]
            return _extreme(op, dtype), lambda v: [f"v = {v}", *fold], "acc"
        cmp = ">" if op == "max" else "<"
        if dtype in FLOATS:  # NaN sticks: nothing compares greater than it
            return _extreme(op, dtype), lambda v: [f"v = {v}", f"if v {cmp} acc or v != v:", "    acc = v"], "acc"
        return _extreme(op, dtype), lambda v: [f"v = {v}", f"if v {cmp} acc:", "    acc = v"], "acc"
    if op in ("sum", "prod"):
        sym = "+" if op == "sum" else "*"
        one = "0" if op == "sum" else "1"
        if dtype in FLOATS:
            if out_dtype != dtype:
                return None
            init = "0.0" if op == "sum" else f"np.{dtype}(1)"  # sums in float64, products in NumPy's dtype
            return init, lambda v: [f"acc {sym}= {v}"], "acc"
        if out_dtype not in INTS:
            return None
        return f"{wide}({one})", lambda v: [f"acc {sym}= {wide}({v})"], "acc"
    if op == "mean":
        if (out_dtype != dtype) if dtype in FLOATS else out_dtype not in FLOATS:
            return None
        return "0.0", lambda v: [f"acc += {v}"], "acc / count"
    return None


def _reduction(op: str) -> None:
    def emit(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
        if not _arrays(args, 2):
            return None
        x, out = args
        X, O = names
        nd = x.ndim  # type: ignore[union-attr]
        keep = bool(attrs.get("keepdims", False))
        axes = _numpy_axes(attrs.get("axis"), nd)
        if axes is None or x.dtype not in FLOATS | INTS | {"bool"} or not _small(x, REDUCE_MAX):  # type: ignore[union-attr]
            return None
        if out.ndim != (nd if keep else nd - len(axes)):  # type: ignore[union-attr]
            return None
        plan = _reduction_plan(op, x.dtype, out.dtype)  # type: ignore[union-attr]
        if plan is None:
            return None
        init, fold, result = plan
        kept = [d for d in range(nd) if d not in axes]
        want = [("1" if d in axes else f"{X}.shape[{d}]") for d in range(nd)] if keep else [
            f"{X}.shape[{d}]" for d in kept]
        lines: Lines = []
        if want:
            cond = " or ".join(f"{O}.shape[{k}] != {w}" for k, w in enumerate(want))
            lines += [f"if {cond}:", f"    raise ValueError('{op}: the output shape does not match the reduction')"]
        if op == "mean":
            lines.append("count = " + (" * ".join(f"{X}.shape[{d}]" for d in axes) if axes else "1"))
        out_at = index(O, [("0" if d in axes else f"i{d}") for d in range(nd)] if keep else [f"i{d}" for d in kept])
        row = [f"acc = {init}"] + _nest(axes, X, fold(index(X, _idx(nd)))) + [f"{out_at} = {result}"]
        return lines + _nest(kept, X, row)

    register(op)(emit)


for _op in ("sum", "mean", "max", "min", "prod"):
    _reduction(_op)


# -- element-wise with parameters -------------------------------------------------------
def _same_shape_or_scalar(args: Sequence[Arg], names: Sequence[Any], what: str) -> Lines:
    """The NumPy kernels store their result with ``store``: equal shapes, or a
    0-d result broadcast into the output."""
    x, out = args
    if x.ndim == 0:  # type: ignore[union-attr]
        return []
    return check_same_shape(names[0], names[1], out.ndim, what) if x.ndim == out.ndim else None  # type: ignore[union-attr,return-value]


def _bound(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _int_clip(attrs: dict, args: Sequence[Arg], names: Sequence[Any], check: Lines) -> Lines | None:
    """An integer input's clip as NumPy promotes its bounds (NEP 50): Python int
    bounds in the dtype's range clip in the dtype; float bounds (or an int with a
    float) in float64, the result cast back as the kernel's store casts (the
    program steps' exact casts; declined where those are not generated). Other
    bounds (out of range, NumPy scalars) keep the NumPy kernel."""
    dtype = args[1].dtype  # type: ignore[union-attr]
    lo, hi = attrs.get("min"), attrs.get("max")
    bounds = [b for b in (lo, hi) if b is not None]
    if not bounds or not all(type(b) in (int, float) for b in bounds):
        return None
    if all(type(b) is int for b in bounds):
        info = np.iinfo(dtype)
        if not all(info.min <= b <= info.max for b in bounds):
            return None
        program: list[tuple] = []
        at = "x0"
        for op, b in (("maximum", lo), ("minimum", hi)):
            if b is not None:
                program += [("const", dtype, b), (op, dtype, at, f"t{len(program)}")]
                at = f"t{len(program) - 1}"
    else:
        if not all(math.isfinite(b) and abs(b) <= 2**53 for b in bounds):
            return None
        if lo is not None and hi is not None:
            program = [("clip", dtype, "x0", float(lo), float(hi))]
        else:
            op, b = ("maximum", lo) if lo is not None else ("minimum", hi)
            program = [("astype", "float64", "x0"), ("const", "float64", float(b)), (op, "float64", "t0", "t1"),
                       ("astype", dtype, "t2")]  # fmt: skip
    body = _program_lines(tuple(program), args, names, "clip")
    return None if body is None else check + body


@register("clip")
def _clip(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    """Float inputs: both bounds through the fused program's step (one source of
    truth), one bound as a maximum or minimum; integer inputs by :func:`_int_clip`."""
    if not _arrays(args, 2) or args[1].dtype != args[0].dtype:  # type: ignore[union-attr]
        return None
    if args[0].dtype in INTS:  # type: ignore[union-attr]
        check = _same_shape_or_scalar(args, names, "clip")
        return None if check is None else _int_clip(attrs, args, names, check)
    if args[0].dtype not in FLOATS:  # type: ignore[union-attr]
        return None
    check = _same_shape_or_scalar(args, names, "clip")
    if check is None:
        return None
    lo, hi = attrs.get("min"), attrs.get("max")
    blo, bhi = _bound(lo), _bound(hi)
    if (lo is not None and blo is None) or (hi is not None and bhi is None) or (lo is None and hi is None):
        return None
    dtype = args[1].dtype  # type: ignore[union-attr]
    if blo is not None and bhi is not None:
        body = _program_lines((("clip", dtype, "x0", blo, bhi),), args, names, "clip")
        return None if body is None else check + body
    op, bound = ("maximum", blo) if blo is not None else ("minimum", bhi)
    body = _program_lines((("const", dtype, bound), (op, dtype, "x0", "t0")), args, names, "clip")
    return None if body is None else check + body


@register("nn.leakyrelu")
def _leakyrelu(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if not _arrays(args, 2) or args[0].dtype not in FLOATS or args[1].dtype != args[0].dtype:  # type: ignore[union-attr]
        return None
    alpha = _bound(attrs.get("alpha", 0.01))
    check = _same_shape_or_scalar(args, names, "nn.leakyrelu")
    if alpha is None or check is None:
        return None
    body = _program_lines((("nn.leakyrelu", args[1].dtype, "x0", alpha),), args, names, "nn.leakyrelu")  # type: ignore[union-attr]
    return None if body is None else check + body

