"""The kernel of ``fused_elementwise``: a generated loop where a code generator
covers the program (Numba on the CPU, see :mod:`.codegen_numba`), else the NumPy
runner, which calls the unfused ops' kernels step by step."""

from __future__ import annotations

from typing import Any

from .fused_program import NumpyRunner, run_numpy
from .registry import register_kernel


def _program(attrs: dict) -> tuple:
    return tuple(tuple(step) for step in attrs["program"])


def _specialize(xp: Any, attrs: dict) -> Any:
    program = _program(attrs)
    from .codegen_numba import generated_kernel

    fast = generated_kernel(xp, program)
    if fast is not None:
        return fast

    return NumpyRunner(xp, program)


@register_kernel("fused_elementwise", specialize=_specialize)
def fused_elementwise(xp: Any, attrs: dict, *args: Any) -> None:
    """``args`` are the inputs then the output."""
    run_numpy(xp, _program(attrs), args[:-1], args[-1])
