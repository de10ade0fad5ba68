"""FuseOps: groups of element-wise ops on one CPU or CUDA device become one
``fused_elementwise`` call, after TVM's FuseOps + FuseTIR in spirit.

Why: every element-wise op is a full pass over its tensor with its own output
buffer. EfficientNet's swish (``sigmoid`` then ``multiply``), MobileNet v3's
HardSwish (``multiply``, ``add``, ``clip``, ``multiply``) and GPT-2's tanh GELU
(``power``, ``multiply``, ``add``, ``multiply``, ``tanh``, ``add``, ``multiply``
...) are chains of such passes whose intermediates only feed the next step.
One fused op computes the whole chain per element (a generated loop where
Numba is present, :mod:`hetvm.kernels.codegen_numba`; a CUDA kernel through
CuPy, :mod:`hetvm.kernels.codegen_cuda`), and the memory planner
sees one buffer instead of one per step.

Where it runs: after PlanDevices and MatchJoinedShapes, before LegalizeOps.
Every value then carries its vdevice, so a group is fused only when all its
values sit on one device, which is a CPU (``llvm``) or CUDA device configured
with no missing kernel: planning already decided where each op runs, and the fused op
runs the same ops there. Memory planning and the kill pass run later and see
the fused op as what it is, a pure compute op writing a fresh result.

What fuses (one binding block at a time): a binding of an op of the step table
(:data:`hetvm.kernels.fused_program.STEP_OPS`) whose result has a known shape
and a fusable dtype, whose operands are variables or constants, is a member.
A member's operand produced by another member joins its group when it has the
consumer's exact shape (a value broadcast into a larger one is never
recomputed per element -- it stays an input) and every read of it is inside
the group. A group holds at most :data:`MAX_GROUP` ops (a longer chain becomes several
groups). Groups of two members or more are fused, and single ops whose
NumPy kernel takes several passes (``sigmoid``, ``erf``, the GELUs, ``silu``,
``leakyrelu``, ``clip``, an integer ``power``). A constant of one element that
does not raise its step's rank is written into the program as a number;
others stay inputs.

Rewrites inside a program: ``power(x, 2)`` / ``power(x, 3)`` of floats become
products (GPT-2's GELU cubes with ``power``: NumPy's ``pow`` is a slow loop),
and ``x * sigmoid(x)`` becomes the existing ``nn.silu`` step.

The result keeps the root binding's variable and struct info (its vdevice is
a placement). Running the pass twice equals running it once: the fused op is
not a member. The input module is never mutated.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import fused_parts
from ..ir.vdevice import VDevice, runtime_kind
from ..ir.visitor import ExprMutator
from ..kernels.fused_program import DTYPES, STEP_OPS
from ..op.base import make_call
from ._conv_chain import op_name, tensor_sinfo, use_counts
from .device_planning.devices import _attrs_of, device_key, parse_device_name
from .pass_infra import FunctionPass, PassContext

__all__ = ["FuseOps"]

_FUSED = "fused_elementwise"
# single ops worth a fused op of their own: their NumPy kernels take several passes
_ALONE = frozenset({"sigmoid", "erf", "nn.gelu", "nn.gelu_tanh", "nn.silu", "nn.leakyrelu", "clip", "power"})
_INT_POWERS = (2.0, 3.0)
_AFFINE = "nn.scale_shift_act"
# at most this many ops per group (TVM's max_fuse_depth is in this spirit): a long
# chain becomes several fused ops, each kernel's source and compile time stay small
MAX_GROUP = 32


def _same_shape(a: S.TensorStructInfo, b: S.TensorStructInfo) -> bool:
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return False
    return all(P.prove_equal(x, y) for x, y in zip(a.shape, b.shape))


def _scalar(const: E.Constant) -> Any:
    """A one-element finite constant as a Python number, or None."""
    data = const.data
    if data.size != 1 or str(data.dtype) not in DTYPES:
        return None
    value = data.reshape(()).item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def _refusing() -> frozenset[str]:
    return frozenset(fused_parts(_FUSED)) | {_FUSED}


class _Planner:
    """Finds a block's groups: which bindings fuse, keyed by their root var."""

    def __init__(self, uses: dict[E.Var, int], device_ok: Any) -> None:
        self.uses = uses
        self.device_ok = device_ok

    def member(self, b: E.Binding) -> bool:
        if not isinstance(b, E.VarBinding):
            return False
        name = op_name(b.value)
        if name == _AFFINE:
            return self._affine_member(b)
        if name is None or name not in STEP_OPS or name == "const":
            return False
        call: E.Call = b.value  # type: ignore[assignment]
        out = tensor_sinfo(b.var)
        if call.sinfo_args or out is None or out.shape is None or out.dtype not in DTYPES:
            return False
        if not self.device_ok(out.vdevice):
            return False
        if name == "clip" and not all(np.isfinite(float(call.attrs.get(k, np.nan))) for k in ("min", "max")):
            return False
        if name == "nn.leakyrelu" and not np.isfinite(float(call.attrs.get("alpha", 0.01))):
            return False
        vars_seen = 0
        for a in call.args:
            s = tensor_sinfo(a)
            if s is None or s.dtype not in DTYPES or s.shape is None:
                return False
            if isinstance(a, E.Var):
                vars_seen += 1
                if s.vdevice is not None and s.vdevice != out.vdevice:
                    return False
            elif not isinstance(a, E.Constant):
                return False
        return vars_seen > 0

    def _affine_member(self, b: E.VarBinding) -> bool:
        """``nn.scale_shift_act`` (FuseChannelAffine's, constant scale and shift)
        on a device that fuses: decomposed into multiply, add and relu steps."""
        call: E.Call = b.value  # type: ignore[assignment]
        out = tensor_sinfo(b.var)
        data = tensor_sinfo(call.args[0])
        if out is None or data is None or out.shape is None or out.dtype not in DTYPES or data.ndim < 2:
            return False
        if not isinstance(call.args[0], E.Var) or not self.device_ok(out.vdevice):
            return False
        return all(isinstance(a, E.Constant) and a.data.ndim == 1 for a in call.args[1:])

    def plan(self, block: E.BindingBlock) -> dict[E.Var, list[E.VarBinding]]:
        """Groups by root (the group's last binding). Each member keeps, per
        group, how often each variable is read inside it, so the test "every use
        of a producer is inside the merged group" is a dictionary look-up rather
        than a recount over both groups' members at every candidate (that
        recount was most of FuseOps' time on large blocks)."""
        groups: dict[E.Var, list[E.VarBinding]] = {}
        reads: dict[E.Var, dict[E.Var, int]] = {}  # root -> variable -> reads inside its group
        for b in block.bindings:
            if not self.member(b):
                continue
            group = [b]
            inside_group = _reads(b)
            out = tensor_sinfo(b.var)
            fits: dict[E.Var, bool] = {}  # producer -> same shape and device as b (fixed for b)
            changed = True
            while changed:
                changed = False
                for m in list(group):
                    for arg in _var_args(m):
                        if arg not in groups or arg is b.var:
                            continue
                        ok = fits.get(arg)
                        if ok is None:
                            producer = tensor_sinfo(arg)
                            ok = fits[arg] = (
                                producer is not None and _same_shape(producer, out) and producer.vdevice == out.vdevice
                            )
                        if not ok:
                            continue
                        inside = inside_group.get(arg, 0) + reads[arg].get(arg, 0)
                        if inside != self.uses.get(arg, 0) or len(group) + len(groups[arg]) > MAX_GROUP:
                            continue
                        group.extend(groups.pop(arg))
                        for var, n in reads.pop(arg).items():
                            inside_group[var] = inside_group.get(var, 0) + n
                        changed = True
            groups[b.var] = group
            reads[b.var] = inside_group
        order = {bb.var: i for i, bb in enumerate(block.bindings) if isinstance(bb, E.VarBinding)}
        plans = {}
        for root, group in groups.items():
            group.sort(key=lambda x: order[x.var])
            if len(group) >= 2 or op_name(group[0].value) in _ALONE and _alone_worth(group[0]):
                plans[root] = group
        return plans


def _alone_worth(b: E.VarBinding) -> bool:
    if op_name(b.value) != "power":
        return True
    exp = b.value.args[1]  # type: ignore[attr-defined]
    return isinstance(exp, E.Constant) and _scalar(exp) in _INT_POWERS


def _var_args(b: E.VarBinding) -> Iterable[E.Var]:
    seen = []
    for a in b.value.args:  # type: ignore[attr-defined]
        if isinstance(a, E.Var) and a not in seen:
            seen.append(a)
    return seen


def _reads(b: E.VarBinding) -> dict[E.Var, int]:
    """How often each variable is a direct argument of ``b``'s call."""
    out: dict[E.Var, int] = {}
    for a in b.value.args:  # type: ignore[attr-defined]
        if isinstance(a, E.Var):
            out[a] = out.get(a, 0) + 1
    return out


class _ProgramBuilder:
    """Turns a group's bindings (in order) into inputs and a step program."""

    def __init__(self, group: list[E.VarBinding]) -> None:
        self.produced = {b.var: b for b in group}
        self.inputs: list[E.Expr] = []
        self.steps: list[list[Any]] = []  # refs are ("in", i) or ("step", k) until finished
        self.step_of: dict[E.Var, int] = {}
        self.consts: dict[tuple[str, Any], int] = {}
        for b in group:
            self.step_of[b.var] = self._binding(b)

    def _input(self, expr: E.Expr) -> tuple[str, int]:
        for i, x in enumerate(self.inputs):
            if x is expr:
                return ("in", i)
        self.inputs.append(expr)
        return ("in", len(self.inputs) - 1)

    def _push(self, op: str, dtype: str, refs: list[tuple[str, int]], params: tuple = ()) -> int:
        self.steps.append([op, dtype, *refs, *params])
        return len(self.steps) - 1

    def _ref(self, arg: E.Expr, rank: int) -> tuple[str, int]:
        if isinstance(arg, E.Var) and arg in self.produced:
            return ("step", self.step_of[arg])
        if isinstance(arg, E.Constant):
            value = _scalar(arg)
            if value is not None and arg.data.ndim <= rank:
                dtype = str(arg.data.dtype)
                key = (dtype, repr(value))
                if key not in self.consts:
                    self.consts[key] = self._push("const", dtype, [], (value,))
                return ("step", self.consts[key])
        return self._input(arg)

    def _binding(self, b: E.VarBinding) -> int:
        call: E.Call = b.value  # type: ignore[assignment]
        name = call.op.name  # type: ignore[union-attr]
        dtype = tensor_sinfo(b.var).dtype  # type: ignore[union-attr]
        rank = max((tensor_sinfo(a).ndim for a in call.args if isinstance(a, E.Var)), default=0)  # type: ignore[union-attr]
        if name == "power" and isinstance(call.args[1], E.Constant) and dtype in ("float32", "float64"):
            exp = _scalar(call.args[1])
            if exp in _INT_POWERS and call.args[1].data.ndim <= rank:
                x = self._ref(call.args[0], rank)
                sq = self._push("multiply", dtype, [x, x])
                return sq if exp == 2.0 else self._push("multiply", dtype, [("step", sq), x])
        if name == _AFFINE:
            return self._affine(call, dtype)
        if name == "multiply":
            silu = self._silu(call, rank)
            if silu is not None:
                return self._push("nn.silu", dtype, [silu])
        refs = [self._ref(a, rank) for a in call.args]
        params: tuple = ()
        if name == "clip":
            params = (float(call.attrs["min"]), float(call.attrs["max"]))
        elif name == "nn.leakyrelu":
            params = (float(call.attrs.get("alpha", 0.01)),)
        return self._push(name, dtype, refs, params)

    def _affine(self, call: E.Call, dtype: str) -> int:
        """``act(data * scale[c] + shift[c])`` as steps: the per-channel vectors
        become constants of shape ``(C, 1, ..., 1)`` (axis 1 of the data), one
        value is written as a number, a scale of ones and a shift of zeros are left out."""
        data, scale, shift = call.args
        rank = tensor_sinfo(data).ndim  # type: ignore[union-attr]
        cur = self._ref(data, rank)
        for kind, vec, skip in (("multiply", scale, 1), ("add", shift, 0)):
            values = vec.data  # type: ignore[attr-defined]
            if values.size and bool(np.all(values == skip)):
                continue
            if values.size and bool(np.all(values == values.reshape(-1)[0])):
                operand = E.Constant(values.reshape(-1)[:1].copy())
            else:
                column = values.reshape((-1,) + (1,) * (rank - 2))
                operand = E.Constant(column, struct_info=S.TensorStructInfo(column.shape, dtype, vdevice=vec.struct_info.vdevice))  # type: ignore[union-attr]
            cur = ("step", self._push(kind, dtype, [cur, self._ref(operand, rank)]))
        if call.attrs.get("activation") == "relu":
            return self._push("nn.relu", dtype, [cur])
        if cur[0] == "in":  # the identity: still one step
            return self._push("multiply", dtype, [cur, self._ref(E.Constant(np.ones((), dtype)), rank)])
        return cur[1]

    def _silu(self, call: E.Call, rank: int) -> tuple[str, int] | None:
        """``x`` when the multiply is ``x * sigmoid(x)`` (either order) with the
        sigmoid in the group."""
        for s, x in (call.args, call.args[::-1]):
            producer = self.produced.get(s) if isinstance(s, E.Var) else None
            if producer is not None and op_name(producer.value) == "sigmoid" and producer.value.args[0] is x:  # type: ignore[attr-defined]
                return self._ref(x, rank)
        return None

    def program(self) -> tuple[tuple[Any, ...], ...]:
        """The steps with refs numbered (inputs first), unread steps dropped."""
        live = [False] * len(self.steps)
        live[-1] = True
        for k in range(len(self.steps) - 1, -1, -1):
            if live[k]:
                for r in self.steps[k][2:]:
                    if isinstance(r, tuple) and r[0] == "step":
                        live[r[1]] = True
        new_index: dict[int, int] = {}
        out = []
        for k, step in enumerate(self.steps):
            if not live[k]:
                continue
            new_index[k] = len(out)
            fields = [step[0], step[1]]
            for r in step[2:]:
                if isinstance(r, tuple):
                    fields.append(f"x{r[1]}" if r[0] == "in" else f"t{new_index[r[1]]}")
                else:
                    fields.append(r)
            out.append(tuple(fields))
        return tuple(out)


class _Fuser(ExprMutator):
    def __init__(self, mod: IRModule, planner: _Planner) -> None:
        super().__init__(mod)
        self.planner = planner

    def visit_binding_block(self, block: E.BindingBlock) -> E.BindingBlock:
        plans = self.planner.plan(block)
        if not plans:
            return super().visit_binding_block(block)
        dropped = {b.var for group in plans.values() for b in group[:-1]}

        def handled(binding: E.Binding) -> bool:
            group = plans.get(binding.var) if isinstance(binding, E.VarBinding) else None
            if group is not None:
                self._emit_group(group)
                return True
            return binding.var in dropped

        return self.rebuild_block(block, handled)

    def _emit_group(self, group: list[E.VarBinding]) -> None:
        builder = _ProgramBuilder(group)
        root = group[-1]
        inputs = [self.visit_expr(x) for x in builder.inputs]
        value = make_call(_FUSED, inputs, {"program": builder.program()}, span=root.value.span)
        value = E.replace(value, struct_info=root.value.struct_info)
        var = self._retype(root.var, value)
        self.emit_binding(E.VarBinding(var, value, span=root.span))


#: device kinds whose fused_elementwise kernel is generated (or runs the NumPy
#: runner on the device's arrays)
_FUSING_KINDS = ("cpu", "cuda")


def _device_filter(mod: IRModule, missing: Mapping[Any, Iterable[str]] | None) -> Any:
    """``ok(vdevice)``: whether a group on ``vdevice`` may fuse: a CPU or CUDA
    device (``sim`` stands for an accelerator with its own kernels) configured (in the module's vdevice declarations or the ``missing_kernels``
    option PlanDevices took) without a kernel for no op a program may run."""
    lacking: dict[tuple, set[str]] = {}
    declared = mod.global_infos.get("vdevice", ()) if hasattr(mod, "global_infos") else ()
    for v in declared or ():
        if isinstance(v, VDevice):
            names = _attrs_of(v).get("missing_kernels")
            if names:
                lacking.setdefault(device_key(v), set()).update(names)
    for name, ops in (missing or {}).items():
        lacking.setdefault(parse_device_name(name), set()).update((ops,) if isinstance(ops, str) else ops)
    refused = {key for key, ops in lacking.items() if ops & _refusing()}

    def ok(vdev: VDevice | None) -> bool:
        if not isinstance(vdev, VDevice) or runtime_kind(vdev.target) not in _FUSING_KINDS:
            return False
        key = device_key(vdev)
        return key not in refused and (key[0], key[1], "global") not in refused

    return ok


class FuseOps(FunctionPass):
    """Fuses groups of element-wise ops on a CPU or CUDA device into ``fused_elementwise``."""

    def __init__(self, missing_kernels: Mapping[Any, Iterable[str]] | None = None) -> None:
        super().__init__("FuseOps")
        self.missing_kernels = missing_kernels

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        if not isinstance(func, E.Function):
            return func
        planner = _Planner(use_counts(func), _device_filter(mod, self.missing_kernels))
        return _Fuser(mod, planner).visit_expr(func)  # type: ignore[return-value]
