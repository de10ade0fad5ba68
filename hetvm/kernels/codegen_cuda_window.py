"""Generated CUDA kernels for windowed ops and per-channel epilogues: max and
average pooling, depthwise convolution (with bias and ReLU), and the bias /
residual / scale-shift / ReLU passes that follow a convolution.

Why: on CuPy's arrays the NumPy kernels build these from whole-tensor steps --
a pool folds one shifted view per window row and column, a depthwise
convolution copies every tap's window into columns for a batched product, an
epilogue is one launch and one pass over the output per step. Here each is
one ``cupy.ElementwiseKernel`` with a thread per output element that reads its
window straight from the input (passed ``raw``, indexed flat): one launch, the
output written once.

The geometry (window, strides, dilation, padding) is written into the kernel
as literals; the input's sizes are scalar arguments, so a model's shapes do
not each compile a kernel, and index arithmetic is 32-bit below 2**31
elements (64-bit above). Semantics are the NumPy kernels': max pooling
propagates NaN and gives the dtype's lowest value for a window wholly in
padding; average pooling divides by the count of cells that count (the input's,
or with ``count_include_pad`` also the explicit padding's); a depthwise padding
tap is a multiply by zero (an infinite weight there gives NaN, as on the CPU).
Sums run in a different order than NumPy's, so floats differ by rounding.
Taken for float32 and float64 (max pooling: integers too) where the inputs,
parameters and output share the dtype and the input is NCHW; otherwise, and
where a kernel fails to compile at its first launch, the NumPy-style kernels run.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from .codegen_cuda import C_TYPES, FMAD_OFF, PRELUDE, int_literal
from .cuda_launch import FirstLaunch, enabled

__all__ = ["applies", "pool", "depthwise", "epilogue", "scale_shift"]

_FLOATS = ("float32", "float64")
_LAUNCHES = FirstLaunch()


def applies(xp: Any) -> bool:
    """Whether ``xp`` is CuPy (or its stand-in: it has ``ElementwiseKernel``) and
    generated CUDA kernels are on."""
    return xp is not np and getattr(xp, "ElementwiseKernel", None) is not None and enabled()


def _kernel(xp: Any, in_params: str, out_params: str, body: str, name: str) -> Any:
    return xp.ElementwiseKernel(in_params, out_params, body, f"hetvm_{name}", preamble=PRELUDE,
                                options=FMAD_OFF, no_return=True)  # fmt: skip


_UNRAVEL = """\
const hv_index e = (hv_index)i;
const hv_index ow = e % OW;
const hv_index oh = (e / OW) % OH;
const hv_index plane = e / (OW * OH);
"""

#: tensors below this many elements index in 32-bit arithmetic (a GPU divides
#: 64-bit integers in software: the output index is unravelled by divisions)
_NARROW_MAX = (1 << 31) - 1


def _narrow(body: str, sizes: str, wide: bool) -> tuple[str, str]:
    """The body with its index type ``hv_index`` defined, and the size
    parameters (``"H, W"``) declared: 64-bit, or 32-bit where every tensor has
    fewer than 2**31 elements (``wide`` False)."""
    c_type, dtype = ("long long", "int64") if wide else ("int", "int32")
    return f"typedef {c_type} hv_index;\n{body}", ", ".join(f"{dtype} {n.strip()}" for n in sizes.split(","))


def _wide(*arrays: Any) -> bool:
    return max(a.size for a in arrays) > _NARROW_MAX


def _act(expr: str, t: str, relu: bool) -> str:
    return f"hv_max<{t}>({expr}, ({t})0)" if relu else expr


@functools.cache
def _pool_kernel(xp: Any, dtype: str, is_max: bool, k: tuple, s: tuple, d: tuple, pads: tuple,
                 explicit: tuple, include_pad: bool, bias: bool, relu: bool, wide: bool) -> Any:  # fmt: skip
    """One pool, its geometry in literals. ``pads`` are (top, left) and
    ``explicit`` the attribute's (bottom, right): the average counts them."""
    t = C_TYPES[dtype]
    (kh, kw), (sh, sw), (dh, dw), (pt, pl), (pb, pr) = k, s, d, pads, explicit
    lines = [_UNRAVEL]
    if is_max:
        lowest = f"-hv_inf_{'f' if dtype == 'float32' else 'd'}()" if dtype in _FLOATS else int_literal(np.iinfo(dtype).min, dtype)
        lines.append(f"{t} acc = {lowest};")
    else:
        lines.append(f"{t} acc = ({t})0;\nhv_index ch = 0, cw = 0;")
    lines.append(f"for (int kh = 0; kh < {kh}; ++kh) {{\n"
                 f"  const hv_index ih = oh * {sh} - {pt} + kh * {dh};")  # fmt: skip
    if not is_max:
        lo, hi = ("0", f"H + {pt + pb}") if include_pad else (f"{pt}", f"{pt} + H")
        lines.append(f"  if (ih + {pt} >= {lo} && ih + {pt} < {hi}) ++ch;")
    lines.append("  if (ih < 0 || ih >= H) continue;\n"
                 f"  for (int kw = 0; kw < {kw}; ++kw) {{\n"
                 f"    const hv_index iw = ow * {sw} - {pl} + kw * {dw};\n"
                 "    if (iw < 0 || iw >= W) continue;\n"
                 "    const " + t + " v = x[(plane * H + ih) * W + iw];\n"
                 + ("    acc = hv_max<" + t + ">(acc, v);\n" if is_max else "    acc = acc + v;\n")
                 + "  }\n}")  # fmt: skip
    if is_max:
        value = "acc + b[plane % C]" if bias else "acc"
    else:
        lo, hi = ("0", f"W + {pl + pr}") if include_pad else (f"{pl}", f"{pl} + W")
        lines.append(f"for (int kw = 0; kw < {kw}; ++kw) {{\n"
                     f"  const hv_index p = ow * {sw} + kw * {dw};\n  if (p >= {lo} && p < {hi}) ++cw;\n}}\n"
                     f"const hv_index count = ch * cw > 0 ? ch * cw : 1;")  # fmt: skip
        value = f"acc / ({t})count"
    lines.append(f"y = {_act(value, t, relu)};")
    body, sizes = _narrow("\n".join(lines), "H, W, OH, OW" + (", C" if bias else ""), wide)
    params = f"raw {dtype} x" + (f", raw {dtype} b" if bias else "") + f", {sizes}"
    return _kernel(xp, params, f"{dtype} y", body, "max_pool2d" if is_max else "avg_pool2d")


def _ints(values: Sequence[Any]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


def pool(xp: Any, attrs: dict, x: Any, out: Any, *, is_max: bool, bias: Any = None, relu: bool = False) -> bool:
    """``out = act(pool(x) + bias[c])`` in one launch; False, with nothing
    written, where no generated kernel covers the call. ``attrs`` are the
    pool's (NCHW)."""
    dtype = str(x.dtype)
    if not applies(xp) or x.ndim != 4 or out.ndim != 4 or out.dtype != x.dtype or out.size == 0:
        return False
    if out.shape[:2] != x.shape[:2]:  # the NumPy kernel says what is wrong
        return False
    if dtype not in C_TYPES or dtype == "bool" or (dtype not in _FLOATS and (not is_max or bias is not None)):
        return False
    if bias is not None and (bias.dtype != x.dtype or bias.shape != (x.shape[1],)):
        return False
    k = _ints(attrs.get("pool_size", (1, 1)))
    s, d = _ints(attrs.get("strides", (1, 1))), _ints(attrs.get("dilation", (1, 1)))
    pt, pl, pb, pr = _ints(attrs.get("padding", (0, 0, 0, 0)))
    include_pad = bool(attrs.get("count_include_pad", False)) and not is_max
    kernel = _pool_kernel(xp, dtype, is_max, k, s, d, (pt, pl), (pb, pr), include_pad, bias is not None, relu,
                          _wide(x, out))  # fmt: skip
    n, c, h, w = x.shape
    args = [xp.ascontiguousarray(x)] + ([xp.ascontiguousarray(bias)] if bias is not None else [])
    args += [h, w, out.shape[2], out.shape[3]] + ([c] if bias is not None else [])
    return _LAUNCHES.run(kernel, lambda: kernel(*args, out))


@functools.cache
def _depthwise_kernel(xp: Any, dtype: str, k: tuple, s: tuple, d: tuple, pads: tuple, bias: bool,
                      relu: bool, wide: bool) -> Any:  # fmt: skip
    t = C_TYPES[dtype]
    (kh, kw), (sh, sw), (dh, dw), (pt, pl) = k, s, d, pads
    body = (
        f"{_UNRAVEL}const hv_index o = plane % O;\nconst hv_index n = plane / O;\n"
        f"const {t}* img = &x[(n * C + o / MULT) * H * W];\nconst {t}* taps = &w[o * {kh * kw}];\n"
        f"{t} acc = ({t})0;\n"
        f"for (int kh = 0; kh < {kh}; ++kh) {{\n"
        f"  const hv_index ih = oh * {sh} - {pt} + kh * {dh};\n"
        f"  for (int kw = 0; kw < {kw}; ++kw) {{\n"
        f"    const hv_index iw = ow * {sw} - {pl} + kw * {dw};\n"
        f"    const {t} v = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? img[ih * W + iw] : ({t})0;\n"
        f"    acc = acc + v * taps[kh * {kw} + kw];\n  }}\n}}\n"
        f"y = {_act('acc + b[o]' if bias else 'acc', t, relu)};"
    )
    body, sizes = _narrow(body, "C, H, W, O, MULT, OH, OW", wide)
    params = f"raw {dtype} x, raw {dtype} w" + (f", raw {dtype} b" if bias else "") + f", {sizes}"
    return _kernel(xp, params, f"{dtype} y", body, "depthwise_conv2d")


def depthwise(xp: Any, x: Any, weight: Any, out: Any, geo: Any, bias: Any = None, relu: bool = False) -> bool:
    """``out = act(depthwise_conv(x, weight) + bias[o])`` in one launch (one input
    channel per group; ``geo`` a :class:`.conv.Geometry`, already checked against
    the shapes); False, with nothing written, where no generated kernel covers it."""
    dtype = str(x.dtype)
    if not applies(xp) or dtype not in _FLOATS or x.ndim != 4 or weight.ndim != 4 or out.size == 0:
        return False
    n, c, h, w = x.shape
    o = weight.shape[0]
    if weight.shape[1] != 1 or geo.groups != c or o % c or weight.dtype != x.dtype or out.dtype != x.dtype:
        return False
    if bias is not None and (bias.dtype != x.dtype or bias.shape != (o,)):
        return False
    kernel = _depthwise_kernel(xp, dtype, tuple(weight.shape[2:]), _ints(geo.strides), _ints(geo.dilation),
                               _ints(geo.pads[:2]), bias is not None, relu, _wide(x, out))  # fmt: skip
    args = [xp.ascontiguousarray(x), xp.ascontiguousarray(weight)]
    args += [xp.ascontiguousarray(bias)] if bias is not None else []
    args += [c, h, w, o, o // c, out.shape[2], out.shape[3]]
    return _LAUNCHES.run(kernel, lambda: kernel(*args, out))


def _per_channel(v: Any, ndim: int) -> Any:
    return v.reshape((-1,) + (1,) * (ndim - 2))


@functools.cache
def _epilogue_kernel(xp: Any, dtype: str, bias: bool, residual: bool, scale: bool, relu: bool) -> Any:
    t = C_TYPES[dtype]
    names = ["v"] + (["s"] if scale else []) + (["b"] if bias else []) + (["r"] if residual else [])
    expr = "v * s" if scale else "v"
    expr += " + b" if bias else ""
    expr += " + r" if residual else ""
    params = ", ".join(f"{dtype} {name}" for name in names)
    return _kernel(xp, params, f"{dtype} y", f"y = {_act(expr, t, relu)};", "epilogue")


def _epilogue(xp: Any, x: Any, out: Any, scale: Any, bias: Any, residual: Any, relu: bool) -> bool:
    dtype = str(out.dtype)
    if not applies(xp) or dtype not in _FLOATS or out.ndim < 2 or x.dtype != out.dtype or x.shape != out.shape:
        return False
    channels = [v for v in (scale, bias) if v is not None]
    if any(v.dtype != out.dtype or v.shape != (out.shape[1],) for v in channels):
        return False
    if residual is not None and (residual.dtype != out.dtype or residual.shape != out.shape):
        return False
    kernel = _epilogue_kernel(xp, dtype, bias is not None, residual is not None, scale is not None, relu)
    args = [x] + [_per_channel(v, out.ndim) for v in (scale, bias) if v is not None]
    args += [residual] if residual is not None else []
    return _LAUNCHES.run(kernel, lambda: kernel(*args, out))


def epilogue(xp: Any, out: Any, bias: Any = None, residual: Any = None, relu: bool = False) -> bool:
    """``out = act(out + bias[c] + residual)`` in place in one launch (the
    order of the NumPy kernels' passes); False, with nothing written, where no
    generated kernel covers the call."""
    return _epilogue(xp, out, out, None, bias, residual, relu)


def scale_shift(xp: Any, data: Any, scale: Any, shift: Any, out: Any, relu: bool) -> bool:
    """``out = act(data * scale[c] + shift[c])`` in one launch; False where no
    generated kernel covers the call."""
    return _epilogue(xp, data, out, scale, shift, None, relu)
