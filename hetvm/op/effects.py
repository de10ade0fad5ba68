"""What every op and builtin does with memory, declared once.

Why one table: legalisation, the kill pass, the memory planner, the peak
simulation, device planning, code generation and the program generators all
ask the same questions of a call -- does its result have bytes of its own, is
it a view of an argument, may it *be* an argument, does it release one -- and
each used to answer them with its own constants (``ALIAS_BUILTINS``,
``VIEW_OPS``, ``KILL_OPS`` ...), which drifted apart. Now an op declares its
effects where it is registered (``register_op(..., effects=VIEW)``), a
packed builtin where it is declared here (:data:`BUILTIN_EFFECTS`), and every
pass asks :func:`call_effects`.

An op that declares nothing is a pure computation whose result has bytes of
its own (:data:`COMPUTE`): that is every arithmetic, reduction and layout op.
Purity itself stays the registry's ``pure=`` flag, declared next to the
effects.

Kernels are packed functions named :data:`KERNEL_PREFIX` + op name (see
:func:`kernel_symbol`); they write their outputs in place (destination
passing) and return nothing. A packed function nobody declared (a user's
``R.call_packed("my_func", x)``) is :data:`OPAQUE`: its result may be any of
its arguments, or new bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..ir.op_registry import op_info

if TYPE_CHECKING:
    from ..ir import expr as E

__all__ = [
    "Result",
    "Effects",
    "COMPUTE",
    "VIEW",
    "ANNOTATION",
    "STORAGE",
    "CARVE",
    "KILL",
    "NO_MEMORY",
    "OPAQUE",
    "KERNEL",
    "KERNEL_PREFIX",
    "RESHAPE_BUILTIN",
    "VIEW_AT_BUILTIN",
    "COPY_BUILTIN",
    "BUILTIN_EFFECTS",
    "declare_builtin",
    "kernel_symbol",
    "kernel_op_of",
    "op_effects",
    "symbol_effects",
    "call_effects",
    "is_view_op",
    "is_kill",
    "is_storage_alloc",
    "is_carve",
]


class Result(enum.Enum):
    """What a call's result is, memory-wise."""

    #: new bytes of its own (a computation, ``builtin.alloc_tensor``, a copy)
    FRESH = "fresh"
    #: a new storage block (``memory.alloc_storage``): tensors are carved from it
    STORAGE = "storage"
    #: a new tensor placed inside argument ``source`` (a storage): ``memory.alloc_tensor``
    CARVED = "carved"
    #: argument ``source``'s bytes seen in another shape (``reshape``, ``view_at``)
    VIEW = "view"
    #: argument ``source`` itself (``hint_on_device``, ``vm.builtin.identity``)
    ARGUMENT = "argument"
    #: writes into argument ``source`` and is it when the call passes it, else FRESH
    #: (``vm.builtin.copy_to(src, dev[, dst])``)
    INTO = "into"
    #: holds no memory: ``()``, shapes, prim values, a null object
    NONE = "none"
    #: unknown: may be any of the arguments, or new bytes (an undeclared packed function)
    OPAQUE = "opaque"


@dataclass(frozen=True)
class Effects:
    """A call's memory effects. ``source``: the argument VIEW, ARGUMENT,
    CARVED and INTO refer to; ``kills``: releases argument 0 (its bytes, or
    for other objects its register); ``writes_outputs``: destination passing,
    writes its trailing arguments in place."""

    result: Result = Result.FRESH
    source: int = 0
    kills: bool = False
    writes_outputs: bool = False

    def shares_bytes_with(self, num_args: int) -> tuple[int, ...] | None:
        """Indices of the arguments whose bytes the result may share; ``None``
        means any of them (OPAQUE)."""
        if self.result is Result.OPAQUE:
            return None
        if self.result in (Result.VIEW, Result.ARGUMENT, Result.CARVED):
            return (self.source,) if self.source < num_args else ()
        if self.result is Result.INTO:
            return (self.source,) if self.source < num_args else ()
        return ()

    def is_alias(self, num_args: int) -> bool:
        """The result is outright the bytes of one argument (a view or the argument)."""
        if self.result in (Result.VIEW, Result.ARGUMENT):
            return self.source < num_args
        return self.result is Result.INTO and self.source < num_args


COMPUTE = Effects()
VIEW = Effects(Result.VIEW)
ANNOTATION = Effects(Result.ARGUMENT)
STORAGE = Effects(Result.STORAGE)
CARVE = Effects(Result.CARVED)
KILL = Effects(Result.NONE, kills=True)
NO_MEMORY = Effects(Result.NONE)
OPAQUE = Effects(Result.OPAQUE)
KERNEL = Effects(Result.NONE, writes_outputs=True)

KERNEL_PREFIX = "kernel."
RESHAPE_BUILTIN = "vm.builtin.reshape"
#: ``view_at(src, byte_offset, shape)``: a tensor over bytes of ``src`` (same dtype);
#: ConcatInPlace makes a concatenation's inputs such views of its output
VIEW_AT_BUILTIN = "vm.builtin.view_at"
COPY_BUILTIN = "vm.builtin.copy_to"

#: the packed builtins the compiler emits or accepts, with their effects
BUILTIN_EFFECTS: dict[str, Effects] = {
    RESHAPE_BUILTIN: VIEW,
    VIEW_AT_BUILTIN: VIEW,
    COPY_BUILTIN: Effects(Result.INTO, source=2),
    "vm.builtin.alloc_storage": STORAGE,
    "vm.builtin.alloc_tensor": CARVE,
    "vm.builtin.alloc_tensor_direct": COMPUTE,
    "vm.builtin.identity": ANNOTATION,
    "vm.builtin.match_cast": ANNOTATION,
    "vm.builtin.match_shape": ANNOTATION,
    "vm.builtin.make_shape": NO_MEMORY,
    "vm.builtin.shape_of": NO_MEMORY,
    "vm.builtin.prim_value": NO_MEMORY,
    "vm.builtin.read_cond": NO_MEMORY,
    "vm.builtin.null_value": NO_MEMORY,
    # a closure holds its captured values; what an invocation returns may be one of them
    "vm.builtin.make_closure": OPAQUE,
    "vm.builtin.invoke_closure": OPAQUE,
}


def declare_builtin(symbol: str, effects: Effects) -> None:
    """Declares (or replaces) a packed builtin's effects."""
    BUILTIN_EFFECTS[symbol] = effects


def kernel_symbol(op_name: str) -> str:
    """The packed-function name of ``op_name``'s kernel."""
    return KERNEL_PREFIX + op_name


def kernel_op_of(symbol: str) -> str | None:
    """The op a kernel symbol runs (None when ``symbol`` is not a kernel)."""
    return symbol[len(KERNEL_PREFIX):] if symbol.startswith(KERNEL_PREFIX) else None


def op_effects(name: str) -> Effects:
    """The effects a registered op declared (COMPUTE when it declared none)."""
    declared = op_info(name).effects
    return declared if declared is not None else COMPUTE


def symbol_effects(symbol: str) -> Effects:
    """The effects of a packed function: a kernel, a declared builtin, or OPAQUE."""
    if symbol.startswith(KERNEL_PREFIX):
        return KERNEL
    return BUILTIN_EFFECTS.get(symbol, OPAQUE)


def call_effects(call: E.Call) -> Effects | None:
    """The effects of a call of an op or a packed function; ``None`` for a call
    of a module function or a function value (the value analysis summarises
    those from their bodies)."""
    from ..ir import expr as E

    if isinstance(call.op, E.Op):
        return op_effects(call.op.name)
    if isinstance(call.op, E.ExternFunc):
        return symbol_effects(call.op.global_symbol)
    return None


def is_view_op(name: str) -> bool:
    """An op whose result is its input in another shape (lowered without a kernel)."""
    return op_effects(name).result is Result.VIEW


def _call_op_effects(call: E.Expr) -> Effects | None:
    from ..ir import expr as E

    if isinstance(call, E.Call) and isinstance(call.op, E.Op):
        return op_effects(call.op.name)
    return None


def is_kill(value: E.Expr) -> bool:
    """A call of an op that releases its argument."""
    eff = _call_op_effects(value)
    return eff is not None and eff.kills


def is_storage_alloc(value: E.Expr) -> bool:
    """A call of an op that allocates a storage block."""
    eff = _call_op_effects(value)
    return eff is not None and eff.result is Result.STORAGE


def is_carve(value: E.Expr) -> bool:
    """A call of an op that places a tensor inside a storage."""
    eff = _call_op_effects(value)
    return eff is not None and eff.result is Result.CARVED
