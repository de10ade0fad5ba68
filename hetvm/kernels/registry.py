"""Kernel registry: destination-passing kernels by (op name, device kind).

A kernel is ``fn(xp, attrs, *args)``: ``xp`` is the array module of the device
(numpy, or cupy), ``attrs`` the op's attributes (TVM Relax keyword names) and
``args`` the op's IR arguments in order -- tensors as backend arrays, a
ShapeExpr as a tuple of ints, a PrimValue as a Python number, a Tuple of
tensors as a list of arrays -- followed by the output arrays, which the kernel
writes in place. ``sim`` runs the NumPy implementation on its own buffers.

A kernel may carry a ``specialize(xp, attrs)`` attribute returning a callable
of ``*args`` alone; the VM binds it once at load time, so hot element-wise
kernels cost one ufunc call per instruction.
"""

from __future__ import annotations

import difflib
import functools
from typing import Any, Callable, Iterable

from ..errors import HetvmRuntimeError

__all__ = ["register_kernel", "get_kernel", "has_kernel", "kernel_ops", "bind_kernel", "KINDS"]

KINDS = ("cpu", "sim", "cuda")
_ALIASES = {"rocm": "cuda"}
Kernel = Callable[..., None]
_KERNELS: dict[tuple[str, str], Kernel] = {}


def _kind(kind: str) -> str:
    return _ALIASES.get(kind, kind)


def register_kernel(
    op: str,
    kinds: Iterable[str] = KINDS,
    *,
    specialize: Callable[[Any, dict], Callable[..., Any]] | None = None,
    override: bool = True,
) -> Callable[[Kernel], Kernel]:
    """Decorator registering ``fn`` as the kernel of ``op`` on each kind."""
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)

    def do(fn: Kernel) -> Kernel:
        if specialize is not None:
            fn.specialize = specialize  # type: ignore[attr-defined]
        for k in kinds:
            key = (op, _kind(k))
            if key in _KERNELS and not override:
                raise HetvmRuntimeError(f"a kernel for '{op}' on '{k}' is already registered")
            _KERNELS[key] = fn
        return fn

    return do


def _ensure_loaded() -> None:
    if not _KERNELS:
        import importlib

        importlib.import_module("hetvm.kernels")


def has_kernel(op: str, kind: str) -> bool:
    """Whether ``op`` has a kernel for device kind ``kind``."""
    _ensure_loaded()
    return (op, _kind(kind)) in _KERNELS


def get_kernel(op: str, kind: str) -> Kernel:
    """The kernel of ``op`` for ``kind``; an error suggests close op names."""
    _ensure_loaded()
    fn = _KERNELS.get((op, _kind(kind)))
    if fn is None:
        names = kernel_ops(kind)
        close = difflib.get_close_matches(op, names, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise HetvmRuntimeError(f"no kernel for op '{op}' on device kind '{kind}'{hint}")
    return fn


def kernel_ops(kind: str) -> list[str]:
    """Sorted op names with a kernel for ``kind``."""
    _ensure_loaded()
    k = _kind(kind)
    return sorted(op for op, kk in _KERNELS if kk == k)


def bind_kernel(op: str, kind: str, xp: Any, attrs: dict) -> Callable[..., Any]:
    """A callable of the kernel's ``*args`` with ``xp`` and ``attrs`` fixed."""
    fn = get_kernel(op, kind)
    spec = getattr(fn, "specialize", None)
    if spec is not None:
        bound = spec(xp, attrs)
        if bound is not None:
            return bound
    return functools.partial(fn, xp, attrs)
