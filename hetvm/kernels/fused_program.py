"""The program of a ``fused_elementwise`` op: what it is, how it is checked, and
how NumPy runs it (the reference every generated kernel is compared with).

A program is a tuple of steps, each ``(op, dtype, *refs, *params)``: ``op`` is a
name from :data:`STEP_OPS` (a fixed table -- nothing else is ever run or
generated), ``dtype`` the step's result dtype, ``refs`` the values it reads
(``"x0"`` is the fused op's first input, ``"t2"`` the result of step 2, which
comes earlier) and ``params`` the op's numeric parameters (``clip``'s bounds,
``nn.leakyrelu``'s slope, a ``const``'s value). The last step is the result:
``(("sigmoid", "float32", "x0"), ("multiply", "float32", "t0", "x0"))`` is
``x * sigmoid(x)``.

Every step computes what the op of the same name computes unfused, so the NumPy
runner calls that op's registered kernel step by step: fusing never changes a
result when no code generator is present.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["STEP_OPS", "DTYPES", "ProgramError", "validate", "run_numpy", "step_attrs", "parse_ref", "check_broadcast", "NumpyRunner"]

# op -> (refs, params, rule); rules: "same" (operands share a dtype, result is
# it), "bool" (operands share a dtype, result bool), "float" (same, floats only),
# "cast" (any), "where" (bool, x, x -> x's dtype), "const" (no operand)
STEP_OPS: dict[str, tuple[int, int, str]] = {
    **{op: (2, 0, "same") for op in (
        "add", "subtract", "multiply", "divide", "floor_divide", "power", "maximum", "minimum")},
    **{op: (2, 0, "bool") for op in (
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
        "logical_and", "logical_or")},
    **{op: (1, 0, "same") for op in (
        "negative", "abs", "floor", "ceil", "round", "sign", "reciprocal", "nn.relu")},
    **{op: (1, 0, "float") for op in (
        "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos",
        "nn.gelu", "nn.gelu_tanh", "nn.silu")},
    "logical_not": (1, 0, "not"),
    "clip": (1, 2, "same"),
    "nn.leakyrelu": (1, 1, "float"),
    "astype": (1, 0, "cast"),
    "where": (3, 0, "where"),
    "const": (0, 1, "const"),
}  # fmt: skip

# dtypes a program may compute in (float16 and bfloat16 are left unfused)
DTYPES = frozenset({"float32", "float64", "int8", "int16", "int32", "int64",
                    "uint8", "uint16", "uint32", "uint64", "bool"})  # fmt: skip
FLOATS = frozenset({"float32", "float64"})


class ProgramError(ValueError):
    """A malformed program (the op's inference turns it into a StructInfoError)."""


def parse_ref(ref: Any) -> tuple[str, int] | None:
    """``("x", i)`` for input ``i``, ``("t", k)`` for step ``k``; None if not a ref."""
    if not isinstance(ref, str) or len(ref) < 2 or ref[0] not in "xt" or not ref[1:].isdigit():
        return None
    if len(ref) > 2 and ref[1] == "0":
        return None
    return ref[0], int(ref[1:])


def validate(program: Any, input_dtypes: Sequence[str | None]) -> list[str]:
    """The dtype of every step, after checking each step's op, refs, params and
    dtype rule; raises ProgramError saying which step is wrong."""
    if not isinstance(program, (list, tuple)) or not program:
        raise ProgramError(f"program must be a non-empty list of steps, got {program!r}")
    inputs: list[str | None] = list(input_dtypes)
    dtypes: list[str] = []
    used = [False] * len(input_dtypes)
    for k, step in enumerate(program):
        where = f"step {k}"
        if not isinstance(step, (list, tuple)) or len(step) < 2:
            raise ProgramError(f"{where} must be [op, dtype, refs..., params...], got {step!r}")
        op, dtype = step[0], step[1]
        spec = STEP_OPS.get(op) if isinstance(op, str) else None
        if spec is None:
            raise ProgramError(f"{where}: unknown op {op!r} (known: {', '.join(sorted(STEP_OPS))})")
        n_refs, n_params, rule = spec
        if dtype not in DTYPES:
            raise ProgramError(f"{where} ({op}): dtype {dtype!r} is not one of {', '.join(sorted(DTYPES))}")
        if len(step) != 2 + n_refs + n_params:
            raise ProgramError(f"{where} ({op}) takes {n_refs} ref(s) and {n_params} param(s), got {step!r}")
        refs, params = step[2 : 2 + n_refs], step[2 + n_refs :]
        operand_dtypes = []
        for r in refs:
            ref = parse_ref(r)
            if ref is None or ref[1] >= (len(inputs) if ref[0] == "x" else k):
                raise ProgramError(
                    f"{where} ({op}): {r!r} names no input (x0..x{len(inputs) - 1}) or earlier step (t0..t{k - 1})"
                )
            if ref[0] == "x":
                used[ref[1]] = True
                operand_dtypes.append(inputs[ref[1]])
            else:
                operand_dtypes.append(dtypes[ref[1]])
        for p in params:
            if isinstance(p, bool) and op != "const" or not isinstance(p, (int, float)):
                raise ProgramError(f"{where} ({op}): param {p!r} is not a number")
            if not math.isfinite(p):
                raise ProgramError(f"{where} ({op}): param {p!r} is not finite")
        _check_rule(where, op, rule, dtype, operand_dtypes)
        dtypes.append(dtype)
    if not all(used):
        raise ProgramError(f"input {used.index(False)} is not read by any step")
    return dtypes


def _check_rule(where: str, op: str, rule: str, dtype: str, operands: list[str | None]) -> None:
    known = [d for d in operands if d is not None]
    if rule == "where":
        if operands[0] not in (None, "bool"):
            raise ProgramError(f"{where} ({op}): condition must be bool, got {operands[0]}")
        known = [d for d in operands[1:] if d is not None]
    if rule in ("same", "bool", "float", "where") and len(set(known)) > 1:
        raise ProgramError(f"{where} ({op}): operand dtypes differ ({', '.join(known)})")
    expect = {"bool": "bool", "not": "bool"}.get(rule, known[0] if known else None)
    if rule in ("cast", "const"):
        expect = dtype
    if expect is not None and dtype != expect:
        raise ProgramError(f"{where} ({op}): result dtype must be {expect}, got {dtype}")
    if rule == "float" and dtype not in FLOATS:
        raise ProgramError(f"{where} ({op}): needs float32 or float64, got {dtype}")


def step_attrs(op: str, dtype: str, params: Sequence[Any]) -> dict:
    """The attrs the unfused op has for a step's params."""
    if op == "clip":
        return {"min": float(params[0]), "max": float(params[1])}
    if op == "nn.leakyrelu":
        return {"alpha": float(params[0])}
    if op == "astype":
        return {"dtype": dtype}
    return {}


def check_broadcast(inputs: Sequence[Any], out: Any) -> None:
    """The inputs broadcast together to exactly the output's shape (a clear
    error, as an unfused op's kernel gives, rather than a wrong-sized result)."""
    shapes = [tuple(a.shape) for a in inputs]
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        shape = None
    if shape != tuple(out.shape):
        raise ValueError(
            f"fused_elementwise: inputs of shapes {', '.join(map(str, shapes))} could not be broadcast "
            f"to the output's shape {tuple(out.shape)}"
        )


class NumpyRunner:
    """``run_numpy`` with the work done once: each step's kernel bound (a bare
    ufunc for the binary ops) at construction; per distinct set of input shapes,
    at its first call, each step's shape and a straight-line function that runs
    the steps with their temporaries reused (a step writes a buffer whose value
    no later step reads, never one of its own operands). A long chain then costs
    one kernel call per step and a few allocations per call."""

    def __init__(self, xp: Any, program: Sequence[Sequence[Any]]) -> None:
        from .registry import bind_kernel

        self.xp = xp
        self.program = program
        self.steps: list[tuple[Any, tuple[tuple[bool, int], ...], str, Any]] = []
        for step in program:
            op, dtype = step[0], step[1]
            n_refs = STEP_OPS[op][0]
            refs = tuple((r[0] == "x", int(r[1:])) for r in step[2 : 2 + n_refs])
            params = step[2 + n_refs :]
            if op == "const":
                self.steps.append((None, refs, dtype, xp.asarray(params[0], dtype=dtype)))
            else:
                self.steps.append((bind_kernel(op, "cpu", xp, step_attrs(op, dtype, params)), refs, dtype, None))
        self.plans: dict[tuple, tuple[tuple[int, ...], Any]] = {}

    def _shapes(self, inputs: Sequence[Any], out: Any) -> list[tuple[int, ...]]:
        check_broadcast(inputs, out)
        shapes: list[tuple[int, ...]] = []
        for _, refs, _, value in self.steps:
            if value is not None:
                shapes.append(())
                continue
            shapes.append(np.broadcast_shapes(*(tuple(inputs[i].shape) if is_in else shapes[i] for is_in, i in refs)))
        return shapes

    def _plan(self, inputs: Sequence[Any], out: Any) -> Any:
        """The straight-line function for these input shapes (see the class doc).

        Its source is made here from the program's structure only: every name in
        it (kernels, shapes, dtypes, constants) is a generated identifier bound in
        its namespace, never text from the program."""
        shapes = self._shapes(inputs, out)
        steps = self.steps
        last = len(steps) - 1
        last_read = [-1] * len(steps)
        for k, (_, refs, _, _) in enumerate(steps):
            for is_in, i in refs:
                if not is_in:
                    last_read[i] = k
        ns: dict[str, Any] = {"__builtins__": {}, "_empty": self.xp.empty}
        names: list[str] = []  # the local holding each step's value
        free: dict[tuple, list[str]] = {}
        n_buffers = 0
        lines = []
        for k, (kernel, refs, dtype, value) in enumerate(steps):
            if value is not None:
                ns[f"c{k}"] = value
                names.append(f"c{k}")
            else:
                operands = [f"x{i}" if is_in else names[i] for is_in, i in refs]
                if k == last:
                    dst = "out"
                else:
                    spot = (shapes[k], dtype)
                    pool = free.get(spot)
                    if pool:
                        dst = pool.pop()
                    else:
                        dst = f"b{n_buffers}"
                        n_buffers += 1
                        ns[f"s{dst}"], ns[f"d{dst}"] = shapes[k], dtype
                        lines.append(f"    {dst} = _empty(s{dst}, d{dst})")
                ns[f"k{k}"] = kernel
                lines.append(f"    k{k}({', '.join([*operands, dst])})")
                names.append(dst)
            # values read for the last time here give their buffer back (after the step)
            for i in sorted({i for is_in, i in refs if not is_in}):
                if last_read[i] == k and names[i].startswith("b"):
                    free.setdefault((shapes[i], steps[i][2]), []).append(names[i])
            if last_read[k] == -1 and k != last and names[k].startswith("b"):
                free.setdefault((shapes[k], dtype), []).append(names[k])
        if steps[last][3] is not None:  # the last step is a constant
            ns["_store"] = _store_into
            lines.append(f"    _store(out, {names[last]})")
        params = ", ".join([f"x{i}" for i in range(len(inputs))] + ["out"])
        source = f"def run({params}):\n" + "\n".join(lines or ["    pass"]) + "\n"
        exec(compile(source, "<hetvm-fused-numpy>", "exec"), ns)  # noqa: S102 - generated above
        return tuple(shapes[-1]) if steps[last][3] is None else tuple(out.shape), ns["run"]

    def __call__(self, *args: Any) -> None:
        out = args[-1]
        inputs = args[:-1]
        key = tuple(a.shape for a in inputs)
        plan = self.plans.get(key)
        if plan is None or out.shape != plan[0]:
            plan = self.plans[key] = self._plan(inputs, out)
        plan[1](*args)


def _store_into(out: Any, value: Any) -> None:
    out[...] = value


def run_numpy(xp: Any, program: Sequence[Sequence[Any]], inputs: Sequence[Any], out: Any) -> None:
    """Runs ``program`` with the unfused ops' kernels, one temporary per step
    (the last step writes ``out``)."""
    from .registry import get_kernel

    check_broadcast(inputs, out)
    steps: list[Any] = []
    last = len(program) - 1
    for k, step in enumerate(program):
        op, dtype = step[0], step[1]
        n_refs, _, _ = STEP_OPS[op]
        refs, params = step[2 : 2 + n_refs], step[2 + n_refs :]
        if op == "const":
            steps.append(xp.asarray(params[0], dtype=dtype))
            continue
        args = [inputs[int(r[1:])] if r[0] == "x" else steps[int(r[1:])] for r in refs]
        shape = np.broadcast_shapes(*(tuple(a.shape) for a in args))
        dst = out if k == last and tuple(out.shape) == shape else xp.empty(shape, dtype=dtype)
        get_kernel(op, "cpu")(xp, step_attrs(op, dtype, params), *args, dst)
        steps.append(dst)
    if steps[-1] is not out:
        from .common import store

        store(out, steps[-1])
