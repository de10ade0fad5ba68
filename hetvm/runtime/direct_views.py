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
defined once, by ``alloc_tensor(storage, offset, shape, dtype)`` over a storage
defined once by ``alloc_storage`` with an immediate device, the offset, shape
and sizes known -- immediates, or registers defined once by ``make_shape`` /
``prim_value`` of an immediate -- as ints or as expressions over shape
variables bound at the function's entry (a symbolic plan), a static view fits
in its static storage, and every other use of the register is as an argument
of a kernel on that device, its ``kill``, or the source of a view builtin
(``view_at``, ``reshape``, ...) with such arguments, whose result is then a
direct view too, at its place in the storage. Anything else (a builtin, a
call, a tuple, the result) keeps the NDArray path.

The generated code then carves all of a storage's direct views right after
the storage is allocated (:func:`~.direct_carve.make_carver`: one lookup when
the pooled block comes back with its views for the same shape values), drops
their ``alloc_tensor`` and ``kill`` instructions -- and the ``make_shape`` /
``prim_value`` registers read by nothing else -- and moves the storage's own
``kill`` after the last kernel that reads one of its views: the block must
outlive views that hold no reference to it (an NDArray's count did that before).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import HetvmRuntimeError
from ..kernels.view_kernels import place_view, view_kernel
from .bytecode import BUILTIN_PREFIX, Call, KernelCall, Kill, VMFunction
from .direct_carve import Place, make_carver, prim_vars
from .ndarray import np_dtype

__all__ = ["DirectViews", "plan_direct_views", "make_carver", "entry_variables"]


@dataclass
class DirectViews:
    """The plan for one function: which registers are direct, and where things go."""

    #: tensor register -> (storage register, its recipe)
    tensors: dict[int, tuple[int, Place]] = field(default_factory=dict)
    #: storage register -> its direct tensor registers, in definition order
    by_storage: dict[int, list[int]] = field(default_factory=dict)
    #: pc of a storage's kill -> the pc after which it runs instead (if later)
    moved_kills: dict[int, int] = field(default_factory=dict)
    #: make_shape / prim_value registers read only to place direct tensors, and
    #: tuples of direct tensors read only through tuple_getitem
    unused: set[int] = field(default_factory=set)
    #: tuple register read by kernels -> its direct tensor fields (a list of arrays)
    tuples: dict[int, list[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.tensors)

    def recipes(self, storage: int) -> tuple[list[Place], tuple[str, ...]]:
        """The recipes of a storage's direct tensors (a view's source as its
        index among them) and the shape variables they read, sorted."""
        regs = self.by_storage[storage]
        index = {r: i for i, r in enumerate(regs)}
        out, names = [], set()
        for r in regs:
            p = self.tensors[r][1]
            if p.source is not None:
                p = Place(p.offset, p.dims, p.dtype, p.where, index[p.source], p.symbol, p.args)
            out.append(p)
            prim_vars([p.offset, list(p.dims), list(p.args)], names)
        return out, tuple(sorted(names))


def _is_int(v: Any) -> bool:
    return type(v) is int


def _is_prim(v: Any) -> bool:
    return _is_int(v) or (isinstance(v, list) and bool(v) and isinstance(v[0], str))


def _is_dims(v: Any) -> bool:
    return isinstance(v, list) and all(_is_prim(d) for d in v)


def _static(v: Any) -> bool:
    return _is_int(v) or (isinstance(v, (list, tuple)) and all(_is_int(d) for d in v))


def entry_variables(func: VMFunction) -> set[str]:
    """Shape variables that binding the parameters defines (a plain ``["var", n]``
    dimension or prim pattern): known before the body runs."""
    out: set[str] = set()

    def walk(info: Any) -> None:
        if not isinstance(info, dict):
            return
        for d in info.get("shape") or ():
            if isinstance(d, list) and len(d) == 2 and d[0] == "var" and isinstance(d[1], str):
                out.add(d[1])
        v = info.get("value")
        if isinstance(v, list) and len(v) == 2 and v[0] == "var" and isinstance(v[1], str):
            out.add(v[1])
        for f in info.get("fields") or ():
            walk(f)

    for info in func.param_info:
        walk(info)
    return out


def placement_variables(func: VMFunction) -> set[str]:
    """Shape variables an ``arena_plan`` binds (a symbolic arena's size and
    offsets at the call's dims, runtime/plan_specialise.py): it runs right
    before its arena's ``alloc_storage``, so they are known when the arena's
    views are carved."""
    out: set[str] = set()
    for ins in func.instructions:
        if isinstance(ins, Call) and ins.func == ARENA_PLAN and len(ins.args) == 2:
            tag, names = ins.args[1]
            if tag == "i" and isinstance(names, list):
                out |= {n for n in names if isinstance(n, str)}
    return out


ARENA_PLAN = BUILTIN_PREFIX + "arena_plan"


class _Resolver:
    """Immediate values of arguments: an immediate, or a register defined once by
    ``make_shape`` / ``prim_value`` of an immediate; symbolic only over ``known``."""

    def __init__(self, func: VMFunction, defs: dict[int, list[int]], exe_functions: Any) -> None:
        self.known = entry_variables(func) | placement_variables(func)
        self.values: dict[int, Any] = {}
        make_shape, prim_value = BUILTIN_PREFIX + "make_shape", BUILTIN_PREFIX + "prim_value"
        for r, pcs in defs.items():
            ins = func.instructions[pcs[0]]
            if r < len(func.params) or len(pcs) != 1 or ins.func in exe_functions or len(ins.args) != 1:
                continue
            tag, value = ins.args[0]
            if tag != "i":
                continue
            if (ins.func == make_shape and _is_dims(value)) or (ins.func == prim_value and _is_prim(value)):
                self.values[r] = value

    def __call__(self, arg: Any) -> Any:
        """The value of ``arg`` (None: a register of another kind, or a variable
        the parameters do not bind)."""
        if not (isinstance(arg, tuple) and len(arg) == 2):
            return None
        tag, value = arg
        if tag == "r":
            value = self.values.get(value)
        elif tag != "i":
            return None
        if value is None or not prim_vars(value, set()) <= self.known:
            return None
        return value


def _storage_facts(ins: Call, resolve: _Resolver) -> tuple[Any, int] | None:
    """(bytes: an int or None when symbolic, device index) of an ``alloc_storage``
    with a known size and an immediate device."""
    args = ins.args
    if len(args) < 2:
        return None
    dims, dev = resolve(args[0]), args[1]
    if not _is_dims(dims) or dev[0] != "i" or not _is_int(dev[1]):
        return None
    dtype = "uint8"
    if len(args) > 3:
        if not (args[3][0] == "i" and isinstance(args[3][1], str)):
            return None
        dtype = args[3][1]
    try:
        itemsize = np_dtype(dtype).itemsize
    except HetvmRuntimeError:
        return None
    return (math.prod(dims) * itemsize if _static(dims) else None), dev[1]


def _view_args(symbol: str, args: Any, resolve: _Resolver) -> tuple | None:
    """A view builtin's arguments after its source, each of the kind its kernel
    takes ("shape": dims, "prim": one value, else an int); None when unknown."""
    kinds = view_kernel(symbol).arg_kinds  # type: ignore[union-attr]
    out = []
    for i, arg in enumerate(args):
        v = resolve(arg)
        kind = kinds[i] if i < len(kinds) else None
        ok = _is_dims(v) if kind == "shape" else _is_prim(v) if kind == "prim" else _is_int(v)
        if not ok:
            return None
        out.append(tuple(v) if kind == "shape" and _static(v) else v)
    return tuple(out)


def plan_direct_views(func: VMFunction, exe_functions: Any) -> DirectViews:
    """Which tensor registers of straight-line ``func`` run as direct views
    (see the module docstring); an empty plan where none qualifies.

    A view builtin (``view_at``, ``reshape``, ...; InplaceElementwise's outputs
    are ``view_at`` of their dying input) with known arguments of a direct
    tensor is a direct tensor too, at its placement in the same storage (worked
    out here when everything is static, else when the views are carved)."""
    plan = DirectViews()
    instrs = func.instructions
    name = func.name
    defs: dict[int, list[int]] = {}
    for pc, ins in enumerate(instrs):
        if isinstance(ins, Call) and ins.dst is not None:
            defs.setdefault(ins.dst, []).append(pc)
    n_params = len(func.params)
    resolve = _Resolver(func, defs, exe_functions)
    alloc_storage, alloc_tensor = BUILTIN_PREFIX + "alloc_storage", BUILTIN_PREFIX + "alloc_tensor"
    storages: dict[int, tuple[Any, int]] = {}  # register -> (bytes or None, device)
    for r, pcs in defs.items():
        ins = instrs[pcs[0]]
        if r >= n_params and len(pcs) == 1 and ins.func == alloc_storage and ins.func not in exe_functions:
            facts = _storage_facts(ins, resolve)
            if facts is not None:
                storages[r] = facts
    candidates: dict[int, tuple[int, Place]] = {}
    parent: dict[int, int] = {}  # a view's source register (an alias's field)
    tuples = _tuples(func, defs, exe_functions)
    for pc, ins in enumerate(instrs):  # in order: a view's source comes first
        if not isinstance(ins, Call) or ins.dst is None or ins.func in exe_functions:
            continue
        r = ins.dst
        if r < n_params or len(defs[r]) != 1:
            continue
        where = f"function '{name}', pc {pc}"
        field_reg = _field_of(ins, tuples)
        if field_reg is not None:
            if field_reg in candidates:  # the same tensor under another register
                candidates[r] = candidates[field_reg]
                parent[r] = field_reg
            continue
        if ins.func == alloc_tensor:
            if len(ins.args) != 4 or ins.args[0][0] != "r" or ins.args[0][1] not in storages:
                continue
            storage = ins.args[0][1]
            offset, dims = resolve(ins.args[1]), resolve(ins.args[2])
            dtype = ins.args[3][1] if ins.args[3][0] == "i" and isinstance(ins.args[3][1], str) else None
            if not _is_prim(offset) or not _is_dims(dims) or dtype is None:
                continue
            try:
                dt = np_dtype(dtype)
            except HetvmRuntimeError:
                continue
            dims = tuple(dims)
            if _static(offset) and _static(dims):
                size = storages[storage][0]
                if offset < 0 or min(dims, default=0) < 0:
                    continue  # the NDArray path raises the error where it belongs
                if size is not None and offset + math.prod(dims) * dt.itemsize > size:
                    continue
            candidates[r] = (storage, Place(offset, dims, dt, where))
        elif view_kernel(ins.func) is not None and ins.args and ins.args[0][0] == "r":
            src = ins.args[0][1]
            if src not in candidates:
                continue
            vals = _view_args(ins.func, ins.args[1:], resolve)
            if vals is None:
                continue
            storage, at = candidates[src]
            if at.source is None and _static(at.offset) and _static(at.dims) and all(_static(v) for v in vals):
                try:
                    offset, dims = place_view(ins.func, at.dims, at.dtype.itemsize, vals)
                except HetvmRuntimeError:
                    continue  # the builtin raises it at run time, where it belongs
                candidates[r] = (storage, Place(at.offset + offset, dims, at.dtype, where))
            else:
                candidates[r] = (storage, Place(0, (), at.dtype, where, src, ins.func, vals))
            parent[r] = src

    placed_from: dict[int, list[int]] = {}  # source -> views placed from it (and aliases)
    for r, (_s, at) in candidates.items():
        if at.source is not None:
            placed_from.setdefault(at.source, []).append(r)
        if r in parent and candidates[parent[r]] is candidates[r]:
            placed_from.setdefault(parent[r], []).append(r)

    def drop(r: int) -> None:
        """``r`` keeps its NDArray; a view builtin then needs its source's too, and
        a view placed from ``r`` when carved loses its placement."""
        stack = [r]
        while stack:
            x = stack.pop()
            if candidates.pop(x, None) is None:
                continue
            stack.extend(placed_from.get(x, ()))
            if x in parent:
                stack.append(parent[x])

    # a tuple of direct tensors read only by kernels and tuple_getitem stays a list of
    # their arrays; any other read of it (a builtin, a call, the result) drops them
    direct_tuples = {t for t in tuples if _only_kernels_read(t, instrs, tuples)}
    for t in set(tuples) - direct_tuples:
        for v in tuples[t]:
            drop(v)
    for ins in instrs:
        if isinstance(ins, KernelCall):
            for tag, v in ins.args:
                fields = tuples[v] if tag == "r" and v in direct_tuples else [v] if tag == "r" else []
                for f in fields:
                    if f in candidates and storages[candidates[f][0]][1] != ins.device:
                        drop(f)
        elif isinstance(ins, Kill):
            continue
        elif isinstance(ins, Call):
            if ins.dst in direct_tuples or _field_of(ins, tuples) is not None:
                continue  # its fields are judged below; an alias is its field
            for pos, (tag, v) in enumerate(ins.args):
                if tag != "r" or v not in candidates:
                    continue
                if pos == 0 and ins.dst in candidates and parent.get(ins.dst) == v:
                    continue  # the source of a direct view: carved, not read
                drop(v)
        else:  # Ret (and, in a straight line, nothing else)
            for v in _read_regs(ins):
                drop(v)
    changed = True
    while changed:  # a tuple with a field that keeps its NDArray keeps them all
        changed = False
        for t in list(direct_tuples):
            if not all(f in candidates for f in tuples[t]):
                direct_tuples.discard(t)
                for f in tuples[t]:
                    drop(f)
                changed = True
    if not candidates:
        return plan
    last_use: dict[int, int] = {}
    for pc, ins in enumerate(instrs):
        if isinstance(ins, KernelCall):
            for tag, v in ins.args:
                if tag == "r" and v in candidates:
                    last_use[v] = pc
                elif tag == "r" and v in direct_tuples:
                    for f in tuples[v]:
                        last_use[f] = pc
    plan.tensors = candidates
    for r, (s, _place) in candidates.items():
        plan.by_storage.setdefault(s, []).append(r)
    for s in plan.by_storage:
        plan.by_storage[s].sort(key=lambda r: defs[r][0])
    for pc, ins in enumerate(instrs):
        if isinstance(ins, Kill) and ins.reg in plan.by_storage:
            last = max((last_use.get(r, -1) for r in plan.by_storage[ins.reg]), default=-1)
            if last > pc:
                plan.moved_kills[pc] = last
    plan.unused = _only_placing(instrs, resolve.values, candidates)
    read_by_kernels = {v for ins in instrs if isinstance(ins, KernelCall) for t, v in ins.args if t == "r"}
    plan.tuples = {t: tuples[t] for t in direct_tuples if t in read_by_kernels}
    plan.unused |= direct_tuples - set(plan.tuples)
    return plan


def _tuples(func: VMFunction, defs: dict[int, list[int]], exe_functions: Any) -> dict[int, list[int]]:
    """Registers defined once by ``make_tuple`` of registers only -> those registers."""
    out = {}
    make_tuple = BUILTIN_PREFIX + "make_tuple"
    for r, pcs in defs.items():
        ins = func.instructions[pcs[0]]
        if r < len(func.params) or len(pcs) != 1 or ins.func != make_tuple or ins.func in exe_functions:
            continue
        if ins.args and all(tag == "r" for tag, _ in ins.args):
            out[r] = [v for _, v in ins.args]
    return out


def _field_of(ins: Call, tuples: dict[int, list[int]]) -> int | None:
    """The field register ``tuple_getitem(t, i)`` reads, for a tuple of :func:`_tuples`."""
    if ins.func != BUILTIN_PREFIX + "tuple_getitem" or len(ins.args) != 2:
        return None
    (tag, t), (itag, i) = ins.args
    if tag != "r" or t not in tuples or itag != "i" or not _is_int(i) or not 0 <= i < len(tuples[t]):
        return None
    return tuples[t][i]


def _only_kernels_read(t: int, instrs: list, tuples: dict[int, list[int]]) -> bool:
    """Whether tuple register ``t`` is read only as a kernel argument, by
    ``tuple_getitem`` with an immediate index, or killed."""
    for ins in instrs:
        if isinstance(ins, (KernelCall, Kill)):
            continue
        if isinstance(ins, Call):
            reads = [v for tag, v in ins.args if tag == "r"]
            if t in reads and _field_of(ins, tuples) is None:
                return False
        elif t in _read_regs(ins):
            return False
    return True


def _only_placing(instrs: list, values: dict[int, Any], direct: dict) -> set[int]:
    """The make_shape / prim_value registers whose only reads are arguments of
    direct tensors' definitions (which the carver evaluates instead)."""
    out = set(values)
    for ins in instrs:
        if isinstance(ins, Kill):
            continue
        if isinstance(ins, Call):
            if ins.dst in direct:
                continue
            regs = [v for t, v in ins.args if t == "r"]
        elif isinstance(ins, KernelCall):
            regs = [v for t, v in ins.args if t == "r"]
        else:
            regs = _read_regs(ins)
        out.difference_update(regs)
    return out


def _read_regs(ins: Any) -> list[int]:
    reg = getattr(ins, "reg", None)
    return [reg] if isinstance(reg, int) else []
