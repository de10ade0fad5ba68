"""The README's first program (kept identical to it by tests/test_readme.py)."""

import numpy as np

import hetvm
from hetvm.script import ir as I
from hetvm.script import relax as R


@I.ir_module
class Module:
    I.module_global_infos({"vdevice": [I.vdevice("llvm"), I.vdevice("sim", 0)]})

    @R.function
    def main(x: R.Tensor((4, 8), "float32", "llvm")) -> R.Tensor((4, 8), "float32", "llvm"):
        with R.dataflow():
            y: R.Tensor((4, 8), "float32", "sim") = R.exp(x)   # wanted on the accelerator
            z = R.add(y, x)                                     # placed by min-cut
            R.output(z)
        return z

print(hetvm.explain(Module))                       # every copy, with its reason
exe = hetvm.build(Module, target="llvm")
print(exe.memory_plan())                            # planned vs lower bound vs no reuse
vm = hetvm.VirtualMachine(exe, [hetvm.cpu(0), hetvm.device("sim", 0)])
out = vm["main"](np.ones((4, 8), "float32"))
print(vm.memory_report())                           # measured peak == predicted peak
