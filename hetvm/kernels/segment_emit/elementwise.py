"""Segment bodies of element-wise ops: the unfused ops as one-step programs, and
``fused_elementwise``'s program, through the scalar templates of
:mod:`..codegen_numba` (one source of truth for what each step computes).

A call is covered where :func:`..codegen_numba.covers` covers its program for
the call's input dtypes and the program checks against them
(:func:`..fused_program.validate`), so the steps NumPy computes awkwardly in a
scalar loop keep their NumPy kernel here too.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..codegen_numba import _body, covers, float_to_int
from ..fused_program import STEP_OPS, ProgramError, validate
from . import FLOATS, Arg, Arr, Lines, broadcast_loop, check_same_shape, index, register

#: unfused ops that are one program step with no parameters
_ONE_STEP = tuple(op for op, (_, params, rule) in STEP_OPS.items() if params == 0 and rule != "const" and op != "astype")


def _program_lines(program: tuple, args: Sequence[Arg], names: Sequence[Any], what: str,
                   same_shape: bool = False) -> Lines | None:  # fmt: skip
    """A program's loop over the output; ``same_shape``: the input must have the
    output's shape (a unary kernel writes with ``out=`` and refuses a broadcast)."""
    if not args or not all(isinstance(a, Arr) for a in args):
        return None
    inputs, out = list(args[:-1]), args[-1]
    if same_shape:
        if len(inputs) != 1 or inputs[0].ndim != out.ndim:  # type: ignore[union-attr]
            return None
        check = check_same_shape(names[0], names[-1], out.ndim, what)  # type: ignore[union-attr]
        body = _program_lines(program, args, names, what)
        return None if body is None else check + body
    dtypes = [a.dtype for a in inputs]  # type: ignore[union-attr]
    try:
        step_dtypes = validate(program, dtypes)
    except ProgramError:
        return None
    if step_dtypes[-1] != out.dtype or not covers(program, dtypes):  # type: ignore[union-attr]
        return None
    consts, steps = _body(program)
    last = f"t{len(program) - 1}"
    out_name = names[-1]

    def body(reads: list[str]) -> Lines:
        loads = [f"x{i} = {r}" for i, r in enumerate(reads)]
        return loads + steps + [f"{index(out_name, [f'i{d}' for d in range(out.ndim)])} = {last}"]  # type: ignore[union-attr]

    ins = [(names[i], a.ndim) for i, a in enumerate(inputs)]  # type: ignore[union-attr]
    return consts + broadcast_loop(out_name, out.ndim, ins, body, what)  # type: ignore[union-attr]


def _one_step(op: str) -> None:
    """Registers ``op``'s emitter: the op as a program of one step."""
    n_refs = STEP_OPS[op][0]
    refs = tuple(f"x{i}" for i in range(n_refs))

    def emit(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
        if len(args) != n_refs + 1 or not isinstance(args[-1], Arr):
            return None
        return _program_lines(((op, args[-1].dtype, *refs),), args, names, op, same_shape=n_refs == 1)

    register(op)(emit)


for _op in _ONE_STEP:
    _one_step(_op)


@register("astype")
def _astype(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 2 or not all(isinstance(a, Arr) for a in args) or attrs.get("dtype") != args[-1].dtype:
        return None
    x, out = args  # type: ignore[misc]
    if x.ndim != out.ndim:
        return None
    at = index(names[1], [f"i{d}" for d in range(out.ndim)])
    check = check_same_shape(names[0], names[1], out.ndim, "astype")
    if out.dtype == "bool":  # NumPy's cast to bool: nonzero (NaN included) is True
        return check + broadcast_loop(names[1], out.ndim, [(names[0], x.ndim)], lambda r: [f"{at} = {r[0]} != 0"], "astype")
    if x.dtype in FLOATS and out.dtype not in FLOATS:  # NumPy's cast here, NaN and out of range included
        cast = float_to_int("v", out.dtype)
        if cast is None:
            return None
        return check + broadcast_loop(names[1], out.ndim, [(names[0], x.ndim)],
                                      lambda r: [f"v = {r[0]}", f"{at} = {cast}"], "astype")  # fmt: skip
    return _program_lines((("astype", out.dtype, "x0"),), args, names, "astype", same_shape=True)


@register("fused_elementwise")
def _fused(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    program = attrs.get("program")
    if not isinstance(program, (list, tuple)):
        return None
    return _program_lines(tuple(tuple(step) for step in program), args, names, "fused_elementwise")


@register("isnan")
def _isnan(attrs: dict, args: Sequence[Arg], names: Sequence[Any]) -> Lines | None:
    if len(args) != 2 or not all(isinstance(a, Arr) for a in args) or args[1].dtype != "bool":
        return None
    x, out = args  # type: ignore[misc]
    if x.ndim != out.ndim:  # the kernel refuses a broadcast
        return None
    at = index(names[1], [f"i{d}" for d in range(out.ndim)])
    check = check_same_shape(names[0], names[1], out.ndim, "isnan")
    if x.dtype not in ("float32", "float64"):  # never NaN
        return check + broadcast_loop(names[1], out.ndim, [(names[0], x.ndim)], lambda r: [f"{at} = False"], "isnan")
    return check + broadcast_loop(names[1], out.ndim, [(names[0], x.ndim)],
                                  lambda r: [f"{at} = np.isnan({r[0]})"], "isnan")  # fmt: skip
