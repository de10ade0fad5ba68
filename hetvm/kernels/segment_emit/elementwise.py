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


#: programs of at most this many inputs get a loop for each input that is the output
_IN_PLACE_VARIANTS = 3


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

    def body(reads: list[str], target: str | None = None) -> Lines:
        loads = [f"x{i} = {r}" for i, r in enumerate(reads)]
        target = target or index(out_name, [f"i{d}" for d in range(out.ndim)])  # type: ignore[union-attr]
        return loads + steps + [f"{target} = {last}"]

    ins = [(names[i], a.ndim) for i, a in enumerate(inputs)]  # type: ignore[union-attr]
    loop = broadcast_loop(out_name, out.ndim, ins, body, what, versioned=True)  # type: ignore[union-attr]
    if out.ndim == 0 or any(a.ndim != out.ndim for a in inputs):  # type: ignore[union-attr]
        return consts + loop
    # every operand of the output's shape and C-contiguous (the common case): one
    # flat loop, whose unit-stride accesses vectorise (the nest's broadcast
    # strides, 0 or 1 at run time, keep it scalar); same elements, same order
    arrays = [names[i] for i in range(len(inputs))] + [out_name]
    same = [f"{n}.shape[{d}] == {out_name}.shape[{d}]" for n in arrays[:-1] for d in range(out.ndim)]  # type: ignore[union-attr]
    contiguous = [f"{n}.flags.c_contiguous" for n in arrays]
    # an input that is the output itself (the planner's in-place steps) is read
    # through the output's name: LLVM cannot tell two names of one buffer from
    # an overlap and would run the loop scalar
    n_in = len(inputs)
    flat = [f"ef{k} = np.ascontiguousarray({n}).reshape({out_name}.size)" for k, n in enumerate(arrays)]
    for k in range(n_in if n_in <= _IN_PLACE_VARIANTS else 0):
        reads = [f"ef{n_in if i == k else i}[ie]" for i in range(n_in)]
        flat += [f"{'if' if k == 0 else 'elif'} ef{k}.ctypes.data == ef{n_in}.ctypes.data:",
                 f"    for ie in range({out_name}.size):", *("        " + ln for ln in body(reads, f"ef{n_in}[ie]"))]  # fmt: skip
    plain = [f"for ie in range({out_name}.size):"]
    plain += ["    " + ln for ln in body([f"ef{k}[ie]" for k in range(n_in)], f"ef{n_in}[ie]")]
    flat += (["else:"] + ["    " + ln for ln in plain]) if 0 < n_in <= _IN_PLACE_VARIANTS else plain
    return consts + [f"if {' and '.join(same + contiguous)}:", *("    " + ln for ln in flat), "else:",
                     *("    " + ln for ln in loop)]  # fmt: skip


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
