"""Build and run a generated program the way every property does.

One place knows how a :class:`~.generators.GeneratedProgram` becomes an
executable (its missing kernels go to the device planner) and a VM (its
devices configured with the same missing kernels), and how results come back
to the host (a copy from a ``sim`` device first), so the properties stay short.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from .generators import GeneratedProgram
from .interpreter import Interpreter, to_numpy_tree, values_close

__all__ = ["build_options", "keeping_dead_code", "build", "make_vm", "fetch", "placed_inputs", "run", "reference", "compare"]


def build_options(prog: GeneratedProgram) -> dict[str, Any]:
    """Keyword arguments of ``hetvm.build`` for this program."""
    if not prog.missing_kernels:
        return {}
    return {"plan_devices_options": {"missing_kernels": dict(prog.missing_kernels)}}


def keeping_dead_code() -> Any:
    """A pass context in which the build keeps unread bindings: generated
    programs compute many values nothing reads, and the properties about
    planning, kills and copies want those planned, killed and copied too (the
    build's DeadCodeElimination would drop them first)."""
    from ..transform import PassContext

    return PassContext(disabled_pass=["DeadCodeElimination"])


def build(prog: GeneratedProgram, keep_dead_code: bool = True, **kwargs: Any) -> Any:
    """``hetvm.build`` of the program; ``keep_dead_code=False`` is the user's build."""
    import hetvm

    prog.runtime_devices()  # configure the sims before anything looks at them
    with keeping_dead_code() if keep_dead_code else contextlib.nullcontext():
        return hetvm.build(prog.mod, **build_options(prog), **kwargs)


def make_vm(prog: GeneratedProgram, exe: Any, **kwargs: Any) -> Any:
    from ..runtime.vm import VirtualMachine

    return VirtualMachine(exe, prog.runtime_devices(), **kwargs)


def fetch(value: Any) -> Any:
    """VM results as host NumPy arrays (nested tuples kept)."""
    if isinstance(value, (list, tuple)):
        return tuple(fetch(v) for v in value)
    if hasattr(value, "copyto") and hasattr(value, "device"):
        from ..runtime.device import cpu

        if value.device.kind != "cpu":
            value = value.copyto(cpu(0))
        return np.array(value.numpy(), copy=True)
    return to_numpy_tree(value)


def placed_inputs(prog: GeneratedProgram, vm: Any) -> list[Any]:
    """The inputs as NDArrays on the devices ``main``'s parameters expect
    (outside the VM's allocators: parameters come from the caller)."""
    from ..runtime.nd import array

    infos = vm.exe.functions["main"].param_info
    out = []
    for value, info in zip(prog.inputs, infos):
        index = info.get("device")
        out.append(array(value, vm.exe_devices[index] if index is not None else None))
    return out


def run(vm: Any, prog: GeneratedProgram, name: str = "main") -> Any:
    """Calls ``name`` on the program's inputs and fetches the results."""
    return fetch(vm[name](*prog.inputs))


def reference(prog: GeneratedProgram, mod: Any = None) -> Any:
    """The interpreter's results for ``main`` of ``mod`` (default: the program's)."""
    return Interpreter(mod if mod is not None else prog.mod).run("main", *prog.inputs)


def compare(got: Any, want: Any, prog: GeneratedProgram, what: str) -> None:
    """Raises AssertionError naming ``what`` when results differ."""
    problem = values_close(got, want)
    if problem is not None:
        raise AssertionError(f"{what}: {problem}\n{prog!r}")
