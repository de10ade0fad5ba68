"""What an executable's memory plan answers before anything runs: figures at
given dims, and the largest dims that fit a capacity."""

from __future__ import annotations

import numpy as np
import pytest

import hetvm
from hetvm.errors import HetvmError
from hetvm.ir import BlockBuilder, TensorStructInfo, Var
from hetvm.ir import prim as P
from hetvm.runtime.plan_queries import need_at, parse_bytes


def _chain_module():
    """x: (n, 256) float32 -> softmax x 3 (not fused): intermediates of 1,024 x n bytes."""
    from hetvm.op import nn

    n = P.PrimVar("n")
    x = Var("x", struct_info=TensorStructInfo((n, 256), "float32"))
    bb = BlockBuilder()
    with bb.function("main", [x]):
        a = bb.emit(nn.softmax(x))
        b = bb.emit(nn.softmax(a))
        bb.emit_func_output(bb.emit(nn.softmax(b)))
    return bb.get()


def _chain_exe(bounds=None):
    mod = _chain_module()
    if bounds:
        from hetvm.transform.declare_dim_bounds import declare_dim_bounds

        mod = declare_dim_bounds(mod, bounds)
    return hetvm.build(mod, target="llvm")


def test_parse_bytes():
    assert parse_bytes("16GiB") == 16 << 30 and parse_bytes("512 MiB") == 512 << 20
    assert parse_bytes("2GB") == 2_000_000_000 and parse_bytes("1000") == 1000
    with pytest.raises(HetvmError, match="cannot read '16 parsecs'"):
        parse_bytes("16 parsecs")


def test_figures_are_formulas_until_dims_are_given():
    exe = _chain_exe()
    facts = exe.memory_plan()["main"][0]
    assert facts["planned_bytes"] is None and facts["free_dims"] == ["n"]
    assert facts["formulas"] == {
        "planned_bytes": "2,048 x n",
        "lower_bound_bytes": "2,048 x n",
        "no_reuse_bytes": "2,048 x n",
        "predicted_peak_bytes": "3,072 x n",
    }
    at = exe.memory_plan(dims={"n": 5})["main"][0]
    assert (at["planned_bytes"], at["lower_bound_bytes"], at["predicted_peak_bytes"]) == (10240, 10240, 15360)
    vm = hetvm.VirtualMachine(exe, hetvm.cpu(0))
    vm["main"](hetvm.nd.array(np.ones((5, 256), np.float32)))
    assert vm.memory_report()["cpu:0"]["peak_bytes"] == 15360  # as predicted, before the run
    with pytest.raises(HetvmError, match="depend on n; give it in dims"):
        need_at(exe, {})


def test_a_declared_bound_gives_the_static_plan_of_the_bound():
    exe = _chain_exe({"n": 8})
    facts = exe.memory_plan()["main"][0]
    assert facts["planned_bytes"] == 2048 * 8 and "formulas" not in facts
    vm = hetvm.VirtualMachine(exe, hetvm.cpu(0))
    with pytest.raises(HetvmError, match="exceeds its upper bound 8"):
        vm["main"](hetvm.nd.array(np.ones((9, 256), np.float32)))


def test_a_bound_on_a_dim_the_function_lacks_is_an_error():
    from hetvm.transform.declare_dim_bounds import declare_dim_bounds

    with pytest.raises(HetvmError, match="'main' has no symbolic dim 'm'; its dims are n"):
        declare_dim_bounds(_chain_module(), {"m": 4})
    with pytest.raises(HetvmError, match="the bound of 'n' must be an integer >= 1, got 0"):
        declare_dim_bounds(_chain_module(), {"n": 0})


def test_largest_dims_that_fit_is_the_last_value_whose_need_fits():
    exe = _chain_exe()
    # need(n) = predicted peak 3,072 n + the input 1,024 n (no weights)
    assert need_at(exe, {"n": 7}) == {0: 4096 * 7}
    assert exe.largest_dims_that_fit(4096 * 100) == {"n": {0: 100}}
    assert exe.largest_dims_that_fit(4096 * 100 - 1) == {"n": {0: 99}}
    assert exe.largest_dims_that_fit("1KiB") == {"n": {0: None}}  # not even n = 1
    with pytest.raises(HetvmError, match="no free dim"):
        exe.largest_dims_that_fit("1GiB", dims={"n": 3})


def test_a_symbolic_plan_that_fits_at_no_size_is_refused_when_the_vm_is_made():
    from hetvm.runtime.device import device

    exe = hetvm.build(_chain_module(), target="sim")
    facts = exe.memory_plan()["main"][0]
    assert facts["least_bytes"] == 2048  # the lower bound 2,048 x n at n = 1
    try:
        with pytest.raises(hetvm.MemoryPlanError, match=r"does not fit on sim:5 at any size: even at n=1 it needs at least 2048 bytes \(lower bound 2,048 x n\)"):
            hetvm.VirtualMachine(exe, device("sim", 5, capacity=2000, missing_kernels=()))
        sim = device("sim", 5, capacity=4096, missing_kernels=())
        vm = hetvm.VirtualMachine(exe, sim)  # n = 1 fits
        vm["main"](hetvm.nd.array(np.ones((1, 256), np.float32)).copyto(sim))
    finally:
        device("sim", 5, capacity=None)
