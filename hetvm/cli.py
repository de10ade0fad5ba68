"""Command line: ``hetvm demo | run | explain | plan | show``.

Only ``demo`` exists so far; it builds a small example with the BlockBuilder
and prints it. Later issues grow it.
"""

from __future__ import annotations

import argparse
import sys


def _demo_module():
    from . import op
    from .ir import BlockBuilder, TensorStructInfo, Var

    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32"))
    w = Var("w", struct_info=TensorStructInfo((8, 8), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            h = bb.emit(op.multiply(x, x))
            y = bb.emit(op.add(h, x))
            out = bb.emit_output(op.exp(y))
        bb.emit_func_output(out)
    return bb.get()


def cmd_demo(args: argparse.Namespace) -> int:
    mod = _demo_module()
    try:
        print(mod.script())
    except ImportError:
        print(repr(mod))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hetvm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the built-in example").set_defaults(func=cmd_demo)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
