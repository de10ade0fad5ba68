"""Program inputs for ``hetvm run``: read from ``.npy`` files or made up.

Inputs are checked here, before anything runs, so a wrong name, shape or dtype
is reported as one line naming the input, what the model expects and what the
file holds (the VM would also refuse, but later and in IR terms).
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S

__all__ = ["InputError", "parse_assignments", "read_inputs", "make_inputs", "describe_param"]


class InputError(HetvmError):
    """An ``--input`` / ``--shape`` argument does not fit the model."""


def parse_assignments(items: Sequence[str] | None, what: str) -> dict[str, str]:
    """``["a=x.npy", "b=y.npy"]`` -> ``{"a": "x.npy", ...}``; one error per bad item."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise InputError(f"{what} '{item}': expected NAME=VALUE")
        if name.strip() in out:
            raise InputError(f"{what} '{item}': '{name.strip()}' is given twice")
        out[name.strip()] = value.strip()
    return out


def parse_shapes(items: Sequence[str] | None) -> dict[str, list[Any]]:
    """``--shape x=1,3,224,224`` (a name instead of a number keeps a dim symbolic)."""
    out: dict[str, list[Any]] = {}
    for name, text in parse_assignments(items, "--shape").items():
        dims: list[Any] = []
        for d in text.split(","):
            d = d.strip()
            if not d:
                raise InputError(f"--shape {name}={text}: empty dimension")
            dims.append(int(d) if d.lstrip("-").isdigit() else d)
        out[name] = dims
    return out


def describe_param(param: E.Var) -> str:
    """``(1, 3, n) float32`` for messages."""
    sinfo = param.struct_info
    if not isinstance(sinfo, S.TensorStructInfo):
        return type(sinfo).__name__
    if sinfo.shape is None:
        return f"(ndim {sinfo.ndim}) {sinfo.dtype}"
    dims = ", ".join(P.to_str(d) for d in sinfo.shape)
    return f"({dims}{',' if len(sinfo.shape) == 1 else ''}) {sinfo.dtype}"


def _resolve_name(name: str, params: list[E.Var], aliases: Mapping[str, str]) -> E.Var:
    ir_name = aliases.get(name, name)
    for p in params:
        if p.name_hint == ir_name:
            return p
    known = list(aliases) or [p.name_hint for p in params]
    raise InputError(f"--input '{name}': the model has no such input (inputs: {', '.join(known)})")


def _check(name: str, source: str, arr: np.ndarray, param: E.Var, env: dict[P.PrimVar, int]) -> None:
    sinfo = param.struct_info
    if not isinstance(sinfo, S.TensorStructInfo):
        return
    want = describe_param(param)
    if sinfo.dtype is not None and str(arr.dtype) != sinfo.dtype:
        raise InputError(
            f"input '{name}' ({source}): dtype {arr.dtype}, the model expects {want}"
        )
    if sinfo.ndim >= 0 and arr.ndim != sinfo.ndim:
        raise InputError(
            f"input '{name}' ({source}): shape {tuple(arr.shape)}, the model expects {want}"
        )
    for axis, (dim, got) in enumerate(zip(sinfo.shape or (), arr.shape)):
        if isinstance(dim, P.PrimVar):
            if env.setdefault(dim, int(got)) != got:
                raise InputError(
                    f"input '{name}' ({source}): dimension {axis} is {got}, but "
                    f"'{dim.name}' is already {env[dim]} from another input"
                )
            continue
        value = P.const_value(dim)
        if value is not None and value != got:
            raise InputError(
                f"input '{name}' ({source}): shape {tuple(arr.shape)}, the model expects {want}"
            )


def read_inputs(
    files: Mapping[str, str], params: list[E.Var], aliases: Mapping[str, str] | None = None
) -> tuple[dict[str, np.ndarray], dict[P.PrimVar, int]]:
    """Loads ``--input`` files (IR param name -> array) and the symbolic dims they fix."""
    aliases = dict(aliases or {})
    out: dict[str, np.ndarray] = {}
    env: dict[P.PrimVar, int] = {}
    for name, path in files.items():
        param = _resolve_name(name, params, aliases)
        if not os.path.isfile(path):
            raise InputError(f"--input {name}={path}: no such file")
        try:
            arr = np.load(path, allow_pickle=False)
        except (ValueError, OSError) as err:
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise InputError(f"--input {name}={path}: not a .npy array ({first})") from None
        if not isinstance(arr, np.ndarray):
            raise InputError(f"--input {name}={path}: holds several arrays; save one with np.save")
        _check(name, path, arr, param, env)
        out[param.name_hint] = arr
    return out, env


def _random(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    kind = np.dtype(dtype).kind
    if kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if kind in "iu":
        return rng.integers(0, 4, size=shape).astype(dtype)
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    raise InputError(f"cannot make a random input of dtype {dtype}")


def make_inputs(
    params: list[E.Var],
    given: Mapping[str, np.ndarray] | None = None,
    env: Mapping[P.PrimVar, int] | None = None,
    seed: int = 0,
    default_dim: int = 1,
) -> tuple[list[np.ndarray], list[str]]:
    """Arguments for ``main`` in order: given arrays, random ones for the rest.

    Symbolic dimensions take their value from a given input, else ``default_dim``.
    Returns the arrays and notes saying which were made up (for the report).
    """
    rng = np.random.default_rng(seed)
    given = dict(given or {})
    env = dict(env or {})
    args: list[np.ndarray] = []
    notes: list[str] = []
    for p in params:
        if p.name_hint in given:
            args.append(given[p.name_hint])
            continue
        sinfo = p.struct_info
        if not isinstance(sinfo, S.TensorStructInfo) or sinfo.shape is None or sinfo.dtype is None:
            raise InputError(
                f"parameter '{p.name_hint}' ({describe_param(p)}) needs an --input: "
                "its shape or dtype is unknown"
            )
        for var in {v for d in sinfo.shape for v in P.free_vars(d)}:
            env.setdefault(var, default_dim)
        shape = tuple(P.evaluate(d, env) for d in sinfo.shape)
        args.append(_random(shape, sinfo.dtype, rng))
        notes.append(f"{p.name_hint}: random {shape} {sinfo.dtype}")
    return args, notes
