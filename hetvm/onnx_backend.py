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

Run-time constants: hetvm compiles static programs, so some converters need
an input known at import time (reduction ``axes``, ``pads``, Reshape/Expand
shapes, Slice ``starts``/``ends``, Tile ``repeats``, Trilu's ``k``, CumSum's
``axis``, Range's bounds...). Conformance cases often pass those as graph
inputs. When the import fails for that reason, and only then, ``prepare``
defers it: graph inputs with a static shape of at most
``MAX_BOUND_ELEMENTS`` elements and an integer or bool dtype, numeric
scalars, and small float tensors a node reads as a parameter (Resize's
``scales`` and ``roi``, Pad's constant value) are candidates for binding. ``rep.run(inputs)`` copies the model
with their values as initializers, imports, compiles and loads that copy,
caches it per distinct tuple of bound values (``MAX_CACHED_BINDINGS``
entries, least recently used dropped), and runs it with the remaining
inputs. The first run fixes which candidates are bound: those some node
reads as an attribute-like input (an index past the first, or any input of
ConstantOfShape/Range) if that import succeeds, else all of them; they are
``rep.bound_inputs``, and ``rep.vm`` is the VM of the last run.
Models unsupported for any other reason (an operator without a converter, an
invalid graph, a device) still fail in ``prepare`` with their own error, as
does a run-time-constant failure when no input qualifies for binding; an
error that only the bound import can reveal (e.g. a dtype the runtime lacks
further down the graph) is raised by the first ``run``.

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


#: a graph input with at most this many elements may be bound as a constant
MAX_BOUND_ELEMENTS = 64
#: compiled modules kept per prepared model, one per distinct bound-value tuple
MAX_CACHED_BINDINGS = 16

_RUNTIME_CONSTANT_MARKERS = ("known at import time", "computed at run time")


def _needs_constants(err: BaseException) -> bool:
    """Whether an import failed because an input must be known at import time."""
    text = str(err)
    return any(m in text for m in _RUNTIME_CONSTANT_MARKERS)


def _bindable_inputs(proto: Any, shape_dict: Mapping[str, Sequence[Any]] | None,
                     ) -> list[tuple[str, np.dtype]]:  # fmt: skip
    """Graph inputs that may be bound as constants: a static shape of at most
    ``MAX_BOUND_ELEMENTS`` elements and an integer or bool dtype, or a scalar,
    or a small float tensor a node reads as a parameter (``_FLOAT_ATTRIBUTE_INPUTS``)."""
    from onnx import helper

    inits = {i.name for i in proto.graph.initializer}
    out = []
    for vi in proto.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            continue
        if shape_dict and vi.name in shape_dict:
            dims = list(shape_dict[vi.name])
        else:
            dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims):
            continue
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, TypeError, ValueError):
            continue
        small = int(np.prod(dims, dtype=np.int64)) <= MAX_BOUND_ELEMENTS
        if small and (dtype.kind in "iub" or (not dims and dtype.kind in "iubf")):
            out.append((vi.name, dtype))
        elif small and dtype.kind == "f" and _float_attribute(proto, vi.name):
            out.append((vi.name, dtype))
    return out


#: float inputs that only parameterise a node (op type -> input indices):
#: Resize's roi and scales, Upsample's scales, Pad's constant value
_FLOAT_ATTRIBUTE_INPUTS = {"Resize": (1, 2), "Upsample": (1,), "Pad": (2,)}


def _float_attribute(proto: Any, name: str) -> bool:
    """Whether some node reads float input ``name`` as a parameter (never data)."""
    return any(
        node.op_type in _FLOAT_ATTRIBUTE_INPUTS and i in _FLOAT_ATTRIBUTE_INPUTS[node.op_type]
        for node in proto.graph.node
        for i, inp in enumerate(node.input)
        if inp == name
    )


#: operators whose first input is attribute-like too (a shape, Range's bounds)
_SHAPE_FIRST_OPS = frozenset({"ConstantOfShape", "Range"})


def _attribute_like(proto: Any, names: set[str]) -> set[str]:
    """Those of ``names`` that some node reads as an attribute-like input: at
    an index past the first (axes, pads, shape, repeats, k...), or any input of
    ConstantOfShape/Range; the others are more likely data."""
    from .frontend.onnx_importer import subgraphs

    out = set()
    graphs = [proto.graph]
    while graphs:  # subgraphs (an If's branches) read the graph's inputs too
        graph = graphs.pop()
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name in names and (i > 0 or node.op_type in _SHAPE_FIRST_OPS):
                    out.add(name)
            graphs.extend(subgraphs(node))
    return out


def _reads_shapes_from_values(mod: Any) -> bool:
    """Whether the imported program reads a shape out of tensor values at run time
    (``tensor_to_shape``): the importer's fallback for shapes it could not know."""
    from .ir import expr as E
    from .ir.visitor import post_order_visit

    found: list[bool] = []

    def visit(node: Any) -> None:
        if isinstance(node, E.Call) and isinstance(node.op, E.Op) and node.op.name == "tensor_to_shape":
            found.append(True)

    for func in mod.functions.values():
        post_order_visit(func, visit)
    return bool(found)


class _Compiler:
    """Import, then compile and load, a model for one device setup."""

    def __init__(self, setup: Any, shape_dict: Any, opset: Any, executor: str) -> None:
        self.setup = setup
        self.shape_dict = shape_dict
        self.opset = opset
        self.executor = executor

    def import_(self, proto: Any, shape_dict: Any = None) -> Any:
        from .frontend import from_onnx

        shape_dict = self.shape_dict if shape_dict is None else shape_dict
        return from_onnx(proto, shape_dict=shape_dict, opset=self.opset)

    def load(self, mod: Any) -> tuple[Any, list[tuple[str, Any]]]:
        from .cli_support.session import compile_program, configure_runtime
        from .runtime.vm import VirtualMachine

        compiled = compile_program(mod, self.setup, self.executor, want_explain=False)
        vm = VirtualMachine(compiled.exe, devices=configure_runtime(self.setup))
        return vm, [(p.name_hint, p.struct_info) for p in mod["main"].params]


class _Binder:
    """Re-imports a model with small integer inputs bound as constants, one
    compiled module per distinct tuple of their values.

    Which inputs are bound is fixed by the first run: the attribute-like
    candidates alone if that import succeeds, else every candidate (so data
    inputs that happen to be small integers stay inputs where possible)."""

    def __init__(self, proto: Any, compiler: _Compiler,
                 candidates: list[tuple[str, np.dtype]]) -> None:  # fmt: skip
        self.proto = proto
        self.compiler = compiler
        self.dtypes = dict(candidates)
        preferred = _attribute_like(proto, set(self.dtypes))
        first = [n for n in self.dtypes if n in preferred]
        everything = list(self.dtypes)
        self.tries = [first, everything] if first and first != everything else [everything]
        self.bound: list[str] | None = None
        self.cache: dict[tuple[Any, ...], tuple[Any, list[tuple[str, Any]]]] = {}

    def names(self) -> list[str]:
        return list(self.bound if self.bound is not None else self.tries[0])

    def load(self, values: Mapping[str, np.ndarray]) -> tuple[Any, list[tuple[str, Any]]]:
        """The VM for these candidate values (compiled on a cache miss)."""
        hit = None
        if self.bound is not None:
            hit = self.cache.pop(self._key(values), None)
        if hit is None:
            mod = self._decide(values) if self.bound is None else self._import(values, self.bound)
            hit = self.compiler.load(mod)
            while len(self.cache) >= MAX_CACHED_BINDINGS:
                self.cache.pop(next(iter(self.cache)))  # the least recently used
        self.cache[self._key(values)] = hit  # most recently used last
        return hit

    def _key(self, values: Mapping[str, np.ndarray]) -> tuple[Any, ...]:
        return tuple((n, values[n].shape, values[n].tobytes()) for n in self.bound or ())

    def _decide(self, values: Mapping[str, np.ndarray]) -> Any:
        for i, names in enumerate(self.tries):
            try:
                mod = self._import(values, names)
            except FrontendError as err:
                if i + 1 < len(self.tries) and _needs_constants(err):
                    continue
                raise
            self.bound = names
            return mod
        raise AssertionError("unreachable")  # pragma: no cover

    def _import(self, values: Mapping[str, np.ndarray], names: list[str]) -> Any:
        import onnx
        from onnx import numpy_helper

        copy = onnx.ModelProto()
        copy.CopyFrom(self.proto)
        # the inputs stay listed in graph.input (IR < 4 needs it); an input that
        # is also an initializer is a constant to the importer
        copy.graph.initializer.extend(numpy_helper.from_array(values[n], n) for n in names)
        shape_dict = {k: v for k, v in (self.compiler.shape_dict or {}).items() if k not in names}
        return self.compiler.import_(copy, shape_dict)


class HetvmBackendRep(_BackendRep):  # type: ignore[misc,valid-type]
    """A prepared model: the compiled executable loaded in a VM (or, for a
    model with run-time constants, a cache of them keyed by the bound values)."""

    def __init__(self, vm: Any, input_names: list[str], output_names: list[str],
                 param_info: list[tuple[str, Any]],
                 binder: _Binder | None = None) -> None:  # fmt: skip
        self.vm = vm
        self.input_names = input_names
        self.output_names = output_names
        self._param_info = param_info
        self._binder = binder

    @property
    def bound_inputs(self) -> list[str]:
        """The inputs bound as constants at run time (empty for most models;
        before the first run, those that will be tried first)."""
        return self._binder.names() if self._binder else []

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Runs the model; ``inputs`` is a list in graph-input order, a dict, or one array."""
        args = self._arrange(inputs)
        if self._binder is not None:
            dtypes = self._binder.dtypes
            values = {n: np.asarray(a, dtype=dtypes[n], order="C")
                      for n, a in zip(self.input_names, args) if n in dtypes}  # fmt: skip
            self.vm, self._param_info = self._binder.load(values)
            bound = set(self._binder.names())
            args = [a for n, a in zip(self.input_names, args) if n not in bound]
        out = self.vm["main"](*args)
        from .cli_support.session import flatten_outputs, to_numpy

        return tuple(to_numpy(v) for v in flatten_outputs(out))

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

        A model whose import needs some small integer input known at import
        time is compiled by ``run`` instead, with those inputs bound as
        constants (see the module docstring); any other failure raises here.
        """
        from .cli_support.placement import parse_devices
        from .frontend.onnx_importer import load_model

        proto, _ = load_model(model)
        devices = _device_list(device, kwargs.get("devices"))
        missing = {str(k): set(v) for k, v in (kwargs.get("missing_kernels") or {}).items()}
        setup = parse_devices(",".join(devices), missing)
        shape_dict = kwargs.get("shape_dict")
        compiler = _Compiler(setup, shape_dict, kwargs.get("opset"), kwargs.get("executor", "vm"))
        inits = {i.name for i in proto.graph.initializer}
        input_names = [vi.name for vi in proto.graph.input if vi.name not in inits]
        output_names = [vo.name for vo in proto.graph.output]
        try:
            mod = compiler.import_(proto)
        except FrontendError as err:
            bound = _bindable_inputs(proto, shape_dict) if _needs_constants(err) else []
            if not bound:
                raise
            binder = _Binder(proto, compiler, bound)
            return HetvmBackendRep(None, input_names, output_names, [], binder)
        bound = _bindable_inputs(proto, shape_dict)
        if bound and _attribute_like(proto, {n for n, _ in bound}) and _reads_shapes_from_values(mod):
            # a shape taken from an attribute-like input's values at run time (a
            # Reshape target with 0 or -1 in it, say) is what binding exists for
            return HetvmBackendRep(None, input_names, output_names, [], _Binder(proto, compiler, bound))
        vm, params = compiler.load(mod)
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
