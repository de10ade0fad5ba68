"""Convolution and pooling in any layout the ops accept (NHWC, OHWI, HWIO ...).

The kernels compute in NCHW data / OIHW weights. The ops' inference accepts
every permutation of those letters (TVM's spellings), so a kernel for another
layout is the canonical one between transposes: the inputs are transposed to
NCHW/OIHW, the canonical kernel writes a temporary, and the temporary is
transposed into the output's layout. Canonical calls go straight through (and
keep the canonical kernel's load-time specialisation).
"""

from __future__ import annotations

from typing import Any, Callable

from .common import store
from .registry import KINDS, get_kernel, has_kernel, register_kernel

# op -> ((attr, canonical) per tensor argument: data, then weight), out_layout follows data
_LAYOUT_ATTRS: dict[str, tuple[tuple[str, str], ...]] = {
    "nn.conv2d": (("data_layout", "NCHW"), ("kernel_layout", "OIHW")),
    "nn.conv1d": (("data_layout", "NCW"), ("kernel_layout", "OIW")),
    "nn.max_pool2d": (("layout", "NCHW"),),
    "nn.avg_pool2d": (("layout", "NCHW"),),
    "nn.adaptive_avg_pool2d": (("layout", "NCHW"),),
}


def _perm(layout: str, canonical: str, op: str) -> tuple[int, ...]:
    """Axes of a tensor in ``layout`` that give ``canonical``."""
    if sorted(layout) != sorted(canonical):
        raise ValueError(f"{op} kernel: layout {layout!r} is not a permutation of {canonical!r}")
    return tuple(layout.index(c) for c in canonical)


def _canonical(op: str, attrs: dict) -> bool:
    keys = _LAYOUT_ATTRS[op]
    data_canon = keys[0][1]
    if any(attrs.get(key, canon) != canon for key, canon in keys):
        return False
    return attrs.get("out_layout") in (None, data_canon)


def _wrap(op: str, base: Callable[..., None]) -> Callable[..., None]:
    keys = _LAYOUT_ATTRS[op]
    data_canon = keys[0][1]

    def in_layouts(xp: Any, attrs: dict) -> Callable[..., None]:
        perms = [_perm(attrs.get(key, canon), canon, op) for key, canon in keys]
        out_layout = attrs.get("out_layout") or attrs.get(keys[0][0], data_canon)
        back = _perm(data_canon, out_layout, op)  # canonical -> out_layout
        to_out = tuple(out_layout.index(c) for c in data_canon)
        canon_attrs = {**attrs, **{key: canon for key, canon in keys}, "out_layout": data_canon}
        inner = getattr(base, "specialize", None)
        run = inner(xp, canon_attrs) if inner is not None else None

        def kernel(*args: Any) -> None:
            *ins, out = args
            conv = [xp.ascontiguousarray(xp.transpose(a, p)) for a, p in zip(ins, perms)]
            conv += ins[len(perms):]
            tmp = xp.empty(tuple(out.shape[i] for i in to_out), dtype=out.dtype)
            if run is not None:
                run(*conv, tmp)
            else:
                base(xp, canon_attrs, *conv, tmp)
            store(out, xp.transpose(tmp, back))

        return kernel

    def specialize(xp: Any, attrs: dict) -> Callable[..., None]:
        if _canonical(op, attrs):
            inner = getattr(base, "specialize", None)
            if inner is not None:
                return inner(xp, attrs)
            return lambda *args: base(xp, attrs, *args)
        return in_layouts(xp, attrs)

    def kernel(xp: Any, attrs: dict, *args: Any) -> None:
        if _canonical(op, attrs):
            base(xp, attrs, *args)
        else:
            in_layouts(xp, attrs)(*args)

    kernel.__name__ = f"{getattr(base, '__name__', op)}_any_layout"
    kernel.__doc__ = base.__doc__
    kernel.specialize = specialize  # type: ignore[attr-defined]
    return kernel


def install() -> None:
    """Wraps each registered canonical kernel of the ops above (every kind)."""
    for op in _LAYOUT_ATTRS:
        for kind in KINDS:
            if not has_kernel(op, kind):
                continue
            base = get_kernel(op, kind)
            if getattr(base, "__name__", "").endswith("_any_layout"):
                continue
            register_kernel(op, (kind,))(_wrap(op, base))
