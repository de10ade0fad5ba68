"""The ops and extern functions a function calls, remembered per function.

Why: several passes rewrite around one op -- a convolution, a pooling, a
concat -- and each is a full traversal (use counts, then a mutator) even of a
function that has none: five of them took 0.35 s of a 20,000-binding DAG's
build. Functions are immutable and a pass that changes nothing returns the
same object, so one walk answers every pass until a pass rebuilds the function.

Functions take no weak references, so the cache holds the last :data:`_KEPT`
it was asked about; :func:`forget` (called when ``hetvm.build``'s pipeline
ends) lets their older versions go.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..ir import expr as E
from ..ir.visitor import ExprVisitor

__all__ = ["called_ops", "calls_any", "forget"]

_KEPT = 16  # functions remembered (each entry holds its function, so ids stay unique)
_CACHE: OrderedDict[int, tuple[E.Function, frozenset[str]]] = OrderedDict()
_LOCK = threading.Lock()


class _Names(ExprVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_call(self, call: E.Call) -> None:
        if isinstance(call.op, E.Op):
            self.names.add(call.op.name)
        elif isinstance(call.op, E.ExternFunc):
            self.names.add(call.op.global_symbol)
        super().visit_call(call)


def called_ops(func: E.Function) -> frozenset[str]:
    """Names of the ops (``nn.conv2d``) and extern functions (their global
    symbols) called anywhere in ``func``, nested functions and branches included."""
    with _LOCK:
        hit = _CACHE.get(id(func))
        if hit is not None and hit[0] is func:
            _CACHE.move_to_end(id(func))
            return hit[1]
    walker = _Names()
    walker.visit_expr(func)
    names = frozenset(walker.names)
    with _LOCK:
        _CACHE[id(func)] = (func, names)
        if len(_CACHE) > _KEPT:
            _CACHE.popitem(last=False)
    return names


def calls_any(func: E.Function, names: frozenset[str]) -> bool:
    """Whether ``func`` calls any op or extern function of ``names``."""
    return not names.isdisjoint(called_ops(func))


def forget() -> None:
    """Drops every remembered function (and the IR it keeps alive)."""
    with _LOCK:
        _CACHE.clear()
