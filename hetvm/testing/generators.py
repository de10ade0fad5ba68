"""Hypothesis strategies for random well-formed IRModules (with their inputs).

``programs(GenConfig(...))`` draws a :class:`GeneratedProgram`: a module whose
``main`` is a DAG of registered ops (see :mod:`.gen_ops`) over random shapes --
static, or symbolic with bounds declared in the ``tir_var_upper_bound`` function
attribute -- and dtypes, with dataflow and plain blocks, tuples, ``If``,
``match_cast``, calls to helper functions (which may call each other; some are
loops: a function calling itself in tail position), and, when
asked, device pins over ``cpu`` and two ``sim`` devices (vdevices declared in
``global_infos["vdevice"]``; pins on parameters, ``hint_on_device`` and
``to_vdevice``) with random kernels missing on the sims. Every choice is a
Hypothesis draw, so a failing program shrinks to a small one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from hypothesis import strategies as st

from .. import op as R
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.block_builder import BlockBuilder
from ..ir.module import IRModule
from ..ir.vdevice import VDevice
from . import gen_ops as G

__all__ = ["GenConfig", "GeneratedProgram", "programs", "VDEVICES", "make_inputs"]

#: the vdevices a program with devices declares, in order (the VM's device order)
VDEVICES = (VDevice("llvm", 0), VDevice("sim", 0), VDevice("sim", 1))
RUNTIME_NAMES = ("cpu:0", "sim:0", "sim:1")


@dataclass(frozen=True)
class GenConfig:
    """What the generator may use; the defaults give small single-device programs."""

    max_ops: int = 8
    dtypes: tuple[str, ...] = ("float32", "float16", "int32", "int64", "bool")
    symbolic: bool = True
    #: how often a symbolic var of main gets a declared upper bound (else it is planned symbolically)
    bound_probability: float = 0.8
    tuples: bool = True
    control_flow: bool = True
    match_cast: bool = True
    calls: bool = True
    max_helpers: int = 2
    #: some helpers are loops (with ``calls``): counter, trip count, carried values
    loops: bool = True
    dataflow: bool = True
    #: pin values to cpu / sim:0 / sim:1 (declares the three vdevices)
    devices: bool = False
    #: remove random kernels from the sim devices (only with ``devices``)
    missing_kernels: bool = False
    #: catalog entries to use (names of gen_ops.CATALOG); None = all
    ops: tuple[str, ...] | None = None

    def replace(self, **changes: Any) -> GenConfig:
        return dataclasses.replace(self, **changes)


@dataclass
class GeneratedProgram:
    """A generated module, inputs for its ``main`` and the devices to run it on."""

    mod: IRModule
    inputs: list[np.ndarray]
    sym_values: dict[str, int] = field(default_factory=dict)
    #: runtime device names, one per declared vdevice (empty: the host only)
    devices: list[str] = field(default_factory=list)
    #: runtime device name -> op names it has no kernel for
    missing_kernels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def runtime_devices(self) -> list[Any] | None:
        """Configures and returns the runtime devices (None: the VM's default)."""
        if not self.devices:
            return None
        from ..runtime.device import device

        out = []
        for name in self.devices:
            kind, _, idx = name.partition(":")
            if kind == "sim":
                out.append(device(kind, int(idx), missing_kernels=self.missing_kernels.get(name, ())))
            else:
                out.append(device(kind, int(idx)))
        return out

    def __repr__(self) -> str:
        shapes = ", ".join(f"{a.dtype}{a.shape}" for a in self.inputs)
        extra = f" missing_kernels={self.missing_kernels}" if self.missing_kernels else ""
        return f"GeneratedProgram(inputs=[{shapes}] sym={self.sym_values}{extra})\n{self.mod.script()}"


# --------------------------------------------------------------------------
# drawing helpers shared by module and function generation
# --------------------------------------------------------------------------


class _Drawer:
    def __init__(self, draw: Callable[[st.SearchStrategy], Any], config: GenConfig) -> None:
        self.draw = draw
        self.config = config

    def draw_int(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi)) if hi > lo else lo

    def draw_bool(self, p: float = 0.5) -> bool:
        return self.draw(st.integers(0, 99)) < int(p * 100)

    def draw_choice(self, items: Sequence[Any]) -> Any:
        return items[self.draw_int(0, len(items) - 1)]

    def draw_permutation(self, n: int) -> list[int]:
        return self.draw(st.permutations(list(range(n))))


class _ModuleGen(_Drawer):
    """Module-wide state: vdevices, symbolic vars of main, helper functions."""

    def __init__(self, draw: Callable, config: GenConfig) -> None:
        super().__init__(draw, config)
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        self.vdevices = list(VDEVICES) if config.devices else []
        # declared up front, so R.device("cpu", 0) names the declared host vdevice
        self.bb = BlockBuilder(IRModule(global_infos={"vdevice": list(self.vdevices)}) if self.vdevices else None)
        self.helpers: list[tuple[str, list[S.StructInfo]]] = []
        # main's symbolic vars: var -> (bound or None, value)
        self.sym: dict[P.PrimVar, tuple[int | None, int]] = {}
        if config.symbolic:
            for name in ("n", "m")[: self.draw_int(0, 2)]:
                bound = self.draw_int(1, 6)
                value = self.draw_int(1, bound)
                bounded = self.draw_bool(config.bound_probability)
                self.sym[P.PrimVar(name)] = (bound if bounded else None, value)

    def build(self) -> GeneratedProgram:
        if self.config.calls:
            for i in range(self.draw_int(0, self.config.max_helpers)):
                if self.config.loops and self.draw_bool(0.4):
                    self._loop_helper(f"loop{i}")
                else:
                    self._helper(f"helper{i}")
        main = FunctionGen(self, "main", is_main=True)
        main.body()
        mod = self.bb.get()
        if self.vdevices:
            mod = mod.with_global_infos(vdevice=list(self.vdevices))
        bounds = {v.name: b for v, (b, _) in self.sym.items() if b is not None and v in main.used_sym}
        if bounds:
            mod = mod.with_function("main", E.replace(mod["main"], attrs=mod["main"].attrs.with_(tir_var_upper_bound=bounds)))
        sym_values = {v.name: val for v, (_, val) in self.sym.items() if v in main.used_sym}
        inputs = make_inputs(mod["main"], {v: val for v, (_, val) in self.sym.items()}, self.rng)
        devices = list(RUNTIME_NAMES) if self.vdevices else []
        missing: dict[str, tuple[str, ...]] = {}
        if self.vdevices and self.config.missing_kernels:
            used = sorted(_kernel_ops_used(mod))
            for name in RUNTIME_NAMES[1:]:
                if used and self.draw_bool(0.6):
                    missing[name] = tuple(o for o in used if self.draw_bool(0.3))
        return GeneratedProgram(mod, inputs, sym_values, devices, missing)

    def _helper(self, name: str) -> None:
        params = []
        for i in range(self.draw_int(1, 2)):
            rank = self.draw_int(0, 3)
            dims: list[P.PrimExpr] = []
            for j in range(rank):
                if self.config.symbolic and self.draw_bool(0.3):
                    dims.append(P.PrimVar(f"k{i}{j}"))
                else:
                    dims.append(P.IntImm(self.draw_int(1, 4)))
            dtype = self.draw_choice(self.config.dtypes)
            params.append(E.Var(f"p{i}", struct_info=S.TensorStructInfo(dims, dtype)))
        gen = FunctionGen(self, name, is_main=False, params=params)
        gen.body()
        self.helpers.append((name, [p.struct_info for p in params]))  # type: ignore[misc]


    def _loop_helper(self, name: str) -> None:
        """A loop: ``loop(i, trips, carried, ...)`` runs its body and calls itself
        with ``i + 1`` and a new first carried value of the same type while
        ``i < trips``; the others (read in the body) pass unchanged."""
        scalar = S.TensorStructInfo((), "int64")
        params = [E.Var("i", struct_info=scalar), E.Var("trips", struct_info=scalar)]
        for i in range(self.draw_int(1, 2)):
            dims = [P.IntImm(self.draw_int(1, 4)) for _ in range(self.draw_int(0, 2))]
            dtype = self.draw_choice([d for d in self.config.dtypes if d != "bool"] or ["float32"])
            params.append(E.Var(f"c{i}", struct_info=S.TensorStructInfo(dims, dtype)))
        gen = FunctionGen(self, name, is_main=False, params=params)
        gen.loop_body()
        self.helpers.append((name, [p.struct_info for p in params]))  # type: ignore[misc]


def make_inputs(
    func: E.Function, sym: dict[P.PrimVar, int], rng: np.random.Generator
) -> list[np.ndarray]:
    """Random small-valued inputs for ``func``'s tensor parameters."""
    out = []
    for p in func.params:
        sinfo = p.struct_info
        assert isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None
        shape = tuple(P.evaluate(d, sym) for d in sinfo.shape)
        out.append(random_array(shape, sinfo.dtype or "float32", rng))
    return out


def random_array(shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Values exact in float16 and small: multiples of 1/8 in [-2, 2], ints in [-4, 4]."""
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in G.FLOATS:
        return (rng.integers(-16, 17, size=shape) / 8).astype(dtype)
    return rng.integers(-4, 5, size=shape).astype(dtype)


def _kernel_ops_used(mod: IRModule) -> set[str]:
    from ..ir.op_registry import DeviceBehavior, op_info
    from ..ir.visitor import post_order_visit

    found: set[str] = set()

    def visit(e: E.Expr) -> None:
        if isinstance(e, E.Call) and isinstance(e.op, E.Op):
            if op_info(e.op).device_behavior is DeviceBehavior.FOLLOW_INPUTS:
                found.add(e.op.name)

    for func in mod.functions.values():
        post_order_visit(func, visit)
    return found


# --------------------------------------------------------------------------
# one function
# --------------------------------------------------------------------------


class FunctionGen(_Drawer):
    """Generates the body of one function into the module's BlockBuilder."""

    def __init__(
        self, mod: _ModuleGen, name: str, is_main: bool, params: list[E.Var] | None = None
    ) -> None:
        super().__init__(mod.draw, mod.config)
        self.m = mod
        self.bb = mod.bb
        self.rng = mod.rng
        self.name = name
        self.is_main = is_main
        self.params: list[E.Var] = list(params or [])
        self.pool: list[E.Var] = list(self.params)
        self.tuples: list[E.Var] = []
        self.in_dataflow = False
        self.used_sym: set[P.PrimVar] = set()
        self.folded: set[E.Var] = set()
        self.computed: set[E.Var] = set()  # tensors with bytes of their own
        self.counter = 0

    # -- structure -----------------------------------------------------------
    def body(self) -> None:
        cfg = self.config
        with self.bb.function(self.name):
            if self.is_main:
                for _ in range(self.draw_int(1, 2)):
                    self.new_param(self.random_shape(), self.draw_choice(cfg.dtypes))
            budget = self.draw_int(1, cfg.max_ops if self.is_main else max(1, cfg.max_ops // 2))
            segments = self.draw_int(1, 3)
            for s in range(segments):
                steps = budget // segments + (1 if s < budget % segments else 0)
                if cfg.dataflow and self.draw_bool():
                    self.dataflow_segment(steps)
                else:
                    for _ in range(steps):
                        self.step(allow_if=True)
            output = self.output()
            self.bb.emit_func_output(output, params=self.params)

    def loop_body(self) -> None:
        """The body of a loop helper (see ``_ModuleGen._loop_helper``)."""
        i, trips, carried = self.params[0], self.params[1], self.params[2]
        rest = self.params[3:]
        me = self.bb.module.get_global_var(self.name) if self.name in self.bb.module else E.GlobalVar(self.name)
        # its signature first, so the call of itself is typed
        stub = E.Function(tuple(self.params), E.SeqExpr((), carried), carried.struct_info, True)
        self.bb.update_func(self.name, stub)
        with self.bb.function(self.name):
            go = self.bb.emit(R.less(i, trips))
            saved_pool, saved_tuples = list(self.pool), list(self.tuples)
            self.bb.begin_scope()
            for _ in range(self.draw_int(1, max(1, self.config.max_ops // 2))):
                self.step(allow_if=False)
            shape, dtype = G.shape_of(carried), G.dtype_of(carried)
            same = [v for v in self.pool if G.dtype_of(v) == dtype and G.shapes_equal(G.shape_of(v), shape)]
            new: E.Expr = self.draw_choice(same)
            if new is carried or self.draw_bool(0.5):
                new = self.bb.emit(self.draw_choice([R.negative, R.abs])(new))
            step = self.bb.emit(R.add(i, E.Constant(np.array(1, dtype=np.int64))))
            again = self.bb.emit(E.Call(me, (step, trips, new, *rest)))
            then = self.bb.end_scope(again)
            self.pool, self.tuples = saved_pool, saved_tuples
            self.bb.begin_scope()
            done = self.bb.end_scope(carried)
            out = self.bb.emit(E.If(go, then, done))
            self.bb.emit_func_output(out, params=self.params)

    def dataflow_segment(self, steps: int) -> None:
        saved_pool, saved_tuples = list(self.pool), list(self.tuples)
        with self.bb.dataflow():
            self.in_dataflow = True
            for _ in range(steps):
                self.step(allow_if=False)
            new = [v for v in self.pool + self.tuples if isinstance(v, E.DataflowVar)]
            exported = {}
            for v in new:  # export some values past the block (trivial re-bindings)
                if v is new[-1] or self.draw_bool(0.4):
                    exported[v] = self.bb.emit_output(v)
            self.in_dataflow = False
        self.pool = [exported.get(v, v) for v in self.pool if not isinstance(v, E.DataflowVar) or v in exported]
        self.tuples = [exported.get(v, v) for v in self.tuples if not isinstance(v, E.DataflowVar) or v in exported]
        if not self.pool:
            self.pool, self.tuples = saved_pool, saved_tuples

    def step(self, allow_if: bool) -> None:
        cfg = self.config
        kinds = ["op"] * 6
        if cfg.tuples:
            kinds.append("tuple")
        if cfg.control_flow and allow_if and self.is_main:
            kinds += ["if", "if"]
        if cfg.calls and self.callable_helpers():
            kinds += ["call", "call"]
        if cfg.match_cast:
            kinds.append("match_cast")
        if self.m.vdevices:
            kinds += ["hint", "to_vdevice"]
        for _ in range(4):
            kind = self.draw_choice(kinds)
            expr = getattr(self, f"step_{kind}")()
            if expr is not None:
                if expr is not True:
                    self.emit(expr)
                return
        self.emit(R.negative(self.pick(dtypes=G.NUMERIC) or self.positive_fresh()))

    def output(self) -> E.Expr:
        if not self.is_main:
            return self.helper_output()
        last = self.pool[-1]
        choice = self.draw_int(0, 9)
        if choice < 6 or len(self.pool) < 2:
            return last
        other = self.draw_choice(self.pool + self.tuples)
        if choice < 9:
            return E.Tuple((last, other))
        return E.Tuple((last, E.Tuple((other,))))

    def helper_output(self) -> E.Expr:
        """A helper's results: often freshly computed, sometimes (an alias of) a
        parameter, which its callers must not kill (test_regressions)."""
        outs = [self.pool[-1]]
        if len(self.pool) > 1 and self.draw_bool(0.3):
            outs.append(self.draw_choice(self.pool))
        fresh = []
        for v in outs:
            if v not in self.computed and self.draw_bool():
                v = self.emit(R.logical_not(v) if G.dtype_of(v) == "bool" else R.negative(v))
            fresh.append(v)
        return fresh[0] if len(fresh) == 1 else E.Tuple(tuple(fresh))

    # -- steps ---------------------------------------------------------------
    def step_op(self) -> E.Expr | None:
        names = list(self.config.ops or G.CATALOG)
        builder = G.CATALOG[self.draw_choice(names)]
        return builder(self)

    def step_tuple(self) -> E.Expr | None:
        if self.tuples and self.draw_bool(0.6):
            tup = self.draw_choice(self.tuples)
            fields = tup.struct_info.fields  # type: ignore[union-attr]
            if not fields:
                return None
            return E.TupleGetItem(tup, self.draw_int(0, len(fields) - 1))
        items = [self.draw_choice(self.pool) for _ in range(self.draw_int(1, 3))]
        return E.Tuple(tuple(items))

    def step_match_cast(self) -> E.Expr | None:
        x = self.pick()
        if x is None:
            return None
        dims = []
        for d in G.shape_of(x):
            if self.draw_bool(0.5):
                dims.append(P.PrimVar(f"d{self.counter}"))
                self.counter += 1
            else:
                dims.append(d)
        var = self.bb.match_cast(x, S.TensorStructInfo(dims, G.dtype_of(x)))
        self.pool.append(var)
        return True  # type: ignore[return-value]

    def step_hint(self) -> E.Expr | None:
        x = self.pick()
        if x is None:
            return None
        vdev = self.draw_choice(self.m.vdevices)
        return R.hint_on_device(x, R.device("cpu" if vdev.is_host else vdev.kind, vdev.vdevice_id))

    def step_to_vdevice(self) -> E.Expr | None:
        x = self.pick()
        if x is None:
            return None
        return R.to_vdevice(x, self.draw_choice(self.m.vdevices))

    def callable_helpers(self) -> list[tuple[str, list[S.StructInfo]]]:
        return list(self.m.helpers)

    def step_call(self) -> E.Expr | None:
        name, params = self.draw_choice(self.callable_helpers())
        args = []
        for sinfo in params:
            assert isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None
            pattern = sinfo.shape

            def fits(v: E.Expr, pattern: tuple = pattern) -> bool:
                s = G.shape_of(v)
                return len(s) == len(pattern) and all(
                    isinstance(p, P.PrimVar) or G.dims_equal(p, d) for p, d in zip(pattern, s)
                )

            arg = self.pick(dtypes=(sinfo.dtype,), where=fits)
            if arg is None:
                shape = tuple(P.IntImm(self.draw_int(1, 4)) if isinstance(d, P.PrimVar) else d for d in pattern)
                arg = self.operand_exact(shape, sinfo.dtype)  # type: ignore[arg-type]
            if arg is None:
                return None
            args.append(arg)
        return E.Call(self.bb.module.get_global_var(name), tuple(args))

    def step_if(self) -> E.Expr | None:
        cond = self.pick(dtypes=("bool",), where=lambda v: len(G.shape_of(v)) == 0)
        if cond is None:
            cond = self.new_param((), "bool")
        template = self.pick()
        if template is None:
            return None
        branches = [self.branch(template) for _ in range(2)]
        return E.If(cond, branches[0], branches[1])

    def branch(self, template: E.Var) -> E.SeqExpr:
        saved_pool, saved_tuples = list(self.pool), list(self.tuples)
        self.bb.begin_scope()
        for _ in range(self.draw_int(0, 2)):
            self.step(allow_if=False)
        shape, dtype = G.shape_of(template), G.dtype_of(template)
        same = [v for v in self.pool if G.dtype_of(v) == dtype and G.shapes_equal(G.shape_of(v), shape)]
        result: E.Expr = self.draw_choice(same)
        if self.draw_bool(0.7):
            ctor = R.logical_not if dtype == "bool" else self.draw_choice([R.negative, R.abs])
            # bound: a call left as a branch body prints as a binding, so it would not
            # re-parse to the same IR (test_regressions covers building that form)
            result = self.bb.emit(ctor(result))
        seq = self.bb.end_scope(result)
        self.pool, self.tuples = saved_pool, saved_tuples
        return seq

    # -- values --------------------------------------------------------------
    def emit(self, expr: E.Expr) -> E.Var:
        var = self.bb.emit(expr)
        if isinstance(expr, E.Call) and isinstance(expr.op, E.Op) and all(
            isinstance(a, (E.Constant, E.ShapeExpr, E.PrimValue)) or a in self.folded
            for a in expr.args
        ):
            self.folded.add(var)  # FoldConstant will turn it into a constant
        if _computes(expr):
            self.computed.add(var)
        sinfo = var.struct_info
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is not None and sinfo.dtype is not None:
            self.pool.append(var)
        elif isinstance(sinfo, S.TupleStructInfo):
            self.tuples.append(var)
        return var

    def pick(
        self,
        dtypes: Sequence[str] | None = None,
        min_rank: int = 0,
        max_rank: int = 4,
        where: Callable[[E.Var], bool] | None = None,
        broadcasts_to: Sequence[P.PrimExpr] | None = None,
    ) -> E.Var | None:
        """A tensor in scope that fits, most recent first (so DAGs grow deep)."""
        bounds = self.bounds()
        found = []
        for v in reversed(self.pool):
            s = G.tinfo(v)
            shape = s.shape or ()
            if dtypes is not None and s.dtype not in dtypes:
                continue
            if not min_rank <= len(shape) <= max_rank:
                continue
            if G.element_bound(shape, bounds) > G.MAX_ELEMENTS:
                continue
            if broadcasts_to is not None:
                out = G.broadcast(shape, broadcasts_to)
                if out is None or not G.shapes_equal(out, broadcasts_to):
                    continue
            if where is not None and not where(v):
                continue
            found.append(v)
        if not found:
            return None
        return found[self.draw_int(0, len(found) - 1)]

    def partner(self, x: E.Var) -> E.Expr:
        """A second operand for ``x`` in a broadcasting op (same dtype)."""
        shape, dtype = G.shape_of(x), G.dtype_of(x)
        bounds = self.bounds()

        def fits(v: E.Var) -> bool:
            out = G.broadcast(G.shape_of(v), shape)
            return out is not None and G.element_bound(out, bounds) <= G.MAX_ELEMENTS

        y = self.pick(dtypes=(dtype,), where=fits) if self.draw_bool(0.7) else None
        if y is not None:
            return y
        # a fresh operand: x's shape with some dims 1 and leading dims maybe dropped
        dims = list(shape)
        if dims and self.draw_bool(0.3):
            dims = dims[self.draw_int(0, len(dims)) :]
        dims = [P.IntImm(1) if self.draw_bool(0.3) else d for d in dims]
        return self.fresh_operand(tuple(dims), dtype, broadcast_ok=True)

    def fresh_operand(self, shape: Sequence[P.PrimExpr], dtype: str, broadcast_ok: bool) -> E.Expr:
        """A new constant or (in main) parameter of ``shape``; symbolic dims
        become 1 where broadcasting allows and no parameter can carry them."""
        exact = self.operand_exact(shape, dtype, reuse=False)
        if exact is not None:
            return exact
        assert broadcast_ok
        dims = [d if P.const_value(d) is not None else P.IntImm(1) for d in shape]
        return self.constant(tuple(int(P.const_value(d)) for d in dims), dtype)  # type: ignore[arg-type]

    def operand_exact(
        self, shape: Sequence[P.PrimExpr], dtype: str, reuse: bool = True
    ) -> E.Expr | None:
        """A value of exactly ``shape`` and ``dtype``: in scope, constant or parameter."""
        if reuse:
            y = self.pick(dtypes=(dtype,), where=lambda v: G.shapes_equal(G.shape_of(v), shape))
            if y is not None and self.draw_bool(0.5):
                return y
        dims = G.static_dims(shape)
        if dims is not None and (not self.is_main or self.draw_bool(0.6)):
            return self.constant(dims, dtype)
        if self.is_main and all(P.const_value(d) is not None or d in self.m.sym for d in shape):
            return self.new_param(tuple(shape), dtype)
        return None

    def constant(self, dims: tuple[int, ...], dtype: str) -> E.Constant:
        return E.const(random_array(dims, dtype, self.rng))

    def positive(self, x: E.Expr) -> E.Var:
        """``abs(x) + 1`` (x numeric): a value safe to divide by or take a log of."""
        dtype = G.dtype_of(x)
        return self.emit(R.add(R.abs(x), E.const(np.ones((), dtype=dtype))))

    def positive_fresh(self) -> E.Var:
        return self.positive(self.constant((2,), "float32"))

    def new_param(self, shape: Sequence[Any], dtype: str) -> E.Var:
        assert self.is_main
        dims = tuple(P.as_prim(d) for d in shape)
        self.used_sym.update(d for d in dims if isinstance(d, P.PrimVar))
        vdev = None
        if self.m.vdevices and self.draw_bool(0.4):
            vdev = self.draw_choice(self.m.vdevices)
        var = E.Var(f"x{len(self.params)}", struct_info=S.TensorStructInfo(dims, dtype, vdevice=vdev))
        self.params.append(var)
        self.pool.append(var)
        return var

    def random_shape(self) -> tuple[P.PrimExpr, ...]:
        dims: list[P.PrimExpr] = []
        for _ in range(self.draw_int(0, 3)):
            if self.m.sym and self.draw_bool(0.4):
                dims.append(self.draw_choice(list(self.m.sym)))
            else:
                dims.append(P.IntImm(self.draw_int(1, 4)))
        return tuple(dims)

    def bounds(self) -> dict:
        return {v: (1, b if b is not None else 8) for v, (b, _) in self.m.sym.items()}

    def choose_op(self, names: Sequence[str]) -> str | None:
        avail = [n for n in names if G.kernel_available(n)]
        return self.draw_choice(avail) if avail else None


def _computes(expr: E.Expr) -> bool:
    """Whether ``expr`` makes a new tensor (not a view, hint or re-binding of one)."""
    from ..ir.op_registry import DeviceBehavior, op_info
    from ..op.effects import is_view_op

    if not isinstance(expr, E.Call) or not isinstance(expr.op, E.Op):
        return False
    info = op_info(expr.op)
    return info.device_behavior is DeviceBehavior.FOLLOW_INPUTS and not is_view_op(info.name)


@st.composite
def _programs(draw: Callable, config: GenConfig) -> GeneratedProgram:
    return _ModuleGen(draw, config).build()


def programs(config: GenConfig | None = None) -> st.SearchStrategy[GeneratedProgram]:
    """Random well-formed modules with inputs for ``main`` (see the module docstring)."""
    return _programs(config or GenConfig())
