"""Pass infrastructure: Pass, module/function passes, Sequential, PassContext.

A pass maps an IRModule to a new IRModule and never mutates its input. The
current :class:`PassContext` carries the optimisation level, free-form config
and *instruments* that observe every pass (print the IR around a named pass,
time passes, record which pass introduced each binding).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable, Sequence

from ..analysis.called_ops import calls_any
from ..errors import HetvmError
from ..ir import expr as E
from ..ir.module import IRModule


class PassInfo:
    """Name and optimisation level of a pass."""

    __slots__ = ("name", "opt_level", "required")

    def __init__(self, name: str, opt_level: int = 0, required: Sequence[str] = ()) -> None:
        self.name = name
        self.opt_level = opt_level
        self.required = tuple(required)

    def __repr__(self) -> str:
        return f"PassInfo({self.name}, opt_level={self.opt_level})"


class PassInstrument:
    """Observer of pass execution; override any hook."""

    def enter_pass_ctx(self) -> None:
        pass

    def exit_pass_ctx(self) -> None:
        pass

    def should_run(self, mod: IRModule, info: PassInfo) -> bool:
        return True

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        pass

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        pass


_local = threading.local()


class PassContext:
    """Settings in force while passes run; use as ``with PassContext(...):``.

    ``opt_level``: passes whose level exceeds it are skipped. ``config``: a
    dict of pass options (e.g. ``{"hetvm.memory.packing": "best"}``).
    ``disabled_pass``: names never run.
    """

    def __init__(
        self,
        opt_level: int = 2,
        config: dict[str, Any] | None = None,
        instruments: Sequence[PassInstrument] = (),
        disabled_pass: Iterable[str] = (),
    ) -> None:
        self.opt_level = opt_level
        self.config = dict(config or {})
        self.instruments = list(instruments)
        self.disabled_pass = set(disabled_pass)

    @staticmethod
    def current() -> PassContext:
        stack = getattr(_local, "stack", None)
        if not stack:
            _local.stack = [PassContext()]
            stack = _local.stack
        return stack[-1]

    def __enter__(self) -> PassContext:
        if not hasattr(_local, "stack"):
            _local.stack = [PassContext()]
        _local.stack.append(self)
        for inst in self.instruments:
            inst.enter_pass_ctx()
        return self

    def __exit__(self, *exc: Any) -> None:
        for inst in self.instruments:
            inst.exit_pass_ctx()
        _local.stack.pop()

    def should_run(self, info: PassInfo) -> bool:
        return info.name not in self.disabled_pass and info.opt_level <= self.opt_level


class Pass:
    """Base class: subclasses implement :meth:`transform_module`."""

    info: PassInfo

    def __init__(self, name: str | None = None, opt_level: int = 0) -> None:
        self.info = PassInfo(name or type(self).__name__, opt_level)

    @property
    def name(self) -> str:
        return self.info.name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        raise NotImplementedError

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise HetvmError(f"pass {self.name} expects an IRModule, got {type(mod).__name__}")
        ctx = PassContext.current()
        return _run_instrumented(self, mod, ctx)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


def _run_instrumented(p: Pass, mod: IRModule, ctx: PassContext) -> IRModule:
    if isinstance(p, Sequential):
        return p.transform_module(mod, ctx)
    if not ctx.should_run(p.info):
        return mod
    if not all(inst.should_run(mod, p.info) for inst in ctx.instruments):
        return mod
    for inst in ctx.instruments:
        inst.run_before_pass(mod, p.info)
    out = p.transform_module(mod, ctx)
    for inst in ctx.instruments:
        inst.run_after_pass(out, p.info)
    return out


class ModulePass(Pass):
    """A pass from a function ``(mod, ctx) -> mod``."""

    def __init__(self, fn: Callable[[IRModule, PassContext], IRModule], name: str, opt_level: int = 0):
        super().__init__(name, opt_level)
        self._fn = fn

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        return self._fn(mod, ctx)


class FunctionPass(Pass):
    """Applies ``transform_function`` to every function of the module."""

    #: a pass that rewrites around these ops changes nothing in a function that
    #: calls none of them, which it then skips (empty: every function is visited)
    required_ops: frozenset[str] = frozenset()

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        raise NotImplementedError

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        changed = False
        funcs: dict[str, E.Function] = {}
        for name, func in mod.functions.items():
            if self.required_ops and isinstance(func, E.Function) and not calls_any(func, self.required_ops):
                funcs[name] = func
                continue
            new = self.transform_function(func, mod, ctx)
            changed |= new is not func
            funcs[name] = new
        return mod.with_functions(funcs) if changed else mod


class _FnFunctionPass(FunctionPass):
    def __init__(self, fn: Callable, name: str, opt_level: int) -> None:
        super().__init__(name, opt_level)
        self._fn = fn

    def transform_function(self, func: E.Function, mod: IRModule, ctx: PassContext) -> E.Function:
        return self._fn(func, mod, ctx)


def module_pass(fn: Callable | None = None, *, opt_level: int = 0, name: str | None = None):
    """Decorator: ``@module_pass(opt_level=0)`` on ``def f(mod, ctx) -> mod``."""

    def wrap(f: Callable) -> ModulePass:
        return ModulePass(f, name or f.__name__, opt_level)

    return wrap(fn) if fn is not None else wrap


def function_pass(fn: Callable | None = None, *, opt_level: int = 0, name: str | None = None):
    """Decorator: ``@function_pass()`` on ``def f(func, mod, ctx) -> func``."""

    def wrap(f: Callable) -> FunctionPass:
        return _FnFunctionPass(f, name or f.__name__, opt_level)

    return wrap(fn) if fn is not None else wrap


class Sequential(Pass):
    """Runs passes in order; instruments see each inner pass."""

    def __init__(self, passes: Sequence[Pass], name: str = "Sequential", opt_level: int = 0):
        super().__init__(name, opt_level)
        self.passes = list(passes)

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        for p in self.passes:
            mod = _run_instrumented(p, mod, ctx)
        return mod


# --------------------------------------------------------------------------
# instruments
# --------------------------------------------------------------------------


class PrintIR(PassInstrument):
    """Prints the module before and/or after the named passes (all when empty)."""

    def __init__(
        self,
        names: Iterable[str] = (),
        before: bool = False,
        after: bool = True,
        printer: Callable[[str], None] = print,
    ) -> None:
        self.names = set(names)
        self.before = before
        self.after = after
        self.printer = printer

    def _wanted(self, info: PassInfo) -> bool:
        return not self.names or info.name in self.names

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.before and self._wanted(info):
            self.printer(f"# IR before {info.name}\n{mod.script()}")

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        if self.after and self._wanted(info):
            self.printer(f"# IR after {info.name}\n{mod.script()}")


class PassTimer(PassInstrument):
    """Wall time of every pass, in run order: ``timings`` is [(name, seconds)]."""

    def __init__(self) -> None:
        self.timings: list[tuple[str, float]] = []
        self._start: list[float] = []

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._start.append(time.perf_counter())

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        self.timings.append((info.name, time.perf_counter() - self._start.pop()))

    def summary(self) -> str:
        total = sum(t for _, t in self.timings) or 1e-12
        lines = [f"{name:<28} {t * 1000:9.2f} ms {100 * t / total:5.1f}%" for name, t in self.timings]
        lines.append(f"{'total':<28} {total * 1000:9.2f} ms")
        return "\n".join(lines)


def _bound_vars(mod: IRModule) -> dict[int, E.Var]:
    out: dict[int, E.Var] = {}

    def walk_seq(seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                out[id(b.var)] = b.var
                value = b.value  # type: ignore[attr-defined]
                if isinstance(value, E.If):
                    walk_seq(value.true_branch)
                    walk_seq(value.false_branch)

    for func in mod.functions.values():
        walk_seq(func.body)
    return out


class BindingOrigin(PassInstrument):
    """Records which pass introduced each binding's variable.

    Mutators keep unchanged variables as the same objects, so a variable that
    appears after a pass and not before was introduced (or re-typed) by it.
    """

    def __init__(self) -> None:
        self.origin: dict[E.Var, str] = {}
        self._before: dict[int, E.Var] = {}

    def run_before_pass(self, mod: IRModule, info: PassInfo) -> None:
        self._before = _bound_vars(mod)
        if not self.origin:
            for var in self._before.values():
                self.origin[var] = "<input>"

    def run_after_pass(self, mod: IRModule, info: PassInfo) -> None:
        for key, var in _bound_vars(mod).items():
            if key not in self._before and var not in self.origin:
                self.origin[var] = info.name

    def pass_of(self, var: E.Var) -> str | None:
        """The pass that introduced ``var`` (``"<input>"`` if it was there first)."""
        return self.origin.get(var)

    def find(self, name_hint: str) -> list[tuple[E.Var, str]]:
        """All recorded variables with this name, with their passes."""
        return [(v, p) for v, p in self.origin.items() if v.name_hint == name_hint]
