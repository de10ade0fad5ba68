"""Which kernel calls of a model still run their NumPy kernel one by one
(figures printed, never asserted).

Why: a compiled segment (hetvm/runtime/segments.py) runs the calls its emitters
cover as one Numba function; a call no emitter covers, or a kernel call that
stands alone between builtins, runs through Python and NumPy each time. This
counts, per model and op, the calls outside any segment ("alone") and the calls
of a segment that stayed NumPy ("numpy"), after one call of the model.

    python benchmarks/segment_coverage.py --models llama_past_dynamo,t5_legacy
"""

from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from onnx_models import load_model, prepare_hetvm  # noqa: E402


def _describe(slot: tuple, args: tuple) -> str:
    """A slot's argument as the emitter sees it: an array's dtype and shape."""
    tag, value = slot
    if tag == "i":
        return repr(value)[:30]
    items = [args[i] for i in ((value,) if tag == "a" else value)]
    text = [f"{a.dtype}{list(a.shape)}" if hasattr(a, "dtype") else f"{type(a).__name__}" for a in items]
    return ",".join(text) if tag == "a" else "[" + ",".join(text) + "]"


def coverage(name: str, detail: bool = False) -> tuple[collections.Counter, collections.Counter, int]:
    """(ops of calls outside segments, ops of segment calls left NumPy, compiled calls)."""
    from hetvm.runtime import codegen, segments

    made: list = []
    alone: collections.Counter = collections.Counter()
    init, flush, body = segments.Segment.__init__, codegen._Emitter.flush_segment, segments.Segment._body

    def record_init(self, calls, where):  # type: ignore[no-untyped-def]
        init(self, calls, where)
        made.append(self)

    def record_flush(self):  # type: ignore[no-untyped-def]
        if len(self.pending) == 1:
            alone[self.pending[0][2].op] += 1
        flush(self)

    def record_body(self, call, args):  # type: ignore[no-untyped-def]
        lines = body(self, call, args)
        if lines is None and detail:
            print(f"  numpy pc {call.pc} {call.op} {call.attrs} {[_describe(s, args) for s in call.slots]}")
        return lines

    segments.Segment.__init__, codegen._Emitter.flush_segment = record_init, record_flush
    segments.Segment._body = record_body
    try:
        model, feeds = load_model(name, 1)
        prepare_hetvm(model, feeds, "cpu")["call"]()
    finally:
        segments.Segment.__init__, codegen._Emitter.flush_segment = init, flush
        segments.Segment._body = body
    numpy: collections.Counter = collections.Counter()
    compiled = 0
    for seg in made:
        for kind, fn, _, ks in seg.pieces or ():
            if kind == "k":
                numpy[seg.calls[fn].op] += 1

            else:
                compiled += len(ks)
    return alone, numpy, compiled


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", required=True, help="comma-separated corpus model names")
    p.add_argument("--detail", action="store_true", help="print each NumPy call of a segment")
    a = p.parse_args(argv)
    for name in a.models.split(","):
        alone, numpy, compiled = coverage(name, a.detail)
        print(f"{name}: {compiled} compiled, {sum(numpy.values())} numpy in segments, {sum(alone.values())} alone")
        for op in sorted(set(alone) | set(numpy)):
            print(f"    {op:28s} numpy {numpy[op]:4d}  alone {alone[op]:4d}")


if __name__ == "__main__":
    main()
