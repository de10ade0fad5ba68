"""Predict the runtime allocator's peak by simulating a lowered function.

Why simulate rather than sum arenas: what the allocator sees depends on when
storage is *returned*, and that is reference counting (``hetvm.runtime.memory``):
a storage block goes back when its ``Storage`` is killed (or dropped) **and**
every tensor carved from it has been killed (or dropped). Returned tensors
stay alive; tensors referenced only by a register are dropped when the
function returns; a tuple keeps its fields alive. This module replays the
lowered IR (after LowerAllocTensor and KillAfterLastUse) with the same
register discipline as ``hetvm.backend.vm_codegen`` and counts bytes per
device.

Model (what the VM must match for ``vm.memory_report()`` to equal the plan):
* ``memory.alloc_storage`` / ``vm.alloc_storage`` / ``builtin.alloc_tensor`` /
  ``to_vdevice`` / ``copy_to`` without a destination allocate;
  ``memory.alloc_tensor``, ``vm.builtin.reshape`` and ``vm.builtin.view_at`` only
  add a reference;
* ``Kill`` of a register holding a tensor or storage releases that object at
  once (idempotent) and clears the register; ``Kill`` of anything else only
  clears the register;
* an object whose last reference (register, tuple field) goes away is
  released; a function's registers go away when it returns;
* the result of a packed function nobody declared (or of a function value)
  may be any argument the value analysis says it may be
  (:mod:`hetvm.analysis.values`), or new bytes of the function's own, made
  outside the VM's allocators (``VMState.global_ref`` wraps a NumPy result on
  the default allocator): it holds a reference to each such argument, so none
  is released before the result goes away -- the figure is then an upper bound
  (``exact`` False) on the devices those arguments' bytes are on;
* parameters come from the caller and are not counted; calls of module
  functions are simulated inside the caller (their peak is part of it);
* a call in tail position (:mod:`.tail_calls`) is made after the caller's
  registers are gone, as the VM does: a loop (a function calling itself in
  tail position) holds only what one iteration passes to the next. A chain
  of tail calls is followed for ``LOOP_ITERATIONS`` entries of one function
  and then cut: from the second iteration on, every value an iteration
  receives was made by the one before, so later iterations repeat the same
  bytes (exact for iterations without a branch of their own; with one, the
  largest over those first iterations).

Both branches of every ``If`` are explored (paths enumerated, up to a cap); the
prediction is the largest peak over paths. Symbolic sizes count at their
declared upper bound (then the prediction is an upper bound, ``exact`` False);
the entry function's sizes in variables without a bound are counted exactly,
as expressions (``PeakPrediction.symbolic``: the peak is a maximum of them);
an unbounded size that is no such expression (a callee's, an unknown shape)
makes the device's prediction ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir import expr as E
from ..ir import prim as P
from ..ir.device_index import sinfo_device_index
from ..ir.module import IRModule
from ..op.effects import COPY_BUILTIN, Result, op_effects, symbol_effects
from .liveness import Liveness, analyze_liveness
from .sizes import SizeBound, declared_upper_bounds, shape_nbytes
from .symbolic_bytes import ByteMax
from .tail_calls import tail_calls
from .values import FunctionValues, analyze_values, flatten

__all__ = ["PeakPrediction", "predict_peak"]

MAX_PATHS = 256
MAX_DEPTH = 64
LOOP_ITERATIONS = 3


@dataclass
class PeakPrediction:
    """Per device index: peak bytes (None when unbounded), and whether exact.

    ``symbolic``: per device whose sizes depend on unbounded shape variables,
    the peak as a maximum of expressions in them (``peak`` is None there).
    """

    peak: dict[int, int | None] = field(default_factory=dict)
    exact: dict[int, bool] = field(default_factory=dict)
    paths: int = 0
    complete: bool = True
    symbolic: dict[int, ByteMax] = field(default_factory=dict)


class _Unpredictable(Exception):
    pass


class _LoopCut(Exception):
    """A tail-call chain entered one function ``LOOP_ITERATIONS`` times: the
    path's peak so far stands for every longer run (see the module doc)."""


class _TailCall(Exception):
    """Raised by a call in tail position: the frame ends, the callee runs."""

    def __init__(self, name: str, args: list) -> None:
        super().__init__(name)
        self.name = name
        self.args = args


class _Block:
    __slots__ = ("nbytes", "device", "refs", "expr")

    def __init__(self, nbytes: int, device: int, expr: P.PrimExpr | None = None) -> None:
        self.nbytes = nbytes
        self.device = device
        self.refs = 0
        self.expr = expr  # the size where it is an expression (nbytes is then 0)


class _Obj:
    __slots__ = ("refs",)

    def __init__(self) -> None:
        self.refs = 0


class _Owner(_Obj):
    """A tensor or a storage: holds one reference to its block until released."""

    __slots__ = ("block", "released", "nbytes", "expr")

    def __init__(self, block: _Block | None, nbytes: int = 0, expr: P.PrimExpr | None = None) -> None:
        super().__init__()
        self.block = block
        self.released = block is None
        self.nbytes = nbytes
        self.expr = expr
        if block is not None:
            block.refs += 1

    @property
    def size(self) -> SizeBound:
        return SizeBound(None, False, self.expr) if self.expr is not None else SizeBound(self.nbytes, True)


class _TupleObj(_Obj):
    __slots__ = ("fields",)

    def __init__(self, fields: list[_Obj]) -> None:
        super().__init__()
        self.fields = fields
        for f in fields:
            f.refs += 1


class _Maybe(_Obj):
    """A value that may be any of ``candidates`` (or bytes the VM does not count):
    it keeps each of them alive while it lives."""

    __slots__ = ("candidates",)

    def __init__(self, candidates: list[_Obj]) -> None:
        super().__init__()
        self.candidates = candidates
        for c in candidates:
            c.refs += 1


OPAQUE = _Obj()  # shared stand-in for values that hold no device memory
OPAQUE.refs = 1 << 60


class _Frame:
    def __init__(self) -> None:
        self.regs: dict[int, _Obj] = {}
        self.reg_of: dict[E.Var, Any] = {}  # var -> register id (int) or an object
        self.live: Liveness | None = None  # kills to replay, when the IR has none yet
        self.name = ""
        self.tails: dict = {}  # binding var -> call in tail position


class _Machine:
    def __init__(
        self, mod: IRModule, choices: list[bool], derive_kills: bool = False, facts: dict | None = None
    ) -> None:
        self.mod = mod
        self.derive_kills = derive_kills
        # per function name: its Liveness or FunctionValues (kept across paths)
        self._liveness: dict[str, Liveness] = {} if facts is None else facts.setdefault("liveness", {})
        self._values: dict[str, FunctionValues] = {} if facts is None else facts.setdefault("values", {})
        self.choices = choices
        self.taken: list[bool] = []
        self.in_use: dict[int, int] = {}
        self.peak: dict[int, int | None] = {}
        self.exact: dict[int, bool] = {}
        self.sym_in_use: dict[int, P.PrimExpr] = {}  # the symbolic part of in_use
        self.sym_peak: dict[int, ByteMax] = {}
        self.next_reg = 0
        self.depth = 0
        self._tails: dict[str, dict] = {}

    # -- memory ---------------------------------------------------------------
    def _alloc(self, device: int, size: SizeBound) -> _Block:
        self.in_use.setdefault(device, 0)
        self.peak.setdefault(device, 0)
        self.exact.setdefault(device, True)
        # a callee's symbolic sizes are in its own variables, not the entry's dims
        symbolic_ok = size.expr is not None and self.depth == 1
        if size.nbytes is None and (not symbolic_ok or self.peak[device] is None):
            self.peak[device] = None
            self.exact[device] = False
            self.sym_peak.pop(device, None)
            return _Block(0, device)
        if size.nbytes is None:  # an exact size that is an expression
            block = _Block(0, device, size.expr)
            self.sym_in_use[device] = P.add(self.sym_in_use.get(device, P.IntImm(0)), size.expr)  # type: ignore[arg-type]
        else:
            if not size.exact:
                self.exact[device] = False
            block = _Block(size.nbytes, device)
            self.in_use[device] += size.nbytes
            if self.peak[device] is not None and self.in_use[device] > self.peak[device]:  # type: ignore[operator]
                self.peak[device] = self.in_use[device]
        sym = self.sym_in_use.get(device)
        if sym is not None and self.peak[device] is not None and P.const_value(sym) != 0:
            peak = self.sym_peak.get(device) or ByteMax()
            self.sym_peak[device] = peak.include(P.add(sym, self.in_use[device]))
        return block

    def _release(self, obj: _Obj) -> None:
        if isinstance(obj, _Owner) and not obj.released:
            obj.released = True
            block = obj.block
            assert block is not None
            block.refs -= 1
            if block.refs == 0:
                self.in_use[block.device] -= block.nbytes
                if block.expr is not None and block.device in self.sym_in_use:
                    self.sym_in_use[block.device] = P.sub(self.sym_in_use[block.device], block.expr)

    def _incref(self, obj: _Obj) -> None:
        obj.refs += 1

    def _decref(self, obj: _Obj) -> None:
        obj.refs -= 1
        if obj.refs == 0:
            if isinstance(obj, _TupleObj):
                for f in obj.fields:
                    self._decref(f)
            elif isinstance(obj, _Maybe):
                for c in obj.candidates:
                    self._decref(c)
            else:
                self._release(obj)

    # -- registers --------------------------------------------------------------
    def _new_reg(self, frame: _Frame, obj: _Obj, var: E.Var | None = None) -> int:
        reg = self.next_reg
        self.next_reg += 1
        frame.regs[reg] = obj
        self._incref(obj)
        if var is not None:
            frame.reg_of[var] = reg
        return reg

    def _arg(self, frame: _Frame, expr: E.Expr) -> _Obj:
        if isinstance(expr, E.Constant):
            # the VM's constant pool holds it, on the host or -- planned on a device
            # outside a kernel's own operands (vm_codegen's copy_to of the constant)
            # -- as one pooled copy there made at the first call: never a call's
            return OPAQUE
        if isinstance(expr, E.Var):
            ref = frame.reg_of.get(expr)
            if isinstance(ref, int):
                return frame.regs.get(ref, OPAQUE)
            return ref if isinstance(ref, _Obj) else OPAQUE
        if isinstance(expr, E.Tuple):
            tup = _TupleObj([self._arg(frame, f) for f in expr.fields])
            self._new_reg(frame, tup)
            return tup
        return OPAQUE

    # -- execution ----------------------------------------------------------------
    def run_function(self, name: str, args: list[_Obj]) -> _Obj:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _Unpredictable(f"call depth over {MAX_DEPTH} (recursion?) at '{name}'")
        entries: dict[str, int] = {}
        while True:
            entries[name] = entries.get(name, 0) + 1
            if entries[name] > LOOP_ITERATIONS:
                raise _LoopCut(name)
            func = self.mod[name]
            bounds = declared_upper_bounds(func, name)
            frame = _Frame()
            frame.name = name
            frame.tails = self._tail_calls(name)
            if self.derive_kills:
                if name not in self._liveness:
                    self._liveness[name] = analyze_liveness(func, self.mod, name)
                frame.live = self._liveness[name]
            for p, a in zip(func.params, args):
                self._new_reg(frame, a, p)
            try:
                out = self._seq(frame, func.body, bounds)
            except _TailCall as tail:
                # the VM makes this call once the caller's registers are gone
                for a in tail.args:
                    self._incref(a)
                self._drop_frame(frame)
                for a in tail.args:
                    a.refs -= 1  # now held by the callee's registers alone (incref'd there)
                name, args = tail.name, tail.args
                continue
            self._incref(out)  # now held by the caller
            self._drop_frame(frame)
            self.depth -= 1
            return out

    def _drop_frame(self, frame: _Frame) -> None:
        for obj in list(frame.regs.values()):
            self._decref(obj)
        frame.regs.clear()

    def _tail_calls(self, name: str) -> dict:
        if name not in self._tails:
            self._tails[name] = tail_calls(self.mod[name], self.mod)
        return self._tails[name]

    def _seq(self, frame: _Frame, seq: E.SeqExpr, bounds: dict[str, int]) -> _Obj:
        kills = frame.live.kills_in(seq) if frame.live is not None else {}
        index = 0
        for block in seq.blocks:
            for b in block.bindings:
                self._binding(frame, b, bounds)
                for _, var in kills.get(index, ()):
                    self._kill(frame, var)
                index += 1
        return self._arg(frame, seq.body)

    def _kill(self, frame: _Frame, target: E.Expr) -> None:
        ref = frame.reg_of.get(target) if isinstance(target, E.Var) else None
        if isinstance(ref, int) and ref in frame.regs:
            obj = frame.regs.pop(ref)
            self._release(obj)
            self._decref(obj)

    def _binding(self, frame: _Frame, b: E.Binding, bounds: dict[str, int]) -> None:
        value = b.value  # type: ignore[attr-defined]
        var = b.var
        if isinstance(b, E.MatchCast):
            self._new_reg(frame, self._arg(frame, value), var)
            return
        if isinstance(value, E.Var):
            frame.reg_of[var] = frame.reg_of.get(value, OPAQUE)
            return
        if isinstance(value, (E.Constant, E.PrimValue, E.StringImm, E.DataTypeImm, E.GlobalVar, E.ShapeExpr)):
            frame.reg_of[var] = OPAQUE
            return
        if isinstance(value, E.Tuple):
            self._new_reg(frame, _TupleObj([self._arg(frame, f) for f in value.fields]), var)
            return
        if isinstance(value, E.TupleGetItem):
            tup = self._arg(frame, value.tuple_value)
            if isinstance(tup, _TupleObj):
                item = tup.fields[value.index]
            else:  # a field of what may be an argument may be any part of it
                item = tup if isinstance(tup, _Maybe) else OPAQUE
            self._new_reg(frame, item, var)
            return
        if isinstance(value, E.If):
            self._arg(frame, value.cond)
            pos = len(self.taken)
            take_true = self.choices[pos] if pos < len(self.choices) else True
            self.taken.append(take_true)
            branch = value.true_branch if take_true else value.false_branch
            self._new_reg(frame, self._seq(frame, branch, bounds), var)
            return
        if isinstance(value, E.Call):
            self._call(frame, var, value, bounds)
            return
        frame.reg_of[var] = OPAQUE

    def _call(self, frame: _Frame, var: E.Var, call: E.Call, bounds: dict[str, int]) -> None:
        op = call.op
        a = call.args
        if isinstance(op, E.Op):
            name = op.name
            effects = op_effects(name)
            if effects.kills:
                self._kill(frame, a[0])
                frame.reg_of[var] = OPAQUE
                return
            if effects.result is Result.STORAGE:
                size = a[0]
                nbytes = (
                    shape_nbytes(size.values, "uint8", bounds)
                    if isinstance(size, E.ShapeExpr)
                    else SizeBound(None, False)
                )
                block = self._alloc(_const_int(a[1]), nbytes)
                self._new_reg(frame, _Owner(block, block.nbytes, block.expr), var)
                return
            if effects.result is Result.CARVED:
                storage = self._arg(frame, a[0])
                block = storage.block if isinstance(storage, _Owner) else None
                self._new_reg(frame, _Owner(block), var)
                return
            if name == "builtin.alloc_tensor":
                nbytes = _tensor_size(a[0], a[1], bounds)
                block = self._alloc(_const_int(a[2]), nbytes)
                self._new_reg(frame, _Owner(block, block.nbytes, block.expr), var)
                return
            if name == "to_vdevice":
                src = self._arg(frame, a[0])
                size = src.size if isinstance(src, _Owner) else SizeBound(0, True)
                block = self._alloc(sinfo_device_index(self.mod, call.struct_info), size)
                self._new_reg(frame, _Owner(block, block.nbytes, block.expr), var)
                return
            if effects.result is Result.ARGUMENT and effects.source < len(a):
                self._new_reg(frame, self._arg(frame, a[effects.source]), var)
                return
            self._new_reg(frame, OPAQUE, var)
            return
        if isinstance(op, E.ExternFunc):
            sym = op.global_symbol
            args = [self._arg(frame, x) for x in a]
            effects = symbol_effects(sym)
            if effects.writes_outputs:  # a kernel: writes its outputs, returns nothing
                frame.reg_of[var] = OPAQUE
                return
            if effects.result is Result.VIEW:
                src = args[effects.source] if effects.source < len(args) else OPAQUE
                view = _Owner(src.block, src.nbytes, src.expr) if isinstance(src, _Owner) and not src.released else OPAQUE
                self._new_reg(frame, src if isinstance(src, _Maybe) else view, var)
                return
            if sym == COPY_BUILTIN:
                dst = args[2] if len(args) > 2 else OPAQUE
                if dst is OPAQUE and a and len(a) > 1:
                    src = args[0]
                    size = src.size if isinstance(src, _Owner) else SizeBound(0, True)
                    block = self._alloc(_const_int(a[1]), size)
                    dst = _Owner(block, block.nbytes, block.expr)
                self._new_reg(frame, dst, var)
                return
            if effects.result is Result.OPAQUE:
                self._new_reg(frame, self._may_be_arguments(frame, var, a, args), var)
                return
            self._new_reg(frame, OPAQUE, var)
            return
        if isinstance(op, E.GlobalVar) and op.name_hint in self.mod:
            args = [self._arg(frame, x) for x in a]
            if var in frame.tails:
                raise _TailCall(op.name_hint, args)
            out = self.run_function(op.name_hint, args)
            self._new_reg(frame, out, var)
            self._decref(out)  # the register now holds the caller's reference
            return
        # a function value: any argument, or bytes of its own (the value analysis's rule)
        args = [self._arg(frame, x) for x in a]
        self._new_reg(frame, self._may_be_arguments(frame, var, a, args), var)

    def _values_of(self, frame: _Frame) -> FunctionValues:
        if frame.live is not None:
            return frame.live.values
        name = frame.name
        if name not in self._values:
            self._values[name] = analyze_values(self.mod[name], self.mod, name)
        return self._values[name]

    def _may_be_arguments(self, frame: _Frame, var: E.Var, exprs: tuple, args: list[_Obj]) -> _Obj:
        """The result of a call the value analysis says may be some of its
        arguments: held as a :class:`_Maybe` of those that hold bytes."""
        values = self._values_of(frame)
        result = values.of(var)
        held = [
            obj
            for expr, obj in zip(exprs, args)
            if obj is not OPAQUE and flatten(values.of_expr(expr)) & result
        ]
        if not held:
            return OPAQUE
        for dev in _devices_held(held):
            self.exact[dev] = False  # it may keep them alive longer than they live
        return _Maybe(held)


def _devices_held(objs: list[_Obj]) -> set[int]:
    """Devices of the counted bytes ``objs`` keep alive (through tuples and maybes)."""
    out: set[int] = set()
    stack = list(objs)
    seen: set[int] = set()
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, _Owner) and obj.block is not None and obj.block.nbytes:
            out.add(obj.block.device)
        elif isinstance(obj, _TupleObj):
            stack.extend(obj.fields)
        elif isinstance(obj, _Maybe):
            stack.extend(obj.candidates)
    return out


def _const_int(expr: E.Expr) -> int:
    if isinstance(expr, E.PrimValue):
        c = P.const_value(expr.value)
        if c is not None:
            return int(c)
    raise _Unpredictable("a device index is not a constant")


def _tensor_size(shape: E.Expr, dtype: E.Expr, bounds: dict[str, int]) -> SizeBound:
    if isinstance(shape, E.ShapeExpr) and isinstance(dtype, E.DataTypeImm):
        return shape_nbytes(shape.values, dtype.value, bounds)
    return SizeBound(None, False)


def predict_peak(mod: IRModule, name: str, derive_kills: bool = False) -> PeakPrediction:
    """Peak bytes per device for one call of ``mod[name]``: a lowered module, or
    with ``derive_kills`` a planned one not yet through LowerAllocTensor and
    KillAfterLastUse -- the kills are then the liveness analysis's kill points
    (what KillAfterLastUse would insert) and each ``builtin.alloc_tensor`` its
    own block (what LowerAllocTensor gives it)."""
    out = PeakPrediction()
    worst: dict[int, ByteMax | None] = {}  # per device, the peak over the paths so far
    choices: list[bool] = []
    func = mod[name]
    facts: dict = {}
    while True:
        machine = _Machine(mod, choices, derive_kills, facts)
        try:
            machine.run_function(name, [OPAQUE] * len(func.params))
        except _LoopCut:
            pass  # a loop's later iterations repeat the bytes seen so far
        except _Unpredictable:
            out.complete = False
            return out
        out.paths += 1
        for dev, peak in machine.peak.items():
            sym = machine.sym_peak.get(dev)
            this: ByteMax | None = None if peak is None else (sym.include(peak) if sym is not None else ByteMax([peak]))
            if dev in worst and (worst[dev] is None or this is None):
                worst[dev] = None
            else:
                worst[dev] = this if dev not in worst else worst[dev].include(this)  # type: ignore[union-attr]
            out.exact[dev] = out.exact.get(dev, True) and machine.exact[dev] and not (this is not None and this.merged)
            value = worst[dev]
            out.peak[dev] = None if value is None else value.constant
            if value is not None and value.constant is None:
                out.symbolic[dev] = value
            else:
                out.symbolic.pop(dev, None)
        taken = machine.taken
        while taken and not taken[-1]:
            taken.pop()
        if not taken:
            return out
        if out.paths >= MAX_PATHS:
            out.complete = False
            return out
        choices = taken[:-1] + [False]
