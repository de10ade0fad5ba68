"""One compiled loop per float dtype that runs any fused program on a small tensor.

Why: a generated kernel is compiled per program. On tensors of a few hundred
elements it saves microseconds per call, but each distinct program costs a
compile (about 0.35 s cold) and a load from Numba's cache (about 4 ms warm): a
20,000-binding DAG of (4, 8) tensors has 901 distinct programs, 329 s cold and
3-4 of its 6 s warm build. Below :data:`SMALL` elements this interpreter runs
the program instead: the program becomes a table of op codes and operand rows,
and the loop takes one op at a time over all elements (a vectorised loop per
op, the op chosen once per step, not per element). It is compiled once per
dtype, for every program.

Each op's branch is written from the generated kernels' own expression
templates (:func:`hetvm.kernels.codegen_numba.step_template`), so a step
computes exactly what the same step of a generated kernel computes.

Covered: programs whose inputs and steps are all one float dtype (float32 or
float64) and whose ops are arithmetic, activations, ``clip``, ``nn.leakyrelu``
and ``const``; comparisons, ``where``, casts and integer programs keep their
generated kernels.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .fused_program import STEP_OPS, parse_ref

__all__ = ["SMALL", "OPS", "covers", "encode", "interpreter_source", "Encoded"]

#: outputs of fewer elements than this run on the interpreter (``auto`` mode);
#: see ``benchmarks/fused_numba_vs_numpy.py --interp`` for the measurement
SMALL = 2048

#: the op codes, in order (code = index)
OPS: tuple[str, ...] = tuple(
    sorted(op for op, (_, _, rule) in STEP_OPS.items() if rule in ("same", "float") and op != "astype") + ["const"]
)
_CODE = {op: i for i, op in enumerate(OPS)}
_DTYPES = ("float32", "float64")

#: (op codes and operand rows, params): ``codes[k] = (op, a, b)`` with rows
#: numbered inputs first, then steps; ``params[k] = (p0, p1)``
Encoded = tuple[np.ndarray, np.ndarray]


def covers(program: Sequence[Sequence[Any]], input_dtypes: Sequence[str]) -> bool:
    """Whether the interpreter runs ``program`` on inputs of these dtypes."""
    if not input_dtypes or len(set(input_dtypes)) != 1 or input_dtypes[0] not in _DTYPES:
        return False
    dtype = input_dtypes[0]
    return all(step[0] in _CODE and step[1] == dtype for step in program)


def encode(program: Sequence[Sequence[Any]], n_inputs: int) -> Encoded:
    """The program as the interpreter's tables (see :data:`Encoded`)."""
    codes = np.zeros((len(program), 3), np.int64)
    params = np.zeros((len(program), 2), np.float64)
    for k, step in enumerate(program):
        op = step[0]
        n_refs = STEP_OPS[op][0]
        codes[k, 0] = _CODE[op]
        for j, ref in enumerate(step[2 : 2 + n_refs]):
            kind, i = parse_ref(ref)  # type: ignore[misc]
            codes[k, 1 + j] = i if kind == "x" else n_inputs + i
        for j, p in enumerate(step[2 + n_refs :]):
            params[k, j] = float(p)
    return codes, params


def interpreter_source(dtype: str) -> str:
    """The module text of the interpreter for ``dtype``: ``run(codes, params, ins,
    tmp, out)`` with ``ins`` the inputs' rows (broadcast to the output's size),
    ``tmp`` a row per step but the last, which writes ``out`` (the flat output)."""
    from .codegen_numba import prelude_import, step_template

    lines = [
        prelude_import(),
        '@numba.njit(cache=True, error_model="numpy", nogil=True)',
        "def run(codes, params, ins, tmp, out):",
        "    n_in = ins.shape[0]",
        "    n = out.shape[0]",
        "    last = codes.shape[0] - 1",
        "    for k in range(codes.shape[0]):",
        "        op = codes[k, 0]",
        "        ra = codes[k, 1]",
        "        rb = codes[k, 2]",
        "        va = ins[ra] if ra < n_in else tmp[ra - n_in]",
        "        vb = ins[rb] if rb < n_in else tmp[rb - n_in]",
        f"        p0 = np.{dtype}(params[k, 0])",
        f"        p1 = np.{dtype}(params[k, 1])",
        "        r = out if k == last else tmp[k]",
    ]
    for code, op in enumerate(OPS):
        word = "if" if code == 0 else "elif"
        if op == "const":
            body = "p0"
        else:
            body = step_template(op, dtype).format(a="va[e]", b="vb[e]", p0="p0", p1="p1", zero=f"np.{dtype}(0)")
        lines.append(f"        {word} op == {code}:  # {op}")
        lines.append("            for e in range(n):")
        lines.append(f"                r[e] = np.{dtype}({body})")
    lines.append("")
    return "\n".join(lines)
