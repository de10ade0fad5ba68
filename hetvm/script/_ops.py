"""Finding an op's constructor: ``R.nn.conv2d`` -> ``hetvm.op.nn.conv2d``.

The printer asks which keyword a constructor takes for its struct-info
arguments; the parser calls the constructor. Both go through the registry, so
an op added to ``hetvm.op`` is picked up without changing the script package.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any, Callable

from ..ir.op_registry import registered_ops

# Keywords TVM 0.27 prints for struct-info arguments, and the names hetvm's
# constructors take (TVM's earlier spelling).
SINFO_KEYWORDS = {"ty_args": "sinfo_args", "out_ty": "out_sinfo"}


def resolve_ctor(name: str) -> Callable[..., Any] | None:
    """The constructor of op ``name`` in ``hetvm.op`` (dots are sub-namespaces)."""
    obj: Any = importlib.import_module("hetvm.op")
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if callable(obj) and not inspect.ismodule(obj) else None


@functools.cache
def signature_of(ctor: Callable[..., Any]) -> inspect.Signature | None:
    """The constructor's signature (cached: the parser binds every op call with it)."""
    try:
        return inspect.signature(ctor)
    except (TypeError, ValueError):
        return None


def _param_names(ctor: Callable[..., Any]) -> tuple[str, ...]:
    sig = signature_of(ctor)
    return () if sig is None else tuple(sig.parameters)


def ctor_params(ctor: Callable[..., Any] | None) -> tuple[str, ...]:
    """Parameter names of a constructor (empty when it has no signature)."""
    return () if ctor is None else _param_names(ctor)


def sinfo_keyword(name: str) -> str | None:
    """The keyword (TVM 0.27 spelling) an op's call prints its ``sinfo_args`` with."""
    if name in TVM_SINFO_KEYWORD:
        return TVM_SINFO_KEYWORD[name]
    params = ctor_params(resolve_ctor(name))
    if "out_sinfo" in params:
        return "out_ty"
    if "sinfo_args" in params:
        return "sinfo_args"
    return None


def known_op_names() -> list[str]:
    return registered_ops()

# Keywords TVM prints that hetvm's constructors spell differently.
KEYWORD_ALIASES = {"device_type": "kind", "dev_type": "kind", "dev_id": "index"}


# ---------------------------------------------------------------------------
# How TVM 0.27 prints some calls, where that differs from "arguments, then
# attrs as keywords in ``OpInfo.attr_names`` order". The constructors read both
# spellings (they drop TVM's defaults), so the printer only has to add them.
# ---------------------------------------------------------------------------
_POOL_ORDER = (
    "pool_size", "strides", "dilation", "padding",
    "ceil_mode", "count_include_pad", "layout", "out_layout",
)  # fmt: skip

#: attrs printed in TVM's order rather than the constructor's
TVM_ATTR_ORDER: dict[str, tuple[str, ...]] = {
    "nn.max_pool2d": _POOL_ORDER,
    "nn.avg_pool2d": _POOL_ORDER,
    "nn.pad": ("pad_width", "pad_value", "pad_mode"),
}

#: attrs that are Relax arguments in TVM, printed positionally after the arguments
TVM_POSITIONAL_ATTRS: dict[str, tuple[str, ...]] = {
    "clip": ("min", "max"),
    "strided_slice": ("axes", "begin", "end", "strides"),
}

#: (argument count, text): a trailing argument TVM always prints with its default
TVM_DEFAULT_ARGS: dict[str, tuple[int, str]] = {
    "memory.alloc_tensor": (4, "0"),
    "vm.alloc_tensor": (4, "0"),
    "builtin.alloc_tensor": (3, 'R.str("global")'),
}

#: ops whose sinfo_args TVM 0.27 prints under another keyword than the constructor's
#: (read back through SINFO_KEYWORDS)
TVM_SINFO_KEYWORD = {"call_pure_packed": "ty_args", "invoke_closure": "ty_args", "invoke_pure_closure": "ty_args"}

#: string attrs TVM prints as ``R.str(...)`` (``R.print(x, format=R.str("x: {}"))``)
TVM_STRING_ATTRS: dict[str, tuple[str, ...]] = {"print": ("format",), "assert_op": ("format",)}

#: ops whose binding TVM prints without an annotation when the variable's struct
#: info is the one the call's ``out_ty`` gives
UNANNOTATED_WHEN_DERIVED = frozenset({"call_dps_packed"})


def attr_print_order(name: str, attr_names: tuple[str, ...]) -> tuple[str, ...]:
    return TVM_ATTR_ORDER.get(name, attr_names)
