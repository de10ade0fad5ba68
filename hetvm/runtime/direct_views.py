"""Planned tensors that the VM never wraps: the hot path of a static plan.

Why: a statically planned tensor costs three instructions per op --
``alloc_tensor`` (an NDArray made and counted), the kernel, ``kill`` (the count
dropped) -- which made a chain of small ops several times slower than a Python
loop of NumPy calls. A tensor carved at a fixed offset and shape from a storage
of fixed size, and read only by kernels, needs none of that: its backend array
(a view into the arena) can be sliced once, kept with the pooled block, and
passed straight to its kernels.

:func:`plan_direct_views` picks those tensors in one VM function. A register
qualifies when the function is straight-line, the VM neither traces nor
poisons (a poisoned kill must still write its bytes), and the register is
defined once, by ``alloc_tensor(storage, offset, shape, dtype)`` with immediate
offset, shape and dtype over a storage defined once by ``alloc_storage`` with an
immediate size and device, the view fits in the storage, and every other use
of the register is as an argument of a kernel on that device, its ``kill``, or
the source of a view builtin (``view_at``, ``reshape``, ...) with immediate
arguments, whose result is then a direct view too, at its place in the storage.
Anything else (a builtin, a call, a tuple, the result) keeps the NDArray path.

The generated code then carves all of a storage's direct views right after
the storage is allocated (:func:`make_carver`: one lookup when the pooled block
comes back with its views), drops their ``alloc_tensor`` and ``kill``
instructions, and moves the storage's own ``kill`` after the last kernel that
reads one of its views -- the block must outlive views that hold no reference
to it (an NDArray's count did that before).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import HetvmRuntimeError
from ..kernels.view_kernels import place_view, view_kernel
from .bytecode import BUILTIN_PREFIX, Call, KernelCall, Kill, VMFunction
from .ndarray import np_dtype

__all__ = ["DirectViews", "plan_direct_views", "make_carver"]

_keys = itertools.count()


@dataclass
class DirectViews:
    """The plan for one function: which registers are direct, and where things go."""

    #: tensor register -> (storage register, byte offset, shape, NumPy dtype)
    tensors: dict[int, tuple[int, int, tuple[int, ...], Any]] = field(default_factory=dict)
    #: storage register -> its direct tensor registers, in definition order
    by_storage: dict[int, list[int]] = field(default_factory=dict)
    #: pc of a storage's kill -> the pc after which it runs instead (if later)
    moved_kills: dict[int, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.tensors)


def _imm_int(arg: Any) -> int | None:
    if isinstance(arg, tuple) and len(arg) == 2 and arg[0] == "i" and type(arg[1]) is int:
        return arg[1]
    return None


def _imm_dims(arg: Any) -> tuple[int, ...] | None:
    if not (isinstance(arg, tuple) and len(arg) == 2 and arg[0] == "i"):
        return None
    value = arg[1]
    if not isinstance(value, list) or not all(type(d) is int and d >= 0 for d in value):
        return None
    return tuple(value)


def _storage_facts(ins: Call) -> tuple[int, int] | None:
    """(bytes, device index) of an ``alloc_storage`` with immediate size and device."""
    args = ins.args
    if len(args) < 2:
        return None
    dims, dev = _imm_dims(args[0]), _imm_int(args[1])
    if dims is None or dev is None:
        return None
    dtype = "uint8"
    if len(args) > 3:
        if not (args[3][0] == "i" and isinstance(args[3][1], str)):
            return None
        dtype = args[3][1]
    try:
        return math.prod(dims) * np_dtype(dtype).itemsize, dev
    except HetvmRuntimeError:
        return None


def _plain_args(args: Any) -> list | None:
    """The immediates of a view builtin's arguments after its source, as plain
    ints and int tuples; None when any is a register or symbolic."""
    out = []
    for arg in args:
        if not (isinstance(arg, tuple) and len(arg) == 2 and arg[0] == "i"):
            return None
        value = arg[1]
        if type(value) is int:
            out.append(value)
        elif isinstance(value, list) and all(type(d) is int for d in value):
            out.append(tuple(value))
        else:
            return None
    return out


def plan_direct_views(func: VMFunction, exe_functions: Any) -> DirectViews:
    """Which tensor registers of straight-line ``func`` run as direct views
    (see the module docstring); an empty plan where none qualifies.

    A view builtin (``view_at``, ``reshape``, ...; InplaceElementwise's outputs
    are ``view_at`` of their dying input) with immediate arguments of a direct
    tensor is a direct tensor too, at its placement in the same storage."""
    plan = DirectViews()
    instrs = func.instructions
    defs: dict[int, list[int]] = {}
    for pc, ins in enumerate(instrs):
        if isinstance(ins, Call) and ins.dst is not None:
            defs.setdefault(ins.dst, []).append(pc)
    n_params = len(func.params)
    alloc_storage, alloc_tensor = BUILTIN_PREFIX + "alloc_storage", BUILTIN_PREFIX + "alloc_tensor"
    storages: dict[int, tuple[int, int]] = {}  # register -> (bytes, device)
    for r, pcs in defs.items():
        ins = instrs[pcs[0]]
        if r >= n_params and len(pcs) == 1 and ins.func == alloc_storage and ins.func not in exe_functions:
            facts = _storage_facts(ins)
            if facts is not None:
                storages[r] = facts
    candidates: dict[int, tuple[int, int, tuple[int, ...], Any]] = {}
    parent: dict[int, int] = {}  # a view's source register
    for ins in instrs:  # in order: a view's source comes first
        if not isinstance(ins, Call) or ins.dst is None or ins.func in exe_functions:
            continue
        r = ins.dst
        if r < n_params or len(defs[r]) != 1:
            continue
        if ins.func == alloc_tensor:
            if len(ins.args) != 4 or ins.args[0][0] != "r" or ins.args[0][1] not in storages:
                continue
            offset, dims = _imm_int(ins.args[1]), _imm_dims(ins.args[2])
            dtype = ins.args[3][1] if ins.args[3][0] == "i" and isinstance(ins.args[3][1], str) else None
            if offset is None or offset < 0 or dims is None or dtype is None:
                continue
            try:
                dt = np_dtype(dtype)
            except HetvmRuntimeError:
                continue
            if offset + math.prod(dims) * dt.itemsize > storages[ins.args[0][1]][0]:
                continue  # the NDArray path raises the error where it belongs
            candidates[r] = (ins.args[0][1], offset, dims, dt)
        elif view_kernel(ins.func) is not None and ins.args and ins.args[0][0] == "r":
            src = ins.args[0][1]
            vals = _plain_args(ins.args[1:])
            if src not in candidates or vals is None:
                continue
            storage, base, src_dims, dt = candidates[src]
            try:
                offset, dims = place_view(ins.func, src_dims, dt.itemsize, vals)
            except HetvmRuntimeError:
                continue  # the builtin raises it at run time, where it belongs
            candidates[r] = (storage, base + offset, dims, dt)
            parent[r] = src

    def drop(r: int) -> None:
        """``r`` keeps its NDArray; a view builtin then needs its source's too."""
        while r in candidates:
            candidates.pop(r)
            r = parent.get(r, -1)

    for ins in instrs:
        if isinstance(ins, KernelCall):
            for tag, v in ins.args:
                if tag == "r" and v in candidates and storages[candidates[v][0]][1] != ins.device:
                    drop(v)
        elif isinstance(ins, Kill):
            continue
        elif isinstance(ins, Call):
            for pos, (tag, v) in enumerate(ins.args):
                if tag != "r" or v not in candidates:
                    continue
                if pos == 0 and ins.dst in candidates and parent.get(ins.dst) == v:
                    continue  # the source of a direct view: carved, not read
                drop(v)
        else:  # Ret (and, in a straight line, nothing else)
            for v in _read_regs(ins):
                drop(v)
    if not candidates:
        return plan
    last_use: dict[int, int] = {}
    for pc, ins in enumerate(instrs):
        if isinstance(ins, KernelCall):
            for tag, v in ins.args:
                if tag == "r" and v in candidates:
                    last_use[v] = pc
    plan.tensors = candidates
    for r, (s, *_rest) in candidates.items():
        plan.by_storage.setdefault(s, []).append(r)
    for s in plan.by_storage:
        plan.by_storage[s].sort(key=lambda r: defs[r][0])
    for pc, ins in enumerate(instrs):
        if isinstance(ins, Kill) and ins.reg in plan.by_storage:
            last = max((last_use.get(r, -1) for r in plan.by_storage[ins.reg]), default=-1)
            if last > pc:
                plan.moved_kills[pc] = last
    return plan


def _read_regs(ins: Any) -> list[int]:
    reg = getattr(ins, "reg", None)
    return [reg] if isinstance(reg, int) else []


def make_carver(specs: list[tuple[int, tuple[int, ...], Any]], where: str) -> Callable[[Any], tuple]:
    """``carve(storage)``: the backend arrays of ``specs`` ((offset, shape, dtype)
    each) over the storage's block, sliced once per pooled block and kept with it;
    specs at the same place get the same array object."""
    key = ("direct", next(_keys))
    need = max((off + math.prod(dims) * dt.itemsize for off, dims, dt in specs), default=0)
    # views at the same place (an in-place output over its input) are one array:
    # NumPy's ufunc takes its cheaper path when ``out`` is the input object itself
    unique: dict[tuple, int] = {}
    index = [unique.setdefault((off, tuple(dims), dt), len(unique)) for off, dims, dt in specs]
    ranges = [(off, off + math.prod(dims) * dt.itemsize, dims, dt) for off, dims, dt in unique]

    def carve(storage: Any) -> tuple:
        block = storage.allocation
        views = block.views
        if views is not None:
            got = views.get(key)
            if got is not None:
                return got
        if block.freed or block.nbytes < need:
            raise HetvmRuntimeError(
                f"{where}: a storage of {block.nbytes} bytes cannot hold tensors up to byte {need}"
            )
        buf = block.buffer
        arrays = [buf[start:end].view(dt).reshape(dims) for start, end, dims, dt in ranges]
        got = tuple(arrays[i] for i in index)
        if views is not None:
            views[key] = got
        return got

    return carve
