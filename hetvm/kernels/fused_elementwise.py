"""The kernel of ``fused_elementwise``: a generated loop where a code generator
covers the program (Numba on the CPU, see :mod:`.codegen_numba`; a CUDA
``ElementwiseKernel`` on CuPy's arrays, see :mod:`.codegen_cuda`), else the
NumPy runner, which calls the unfused ops' kernels step by step."""

from __future__ import annotations

from typing import Any

from ..errors import HetvmRuntimeError
from .fused_program import NumpyRunner, ProgramError, parse_ref, run_numpy, validate
from .registry import register_kernel


def _program(attrs: dict) -> tuple:
    """The attrs' program checked (a loaded executable may be damaged) as tuples."""
    raw = attrs.get("program")
    n_inputs = 0
    if isinstance(raw, (list, tuple)):
        for step in raw:
            for field in step if isinstance(step, (list, tuple)) else ():
                ref = parse_ref(field)
                if ref is not None and ref[0] == "x":
                    n_inputs = max(n_inputs, ref[1] + 1)
    try:
        validate(raw, [None] * n_inputs)
    except ProgramError as err:
        raise HetvmRuntimeError(f"kernel 'fused_elementwise': bad program: {err}") from None
    return tuple(tuple(step) for step in raw)  # type: ignore[union-attr]


def _specialize(xp: Any, attrs: dict) -> Any:
    program = _program(attrs)
    from . import codegen_cuda, codegen_numba

    for generator in (codegen_numba, codegen_cuda):
        fast = generator.generated_kernel(xp, program)
        if fast is not None:
            return fast
    return NumpyRunner(xp, program)


@register_kernel("fused_elementwise", specialize=_specialize)
def fused_elementwise(xp: Any, attrs: dict, *args: Any) -> None:
    """``args`` are the inputs then the output."""
    run_numpy(xp, _program(attrs), args[:-1], args[-1])
