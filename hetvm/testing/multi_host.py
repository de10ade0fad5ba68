"""Small programs over devices of two hosts, for tests and benchmarks of hetvm.distributed.

``mlp(layers, width, batch)``: a chain of matmul + relu layers with no pin
(stage mode or pins place it); ``pinned_pair()``: a matmul on hostA's CPU
feeding hostB's accelerator, whose one value is read there by two devices.
Inputs come from :func:`inputs_for` (seeded).
"""

from __future__ import annotations

import numpy as np

from ..ir import BlockBuilder, TensorStructInfo, Var, const
from ..ir.module import IRModule
from ..ir.vdevice import VDevice, remote

__all__ = ["ALTERNATING", "mlp", "pinned_pair", "inputs_for", "HOST_A_CPU", "HOST_B_CPU", "HOST_B_SIM"]

HOST_A_CPU = remote("hostA", "cpu", 0)
HOST_B_CPU = remote("hostB", "cpu", 0)
HOST_B_SIM = remote("hostB", "sim", 0)


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
