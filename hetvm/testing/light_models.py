"""The nine light ONNX models the ``onnx`` package ships, for tests and benchmarks.

``onnx/backend/test/data/light`` holds small CNNs (SqueezeNet, ShuffleNet,
ResNet-50, ...) whose weights are all 0.02, with the output ONNX's backend
runner expects for its input ``arange(n) / n``. With every weight equal, all
channels of a layer are equal too and a classifier's softmax is uniform for any
input, so a test that must tell a right output from a wrong one gives the model
seeded random weights (:func:`with_random_weights`). One place finds them, so every
suite and benchmark reads the same files the same way. Needs the ``onnx``
package (imported on use).
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

__all__ = [
    "light_dir", "light_names", "light_path", "light_expected", "light_input", "load_light", "with_random_weights",
]


def light_dir() -> str:
    """The folder of the light models inside the installed onnx package."""
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def light_names() -> list[str]:
    """The models' short names (``squeezenet``, ``shufflenet``, ...), sorted."""
    return sorted(os.path.basename(p)[len("light_") : -len(".onnx")] for p in glob.glob(os.path.join(light_dir(), "light_*.onnx")))


def light_path(name: str) -> str:
    return os.path.join(light_dir(), f"light_{name}.onnx")


def light_expected(name: str) -> np.ndarray:
    """The output the onnx package ships for :func:`light_input`."""
    import onnx
    from onnx import numpy_helper

    tensor = onnx.TensorProto()
    with open(os.path.join(light_dir(), f"light_{name}_output_0.pb"), "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def light_input(model: Any) -> np.ndarray:
    """What ONNX's backend runner feeds a light model (an onnx ModelProto): arange / n."""
    inits = {i.name for i in model.graph.initializer}
    (vi,) = [i for i in model.graph.input if i.name not in inits]
    shape = tuple(d.dim_value or 1 for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def load_light(name: str) -> Any:
    """The model as an onnx ModelProto."""
    import onnx

    return onnx.load(light_path(name))


def _random_like(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if len(shape) >= 2:  # a weight: He scaling keeps the activations' scale
        new = rng.standard_normal(shape) * np.sqrt(2.0 / int(np.prod(shape[1:])))
    else:  # a bias or a norm's vector: small and positive (a valid variance too)
        new = rng.uniform(0.05, 0.15, shape)
    return new.astype(dtype)


def with_random_weights(model: Any, seed: int = 0) -> Any:
    """A copy of the model whose weights are seeded random, ``N(0, 2 / fan_in)`` for
    weights (fan_in: the product of the dims after the first) and ``U(0.05, 0.15)``
    for vectors. The light models make their weights with ``ConstantOfShape`` nodes
    of 0.02; those become initializers (listed as graph inputs, as IR version 3
    wants), and float initializers are redrawn."""
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    rng = np.random.default_rng(seed)
    inits = {i.name: i for i in graph.initializer}
    for init in graph.initializer:
        arr = numpy_helper.to_array(init)
        if arr.dtype.kind == "f" and arr.size > 1:
            init.CopyFrom(numpy_helper.from_array(_random_like(rng, arr.shape, arr.dtype), init.name))
    listed = {i.name for i in graph.input}
    used_shapes = set()
    keep = []
    for node in graph.node:
        shape_init = inits.get(node.input[0]) if node.op_type == "ConstantOfShape" and node.input else None
        if shape_init is None:
            keep.append(node)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(shape_init))
        value = next((numpy_helper.to_array(a.t) for a in node.attribute if a.name == "value"), np.zeros(1, "float32"))
        new = numpy_helper.from_array(_random_like(rng, shape, value.dtype), node.output[0])
        graph.initializer.append(new)
        used_shapes.add(shape_init.name)
        if new.name not in listed:
            graph.input.append(onnx.helper.make_tensor_value_info(new.name, new.data_type, shape))
    del graph.node[:]
    graph.node.extend(keep)
    still_read = {i for n in graph.node for i in n.input}
    kept_inits = [i for i in graph.initializer if i.name not in used_shapes or i.name in still_read]
    del graph.initializer[:]
    graph.initializer.extend(kept_inits)
    kept_inputs = [i for i in graph.input if i.name not in used_shapes or i.name in still_read]
    del graph.input[:]
    graph.input.extend(kept_inputs)
    return out
