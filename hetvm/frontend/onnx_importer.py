"""ONNX -> hetvm IR: ``from_onnx(model, shape_dict=None, opset=None, keep_params_in_input=False)``.

The importer

1. loads and checks the model (``onnx.checker``); a file that is not ONNX, a
   truncated file or an invalid graph is a one-line :class:`FrontendError`;
   external data is read from the model file's own directory only
   (:mod:`.onnx_external`);
2. lists every node whose (op type, opset) has no converter and fails with all
   of them at once, before converting anything;
3. walks the nodes in order, folding those whose inputs are known at import
   time (:mod:`.fold`) and converting the rest into one dataflow block of a
   ``main`` function.

Result conventions (documented in docs/onnx.md):

* ``main``'s parameters are the graph inputs that are not initializers, in
  graph order; symbolic dims (``dim_param``) are PrimVars shared by name.
* Initializers become ``Constant``s. With ``keep_params_in_input=True``, every
  initializer-derived tensor that the program uses at run time becomes an extra
  parameter after the inputs instead; their values are in
  ``mod.attrs["params"]`` (name -> ndarray, in parameter order) and
  ``mod["main"].attrs["num_input"]`` counts the real inputs.
* The result is the output tensor, or a Tuple when the graph has several.
* ``mod.attrs["onnx_node_of"]`` maps each emitted variable's name to
  ``(node name, op type)``; nodes without a name are called ``<OpType>_<index>``.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import FrontendError, HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir.block_builder import BlockBuilder
from ..ir.module import IRModule
from .fold import SymArray, fold_node, is_known
from .onnx_context import ConvertContext, NeedsControlFlow, NodeView
from .onnx_external import load_external_data
from .onnx_ops import FOLD_ONLY, is_supported, lookup
from .onnx_types import ident, input_struct_info, parse_attrs

__all__ = ["from_onnx", "load_model", "unsupported_ops"]

_DEFAULT_DOMAINS = ("", "ai.onnx")


def _import_onnx() -> Any:
    try:
        import onnx
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise FrontendError(
            "importing ONNX models needs the 'onnx' package: pip install 'hetvm[onnx]'"
        ) from err
    return onnx


def load_model(model: Any) -> tuple[Any, str]:
    """The checked ``ModelProto`` and a label for messages (the file name or '<model>')."""
    onnx = _import_onnx()
    from google.protobuf.message import DecodeError

    label = "<model>"
    if isinstance(model, (str, os.PathLike)):
        label = os.fspath(model)
        if not os.path.isfile(label):
            raise FrontendError(f"{label}: no such file")
        try:
            with open(label, "rb") as f:
                data = f.read()
            model = onnx.load_model_from_string(data)
        except (DecodeError, ValueError, RuntimeError) as err:
            raise FrontendError(f"{label}: not an ONNX model or truncated ({_first_line(err)})") from None
    elif isinstance(model, (bytes, bytearray)):
        try:
            model = onnx.load_model_from_string(bytes(model))
        except (DecodeError, ValueError, RuntimeError) as err:
            raise FrontendError(f"{label}: not an ONNX model or truncated ({_first_line(err)})") from None
    elif not isinstance(model, onnx.ModelProto):
        raise FrontendError(f"from_onnx expects an onnx.ModelProto or a path, got {type(model).__name__}")
    if not model.HasField("graph") or not model.graph.node:
        raise FrontendError(f"{label}: not an ONNX model (it has no graph nodes)")
    load_external_data(model, label if label != "<model>" else None, label)
    try:
        onnx.checker.check_model(model)
    except (onnx.checker.ValidationError, ValueError) as err:
        raise FrontendError(f"{label}: invalid ONNX model: {_first_line(err)}") from None
    return model, label


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _default_opset(model: Any, opset: int | None) -> int:
    if opset is not None:
        return int(opset)
    for imp in model.opset_import:
        if imp.domain in _DEFAULT_DOMAINS:
            return int(imp.version)
    return 1


def _node_name(node: Any, index: int) -> str:
    return node.name or f"{node.op_type}_{index}"


def unsupported_ops(model: Any, opset: int | None = None) -> list[tuple[str, int]]:
    """Every (op type, opset) in ``model`` without a converter, sorted, each once;
    nodes inside subgraphs (an ``If``'s branches) are looked at too."""
    return sorted(_unsupported_where(model, opset))


def _unsupported_where(model: Any, opset: int | None) -> dict[tuple[str, int], set[str]]:
    """(op type, opset) -> the nodes whose subgraphs hold it ('' for the main graph)."""
    version = _default_opset(model, opset)
    domains = {imp.domain: int(imp.version) for imp in model.opset_import}
    missing: dict[tuple[str, int], set[str]] = {}

    def walk(graph: Any, owner: str) -> None:
        for index, node in enumerate(graph.node):
            key = None
            if node.domain not in _DEFAULT_DOMAINS:
                key = (f"{node.domain}.{node.op_type}", domains.get(node.domain, 1))
            elif not is_supported(node.op_type, version):
                key = (node.op_type, version)
            if key is not None:
                missing.setdefault(key, set()).add(owner)
            for sub in subgraphs(node):
                walk(sub, f"{node.op_type} node '{_node_name(node, index)}'")

    walk(model.graph, "")
    return missing


def subgraphs(node: Any) -> list[Any]:
    """The GraphProtos in ``node``'s attributes (an If's branches, a Loop's body)."""
    out = []
    for attr in node.attribute:
        if attr.HasField("g"):
            out.append(attr.g)
        out.extend(attr.graphs)
    return out


def _listed(op: str, version: int, owners: set[str]) -> str:
    inside = sorted(o for o in owners if o)
    where = f" inside a subgraph of {', '.join(inside)}" if inside else ""
    if inside and "" in owners:
        where = f" (also{where})"
    return f"{op} (opset {version}){where}"


def from_onnx(
    model: Any,
    shape_dict: Mapping[str, Sequence[Any]] | None = None,
    opset: int | None = None,
    keep_params_in_input: bool = False,
    unroll_recurrent: bool = False,
    dim_bounds: Mapping[str, int] | None = None,
) -> IRModule:
    """Imports an ONNX model as an IRModule with one function, ``main``.

    ``model``: an ``onnx.ModelProto``, serialized bytes, or a path.
    ``shape_dict``: input name -> shape (ints, or names for symbolic dims),
    overriding the model's input shapes. ``opset``: overrides the model's
    default-domain opset. ``keep_params_in_input``: initializers become
    parameters instead of constants (values in ``mod.attrs["params"]``).
    ``unroll_recurrent``: RNN/GRU/LSTM become their steps in plain ops (a static
    sequence length) instead of one ``nn.recurrent_scan`` call per direction.
    ``dim_bounds``: symbolic dim name -> largest value (``{"batch": 32}``):
    the memory plan is sized for it, and the VM refuses larger; without it a
    dim's tensors are planned with expressions in it.
    """
    mod = _import(model, shape_dict, opset, keep_params_in_input, unroll_recurrent)
    if dim_bounds:
        from ..transform.declare_dim_bounds import declare_dim_bounds

        try:
            mod = declare_dim_bounds(mod, dim_bounds)
        except HetvmError as err:
            raise FrontendError(f"from_onnx: {err}") from None
    return mod


def _import(
    model: Any, shape_dict: Any, opset: int | None, keep_params_in_input: bool, unroll_recurrent: bool
) -> IRModule:
    proto, label = load_model(model)
    version = _default_opset(proto, opset)
    missing = _unsupported_where(proto, opset)
    if missing:
        listed = ", ".join(_listed(op, v, missing[op, v]) for op, v in sorted(missing))
        raise FrontendError(f"{label}: {len(missing)} unsupported ONNX operator(s): {listed}")
    try:
        return _GraphImporter(proto, label, version, shape_dict or {}, keep_params_in_input,
                              unroll_recurrent=unroll_recurrent).run()  # fmt: skip
    except NeedsControlFlow:  # a dataflow block cannot hold an If: import without one
        return _GraphImporter(proto, label, version, shape_dict or {}, keep_params_in_input,
                              dataflow=False, unroll_recurrent=unroll_recurrent).run()  # fmt: skip


class _GraphImporter:
    """One import: the value table and the walk over the nodes."""

    def __init__(
        self,
        model: Any,
        label: str,
        opset: int,
        shape_dict: Mapping[str, Sequence[Any]],
        keep_params: bool,
        dataflow: bool = True,
        unroll_recurrent: bool = False,
    ) -> None:
        self.model = model
        self.dataflow = dataflow
        self.graph = model.graph
        self.label = label
        self.opset = opset
        self.shape_dict = dict(shape_dict)
        self.bb = BlockBuilder()
        self.ctx = ConvertContext(self.bb, keep_params=keep_params, source=label, unroll_recurrent=unroll_recurrent)
        self.ctx.subgraph = self._subgraph
        self.ctx.lookup = lambda name: self.values.get(name)
        self.values: dict[str, Any] = {}
        self.sym_vars: dict[str, P.PrimVar] = {}

    # ------------------------------------------------------------------
    def run(self) -> IRModule:
        from onnx import numpy_helper

        for init in self.graph.initializer:
            self.values[init.name] = numpy_helper.to_array(init)
            self.ctx.param_eligible.add(init.name)
        inputs = self._inputs()
        # graph outputs keep their ONNX names; the values computing them get variants
        self.output_names = {vi.name: self.ctx.names.unique(ident(vi.name)) for vi in self.graph.output}
        with self.bb.function("main"):
            with self.bb.dataflow() if self.dataflow else contextlib.nullcontext():
                for index, node in enumerate(self.graph.node):
                    self._node(node, index)
                output = self._outputs()
            self.bb.emit_func_output(output, params=inputs + self.ctx.params)
        mod = self.bb.get()
        func = mod["main"]
        if self.ctx.keep_params:
            mod["main"] = E.replace(func, attrs=func.attrs.with_(num_input=len(inputs)))
            mod.attrs["params"] = dict(self.ctx.param_values)
        mod.attrs["onnx_node_of"] = dict(self.ctx.node_of)
        return mod

    def _inputs(self) -> list[E.Var]:
        names = [i.name for i in self.graph.input if i.name not in self.values]
        unknown = sorted(set(self.shape_dict) - set(names))
        if unknown:
            raise FrontendError(
                f"{self.label}: shape_dict names unknown input(s) {unknown}; "
                f"the model's inputs are {names}"
            )
        params = []
        for vi in self.graph.input:
            if vi.name in self.values:
                continue  # an initializer listed as an input (IR version < 4)
            sinfo = input_struct_info(vi, self.shape_dict.get(vi.name), self.sym_vars)
            var = E.Var(self.ctx.names.unique(ident(vi.name)), struct_info=sinfo)
            self.values[vi.name] = var
            params.append(var)
        return params

    def _subgraph(
        self, graph: Any, owner: str, bindings: dict[str, Any] | None = None, isolated: bool = False
    ) -> list[Any]:
        """Walks ``graph`` (a branch of node ``owner``) into the current scope and
        returns its output values. It reads the enclosing graph's values; what it
        defines is visible only inside it. ``bindings``: values for names (a loop
        body's inputs); ``isolated``: of the enclosing values only the constants
        are visible (a loop body is another function: it reads the rest through
        ``bindings``)."""
        from onnx import numpy_helper

        outer, node = self.values, self.ctx.node
        if isolated:
            self.values = {k: v for k, v in outer.items() if isinstance(v, np.ndarray)}
        else:
            self.values = dict(outer)
        self.values.update(bindings or {})
        try:
            for init in graph.initializer:
                self.values[init.name] = numpy_helper.to_array(init)
            for index, inner in enumerate(graph.node):
                self._node(inner, index, prefix=f"{owner}/{graph.name or 'subgraph'}/")
            outputs = []
            for vi in graph.output:
                if vi.name not in self.values:
                    raise FrontendError(f"{self.label}: subgraph output '{vi.name}' of node '{owner}' is never produced")
                outputs.append(self.values[vi.name])
            return outputs
        finally:
            self.values, self.ctx.node = outer, node

    def _node(self, node: Any, index: int, prefix: str = "") -> None:
        name = node.name or prefix + _node_name(node, index)
        if node.domain not in _DEFAULT_DOMAINS:  # pragma: no cover - rejected before
            raise FrontendError(f"{self.label}: node '{name}' is in unsupported domain '{node.domain}'")
        inputs = []
        for i, inp in enumerate(node.input):
            if not inp:
                inputs.append(None)
                continue
            if inp not in self.values:
                raise FrontendError(
                    f"{self.label}: {node.op_type} node '{name}' reads '{inp}' (input {i}), "
                    f"which no earlier node produces"
                )
            inputs.append(self.values[inp])
        attrs = parse_attrs(node)
        view = NodeView(name, node.op_type, self.opset, inputs, list(node.input),
                        list(node.output), attrs, node)  # fmt: skip
        self.ctx.node = view
        try:
            foldable = not subgraphs(node) and all(v is None or is_known(v) for v in inputs)
            outputs = self._fold(view) if foldable else None
            if outputs is None:
                outputs = self._convert(view)
        except FrontendError as err:
            if str(err).startswith(f"{self.label}:"):
                raise
            raise FrontendError(f"{self.label}: {err}") from None  # the file, then the node
        except HetvmError as err:
            raise FrontendError(f"{self.label}: {self.ctx.error(str(err))}") from None
        finally:
            self.ctx.node = None
        self._bind(view, outputs)

    def _fold(self, view: NodeView) -> list[Any] | None:
        try:
            outs = fold_node(view.op_type, view.inputs, view.attrs, view.opset, view.proto,
                             num_outputs=len(view.output_names))  # fmt: skip
        except HetvmError:
            raise
        except Exception as exc:  # NumPy or onnx.reference refusing the node's values
            raise self.ctx.error(
                f"cannot evaluate it on its constant inputs ({type(exc).__name__}: {exc})"
            ) from None
        if outs is not None and any(n in self.ctx.param_eligible for n in view.input_names if n):
            self.ctx.param_eligible.update(o for o in view.output_names if o)
        return outs

    def _convert(self, view: NodeView) -> list[Any]:
        spec = lookup(view.op_type, view.opset)
        if spec is None:
            if view.op_type in FOLD_ONLY:
                raise self.ctx.error("supported only with inputs known at import time")
            raise self.ctx.error("no converter")  # pragma: no cover - rejected before
        result = spec.convert(self.ctx, view)
        return list(result) if isinstance(result, (list, tuple)) else [result]

    def _bind(self, view: NodeView, outputs: list[Any]) -> None:
        for i, out_name in enumerate(view.output_names):
            if not out_name:
                continue
            if i >= len(outputs) or outputs[i] is None:
                raise FrontendError(
                    f"{self.label}: {view.op_type} node '{view.name}': output {i} "
                    f"('{out_name}') is not supported"
                )
            self.values[out_name] = outputs[i]

    def _outputs(self) -> E.Expr:
        exprs: list[E.Expr] = []
        for vi in self.graph.output:
            value = self.values.get(vi.name)
            if value is None:
                raise FrontendError(f"{self.label}: graph output '{vi.name}' is never produced")
            if isinstance(value, (np.ndarray, SymArray)):
                value = self.ctx.tensor(value)
            exprs.append(value)
        node_of = self.ctx.node_of
        if not self.dataflow:
            return self._plain_outputs(exprs)
        if len(exprs) == 1:
            out = self.bb.emit_output(exprs[0], self.output_names[self.graph.output[0].name])
            if isinstance(exprs[0], E.Var) and exprs[0].name_hint in node_of:
                node_of[out.name_hint] = node_of[exprs[0].name_hint]
            return out
        outs = []
        for vi, expr in zip(self.graph.output, exprs):
            if isinstance(expr, E.Var) and not isinstance(expr, E.DataflowVar):
                outs.append(expr)  # a graph input returned as it is
                continue
            var = self.bb.emit_output(expr, self.output_names[vi.name])
            if isinstance(expr, E.Var) and expr.name_hint in node_of:
                node_of[var.name_hint] = node_of[expr.name_hint]
            outs.append(var)
        return E.Tuple(tuple(outs))

    def _plain_outputs(self, exprs: list[E.Expr]) -> E.Expr:
        """The result without a dataflow block (the graph holds an If)."""
        graph_inputs = {vi.name for vi in self.graph.input}
        outs = []
        for vi, expr in zip(self.graph.output, exprs):
            if vi.name in graph_inputs:
                outs.append(expr)  # a graph input returned as it is
                continue
            var = self.bb.emit(expr, self.output_names[vi.name])
            if isinstance(expr, E.Var) and expr.name_hint in self.ctx.node_of:
                self.ctx.node_of[var.name_hint] = self.ctx.node_of[expr.name_hint]
            outs.append(var)
        return outs[0] if len(outs) == 1 else E.Tuple(tuple(outs))
