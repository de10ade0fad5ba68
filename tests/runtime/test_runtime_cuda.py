"""CUDA through CuPy; skipped where CuPy or a GPU is missing."""

import numpy as np
import pytest

import hetvm
from hetvm.runtime.bytecode import Call, Executable, KernelCall, Ret, VMFunction

cp = pytest.importorskip("cupy")
try:
    HAVE_GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # driver missing
    HAVE_GPU = False
pytestmark = pytest.mark.skipif(not HAVE_GPU, reason="no CUDA device")


def test_round_trip_and_kernels_on_cuda():
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype("float32")
    w = np.random.default_rng(1).standard_normal((4, 3, 3, 3)).astype("float32")
    a = hetvm.nd.array(x, hetvm.device("cuda", 0))
    np.testing.assert_array_equal(a.numpy(), x)
    B = "vm.builtin."
    instrs = [
        Call(2, B + "alloc_tensor_direct", (("i", [2, 4, 6, 6]), ("i", "float32"), ("i", 0))),
        KernelCall("nn.conv2d", {"strides": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1],
                                 "groups": 1}, 0, (("r", 0), ("r", 1), ("r", 2)), 1),  # fmt: skip
        Call(3, B + "alloc_tensor_direct", (("i", [2, 4, 6, 6]), ("i", "float32"), ("i", 0))),
        KernelCall("nn.relu", {}, 0, (("r", 2), ("r", 3)), 1),
        Ret(3),
    ]
    info = {"kind": "tensor", "shape": None, "dtype": "float32", "device": 0}
    main = VMFunction("main", ["x", "w"], [info, info], 4, instrs, {})
    exe = Executable([{"kind": "cuda", "index": 0, "memory_scope": "global"}], [], {"main": main})
    out = hetvm.VirtualMachine(exe)["main"](x, w)
    cpu = hetvm.VirtualMachine(exe, devices=[hetvm.cpu(0)])["main"](x, w)
    np.testing.assert_allclose(out.numpy(), cpu.numpy(), rtol=1e-4, atol=1e-4)
