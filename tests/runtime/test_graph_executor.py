"""Graph executor: planned programs on cpu + sim, __copy nodes, debug timing/dumps, artifacts."""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
import hetvm.op as R
from hetvm.errors import ArtifactError, DeviceMismatchError, HetvmError
from hetvm.graph_executor import create, load_graph
from hetvm.ir import BlockBuilder, TensorStructInfo, Var, VDevice
from hetvm.ir import expr as E
from hetvm.pipeline import build
from hetvm.testing.mutations import mutate_json

CPU = VDevice("llvm", 0)
SIM = VDevice("sim", 0)
SIM1 = VDevice("sim", 1)


def conv_like(devs=(CPU, SIM), pin=SIM):
    """exp -> softmax (no sim kernel) -> multiply by a constant -> tanh, inputs on ``pin``."""
    bb = BlockBuilder()
    x = Var("x", struct_info=TensorStructInfo((4, 8), "float32", vdevice=pin))
    w = Var("w", struct_info=TensorStructInfo((4, 8), "float32", vdevice=pin))
    c = E.const(np.full((4, 8), 0.5, "float32"))
    with bb.function("main", [x, w]):
        a = bb.emit(R.add(x, w))
        b = bb.emit(R.nn.softmax(a))
        m = bb.emit(R.multiply(b, c))
        t = bb.emit(R.tanh(m))
        bb.emit_func_output(E.Tuple((t, a)))
    mod = bb.get()
    mod.global_infos["vdevice"] = list(devs)
    return mod


def reference(x, w):
    a = x + w
    e = np.exp(a - a.max(-1, keepdims=True))
    b = e / e.sum(-1, keepdims=True)
    return np.tanh(b * 0.5), a


def host(nd):
    return nd.copyto(hetvm.cpu(0)).numpy()


@pytest.mark.parametrize("devs", [(CPU, SIM), (CPU, SIM1)], ids=["sim0", "sim1"])
def test_graph_runs_planned_program_with_copy_nodes(devs):
    mk = {"missing_kernels": {f"sim:{devs[1].vdevice_id}": ["nn.softmax"]}}
    target = f"sim:{devs[1].vdevice_id}"
    gm = build(conv_like(devs, devs[1]), target=target, target_host="llvm", executor="graph",
               plan_devices_options=mk)
    graph, lib, params = gm
    copies = [n for n in graph["nodes"] if n["op"] == "__copy"]
    assert len(copies) == 2
    assert {n["device"]["kind"] for n in copies} == {"cpu", "sim"}
    assert all("storage_id" in e and "device" in e for e in graph["entries"])
    rt = [hetvm.cpu(0), hetvm.device("sim", devs[1].vdevice_id, missing_kernels=["nn.softmax"])]
    ex = create(graph, lib, rt)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 4, 8)).astype("float32")
    ex.set_input("x", x)
    ex.set_input(w=w)
    ex.run()
    assert ex.get_num_outputs() == 2
    t, a = reference(x, w)
    np.testing.assert_allclose(host(ex.get_output(0)), t, rtol=1e-5)
    np.testing.assert_allclose(host(ex.get_output(1)), a, rtol=1e-5)
    # every storage is allocated once, at creation: the peak per device is their sum
    report = ex.memory_report()
    for i, dev in enumerate(rt):
        stores = [st["bytes"] for st in graph["storages"] if st["device"] == i]
        assert report[str(dev)]["peak_bytes"] == sum(stores) > 0
        assert report[str(dev)]["alloc_calls"] == len(stores)
    ex.run()
    assert ex.memory_report() == report  # runs allocate nothing
    hetvm.device("sim", devs[1].vdevice_id, missing_kernels=[])


def test_graph_equals_vm_and_debug_dumps_every_node(tmp_path):
    gm = build(conv_like(), target="sim", target_host="llvm", executor="graph")
    exe = build(conv_like(), target="sim", target_host="llvm")
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 4, 8)).astype("float32")
    vm_out = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)])["main"](x, w)
    dbg = create(gm.graph, gm.lib, [hetvm.cpu(0), hetvm.device("sim", 0)], debug=True)
    dbg.run(dump=True, x=x, w=w)
    np.testing.assert_allclose(host(dbg.get_output(0)), host(vm_out[0]), rtol=1e-6)
    kernels = [n for n in gm.graph["nodes"] if n["op"] != "null"]
    assert len(dbg.timings) == len(kernels) == len(dbg.dumps)
    assert all(t["seconds"] >= 0 for t in dbg.timings) and "total" in dbg.profile()
    # export -> load -> run gives the same outputs
    path = str(tmp_path / "g.hetvmg")
    gm.export(path)
    loaded = load_graph(path)
    ex = create(loaded.graph, loaded.lib, [hetvm.cpu(0), hetvm.device("sim", 0)])
    ex.run(x=x, w=w)
    np.testing.assert_allclose(host(ex.get_output(0)), host(dbg.get_output(0)))


def test_corrupted_artifact_fails_cleanly(tmp_path):
    gm = build(conv_like(), target="sim", target_host="llvm", executor="graph")
    path = tmp_path / "g.hetvmg"
    gm.export(str(path))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.hetvmg"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArtifactError):
        load_graph(str(bad))
    (tmp_path / "trunc.hetvmg").write_bytes(bytes(data[:100]))
    with pytest.raises(ArtifactError):
        load_graph(str(tmp_path / "trunc.hetvmg"))


def test_edited_and_rehashed_graph_fails_only_with_hetvm_errors(tmp_path):
    """A graph file edited *and* re-hashed passes the hash check; loading,
    creating and running it must then fail with a hetvm error naming what is
    wrong, never a KeyError/TypeError/IndexError from deep inside, and never a
    view outside a storage."""
    import hashlib
    import json
    import random
    import zipfile

    gm = build(conv_like(), target="sim", target_host="llvm", executor="graph")
    path = tmp_path / "g.hetvmg"
    gm.export(str(path))
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    rng = random.Random(7)
    rt = [hetvm.cpu(0), hetvm.device("sim", 0)]
    x = np.ones((4, 8), "float32")
    outcomes = {"refused": 0, "ran": 0}
    for trial in range(300):
        name = "graph.json" if trial % 4 else "lib.json"
        doc = json.loads(members[name])
        for _ in range(rng.randint(1, 3)):
            doc = mutate_json(doc, rng)
        edited = dict(members, **{name: json.dumps(doc).encode()})
        manifest = json.loads(edited["manifest.json"])
        manifest["members"][name] = hashlib.sha256(edited[name]).hexdigest()
        edited["manifest.json"] = json.dumps(manifest).encode()
        target = tmp_path / "edited.hetvmg"
        with zipfile.ZipFile(target, "w") as zf:
            for n, blob in edited.items():
                zf.writestr(n, blob)
        try:
            loaded = load_graph(str(target))
            ex = create(loaded.graph, loaded.lib, rt)
            ex.run(x=x, w=x)
            outcomes["ran"] += 1
        except HetvmError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 150, outcomes


def test_kernel_on_wrong_device_is_refused():
    gm = build(conv_like(), target="sim", target_host="llvm", executor="graph")
    graph = dict(gm.graph)
    nodes = [dict(n) for n in graph["nodes"]]
    k = next(n for n in nodes if n["op"] == "kernel" and n["device"]["kind"] == "sim")
    k["device"] = {"kind": "cpu", "index": 0}
    graph["nodes"] = nodes
    with pytest.raises(DeviceMismatchError, match="lives on sim:0.*runs on cpu"):
        create(graph, gm.lib, [hetvm.cpu(0), hetvm.device("sim", 0)])


def test_control_flow_is_refused_for_graph():
    bb = BlockBuilder()
    x = Var("x", struct_info=TensorStructInfo((2,), "float32"))
    with bb.function("main", [x]):
        s = bb.emit(R.sum(x))
        cond = bb.emit(R.greater(s, E.const(0.0, "float32")))
        bb.begin_scope()
        tb = bb.end_scope(bb.emit(R.exp(x)))
        bb.begin_scope()
        fb = bb.end_scope(bb.emit(R.negative(x)))
        r = bb.emit(E.If(cond, tb, fb))
        bb.emit_func_output(r)
    with pytest.raises(HetvmError, match="executor='vm'"):
        build(bb.get(), executor="graph")


def test_tuple_argument_reaches_the_kernel_as_a_list(tmp_path):
    """concat takes a tuple of tensors: the graph names its entries in one
    ``{"tuple": [...]}`` input (every light model with a concat failed with
    "expected an immediate, got Tuple" before), also after export and load, and
    with a part copied from another device."""
    bb = BlockBuilder()
    x = Var("x", struct_info=TensorStructInfo((2, 3), "float32"))
    with bb.function("main", [x]):
        a = bb.emit(R.exp(x))
        s = bb.emit(R.hint_on_device(R.negative(x), R.device("sim", 0)))
        c = bb.emit(R.concat(E.Tuple((a, s, a)), axis=1))
        bb.emit_func_output(c)
    mod = bb.get()
    mod.global_infos["vdevice"] = [CPU, SIM]
    gm = build(mod, target="llvm", target_host="llvm", executor="graph")
    node = next(n for n in gm.graph["nodes"] if n.get("name") == "concat")
    assert [sorted(i) for i in node["inputs"]] == [["tuple"]] and len(node["inputs"][0]["tuple"]) == 3
    path = str(tmp_path / "concat.hetvmg")
    gm.export(path)
    loaded = load_graph(path)
    ex = create(loaded.graph, loaded.lib, [hetvm.cpu(0), hetvm.device("sim", 0)])
    xv = np.arange(6, dtype="float32").reshape(2, 3) / 4
    ex.run(x=xv)
    np.testing.assert_allclose(host(ex.get_output(0)), np.concatenate([np.exp(xv), -xv, np.exp(xv)], axis=1), rtol=1e-6)


def test_graph_holds_what_the_vm_peaks_at_and_reports_the_plan():
    """On one device, with every intermediate planned, the graph's storages less
    its params and inputs are the arena and the outputs: the VM's measured peak
    (and the plan's prediction). An unplanned output's storage is its own bytes
    (it was sized as bytes x dtype size: 4x for float32)."""
    mod = conv_like((CPU,), CPU)
    gm = build(mod, executor="graph")
    exe = build(conv_like((CPU,), CPU))
    assert gm.memory_plan() == exe.memory_plan()
    assert gm.devices[0]["kind"] == "cpu"
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 4, 8)).astype("float32")
    ex = create(gm.graph, gm.lib)
    ex.set_input(x=x, w=w)
    ex.run()
    report = ex.memory_report()["cpu:0"]
    assert report["inputs_bytes"] == x.nbytes + w.nbytes
    assert report["params_bytes"] == 4 * 8 * 4  # the constant
    vm = hetvm.VirtualMachine(exe)
    vm["main"](x, w)
    vm_peak = vm.memory_report()["cpu:0"]["peak_bytes"]
    working = report["peak_bytes"] - report["params_bytes"] - report["inputs_bytes"]
    assert working == vm_peak == exe.memory_plan()["main"][0]["predicted_peak_bytes"]


CONSTANT_FIELDS_ON_SIM = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((1,), dtype="float32", vdevice="sim:0:global")) -> R.Tensor((3,), dtype="float32", vdevice="sim:0:global"):
        c = R.const([2.5], "float32")
        lv1: R.Tensor((3,), dtype="float32", vdevice="sim:0:global") = R.concat((c, x, c), axis=0)
        return lv1
'''


def test_a_constant_planned_on_a_device_is_a_param_there_not_a_copy_per_run():
    """A constant that is a tuple field of a kernel on sim:0 is a param placed on
    sim:0 at load (the VM pools it the same way), not copied on every run."""
    from hetvm.script import from_source

    gm = build(from_source(CONSTANT_FIELDS_ON_SIM), executor="graph")
    assert [n["op"] for n in gm.graph["nodes"] if n["op"] != "null"] == ["kernel"]
    (kernel,) = [n for n in gm.graph["nodes"] if n["op"] == "kernel"]
    fields = kernel["inputs"][0]["tuple"]
    assert all(gm.graph["entries"][eid]["device"]["kind"] == "sim" for eid in fields)
    assert fields[0] in gm.graph["params"].values() and fields[2] in gm.graph["params"].values()
    ex = create(gm.graph, gm.lib, [hetvm.cpu(0), hetvm.device("sim", 0)])
    for x in (1.5, -4.0):
        ex.set_input(x=np.array([x], "float32"))
        ex.run()
        np.testing.assert_array_equal(host(ex.get_output(0)), np.array([2.5, x, 2.5], "float32"))


def test_found_by_the_graph_property_nested_result_and_constant_reshape():
    """The generated-program property found: a nested tuple result made an
    invalid graph ('output [0] out of range') instead of a build error; and a
    reshape of a folded constant failed inside codegen (KeyError)."""
    from hetvm.script import from_source

    nested = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x0: R.Tensor((), dtype="float32")):
        lv: R.Tuple(R.Tensor((), dtype="float32")) = (x0,)
        lv1: R.Tensor((), dtype="float32") = lv[0]
        return (lv1, (x0,))
''')
    with pytest.raises(HetvmError, match="nested tuple; use executor='vm'"):
        build(nested, executor="graph")
    reshaped = from_source('''
@I.ir_module
class Module:
    @R.function
    def main(x0: R.Tensor((), dtype="float32")) -> R.Tensor((1, 1), dtype="float32"):
        lv: R.Tensor((), dtype="float32") = R.zeros(R.shape([]), dtype="float32")
        lv1: R.Tensor((1, 1), dtype="float32") = R.reshape(lv, R.shape([1, 1]))
        return lv1
''')
    gm = build(reshaped, executor="graph")
    ex = create(gm.graph, gm.lib)
    ex.set_input("x0", np.float32(1.5))
    ex.run()
    np.testing.assert_array_equal(ex.get_output(0).numpy(), np.zeros((1, 1), "float32"))


def test_a_loop_is_refused_with_an_error_naming_the_vm():
    from hetvm.script import from_source
    from hetvm.testing.loop_programs import counting_loop

    with pytest.raises(HetvmError, match=r"function 'loop' is a loop.*executor='vm'"):
        build(from_source(counting_loop(8)), target="llvm", executor="graph")
