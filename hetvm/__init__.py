"""hetvm: a compiler and virtual machine for tensor programs across devices."""

# every op definition is registered here, explicitly and once, so no lookup
# loads them as a side effect (hetvm.ir.op_registry)
from . import op as _op_definitions  # noqa: F401
from .errors import (
    ArtifactError,
    DeviceMismatchError,
    DevicePlanError,
    DistributedError,
    FrontendError,
    HetvmError,
    HetvmRuntimeError,
    HostMissingError,
    MemoryPlanError,
    OutOfMemoryError,
    ParseError,
    StructInfoError,
    TransferTimeoutError,
    WellFormedError,
    WorkerDiedError,
)

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "DeviceMismatchError",
    "DevicePlanError",
    "DistributedError",
    "FrontendError",
    "HetvmError",
    "HetvmRuntimeError",
    "HostMissingError",
    "MemoryPlanError",
    "OutOfMemoryError",
    "ParseError",
    "StructInfoError",
    "TransferTimeoutError",
    "WellFormedError",
    "WorkerDiedError",
]

# --- runtime (issue 4): imported lazily so `import hetvm` stays light ---------
_RUNTIME_EXPORTS = {
    "cpu": ("hetvm.runtime.device", "cpu"),
    "device": ("hetvm.runtime.device", "device"),
    "Device": ("hetvm.runtime.device", "Device"),
    "nd": ("hetvm.runtime.nd", None),
    "NDArray": ("hetvm.runtime.ndarray", "NDArray"),
    "VirtualMachine": ("hetvm.runtime.vm", "VirtualMachine"),
    "Executable": ("hetvm.runtime.bytecode", "Executable"),
    "register_func": ("hetvm.runtime.registry", "register_func"),
    "get_global_func": ("hetvm.runtime.registry", "get_global_func"),
    "load_module": ("hetvm.runtime.artifact", "load_module"),
    "explain": ("hetvm.explain", "explain"),
    "remote": ("hetvm.ir.vdevice", "remote"),
    "distributed": ("hetvm.distributed", None),
    "graph_executor": ("hetvm.graph_executor", None),
    "script": ("hetvm.script", None),
    "transform": ("hetvm.transform", None),
    "ir": ("hetvm.ir", None),
    "op": ("hetvm.op", None),
    "frontend": ("hetvm.frontend", None),
}


def __getattr__(name: str):
    target = _RUNTIME_EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'hetvm' has no attribute '{name}'")
    import importlib

    module = importlib.import_module(target[0])
    value = module if target[1] is None else getattr(module, target[1])
    globals()[name] = value
    return value


def build(*args, **kwargs):  # noqa: ANN002, ANN003 - thin lazy wrapper
    """Compiles an IRModule; see :func:`hetvm.pipeline.build`."""
    from .pipeline import build as _build

    return _build(*args, **kwargs)
