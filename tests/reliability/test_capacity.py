"""A device at capacity: a static plan that cannot fit is refused before anything
runs (device, needed, capacity); a run that still hits the limit raises the
runtime's OutOfMemoryError, gives all its memory back, and the VM stays usable."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import hetvm
from hetvm.errors import MemoryPlanError, OutOfMemoryError
from hetvm.runtime.device import get_api
from hetvm.script import from_source

STATIC = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor((64, 64), "float32", vdevice="sim:0:global")) -> R.Tensor((64, 64), "float32", vdevice="sim:0:global"):
        y: R.Tensor((64, 64), "float32", vdevice="sim:0:global") = R.exp(x)
        z: R.Tensor((64, 64), "float32", vdevice="sim:0:global") = R.tanh(y)
        w: R.Tensor((64, 64), "float32", vdevice="sim:0:global") = R.add(z, y)
        out: R.Tensor((64, 64), "float32", vdevice="sim:0:global") = R.multiply(w, x)
        return out
'''

DYNAMIC = '''
@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm", 0, "global"), I.vdevice("sim", 0, "global")]})
    @R.function
    def main(x: R.Tensor(("n",), "float32", vdevice="sim:0:global")) -> R.Tensor(("n",), "float32", vdevice="sim:0:global"):
        n = T.int64()
        y: R.Tensor((n,), "float32", vdevice="sim:0:global") = R.exp(x)
        z: R.Tensor((n,), "float32", vdevice="sim:0:global") = R.add(y, x)
        w: R.Tensor((n,), "float32", vdevice="sim:0:global") = R.multiply(z, y)
        return w
'''


@pytest.fixture
def sim_with_capacity():
    """A sim index no other test uses, configured per test and reset afterwards."""
    dev = hetvm.device("sim", 7)
    gc.collect()
    assert get_api(dev).allocated == 0
    yield lambda capacity: hetvm.device("sim", 7, capacity=capacity)
    hetvm.device("sim", 7, capacity=None)
    gc.collect()  # the test's VMs go, and their pools back to the device
    assert get_api(dev).allocated == 0, "a dropped VM kept device memory"


def test_plan_that_cannot_fit_is_refused_before_running(sim_with_capacity):
    exe = hetvm.build(from_source(STATIC))
    facts = exe.memory_plan()["main"][1]
    needed = max(facts["planned_bytes"], facts["predicted_peak_bytes"])
    assert facts["planned_bytes"] >= 2 * 64 * 64 * 4  # y and z live together on the sim
    sim = sim_with_capacity(needed - 1)
    allocated = get_api(sim).allocated
    with pytest.raises(MemoryPlanError) as info:
        hetvm.VirtualMachine(exe, ["cpu:0", sim])
    msg = str(info.value)
    assert "sim:7" in msg and f"needs {needed} bytes" in msg and f"capacity is {needed - 1} bytes" in msg
    assert "'main'" in msg
    assert get_api(sim).allocated == allocated  # nothing was allocated
    # exactly enough: the VM is made and the call fits (the parameter is placed first)
    x = np.linspace(-1, 1, 64 * 64, dtype="float32").reshape(64, 64)
    sim_with_capacity(needed + x.nbytes)
    vm = hetvm.VirtualMachine(exe, ["cpu:0", sim])
    out = vm["main"](hetvm.nd.array(x, sim)).copyto(hetvm.cpu(0)).numpy()
    y = np.exp(x)
    np.testing.assert_allclose(out, (np.tanh(y) + y) * x, rtol=1e-5)
    assert vm.memory_report()["sim:7"]["peak_bytes"] <= needed


def test_run_past_the_capacity_raises_and_the_vm_stays_usable(sim_with_capacity):
    exe = hetvm.build(from_source(DYNAMIC))  # n unbounded: sizes known only at run time
    sim = sim_with_capacity(10_000)
    vm = hetvm.VirtualMachine(exe, ["cpu:0", sim])
    api = get_api(sim)
    before = api.allocated

    def call(n: int) -> np.ndarray:
        x = np.linspace(0, 1, n, dtype="float32")
        out = vm["main"](x).copyto(hetvm.cpu(0)).numpy()
        y = np.exp(x)
        np.testing.assert_allclose(out, (y + x) * y, rtol=1e-5)
        return out

    call(100)
    for _ in range(2):  # twice: a failed call leaves nothing behind
        with pytest.raises(OutOfMemoryError) as info:
            call(1000)  # 4,000 bytes a tensor: x, y and z do not fit in 10,000
        msg = str(info.value)
        assert "out of memory on sim:7" in msg and "capacity 10000 bytes" in msg
        assert "function 'main', pc" in msg  # where in the program
        gc.collect()
        assert vm.memory_report()["sim:7"]["bytes_in_use"] == 0
        vm.release_pools()
        assert api.allocated == before, "the failed call kept device memory"
        call(100)  # the VM still runs a smaller input
    vm.release_pools()
    gc.collect()
    assert api.allocated == before
