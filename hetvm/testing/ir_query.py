"""Builders and queries the tests of rewriting passes share: a one-input module
from a body function, a function's bindings and op calls, and a build-and-run
with some passes disabled (to compare a rewrite against the program without it)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from ..ir import BlockBuilder, Call, Op, TensorStructInfo, Var
from ..ir import expr as E
from ..ir.module import IRModule

__all__ = ["one_input_module", "bindings", "op_calls", "op_names", "build_and_run"]


def one_input_module(
    body_fn: Callable[..., E.Expr],
    x_shape: Sequence[int],
    dtype: str = "float32",
    extra_params: Sequence[Var] = (),
    attrs: dict | None = None,
) -> IRModule:
    """``main(x, *extra_params)`` whose dataflow block ``body_fn(bb, x, *extra_params)`` emits."""
    x = Var("x", struct_info=TensorStructInfo(tuple(x_shape), dtype))
    bb = BlockBuilder()
    with bb.function("main", [x, *extra_params], attrs=attrs):
        with bb.dataflow():
            out = bb.emit_output(body_fn(bb, x, *extra_params))
        bb.emit_func_output(out)
    return bb.get()


def bindings(mod: IRModule, name: str = "main") -> list[E.Binding]:
    """Every binding of the function's top-level blocks, in order."""
    return [b for blk in mod[name].body.blocks for b in blk.bindings]


def variables_by_name(func: E.Function) -> dict[str, E.Var]:
    """A function's parameters and binding variables (in branches too) by name;
    where names repeat, an outer binding wins over its branches' and a later one
    over an earlier."""
    out = {p.name_hint: p for p in func.params}

    def walk(seq: E.SeqExpr) -> None:
        for block in seq.blocks:
            for b in block.bindings:
                if isinstance(b.value, E.If):  # type: ignore[attr-defined]
                    walk(b.value.true_branch)  # type: ignore[attr-defined]
                    walk(b.value.false_branch)  # type: ignore[attr-defined]
                out[b.var.name_hint] = b.var

    walk(func.body)
    return out


def op_calls(mod: IRModule, name: str = "main") -> list[Call]:
    """The values of those bindings that call a registered op."""
    return [b.value for b in bindings(mod, name) if isinstance(b.value, Call) and isinstance(b.value.op, Op)]  # type: ignore[attr-defined]


def op_names(mod: IRModule, name: str = "main") -> list[str]:
    return [c.op.name for c in op_calls(mod, name)]  # type: ignore[union-attr]


def build_and_run(mod: IRModule, *args: Any, disabled: Sequence[str] = (), poison: bool = False, **build: Any) -> Any:
    """``main(*args)`` built with ``disabled`` passes off, as NumPy (a list for tuples)."""
    import hetvm

    from ..transform import PassContext

    with PassContext(disabled_pass=list(disabled)):
        exe = hetvm.build(mod, **build)
    out = hetvm.VirtualMachine(exe, poison=poison)["main"](*args)
    return out.numpy() if hasattr(out, "numpy") else [o.numpy() for o in out]
