"""A convolution's direct segment loop (hetvm/kernels/segment_emit/conv.py)
against its NumPy kernel, at the exported corpus's shapes and scaled-up ones
(figures printed, never asserted): where the loop's size rule
(``CONV_LOOP_MAX`` multiply-adds) should sit.

Each row: the call's multiply-adds, the NumPy kernel's time a call (with
HETVM_NUMBA=1, as in a model: its depthwise and epilogue passes are Numba
loops too) and the compiled segment's (one call of a segment holding only that
convolution: the loop plus Numba's dispatch, ~1 us, which inside a model's
segment is shared by the whole stretch), and their ratio. CPU time, min of
``--repeat`` rounds, one BLAS thread.

    python benchmarks/segment_conv.py [--repeat 7] [--scale 1,2,4] [--light | --small]

The "loop" column is the general body (``conv.py``); "dots" the dot-product
body for small output planes (``conv_dots.py``), timed on every row whatever
its size rule (``dots_pay``) would choose, and the last column says what that
rule picks.

The corpus shapes were read from the segments' first calls of the CNNs in
tests/frontend/exported (resnet, mobilenet_v3, efficientnet, convnext,
segformer, swin; both exports have the same layers). ``--scale k`` multiplies
channels and image sides by k (groups of depthwise layers with them).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ["HETVM_NUMBA"] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

from hetvm.kernels import codegen_numba  # noqa: E402
from hetvm.kernels.registry import bind_kernel  # noqa: E402
from hetvm.kernels.segment_emit import conv as seg_conv  # noqa: E402
from hetvm.kernels.segment_emit import conv_dots  # noqa: E402
from hetvm.testing.segment_check import segment_of  # noqa: E402

# (model, activation, data NCHW, weight OIHW, strides, padding, groups, residual)
CORPUS = [
    ("resnet stem", "relu", (1, 3, 32, 32), (8, 3, 7, 7), 2, 3, 1, False),
    ("resnet 3x3", "relu", (1, 8, 8, 8), (8, 8, 3, 3), 1, 1, 1, False),
    ("resnet 3x3+res", "relu", (1, 8, 8, 8), (8, 8, 3, 3), 1, 1, 1, True),
    ("resnet 3x3/2", "relu", (1, 8, 8, 8), (16, 8, 3, 3), 2, 1, 1, False),
    ("resnet 3x3 16", "none", (1, 16, 4, 4), (16, 16, 3, 3), 1, 1, 1, False),
    ("resnet 1x1/2+res", "relu", (1, 8, 8, 8), (16, 8, 1, 1), 2, 0, 1, True),
    ("mobilenet stem", "none", (1, 3, 32, 32), (8, 3, 3, 3), 2, 1, 1, False),
    ("mobilenet 1x1", "relu", (1, 8, 16, 16), (16, 8, 1, 1), 1, 0, 1, False),
    ("mobilenet dw3x3", "relu", (1, 16, 16, 16), (16, 1, 3, 3), 1, 1, 16, False),
    ("mobilenet se 1x1", "relu", (1, 16, 1, 1), (4, 16, 1, 1), 1, 0, 1, False),
    ("mobilenet 1x1+res", "none", (1, 16, 16, 16), (8, 16, 1, 1), 1, 0, 1, True),
    ("mobilenet dw5x5/2", "none", (1, 24, 16, 16), (24, 1, 5, 5), 2, 2, 24, False),
    ("efficientnet 1x1", "none", (1, 8, 16, 16), (32, 8, 1, 1), 1, 0, 1, False),
    ("efficientnet dw3x3", "none", (1, 32, 16, 16), (32, 1, 3, 3), 1, 1, 32, False),
    ("efficientnet 1x1 32", "none", (1, 32, 8, 8), (16, 32, 1, 1), 1, 0, 1, False),
    ("convnext stem 4x4/4", "none", (1, 3, 32, 32), (8, 3, 4, 4), 4, 0, 1, False),
    ("convnext dw7x7", "none", (1, 8, 8, 8), (8, 1, 7, 7), 1, 3, 8, False),
    ("convnext 2x2/2", "none", (1, 8, 8, 8), (16, 8, 2, 2), 2, 0, 1, False),
    ("segformer 7x7/4", "none", (1, 3, 32, 32), (16, 3, 7, 7), 4, 3, 1, False),
    ("segformer 3x3/2", "none", (1, 16, 8, 8), (32, 16, 3, 3), 2, 1, 1, False),
    ("segformer 1x1 64", "relu", (1, 64, 8, 8), (32, 64, 1, 1), 1, 0, 1, False),
    ("swin 4x4/4", "none", (1, 3, 32, 32), (16, 3, 4, 4), 4, 0, 1, False),
]
#: the light models' stems and other layers the loop declined (benchmarks/onnx_models.py LIGHT)
LIGHT = [
    ("shufflenet stem 3x3/2", "none", (1, 3, 224, 224), (24, 3, 3, 3), 2, 1, 1, False),
    ("squeezenet stem 3x3/2", "none", (1, 3, 224, 224), (64, 3, 3, 3), 2, 0, 1, False),
    ("resnet50 stem 7x7/2", "relu", (1, 3, 224, 224), (64, 3, 7, 7), 2, 3, 1, False),
    ("shufflenet 1x1 g4", "relu", (1, 272, 14, 14), (272, 68, 1, 1), 1, 0, 4, False),
    ("shufflenet 1x1 g4 28", "relu", (1, 136, 28, 28), (136, 34, 1, 1), 1, 0, 4, False),
    ("shufflenet 1x1 g4 7", "relu", (1, 544, 7, 7), (544, 136, 1, 1), 1, 0, 4, False),
    ("shufflenet 1x1 24->112", "relu", (1, 24, 56, 56), (112, 24, 1, 1), 1, 0, 1, False),
    ("squeezenet 3x3 16->64", "relu", (1, 16, 55, 55), (64, 16, 3, 3), 1, 1, 1, False),
    ("squeezenet 3x3 32->128", "relu", (1, 32, 27, 27), (128, 32, 3, 3), 1, 1, 1, False),
    ("squeezenet 3x3 48->192", "relu", (1, 48, 13, 13), (192, 48, 3, 3), 1, 1, 1, False),
    ("squeezenet 1x1 16->64", "relu", (1, 16, 55, 55), (64, 16, 1, 1), 1, 0, 1, False),
]


#: small output planes (a small CNN's last stages: 64x64 inputs, 16x16 to 2x2
#: maps), where the dot-product body (segment_emit/conv_dots.py) competes
SMALL = [
    ("3x3/2 48->64 @4", "none", (1, 48, 4, 4), (64, 48, 3, 3), 2, 1, 1, False),
    ("3x3/2 32->48 @8", "none", (1, 32, 8, 8), (48, 32, 3, 3), 2, 1, 1, False),
    ("3x3/2 16->32 @16", "none", (1, 16, 16, 16), (32, 16, 3, 3), 2, 1, 1, False),
    ("1x1 64->256 @2", "none", (1, 64, 2, 2), (256, 64, 1, 1), 1, 0, 1, False),
    ("1x1 256->64 @2 res", "none", (1, 256, 2, 2), (64, 256, 1, 1), 1, 0, 1, True),
    ("1x1 48->192 @4", "none", (1, 48, 4, 4), (192, 48, 1, 1), 1, 0, 1, False),
    ("1x1 32->64 @4", "relu", (1, 32, 4, 4), (64, 32, 1, 1), 1, 0, 1, False),
    ("1x1 16->32 @4", "relu", (1, 16, 4, 4), (32, 16, 1, 1), 1, 0, 1, False),
    ("1x1 64->32 @8", "relu", (1, 64, 8, 8), (32, 64, 1, 1), 1, 0, 1, False),
    ("resnet 3x3 16 @4", "none", (1, 16, 4, 4), (16, 16, 3, 3), 1, 1, 1, False),
    ("3x3 8 @4", "none", (1, 8, 4, 4), (8, 8, 3, 3), 1, 1, 1, False),
    ("3x3 4->8 @4", "none", (1, 4, 4, 4), (8, 4, 3, 3), 1, 1, 1, False),
    ("3x3 32->64 @4", "relu", (1, 32, 4, 4), (64, 32, 3, 3), 1, 1, 1, False),
    ("3x3 32 @3", "relu", (1, 32, 3, 3), (32, 32, 3, 3), 1, 1, 1, False),
    ("3x3 64 @2", "relu", (1, 64, 2, 2), (64, 64, 3, 3), 1, 1, 1, False),
    ("3x3 32 @8", "relu", (1, 32, 8, 8), (32, 32, 3, 3), 1, 1, 1, False),
    ("3x3 g8 64 @4", "relu", (1, 64, 4, 4), (64, 8, 3, 3), 1, 1, 8, False),
    ("3x3 g4 64 @4", "relu", (1, 64, 4, 4), (64, 16, 3, 3), 1, 1, 4, False),
    ("3x3/2 g8 64 @8", "relu", (1, 64, 8, 8), (64, 8, 3, 3), 2, 1, 8, False),
    ("2x2/2 32->64 @8", "none", (1, 32, 8, 8), (64, 32, 2, 2), 2, 0, 1, False),
]


def _scaled(row: tuple, k: int) -> tuple:
    name, act, (n, c, h, w), (o, cg, kh, kw), s, p, g, res = row
    if k == 1:
        return row
    grow = (lambda v: v) if c == 3 else (lambda v: v * k)  # the stems keep 3 input channels
    c2, o2 = grow(c), o * k
    g2 = g * k if g > 1 else 1
    cg2 = c2 // g2
    return (f"{name} x{k}", act, (n, c2, h * k, w * k), (o2, cg2, kh, kw), s, p, g2, res)


def _call(row: tuple) -> tuple:
    _, act, dshape, wshape, s, p, g, res = row
    rng = np.random.default_rng(0)
    n, _, h, w = dshape
    o, _, kh, kw = wshape
    oh, ow = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
    x = rng.standard_normal(dshape).astype(np.float32)
    wt = rng.standard_normal(wshape).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)
    out = np.empty((n, o, oh, ow), np.float32)
    attrs = {"strides": [s, s], "padding": [p] * 4, "dilation": [1, 1], "groups": g, "activation": act}
    if res:
        return "nn.conv2d_bias_add_act", attrs, [x, wt, b, rng.standard_normal(out.shape).astype(np.float32), out]
    return "nn.conv2d_bias_act", attrs, [x, wt, b, out]


def _time(fn, repeat: int) -> float:
    """Min over rounds of the CPU seconds a call, a round long enough to time."""
    fn()
    t0 = time.process_time()
    calls = 0
    while time.process_time() - t0 < 0.02:
        fn()
        calls += 1
    per_round = max(1, calls * 5)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(per_round):
            fn()
        best = min(best, (time.process_time() - t0) / per_round)
    return best


def _compiled(op: str, attrs: dict, args: list, dots: bool):
    """The segment of the call alone, compiled with the general body or the dot
    products; None where neither covers it."""
    conv_dots.dots_pay = (lambda *shapes: True) if dots else (lambda *shapes: False)
    codegen_numba._MODULES.clear()  # rows of one source: each its own compile (see the report)
    seg, arrays = segment_of([(op, attrs, args)])
    seg(*arrays)  # plans and compiles
    if seg.pieces is None or seg.pieces[0][0] != "g":
        return None
    return lambda: seg(*arrays)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--light", action="store_true", help="the light models' layers instead of the corpus's")
    ap.add_argument("--small", action="store_true", help="small output planes instead of the corpus's layers")
    opts = ap.parse_args()
    rule = conv_dots.dots_pay
    seg_conv.conv_is_small = lambda *shapes: True  # the loops at every size, to place the rules
    conv_dots.conv_is_small = seg_conv.conv_is_small
    rows = LIGHT if opts.light else SMALL if opts.small else CORPUS
    print(f"{'layer':28} {'MACs':>10} {'NumPy us':>10} {'loop us':>10} {'dots us':>10} {'loop/NumPy':>10} "
          f"{'dots/loop':>10}  rule")
    for k in (int(v) for v in opts.scale.split(",")):
        for row in rows:
            row = _scaled(row, k)
            op, attrs, args = _call(row)
            kernel = bind_kernel(op, "cpu", np, dict(attrs))
            loop, dots = _compiled(op, attrs, args, False), _compiled(op, attrs, args, True)
            if loop is None or dots is None:
                print(f"{row[0]:28} not compiled")
                continue
            t_np = _time(lambda k=kernel, a=args: k(*a), opts.repeat)
            t_loop, t_dots = _time(loop, opts.repeat), _time(dots, opts.repeat)
            macs = seg_conv.conv_multiply_adds(args[1].shape, args[-1].shape)
            pick = "dots" if rule(args[1].shape, args[-1].shape, attrs["groups"]) else "loop"
            print(f"{row[0]:28} {macs:>10} {t_np * 1e6:>10.1f} {t_loop * 1e6:>10.1f} {t_dots * 1e6:>10.1f} "
                  f"{t_loop / t_np:>10.2f} {t_dots / t_loop:>10.2f}  {pick}")


if __name__ == "__main__":
    main()
