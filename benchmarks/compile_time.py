"""Compile-time benchmark: ``hetvm.build`` of chains and DAGs of N bindings.

Prints the time of every pass and the total, per program size, so growth can
be read off (it should be linear). Never asserts: machines are noisy.

    python benchmarks/compile_time.py            # 1,000 / 5,000 / 20,000
    python benchmarks/compile_time.py 2000       # one size
"""

from __future__ import annotations

import random
import sys
import time

import hetvm
import hetvm.op as op
from hetvm.ir import BlockBuilder, TensorStructInfo, Var
from hetvm.transform import PassContext, PassTimer

UNARY = (op.exp, op.negative, op.tanh, op.sigmoid)
BINARY = (op.add, op.multiply, op.subtract, op.maximum)


def chain(n: int):
    """x -> f1 -> f2 -> ... -> fn: one live value at a time."""
    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            v = x
            for i in range(n):
                v = bb.emit(BINARY[i % 4](v, x) if i % 2 else UNARY[i % 4](v))
            v = bb.emit_output(v)
        bb.emit_func_output(v)
    return bb.get()


def dag(n: int, seed: int = 0):
    """Each op reads one or two earlier values, mostly recent ones."""
    rng = random.Random(seed)
    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            values = [x]
            for _ in range(n):
                a = values[max(0, len(values) - 1 - int(rng.expovariate(0.2)))]
                if rng.random() < 0.5:
                    b = values[rng.randrange(len(values))]
                    values.append(bb.emit(rng.choice(BINARY)(a, b)))
                else:
                    values.append(bb.emit(rng.choice(UNARY)(a)))
            out = bb.emit_output(values[-1])
        bb.emit_func_output(out)
    return bb.get()


def measure(name: str, mod) -> float:
    timer = PassTimer()
    start = time.perf_counter()
    with PassContext(instruments=[timer]):
        hetvm.build(mod, target="llvm")
    total = time.perf_counter() - start
    passes = sum(t for _, t in timer.timings)
    print(f"\n== {name}: total {total:.2f} s (passes {passes:.2f} s, codegen {total - passes:.2f} s)")
    print(timer.summary())
    return total


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [1000, 5000, 20000]
    rows = []
    for n in sizes:
        rows.append((n, measure(f"chain {n}", chain(n)), measure(f"dag {n}", dag(n))))
    print("\nbindings   chain s   dag s   chain us/binding")
    for n, c, d in rows:
        print(f"{n:8d} {c:9.2f} {d:7.2f} {1e6 * c / n:12.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
