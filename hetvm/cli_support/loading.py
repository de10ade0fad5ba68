"""Turning a MODEL argument (an ``.onnx`` file or a TVMScript ``.py``) into IR.

The command line accepts both kinds of file; this module decides which one a
path is, reads it with the right frontend and keeps what later steps need: the
IRModule, a label for messages, and for ONNX the graph inputs (so ``--input``
names can be checked against the model rather than the IR's renamed params).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import FrontendError, HetvmError
from ..ir.module import IRModule

__all__ = ["LoadedModel", "load", "load_onnx_proto"]


@dataclass
class LoadedModel:
    """A program ready for placement: its module and where it came from."""

    mod: IRModule
    label: str
    kind: str  # "onnx" | "script" | "builtin"
    proto: Any = None
    #: ONNX input name -> IR parameter name (the importer makes names identifiers)
    input_names: dict[str, str] = field(default_factory=dict)
    #: one line per symbolic dim a ``--shape`` fixed: "dim 'batch' = 1 (--shape ids=1x8)"
    dim_notes: list[str] = field(default_factory=list)


def _looks_like_script(path: str) -> bool:
    return path.endswith(".py")


def load_onnx_proto(path: str) -> tuple[Any, str]:
    """The checked ``ModelProto`` of ``path``; one-line FrontendError otherwise."""
    from ..frontend.onnx_importer import load_model

    return load_model(path)


def load(
    path: str,
    shape_dict: Mapping[str, Sequence[Any]] | None = None,
    status: Any = None,
) -> LoadedModel:
    """Reads ``path`` as ONNX (``.onnx`` or anything not ``.py``) or TVMScript."""
    if not os.path.exists(path):
        raise FrontendError(f"{path}: no such file")
    if os.path.isdir(path):
        raise FrontendError(f"{path}: is a directory, expected an .onnx or .py file")
    if _looks_like_script(path):
        if shape_dict:
            raise FrontendError(f"{path}: --shape applies to ONNX models only")
        return _load_script(path)
    return _load_onnx(path, shape_dict, status)


def _load_script(path: str) -> LoadedModel:
    try:
        from ..script import from_source  # type: ignore[attr-defined]
    except ImportError:
        raise FrontendError(
            f"{path}: this build of hetvm cannot parse TVMScript files (hetvm.script.from_source missing)"
        ) from None
    with open(path, encoding="utf-8") as f:
        text = f.read()
    mod = from_source(text, filename=path)  # ParseError names path:line:col
    if not isinstance(mod, IRModule):
        raise FrontendError(f"{path}: the script defines no IRModule (got {type(mod).__name__})")
    return LoadedModel(mod, path, "script")


def _load_onnx(path: str, shape_dict: Mapping[str, Sequence[Any]] | None, status: Any) -> LoadedModel:
    from ..frontend import from_onnx

    proto, label = load_onnx_proto(path)
    inits = {i.name for i in proto.graph.initializer}
    names = [vi.name for vi in proto.graph.input if vi.name not in inits]
    if shape_dict:
        unknown = sorted(set(shape_dict) - set(names))
        if unknown:
            raise FrontendError(
                f"{label}: --shape names unknown input(s) {unknown}; the model's inputs are {names}"
            )
    notes: list[str] = []
    if shape_dict:
        shape_dict, notes = _share_fixed_dims(proto, names, shape_dict)
    try:
        mod = from_onnx(proto, shape_dict=shape_dict)
    except HetvmError as err:
        text = str(err)
        if not text.startswith(label) and not text.startswith("<model>"):
            text = f"{label}: {text}"
        raise FrontendError(text.replace("<model>", label, 1)) from None
    # main's parameters are the non-initializer graph inputs, in graph order
    params = [p.name_hint for p in mod["main"].params]
    mapping = dict(zip(names, params))
    return LoadedModel(mod, label, "onnx", proto, mapping, notes)


def _share_fixed_dims(
    proto: Any, names: Sequence[str], shape_dict: Mapping[str, Sequence[Any]]
) -> tuple[dict[str, list[Any]], list[str]]:
    """``--shape input_ids=1x8`` fixes the model's dims ``batch`` and ``sequence``;
    the other inputs that share them (a mask, token types) get the same values, so
    one ``--shape`` is enough. Returns the completed shape dict and one line per dim."""
    inputs = {vi.name: vi for vi in proto.graph.input if vi.name in names}

    def model_dims(name: str) -> list[Any] | None:
        ttype = inputs[name].type.tensor_type
        if not ttype.HasField("shape"):
            return None
        return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in ttype.shape.dim]

    fixed: dict[str, tuple[int, str]] = {}
    for name, dims in shape_dict.items():
        have = model_dims(name)
        if have is None:
            continue
        if len(have) != len(dims):
            raise FrontendError(
                f"--shape {name}: {len(dims)} dim(s) given, the model's input has rank {len(have)}"
            )
        spelled = "x".join(str(d) for d in dims)
        for model_dim, given in zip(have, dims):
            if isinstance(model_dim, str) and model_dim != "?" and isinstance(given, int):
                if model_dim in fixed and fixed[model_dim][0] != given:
                    raise FrontendError(
                        f"--shape {name}={spelled}: dim '{model_dim}' is {given} here but "
                        f"{fixed[model_dim][0]} in {fixed[model_dim][1]}"
                    )
                fixed.setdefault(model_dim, (given, f"--shape {name}={spelled}"))
    out = {k: list(v) for k, v in shape_dict.items()}
    for name in names:
        have = model_dims(name)
        if name in out or have is None or not any(d in fixed for d in have if isinstance(d, str)):
            continue
        if any(d is None or d == "?" for d in have):
            continue  # an unnamed dim cannot be spelled in a shape override
        out[name] = [fixed[d][0] if isinstance(d, str) and d in fixed else d for d in have]
    notes = [f"dim '{d}' = {v} ({src})" for d, (v, src) in fixed.items()]
    return out, notes
