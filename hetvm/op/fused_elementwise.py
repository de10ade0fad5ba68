"""``fused_elementwise(*inputs, program=...)``: one kernel for a group of
element-wise ops (hetvm only; ``FuseOps`` builds it, the ONNX frontend never does).

``program`` is the group's computation as steps over the inputs (see
:mod:`hetvm.kernels.fused_program`); every step computes an op's result at the
group's output shape, so the result is the inputs broadcast together, in the
last step's dtype. A malformed program is a StructInfoError naming the step.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..ir import expr as E
from ..ir import struct_info as S
from ..kernels.fused_program import STEP_OPS, ProgramError, validate
from .base import broadcast_shapes, common_vdevice, fail, make_call, register_op, tensor_arg

__all__ = ["fused_elementwise", "OP"]

OP = "fused_elementwise"


def _infer(call: E.Call) -> S.StructInfo:
    if not call.args:
        raise fail(OP, "needs at least one input tensor")
    inputs = [tensor_arg(call, i, f"input {i}") for i in range(len(call.args))]
    try:
        dtypes = validate(call.attrs.get("program"), [s.dtype for s in inputs])
    except ProgramError as err:
        raise fail(OP, str(err)) from None
    vdev = common_vdevice(inputs)
    if any(s.shape is None for s in inputs):
        ndims = [s.ndim for s in inputs]
        return S.TensorStructInfo(None, dtypes[-1], -1 if -1 in ndims else max(ndims), vdev)
    shape = inputs[0].shape
    for s in inputs[1:]:
        shape = broadcast_shapes(OP, shape, s.shape)
    return S.TensorStructInfo(shape, dtypes[-1], vdevice=vdev)


# a device without a kernel for any op a program may run has none for the fused
# op (conservative: the check is by op name, not by this call's program)
register_op(OP, _infer, num_inputs=-1, attr_names=("program",),
            description="element-wise ops fused into one kernel (FuseOps)",
            fused_from=tuple(op for op in STEP_OPS if op != "const"))  # fmt: skip


def fused_elementwise(*inputs: E.Expr, program: Sequence[Sequence[Any]]) -> E.Call:
    """The fused op of ``program`` over ``inputs`` (steps as tuples)."""
    steps = tuple(tuple(step) for step in program)
    return make_call(OP, list(inputs), {"program": steps})
