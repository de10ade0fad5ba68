"""Small programs over devices of two hosts, for tests and benchmarks of hetvm.distributed.

``mlp(layers, width, batch)``: a chain of matmul + relu layers with no pin
(stage mode or pins place it); ``pinned_pair()``: a matmul on hostA's CPU
feeding hostB's accelerator, whose one value is read there by two devices;
``light_cnn(name)``: one of the onnx package's light CNNs over hostA/cpu and
hostB/sim:0. Inputs come from :func:`inputs_for` (seeded).

``cut_bytes(func)`` counts, for every cut point of a function's linear order,
the bytes of the values made before it and read at or after it: what a
two-stage split there must send. It reads only the IR (no planner code), so
tests compare the planner's stage cut and the bytes the runtime measures with
it; :func:`module_before` builds and gives the module a pass of the build received.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import BlockBuilder, TensorStructInfo, Var, const
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.vdevice import VDevice, remote

__all__ = [
    "ALTERNATING", "mlp", "pinned_pair", "light_cnn", "inputs_for", "cut_bytes", "module_before", "build_stages",
    "HOST_A_CPU", "HOST_B_CPU", "HOST_B_SIM", "STAGES", "SLOW_LINK",
]

HOST_A_CPU = remote("hostA", "cpu", 0)
HOST_B_CPU = remote("hostB", "cpu", 0)
HOST_B_SIM = remote("hostB", "sim", 0)
#: stage mode over the two hosts: hostA's CPU, then hostB's accelerator
STAGES = ["hostA/cpu", "hostB/sim:0"]
#: a network so slow (100 kB/s) that the bytes crossing decide a light CNN's stage cut
SLOW_LINK = {"cross_host": {"bandwidth": 1e5, "latency": 1e-3}}


#: a chain whose values alternate between hostA's CPU and hostB's sim (the split, transfer and fault tests)
ALTERNATING = '''
@I.ir_module
class M:
    I.module_global_infos({"vdevice": [I.vdevice({"kind": "llvm", "tag": "host:hostA"}, 0),
                                       I.vdevice({"kind": "sim", "tag": "host:hostB"}, 0)]})
    @R.function
    def main(x: R.Tensor((4, 8), "float32", "llvm:0"), w: R.Tensor((8, 8), "float32", "llvm:0")):
        with R.dataflow():
            a = R.matmul(x, w)
            b: R.Tensor((4, 8), "float32", "sim:0") = R.nn.relu(a)
            c: R.Tensor((4, 8), "float32", "llvm:0") = R.add(b, a)
            d: R.Tensor((4, 8), "float32", "sim:0") = R.exp(c)
            e: R.Tensor((4, 8), "float32", "sim:0") = R.multiply(d, b)
            R.output(e)
        return e
'''


def mlp(
    layers: int = 6, width: int = 64, batch: int = 8, devices: list[VDevice] | None = None,
    constant_weights: bool = False,
) -> IRModule:
    """``x -> relu(x @ w_i + b_i)`` ``layers`` times; the weights are parameters, or
    seeded constants (each host then holds its stage's weights: only ``x`` is sent)."""
    import hetvm.op as R

    x = Var("x", struct_info=TensorStructInfo((batch, width), "float32"))
    if constant_weights:
        rng = np.random.default_rng(1)
        scale = 1.0 / np.sqrt(width)
        ws = [const((rng.standard_normal((width, width)) * scale).astype("float32")) for _ in range(layers)]
        bs = [const((rng.standard_normal((width,)) * 0.1).astype("float32")) for _ in range(layers)]
        params = [x]
    else:
        ws = [Var(f"w{i}", struct_info=TensorStructInfo((width, width), "float32")) for i in range(layers)]
        bs = [Var(f"b{i}", struct_info=TensorStructInfo((width,), "float32")) for i in range(layers)]
        params = [x, *ws, *bs]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            h = x
            for i in range(layers):
                h = bb.emit(R.nn.relu(R.add(R.matmul(h, ws[i]), bs[i])), name_hint=f"h{i}")
            out = bb.emit_output(h)
        bb.emit_func_output(out)
    mod = bb.get()
    return mod.with_global_infos(vdevice=list(devices or [HOST_A_CPU, HOST_B_SIM]))


def pinned_pair() -> IRModule:
    """``b = relu(x @ w)`` on hostA/cpu, read on hostB/sim:0 and on hostB/cpu."""
    import hetvm.op as R

    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32", vdevice=HOST_A_CPU))
    w = Var("w", struct_info=TensorStructInfo((8, 8), "float32", vdevice=HOST_A_CPU))
    v = Var("v", struct_info=TensorStructInfo((4, 8), "float32", vdevice=HOST_B_SIM))
    bb = BlockBuilder()
    with bb.function("main", [x, w, v]):
        with bb.dataflow():
            b = bb.emit(R.nn.relu(R.matmul(x, w)), name_hint="b")
            on_sim = bb.emit(R.hint_on_device(b, HOST_B_SIM), name_hint="b_sim")
            c = bb.emit(R.multiply(on_sim, v), name_hint="c")
            on_cpu = bb.emit(R.hint_on_device(b, HOST_B_CPU), name_hint="b_cpu")
            d = bb.emit(R.exp(on_cpu), name_hint="d")
            d_sim = bb.emit(R.hint_on_device(d, HOST_B_SIM), name_hint="d_sim")
            e = bb.emit(R.add(c, d_sim), name_hint="e")
            out = bb.emit_output(e)
        bb.emit_func_output(out)
    mod = bb.get()
    return mod.with_global_infos(vdevice=[HOST_A_CPU, HOST_B_CPU, HOST_B_SIM])


def inputs_for(mod: IRModule, seed: int = 0) -> list[np.ndarray]:
    """Seeded float32 inputs for ``main``'s parameters (static shapes)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in mod["main"].params:
        shape = tuple(int(d.value) for d in p.struct_info.shape)
        out.append((rng.standard_normal(shape) * 0.5).astype("float32"))
    return out


def light_cnn(name: str = "squeezenet", devices: list[VDevice] | None = None, seed: int | None = 0) -> IRModule:
    """A light ONNX CNN (``hetvm.testing.light_models``) over two hosts' devices, with
    seeded random weights (``seed=None``: the shipped all-0.02 ones)."""
    from ..frontend import from_onnx
    from .light_models import load_light, with_random_weights

    model = load_light(name)
    if seed is not None:
        model = with_random_weights(model, seed)
    return from_onnx(model).with_global_infos(vdevice=list(devices or [HOST_A_CPU, HOST_B_SIM]))


def _nbytes(sinfo: S.StructInfo | None) -> int:
    if isinstance(sinfo, S.TupleStructInfo):
        return sum(_nbytes(f) for f in sinfo.fields)
    if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None:
        return 0
    return int(np.prod([int(d.value) for d in sinfo.shape], dtype=np.int64)) * S.dtype_nbytes(sinfo.dtype)


def _reads(expr: E.Expr) -> list[E.Var]:
    from ..analysis.free_vars import free_vars

    return list(free_vars(expr))


def cut_bytes(func: E.Function) -> list[tuple[str, int]]:
    """Per cut point of ``func``'s top-level op bindings (before op 1, 2, ...): the name of
    the first op after the cut and the bytes of the values made before it and read at or
    after it (a value once, however many read it; aliases are their source)."""
    bindings = [b for block in func.body.blocks for b in block.bindings]
    root: dict[E.Var, E.Var] = {}
    for b in bindings:
        if isinstance(b.value, E.Var):  # y = x: the same value
            root[b.var] = root.get(b.value, b.value)
    made = {b.var: i for i, b in enumerate(bindings) if b.var not in root}
    last: dict[E.Var, int] = {}
    for i, b in enumerate(bindings):
        for v in _reads(b.value):
            v = root.get(v, v)
            if v in made:
                last[v] = max(last.get(v, -1), i)
    for v in _reads(func.body.body):
        v = root.get(v, v)
        if v in made:
            last[v] = len(bindings)
    ops = [i for i, b in enumerate(bindings) if isinstance(b.value, E.Call)]
    out = []
    for p in ops[1:]:
        crossing = sum(_nbytes(v.struct_info) for v, j in last.items() if made[v] < p <= j)
        out.append((bindings[p].var.name_hint, crossing))
    return out


def module_before(pass_name: str, mod: IRModule, **build_options) -> tuple[Any, IRModule]:  # noqa: ANN003
    """``hetvm.build(mod, **build_options)`` and the module its pass ``pass_name`` received."""
    import hetvm

    from ..transform.pass_infra import PassInstrument

    class _Before(PassInstrument):
        seen: IRModule | None = None

        def run_before_pass(self, m: IRModule, info) -> None:  # noqa: ANN001
            if info.name == pass_name and self.seen is None:
                self.seen = m

    spy = _Before()
    exe = hetvm.build(mod, instruments=[spy], **build_options)
    if spy.seen is None:
        raise ValueError(f"hetvm.build ran no pass named {pass_name!r}")
    return exe, spy.seen


def build_stages(mod: IRModule, links: dict | None = None) -> tuple[Any, dict, list[tuple[str, int]]]:
    """Builds ``mod`` in stage mode over :data:`STAGES`: the executable, the planner's
    stage cut (``device_stages``) and :func:`cut_bytes` of the program it cut."""
    exe, planned_from = module_before("PlanDevices", mod, plan_devices_options={"stages": STAGES, "links": links})
    return exe, exe.metadata["device_stages"], cut_bytes(planned_from["main"])
