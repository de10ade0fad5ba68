"""Program inputs for ``hetvm run``: read from ``.npy`` files or made up.

Inputs are checked here, before anything runs, so a wrong name, shape or dtype
is reported as one line naming the input, what the model expects and what the
file holds (the VM would also refuse, but later and in IR terms).
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import HetvmError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from .input_roles import InputRole
from .npy import read_npy

__all__ = [
    "InputError", "parse_assignments", "parse_shapes", "parse_dims", "read_inputs", "choose_dims",
    "make_inputs", "describe_param", "symbolic_dims",
]


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
    """``--shape x=1x3x224x224`` or ``x=1,3,224,224`` (a name instead of a number
    keeps a dim symbolic: ``ids=batchx128``)."""
    out: dict[str, list[Any]] = {}
    for name, text in parse_assignments(items, "--shape").items():
        dims: list[Any] = []
        for d in re.split(r"[,x]" if "," not in text else r",", text):
            d = d.strip()
            if not d:
                raise InputError(f"--shape {name}={text}: empty dimension")
            if d.lstrip("-").isdigit():
                if int(d) < 0:
                    raise InputError(f"--shape {name}={text}: dimension {d} is negative")
                dims.append(int(d))
            else:
                dims.append(d)
        out[name] = dims
    return out


def parse_dims(items: Sequence[str] | None, flag: str = "--dim") -> dict[str, int]:
    """``--dim batch=4 --dim sequence=128``: values for the model's symbolic dims."""
    out: dict[str, int] = {}
    for name, text in parse_assignments(items, flag).items():
        if not text.isdigit():
            raise InputError(f"{flag} {name}={text}: expected a non-negative integer")
        out[name] = int(text)
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


def _check(name: str, source: str, arr: np.ndarray, param: E.Var, env: dict[P.PrimVar, int],
           sources: dict[P.PrimVar, str]) -> None:
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
            sources.setdefault(dim, f"--input {name}={source}")
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
    files: Mapping[str, str],
    params: list[E.Var],
    aliases: Mapping[str, str] | None = None,
    sources: dict[P.PrimVar, str] | None = None,
) -> tuple[dict[str, np.ndarray], dict[P.PrimVar, int]]:
    """Loads ``--input`` files (IR param name -> array) and the symbolic dims they fix:
    an array's own shape sets them, so no ``--shape`` is needed beside an ``--input``.
    ``sources``, when given, is filled with the ``--input`` that set each dim."""
    sources = {} if sources is None else sources
    aliases = dict(aliases or {})
    out: dict[str, np.ndarray] = {}
    env: dict[P.PrimVar, int] = {}
    for name, path in files.items():
        param = _resolve_name(name, params, aliases)
        if not os.path.isfile(path):
            raise InputError(f"--input {name}={path}: no such file")
        arr = read_npy(path, f"--input {name}={path}")  # never unpickles; says what is wrong
        if not isinstance(arr, np.ndarray):
            raise InputError(f"--input {name}={path}: holds several arrays; save one with np.save")
        _check(name, path, arr, param, env, sources)
        out[param.name_hint] = arr
    return out, env


def symbolic_dims(params: Sequence[E.Var]) -> list[P.PrimVar]:
    """The symbolic variables of the parameters' shapes, in order of appearance."""
    out: dict[P.PrimVar, None] = {}
    for p in params:
        sinfo = p.struct_info
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None:
            for d in sinfo.shape:
                for v in P.free_vars(d):
                    out.setdefault(v)
    return list(out)


_BATCH_NAMES = ("batch", "n", "b", "bs", "batch_size", "n_batch")


def _default_dim(var: P.PrimVar, params: Sequence[E.Var]) -> tuple[int, str]:
    """A value for a dim nobody set, and why: 1 on a batch axis (named so, or axis 0
    of an input), else 8 (a sequence or spatial size a model can take)."""
    if var.name.lower() in _BATCH_NAMES or "batch" in var.name.lower():
        return 1, "default for a batch dim"
    for p in params:
        sinfo = p.struct_info
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape and sinfo.shape[0] is var and len(sinfo.shape) > 1:
            return 1, f"default for axis 0 of '{p.name_hint}'"
    return 8, "default"


_TERM = re.compile(r"\s*([+-]?)\s*([A-Za-z_][A-Za-z_0-9]*|[0-9]+)\s*")


def _sum_named_by(var: P.PrimVar, variables: Sequence[P.PrimVar]) -> P.PrimExpr | None:
    """The size a dim's name says it has in terms of the other dims: a ``dim_param``
    spelled as a sum (``past_sequence_length + sequence_length``, as HF Optimum writes
    a cached decoder's mask), or ``total...`` beside exactly one ``past...`` and one
    ``...seq...`` dim (the mask of a KV-cached decoder covers the past and the new
    tokens). None when the name says nothing."""
    by_name = {v.name: v for v in variables if v is not var}
    if "+" in var.name or "-" in var.name[1:]:
        expr: P.PrimExpr = P.IntImm(0)
        pos = 0
        while pos < len(var.name):
            m = _TERM.match(var.name, pos)
            if m is None or (pos > 0 and not m.group(1)):
                return None
            term = m.group(2)
            value = P.IntImm(int(term)) if term.isdigit() else by_name.get(term)
            if value is None:
                return None
            expr = expr - value if m.group(1) == "-" else expr + value
            pos = m.end()
        return expr
    low = var.name.lower()
    if "total" not in low:
        return None
    past = [v for v in by_name.values() if v.name.lower().startswith("past")]
    seqs = [v for v in by_name.values()
            if "seq" in v.name.lower() and not v.name.lower().startswith("past") and "total" not in v.name.lower()]
    if len(past) == 1 and len(seqs) == 1:
        return past[0] + seqs[0]
    return None


def choose_dims(
    params: Sequence[E.Var],
    from_inputs: Mapping[P.PrimVar, int] | None = None,
    dims: Mapping[str, int] | None = None,
    input_sources: Mapping[P.PrimVar, str] | None = None,
    related: Sequence[tuple[P.PrimExpr, P.PrimExpr]] = (),
    extents: Sequence[tuple[P.PrimVar, P.PrimExpr]] = (),
) -> tuple[dict[P.PrimVar, int], list[str]]:
    """A value for every symbolic dim of ``main``'s parameters, and one line per dim
    saying where it came from: an ``--input`` array, ``--dim NAME=N``, a size it is
    broadcast against (``related``, see ``input_roles.broadcast_pairs``), a length it
    is indexed up to (``extents``, ``input_roles.index_extents``), or a default."""
    env = dict(from_inputs or {})
    sources = dict(input_sources or {})
    dims = dict(dims or {})
    variables = symbolic_dims(params)
    by_name = {v.name: v for v in variables}
    unknown = sorted(set(dims) - set(by_name))
    if unknown:
        have = ", ".join(f"'{n}'" for n in by_name) or "none"
        raise InputError(f"--dim {unknown[0]}: the model has no such symbolic dim (its dims: {have})")
    why: dict[P.PrimVar, str] = {}
    for var in variables:
        if var in env:
            if var.name in dims and dims[var.name] != env[var]:
                raise InputError(
                    f"--dim {var.name}={dims[var.name]}: {sources.get(var, 'an --input')} makes it {env[var]}"
                )
            why[var] = f"from {sources.get(var, 'an --input')}"
        elif var.name in dims:
            env[var] = dims[var.name]
            why[var] = f"--dim {var.name}={env[var]}"
    # a dim broadcast against a size of dims already chosen takes that size
    equal_to = list(extents)
    equal_to += [(a, b) for a, b in related if isinstance(a, P.PrimVar)]
    equal_to += [(b, a) for a, b in related if isinstance(b, P.PrimVar)]
    pending = [v for v in variables if v not in env]

    def derive() -> bool:
        for var in pending:
            for lhs, rhs in equal_to:
                if lhs is var and var not in P.free_vars(rhs) and all(v in env for v in P.free_vars(rhs)):
                    env[var] = P.evaluate(rhs, env)
                    if (lhs, rhs) in extents:
                        how = "the positions it is indexed at"
                    elif (lhs, rhs) in related or (rhs, lhs) in related:
                        how = "which it is broadcast against"
                    else:
                        how = "as its name says"
                    why[var] = f"equal to {P.to_str(rhs)}, {how}; set with --dim {var.name}=N"
                    pending.remove(var)
                    return True
        return False

    for var in variables:  # a mask length spelled or named as past + sequence
        rhs = _sum_named_by(var, variables)
        if rhs is not None:
            equal_to.append((var, rhs))
    while pending:
        if derive():
            continue
        derivable = {lhs for lhs, _ in equal_to}
        var = next((v for v in pending if v not in derivable), pending[0])
        env[var], reason = _default_dim(var, params)
        why[var] = f"{reason}; set with --dim {var.name}=N"
        pending.remove(var)
    return env, [f"dim '{v.name}' = {env[v]} ({why[v]})" for v in variables]


def _mask(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """1s then 0s along the last axis (padding at the end), at least one 1 per row."""
    if not shape or shape[-1] == 0:
        return np.ones(shape, dtype=dtype)
    rows = int(np.prod(shape[:-1]))
    keep = rng.integers(1, shape[-1] + 1, size=rows)
    out = (np.arange(shape[-1])[None, :] < keep[:, None]).reshape(shape)
    return out.astype(dtype)


def _random(shape: tuple[int, ...], dtype: str, rng: np.random.Generator, role: InputRole | None = None) -> np.ndarray:
    kind = np.dtype(dtype).kind
    if kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if role is not None and role.kind == "mask":
        return _mask(shape, dtype, rng)
    if kind in "iu":
        high = role.bound if role is not None and role.kind == "index" and role.bound else 4
        return rng.integers(0, high, size=shape).astype(dtype)
    if kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    raise InputError(f"cannot make a random input of dtype {dtype}")


def _describe_random(shape: tuple[int, ...], dtype: str, role: InputRole | None) -> str:
    text = f"random {shape} {dtype}"
    if role is None or np.dtype(dtype).kind == "f":
        return text
    if role.kind == "index":
        return f"{text} in [0, {role.bound}) ({role.why})"
    return f"{text} 0/1 mask ({role.why})"


def make_inputs(
    params: list[E.Var],
    given: Mapping[str, np.ndarray] | None = None,
    env: Mapping[P.PrimVar, int] | None = None,
    seed: int = 0,
    default_dim: int | None = None,
    roles: Mapping[str, InputRole] | None = None,
) -> tuple[list[np.ndarray], list[str]]:
    """Arguments for ``main`` in order: given arrays, random ones for the rest.

    Symbolic dimensions take their value from ``env`` (see :func:`choose_dims`),
    else ``default_dim``, else :func:`choose_dims`'s defaults. Integer inputs follow
    their ``roles`` (indices below a table's size, 0/1 masks). Returns the arrays and
    notes saying which were made up (for the report).
    """
    rng = np.random.default_rng(seed)
    given = dict(given or {})
    env = dict(env or {})
    roles = dict(roles or {})
    if default_dim is not None:
        for var in symbolic_dims(params):
            env.setdefault(var, default_dim)
    else:
        env, _ = choose_dims(params, env)
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
        shape = tuple(P.evaluate(d, env) for d in sinfo.shape)
        role = roles.get(p.name_hint)
        args.append(_random(shape, sinfo.dtype, rng, role))
        notes.append(f"{p.name_hint}: {_describe_random(shape, sinfo.dtype, role)}")
    return args, notes
