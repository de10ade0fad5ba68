"""hetvm as an ONNX backend (``onnx.backend.base.Backend``).

ONNX's conformance runner (``onnx.backend.test.BackendTest``) drives a backend
through three calls: ``supports_device(name)``, ``prepare(model, device)`` —
import, compile, load — and ``rep.run(inputs)``. This module implements them
on the public API (``hetvm.frontend.from_onnx``, ``hetvm.build``,
``hetvm.VirtualMachine``) so the same conformance cases that test other
runtimes test hetvm. See docs/conformance.md for the command and pass counts.

Devices: ``"CPU"`` runs on the host. ``prepare(model, devices=["sim:0", "cpu"],
missing_kernels={"sim:0": [...]})`` runs heterogeneously: the first device is
the default, inputs arrive there, and the device planner places the rest
(the runner itself only knows ``CPU``/``CUDA``). ``CUDA`` is supported when CuPy
and a GPU are present.

The ``onnx`` package is needed only to use this module; ``import hetvm`` does
not import it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .errors import FrontendError

try:  # the base classes are optional: without onnx the module still imports
    from onnx.backend.base import Backend as _Backend
    from onnx.backend.base import BackendRep as _BackendRep
except ImportError:  # pragma: no cover - depends on the environment
    _Backend = object  # type: ignore[assignment,misc]
    _BackendRep = object  # type: ignore[assignment,misc]

__all__ = ["HetvmBackend", "HetvmBackendRep", "prepare", "run_model", "run_node", "supports_device"]


def _cuda_available() -> bool:
    try:
        import cupy  # type: ignore[import-not-found]

        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # noqa: BLE001 - any failure means "no usable GPU"
        return False


def _device_list(device: str, devices: Sequence[str] | None) -> list[str]:
    if devices:
        return [str(d) for d in devices]
    kind, _, idx = str(device or "CPU").partition(":")
    kind = kind.strip().upper()
    if kind == "CPU":
        return ["cpu"]
    if kind == "CUDA":
        return [f"cuda:{idx or 0}", "cpu"]
    raise FrontendError(f"hetvm's ONNX backend does not know device '{device}' (use CPU or CUDA)")


class HetvmBackendRep(_BackendRep):  # type: ignore[misc,valid-type]
    """A prepared model: the compiled executable loaded in a VM."""

    def __init__(self, vm: Any, input_names: list[str], output_names: list[str],
                 param_info: list[tuple[str, Any]]) -> None:  # fmt: skip
        self.vm = vm
        self.input_names = input_names
        self.output_names = output_names
        self._param_info = param_info

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Runs the model; ``inputs`` is a list in graph-input order, a dict, or one array."""
        args = self._arrange(inputs)
        out = self.vm["main"](*args)
        flat = _flatten(out)
        return tuple(_to_numpy(v) for v in flat)

    def _arrange(self, inputs: Any) -> list[np.ndarray]:
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            unknown = [n for n in inputs if n not in self.input_names]
            if missing or unknown:
                raise FrontendError(
                    f"inputs do not match the model: missing {missing}, unknown {unknown} "
                    f"(inputs: {self.input_names})"
                )
            inputs = [inputs[n] for n in self.input_names]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise FrontendError(
                f"the model takes {len(self.input_names)} input(s) ({', '.join(self.input_names)}), "
                f"given {len(inputs)}"
            )
        return [np.asarray(x) for x in inputs]


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "numpy"):
        dev = getattr(value, "device", None)
        if dev is not None and getattr(dev, "kind", "cpu") != "cpu":
            from .runtime.device import cpu

            value = value.copyto(cpu(0))
        return value.numpy()
    return np.asarray(value)


class HetvmBackend(_Backend):  # type: ignore[misc,valid-type]
    """The ``onnx.backend.base.Backend`` of hetvm."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        kind = str(device).partition(":")[0].strip().upper()
        if kind == "CPU":
            return True
        if kind == "CUDA":
            return _cuda_available()
        return False

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> HetvmBackendRep:
        """Imports, checks, compiles and loads ``model``.

        Keyword options: ``devices`` (list, first is the default device),
        ``missing_kernels`` (device -> ops a sim device lacks), ``shape_dict``
        and ``opset`` (passed to the importer), ``executor`` ("vm").
        """
        from .cli_support.placement import parse_devices
        from .cli_support.session import compile_program, configure_runtime
        from .frontend import from_onnx
        from .frontend.onnx_importer import load_model
        from .runtime.vm import VirtualMachine

        proto, _ = load_model(model)
        devices = _device_list(device, kwargs.get("devices"))
        missing = {str(k): set(v) for k, v in (kwargs.get("missing_kernels") or {}).items()}
        setup = parse_devices(",".join(devices), missing)
        mod = from_onnx(proto, shape_dict=kwargs.get("shape_dict"), opset=kwargs.get("opset"))
        compiled = compile_program(mod, setup, kwargs.get("executor", "vm"), want_explain=False)
        vm = VirtualMachine(compiled.exe, devices=configure_runtime(setup))
        inits = {i.name for i in proto.graph.initializer}
        input_names = [vi.name for vi in proto.graph.input if vi.name not in inits]
        output_names = [vo.name for vo in proto.graph.output]
        params = [(p.name_hint, p.struct_info) for p in mod["main"].params]
        return HetvmBackendRep(vm, input_names, output_names, params)

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:  # fmt: skip
        """Runs one node by wrapping it in a one-node model (inputs as given)."""
        from onnx import helper

        arrays = [np.asarray(x) for x in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        names = [n for n in node.input if n]
        if len(names) != len(arrays):
            raise FrontendError(f"node {node.op_type} has {len(names)} inputs, given {len(arrays)}")
        in_vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                 for n, a in zip(names, arrays)]  # fmt: skip
        if outputs_info:
            out_vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
                      for n, (dt, shape) in zip(node.output, outputs_info)]  # fmt: skip
        else:
            out_vi = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = helper.make_graph([node], f"run_node_{node.op_type}", in_vi, out_vi)
        opset = kwargs.pop("opset_version", None)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] if opset else None)
        return cls.run_model(model, arrays, device, **kwargs)


prepare = HetvmBackend.prepare
run_model = HetvmBackend.run_model
run_node = HetvmBackend.run_node
supports_device = HetvmBackend.supports_device
