"""Questions a build's memory plan answers before anything runs.

A plan built without bounds on its shape variables records its figures as
expressions (``<figure>_expr``: serialised candidates of a maximum, see
``hetvm.analysis.symbolic_bytes``). Here they are evaluated:

* :func:`plan_at` -- the figures at given sizes (``exe.memory_plan(dims=...)``);
* :func:`largest_fitting` -- for each free dim, the largest value whose need
  (predicted peak + the inputs + the weights) fits a device's capacity
  (``exe.largest_dims_that_fit(...)``, ``hetvm plan --fit``).

Only the executable's JSON metadata is read: no IR, no compiler.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np

from ..errors import HetvmRuntimeError
from .shapes import eval_prim

__all__ = ["FIGURES", "check_complete", "plan_at", "free_dims", "largest_fitting", "parse_bytes", "need_at"]

FIGURES = ("planned_bytes", "lower_bound_bytes", "no_reuse_bytes", "predicted_peak_bytes")
MAX_SEARCH = 1 << 40  # the largest dim value looked at (beyond it: "no limit")

_UNITS = {
    "": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
    "t": 1000**4, "tb": 1000**4, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}  # fmt: skip


def parse_bytes(text: str) -> int:
    """``16GiB``, ``512MiB``, ``2.5GB``, ``1000000`` -> bytes."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise HetvmRuntimeError(
            f"cannot read {text!r} as a size in bytes (e.g. 16GiB, 512MiB, 2GB or a number of bytes)"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def _value(terms: Any, dims: Mapping[str, int]) -> int:
    terms = terms if isinstance(terms, list) and terms and not isinstance(terms[0], str) else [terms]
    return max(int(eval_prim(t, dims)) for t in terms)


def free_dims(plan: Mapping[str, Any], function: str = "main") -> list[str]:
    """Names of the shape variables the function's figures depend on."""
    names: set[str] = set()
    for facts in (plan.get(function) or {}).values():
        names |= set(facts.get("free_dims") or ())
    return sorted(names)


def plan_at(plan: Mapping[str, Any], dims: Mapping[str, int], specialiser: Any = None) -> dict:
    """``plan`` (function -> device index -> figures) with every symbolic
    figure evaluated at ``dims`` (name -> value). A function whose figures
    need a dim not given keeps them as formulas and lists it in
    ``missing_dims`` (see :func:`check_complete`).

    With ``specialiser`` (:class:`.plan_specialise.PlanSpecialiser`), the
    planned bytes and the predicted peak are those of the arenas as the VM
    re-packs them at ``dims`` -- what a call then measures; the formula's
    values stay as ``formula_planned_bytes`` / ``formula_predicted_peak_bytes``."""
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise HetvmRuntimeError(f"memory_plan: dim '{name}' must be a non-negative integer, got {value!r}")
    out: dict = {}
    for fn, devices in plan.items():
        out[fn] = {}
        for dev, facts in devices.items():
            entry = dict(facts)
            missing = sorted(set(entry.get("free_dims") or ()) - set(dims))
            if missing:  # another function's variables: its figures stay formulas
                entry["missing_dims"] = missing
                out[fn][dev] = entry
                continue
            for key in FIGURES:
                if f"{key}_expr" in entry:
                    entry[key] = _value(entry[f"{key}_expr"], dims)
            if specialiser is not None and isinstance(entry.get("at_call"), dict):
                _at_call(entry, fn, dims, specialiser)
            entry["dims"] = {k: int(v) for k, v in dims.items()}
            out[fn][dev] = entry
    return out


def _at_call(entry: dict, function: str, dims: Mapping[str, int], specialiser: Any) -> None:
    """The figures of a device whose symbolic arenas the VM re-packs per call."""
    at_call = entry["at_call"]
    sizes: dict[str, int] = {}
    planned = 0
    for arena in at_call.get("arenas", []):
        if isinstance(arena, str):
            sizes["%arena:" + arena] = n = specialiser.place_at(function, arena, dims)[0]
        elif isinstance(arena, int) and not isinstance(arena, bool):
            n = arena
        else:
            raise HetvmRuntimeError(f"memory plan of '{function}': bad arena entry {arena!r}")
        planned += n
    entry["formula_planned_bytes"] = entry.get("planned_bytes")
    entry["formula_predicted_peak_bytes"] = entry.get("predicted_peak_bytes")
    entry["planned_bytes"] = planned
    entry["predicted_peak_bytes"] = _value(at_call["predicted_peak_bytes_expr"], {**dims, **sizes})


def check_complete(plan_of_function: Mapping[int, Any], function: str) -> None:
    """Raises naming the dims a function's evaluated plan still needs."""
    missing = sorted({m for facts in plan_of_function.values() for m in facts.get("missing_dims", ())})
    if missing:
        raise HetvmRuntimeError(
            f"memory plan of '{function}': the figures depend on {', '.join(missing)}; give "
            f"{'it' if len(missing) == 1 else 'them'} in dims (e.g. dims={{{', '.join(repr(m) + ': 4' for m in missing)}}})"
        )


def _input_bytes(info: Any, dims: Mapping[str, int], default_device: int, out: dict[int, int]) -> None:
    if not isinstance(info, dict):
        return
    if info.get("kind") == "tuple":
        for f in info.get("fields", []):
            _input_bytes(f, dims, default_device, out)
        return
    if info.get("kind") != "tensor" or info.get("shape") is None or info.get("dtype") is None:
        return
    n = int(np.dtype(info["dtype"] if info["dtype"] != "bool" else np.bool_).itemsize)
    for d in info["shape"]:
        n *= int(eval_prim(d, dims))
    dev = info.get("device")
    dev = default_device if dev is None else int(dev)
    out[dev] = out.get(dev, 0) + n


def need_at(exe: Any, dims: Mapping[str, int], function: str = "main", weights: bool = True) -> dict[int, int]:
    """Per device index: the bytes one call needs at ``dims``: the predicted
    peak, the inputs on that device and (``weights``) every constant (counted
    on each device: an upper bound where weights are split across devices)."""
    plan = plan_at(exe.memory_plan(), dims).get(function)
    if plan is None:
        raise HetvmRuntimeError(f"the build has no memory plan for function '{function}'")
    check_complete(plan, function)
    inputs: dict[int, int] = {}
    fn = exe.functions.get(function) if hasattr(exe, "functions") else None
    for info in getattr(fn, "param_info", None) or []:
        _input_bytes(info, dims, 0, inputs)
    const = sum(int(c.nbytes) for c in getattr(exe, "constants", []) or []) if weights else 0
    out: dict[int, int] = {}
    for dev, facts in plan.items():
        peak = facts.get("predicted_peak_bytes")
        if peak is None:
            raise HetvmRuntimeError(
                f"device {dev}: the predicted peak of '{function}' is unknown (a size is unbounded "
                "and not an expression of the inputs' dims)"
            )
        out[int(dev)] = int(peak) + inputs.get(int(dev), 0) + const
    return out


def largest_fitting(
    exe: Any,
    capacity: int | Mapping[int, int],
    dims: Mapping[str, int] | None = None,
    function: str = "main",
    weights: bool = True,
) -> dict[str, dict[int, int | None]]:
    """For each free dim not in ``dims``: per device index, the largest value
    whose need (:func:`need_at`) fits ``capacity`` (bytes; or per device
    index), the other free dims at their ``dims`` value or 1. None: not even
    1 fits; ``MAX_SEARCH``: no limit found. Assumes the need grows with the
    dim (sizes are products of dims)."""
    fixed = dict(dims or {})
    names = [n for n in free_dims(exe.memory_plan(), function) if n not in fixed]
    if not names:
        raise HetvmRuntimeError(
            f"'{function}' has no free dim to size (its memory plan is static, or every dim is given)"
        )
    out: dict[str, dict[int, int | None]] = {}
    for name in names:
        base = {n: 1 for n in names} | fixed

        def need(v: int, _name: str = name, _base: dict = base) -> dict[int, int]:
            return need_at(exe, {**_base, _name: v}, function, weights)

        devices = sorted(need(1))
        out[name] = {}
        for dev in devices:
            cap = capacity[dev] if isinstance(capacity, Mapping) else capacity
            out[name][dev] = _largest(lambda v, d=dev, c=cap: need(v)[d] <= c)
    return out


def _largest(fits: Any) -> int | None:
    if not fits(1):
        return None
    lo, hi = 1, 2
    while hi <= MAX_SEARCH and fits(hi):
        lo, hi = hi, hi * 2
    if hi > MAX_SEARCH:
        return MAX_SEARCH
    while hi - lo > 1:  # fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo
