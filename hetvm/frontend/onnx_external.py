"""ONNX external data, read from the model's own directory and nowhere else.

Why: a model saved with ``save_as_external_data`` (every model over 2 GB) keeps
its tensors in files named by a relative ``location``. ONNX's readers resolve
that against a base directory; resolved against the current directory instead,
the model fails to import from anywhere else, and a ``w.bin`` that happens to
be in the current directory is read in its place. A location is also input:
an absolute path, a ``..``, or a symlink in the model's directory pointing
elsewhere would make importing a model read a file it was never shipped with.

So :func:`load_external_data` reads every external tensor of a model loaded
from a path, from a regular file whose real path lies inside the real path of
the model's directory, and stores the bytes in the tensor (``raw_data``); any
other location is a :class:`FrontendError` naming the tensor and the location.
A model given as bytes or a ``ModelProto`` has no directory: an external
tensor left in it is refused, naming the tensor.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np

from ..errors import FrontendError

__all__ = ["load_external_data"]


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto of a graph: initializers, sparse initializers, and node
    attributes, in subgraphs too."""
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def _inside(base: str, location: str, label: str, name: str) -> str:
    """The real path of ``location`` (relative to the real directory ``base``),
    refused unless it is a regular file inside ``base``."""
    where = f"{label}: tensor '{name}' keeps its data in external file '{location}'"
    if not location:
        raise FrontendError(f"{label}: tensor '{name}' has external data without a location")
    parts = location.replace("\\", "/").split("/")
    if os.path.isabs(location) or location.startswith(("/", "\\")) or os.path.splitdrive(location)[0]:
        raise FrontendError(f"{where}: an absolute path; external data must lie in the model's directory")
    if ".." in parts:
        raise FrontendError(f"{where}, which points outside the model's directory ('..')")
    path = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([path, base]) != base:
        raise FrontendError(f"{where}, which resolves outside the model's directory (a link to {path})")
    if not os.path.isfile(path):
        raise FrontendError(f"{where}: no such file in {base}")
    return path


def _int_field(info: dict, key: str, where: str) -> int | None:
    if key not in info:
        return None
    try:
        value = int(info[key])
    except ValueError:
        raise FrontendError(f"{where}: '{key}' is not an integer ({info[key]!r})") from None
    if value < 0:
        raise FrontendError(f"{where}: '{key}' is negative ({value})")
    return value


def _expected_bytes(tensor: Any) -> int | None:
    from onnx import helper

    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.data_type))
    except (KeyError, TypeError, ValueError):
        return None
    if dtype.hasobject:  # strings: no fixed size
        return None
    return int(np.prod(tensor.dims, dtype=np.int64)) * dtype.itemsize


def load_external_data(model: Any, model_path: str | None, label: str) -> None:
    """Reads every external tensor of ``model`` from ``model_path``'s directory into
    the tensor itself (see the module docstring); ``model_path`` None: refuses any."""
    from onnx import TensorProto

    base = os.path.realpath(os.path.dirname(os.path.abspath(model_path))) if model_path else None
    for tensor in _tensors(model.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        info = {entry.key: entry.value for entry in tensor.external_data}
        location = info.get("location", "")
        if base is None:
            raise FrontendError(
                f"{label}: tensor '{tensor.name}' keeps its data in external file '{location}', "
                "and a model given as bytes or a ModelProto has no directory to read it from; "
                "pass the model's path"
            )
        path = _inside(base, location, label, tensor.name)
        where = f"{label}: external data of tensor '{tensor.name}' in '{location}'"
        offset = _int_field(info, "offset", where) or 0
        length = _int_field(info, "length", where)
        size = os.path.getsize(path)
        want = length if length is not None else size - offset
        if offset + max(want, 0) > size or want < 0:
            raise FrontendError(
                f"{where}: {want} bytes at offset {offset} do not fit in the file's {size} bytes "
                "(truncated?)"
            )
        expected = _expected_bytes(tensor)
        if expected is not None and want != expected:
            raise FrontendError(
                f"{where}: {want} bytes, but a {TensorProto.DataType.Name(tensor.data_type).lower()} "
                f"tensor of shape {tuple(tensor.dims)} needs {expected}"
            )
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(want)
        tensor.raw_data = data
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]
