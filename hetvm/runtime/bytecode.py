"""VM bytecode: instructions, functions and the Executable (docs/CONTRACTS.md §3).

Everything here is plain data, so an Executable exports as JSON + ``.npz``.

Registers are ints. Parameter ``i`` of a function arrives in register ``i``.
An argument is a tagged pair: ``("r", reg)`` register, ``("c", idx)``
constant-pool entry, ``("i", value)`` JSON immediate, ``("f", name)`` a VM
function. Shapes are lists of ints or serialised PrimExprs (``["var", "n"]``,
``["add", a, b]``, ``["sub", a, b]``, ``["mul", a, b]``, ``["floordiv", a, b]``,
``["floormod", a, b]``, ``["min", a, b]``, ``["max", a, b]``).

Constants: a ``("c", i)`` argument of a ``KernelCall`` is materialised once
on the kernel's device; in a ``Call`` it is a host (cpu:0) NDArray.

Builtins (``Call(dst, "vm.builtin.<name>", args)``), arguments in this order:

===========================================================  ====================================
``alloc_storage(size, device_index, scope="global", dtype="uint8")``  Storage of prod(size) x itemsize bytes
``alloc_tensor(storage, offset, shape, dtype)``              NDArray carved at byte ``offset``
``alloc_tensor_direct(shape, dtype, device_index)``          NDArray with its own storage
``copy_to(src, device_index, dst=None)``                     copy of ``src`` on that device, or into ``dst``
``make_tuple(*xs)`` / ``tuple_getitem(t, i)``                 tuples
``make_shape(shape)``                                        ShapeTuple, symbolic dims evaluated
``match_cast(value, info)`` (alias ``match_shape``)          checks ``value`` against a param_info-like
                                                             dict, binds new symbolic vars, returns value
``shape_of(t)``                                              ShapeTuple of a tensor
``tensor_to_shape(t)``                                       ShapeTuple of a 1-D integer tensor's values
``prim_value(expr)``                                         int/float, symbolic expr evaluated
``read_cond(x)``                                             bool of a host scalar tensor or a prim
``null_value()``                                             None
``identity(x)``                                              x (register move)
``reshape(src, shape)``                                      a view of ``src`` sharing its bytes
``view_at(src, offset, shape)``                              a tensor of ``shape`` over ``src``'s bytes
                                                             from byte ``offset`` (same dtype)
``arena_plan([function, arena], names)``                     binds ``names`` (shape variables: the arena's
                                                             bytes, then each tensor's offset) to a
                                                             symbolic arena packed at the call's dims
                                                             (``runtime/plan_specialise.py``)
===========================================================  ====================================

The view builtins (``reshape``, ``view_at`` and any other in
``hetvm.kernels.view_kernels``) are not in :data:`BUILTINS`: each is its view
kernel, which says where the result lies in its source's bytes.

``size``/``shape`` arguments may be immediates (evaluated with the call's
symbolic bindings) or registers holding a ShapeTuple; ``device_index`` is an
index into ``Executable.devices``. A ``Call`` whose ``func`` names a VM function
calls it; any other name is a registered global function
(``hetvm.register_func``), which receives NDArrays.

``param_info`` (one dict per parameter, also the ``info`` of ``match_cast``):
``{"kind": "tensor", "shape": [..] | None, "ndim": int (optional), "dtype": str | None,
"device": int | None}``, ``{"kind": "shape", "shape": [..] | None, "ndim": int}``,
``{"kind": "prim", "dtype": str, "value": expr | None}``, ``{"kind": "tuple", "fields":
[info, ...]}``, ``{"kind": "object"}``. ``sym_bounds`` maps a variable name to
``[lower, upper]`` (either may be None).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import numpy as np

from ..errors import HetvmRuntimeError

__all__ = [
    "Call",
    "KernelCall",
    "Kill",
    "Ret",
    "Goto",
    "If",
    "Instruction",
    "VMFunction",
    "Executable",
    "memory_plan_of",
    "BytecodeError",
    "BUILTIN_PREFIX",
    "BUILTINS",
    "PRIM_OPS",
    "FORMAT_VERSION",
]

BUILTIN_PREFIX = "vm.builtin."
BUILTINS = (
    "alloc_storage",
    "alloc_tensor",
    "alloc_tensor_direct",
    "copy_to",
    "make_tuple",
    "tuple_getitem",
    "make_shape",
    "match_cast",
    "match_shape",
    "shape_of",
    "tensor_to_shape",
    "prim_value",
    "read_cond",
    "null_value",
    "identity",
    "make_closure",
    "invoke_closure",
    "arena_plan",
)
PRIM_OPS = ("add", "sub", "mul", "floordiv", "floormod", "min", "max", "eq", "ne", "lt", "le", "gt", "ge")
PARAM_KINDS = ("tensor", "shape", "prim", "tuple", "object")
ARG_TAGS = ("r", "c", "i", "f")
FORMAT_VERSION = 1
MAX_REGISTERS = 1 << 20


class BytecodeError(HetvmRuntimeError):
    """An executable breaks a structural rule of the bytecode."""


Arg = tuple  # (tag, value)


@dataclass(frozen=True, slots=True)
class Call:
    dst: int | None
    func: str
    args: tuple = ()


@dataclass(frozen=True, slots=True)
class KernelCall:
    op: str
    attrs: dict
    device: int
    args: tuple
    num_outputs: int = 1
    names: tuple | None = None  # optional per-argument names for error messages


@dataclass(frozen=True, slots=True)
class Kill:
    reg: int


@dataclass(frozen=True, slots=True)
class Ret:
    reg: int


@dataclass(frozen=True, slots=True)
class Goto:
    offset: int


@dataclass(frozen=True, slots=True)
class If:
    cond: int
    false_offset: int


Instruction = Call | KernelCall | Kill | Ret | Goto | If


@dataclass
class VMFunction:
    name: str
    params: list
    param_info: list
    num_registers: int
    instructions: list
    sym_bounds: dict = field(default_factory=dict)
    #: pc -> where the instruction comes from in the user's model (optional, for
    #: errors): ``{"node": str, "op_type": str, "inputs": [str, ...], "source": str}``
    debug_info: dict = field(default_factory=dict)


def format_arg(arg: Arg) -> str:
    tag, value = arg
    if tag == "r":
        return f"r{value}"
    if tag == "c":
        return f"c[{value}]"
    if tag == "f":
        return f"@{value}"
    return json.dumps(value)


def format_instruction(ins: Instruction) -> str:
    """One line of readable bytecode (used in error messages and ``as_text``)."""
    if isinstance(ins, Call):
        dst = "_" if ins.dst is None else f"r{ins.dst}"
        return f"{dst} = call {ins.func}({', '.join(format_arg(a) for a in ins.args)})"
    if isinstance(ins, KernelCall):
        ni = len(ins.args) - ins.num_outputs
        ins_ = ", ".join(format_arg(a) for a in ins.args[:ni])
        outs = ", ".join(format_arg(a) for a in ins.args[ni:])
        attrs = f" {json.dumps(ins.attrs, sort_keys=True)}" if ins.attrs else ""
        return f"kernel {ins.op}@dev{ins.device}({ins_}) -> ({outs}){attrs}"
    if isinstance(ins, Kill):
        return f"kill r{ins.reg}"
    if isinstance(ins, Ret):
        return f"ret r{ins.reg}"
    if isinstance(ins, Goto):
        return f"goto {ins.offset:+d}"
    if isinstance(ins, If):
        return f"if r{ins.cond} else goto {ins.false_offset:+d}"
    return repr(ins)


# --------------------------------------------------------------------------
# JSON form
# --------------------------------------------------------------------------


def _args_json(args: Iterable[Arg]) -> list:
    return [[tag, value] for tag, value in args]


def instruction_to_json(ins: Instruction) -> dict:
    if isinstance(ins, Call):
        return {"op": "Call", "dst": ins.dst, "func": ins.func, "args": _args_json(ins.args)}
    if isinstance(ins, KernelCall):
        out = {
            "op": "KernelCall",
            "kernel": ins.op,
            "attrs": ins.attrs,
            "device": ins.device,
            "args": _args_json(ins.args),
            "num_outputs": ins.num_outputs,
        }
        if ins.names is not None:
            out["names"] = list(ins.names)
        return out
    if isinstance(ins, Kill):
        return {"op": "Kill", "reg": ins.reg}
    if isinstance(ins, Ret):
        return {"op": "Ret", "reg": ins.reg}
    if isinstance(ins, Goto):
        return {"op": "Goto", "offset": ins.offset}
    if isinstance(ins, If):
        return {"op": "If", "cond": ins.cond, "false_offset": ins.false_offset}
    raise BytecodeError(f"not an instruction: {ins!r}")


def _need(d: Any, key: str, types: type | tuple, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise BytecodeError(f"{where}: missing field '{key}'")
    value = d[key]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
        raise BytecodeError(f"{where}: field '{key}' has the wrong type ({type(value).__name__})")
    return value


def _tuple(t: type | tuple) -> tuple:
    return t if isinstance(t, tuple) else (t,)


def _args_from_json(raw: Any, where: str) -> tuple:
    if not isinstance(raw, list):
        raise BytecodeError(f"{where}: 'args' must be a list")
    out = []
    for a in raw:
        if not isinstance(a, list) or len(a) != 2 or a[0] not in ARG_TAGS:
            raise BytecodeError(f"{where}: bad argument {a!r} (expected [tag, value])")
        out.append((a[0], a[1]))
    return tuple(out)


def instruction_from_json(d: Any, where: str) -> Instruction:
    op = _need(d, "op", str, where)
    if op == "Call":
        dst = d.get("dst")
        if dst is not None and (not isinstance(dst, int) or isinstance(dst, bool)):
            raise BytecodeError(f"{where}: 'dst' must be an int or null")
        return Call(dst, _need(d, "func", str, where), _args_from_json(d.get("args"), where))
    if op == "KernelCall":
        names = d.get("names")
        if names is not None and not isinstance(names, list):
            raise BytecodeError(f"{where}: 'names' must be a list")
        return KernelCall(
            _need(d, "kernel", str, where),
            _need(d, "attrs", dict, where),
            _need(d, "device", int, where),
            _args_from_json(d.get("args"), where),
            _need(d, "num_outputs", int, where),
            tuple(names) if names is not None else None,
        )
    if op == "Kill":
        return Kill(_need(d, "reg", int, where))
    if op == "Ret":
        return Ret(_need(d, "reg", int, where))
    if op == "Goto":
        return Goto(_need(d, "offset", int, where))
    if op == "If":
        return If(_need(d, "cond", int, where), _need(d, "false_offset", int, where))
    raise BytecodeError(f"{where}: unknown instruction '{op}'")


DEBUG_KEYS = {"node": str, "op_type": str, "source": str, "inputs": list}


def debug_info_from_json(raw: Any, num_instructions: int, where: str) -> dict:
    """``[[pc, {"node": ..., "op_type": ..., ...}], ...]`` -> ``{pc: {...}}``, checked
    (an artifact may have been edited); absent (older artifacts) is an empty dict."""
    if raw is None:
        return {}
    if not isinstance(raw, list):
        raise BytecodeError(f"{where}: 'debug_info' must be a list")
    out: dict[int, dict] = {}
    for item in raw:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], int)
                and not isinstance(item[0], bool) and 0 <= item[0] < num_instructions
                and isinstance(item[1], dict)):  # fmt: skip
            raise BytecodeError(f"{where}: bad 'debug_info' entry {item!r} (expected [pc, {{...}}])")
        for key, value in item[1].items():
            want = DEBUG_KEYS.get(key)
            if want is None or not isinstance(value, want) or (
                want is list and not all(isinstance(v, str) for v in value)
            ):
                raise BytecodeError(f"{where}: 'debug_info' of pc {item[0]}: bad field {key!r}")
        out[item[0]] = dict(item[1])
    return out


def debug_label(info: dict | None) -> str:
    """``ONNX node 'Gather_3' (Gather; inputs 'emb', 'ids')`` from a pc's debug info."""
    if not info or "node" not in info:
        return ""
    inputs = [i for i in info.get("inputs", ()) if i]
    extra = f"; inputs {', '.join(repr(i) for i in inputs)}" if inputs else ""
    return f"ONNX node '{info['node']}' ({info.get('op_type', '?')}{extra})"


# --------------------------------------------------------------------------
# the executable
# --------------------------------------------------------------------------


def memory_plan_of(metadata: dict, dims: Mapping[str, int] | None = None, specialiser: Any = None) -> dict:
    """The memory plan a build recorded in its metadata (VM executable or graph
    module alike): function -> device index -> the planner's figures; with
    ``dims`` (name -> value), the figures that depend on them evaluated there
    (with ``specialiser``, a symbolic arena's as the VM packs it at ``dims``)."""
    report = metadata.get("memory_plan_report")
    if not isinstance(report, dict):
        raise HetvmRuntimeError("this build carries no memory plan (built with plan_memory=False?)")
    plan = {fn: {int(d): dict(v) for d, v in devs.items()} for fn, devs in report.items()}
    if dims is None:
        return plan
    from .plan_queries import plan_at

    return plan_at(plan, dims, specialiser)


@dataclass
class Executable:
    """Compiled program: devices, constant pool, VM functions and build metadata."""

    devices: list = field(default_factory=list)
    constants: list = field(default_factory=list)
    functions: dict = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    _specialiser: Any = field(default=None, init=False, repr=False, compare=False)

    def __getitem__(self, name: str) -> VMFunction:
        return self.functions[name]

    def specialiser(self) -> Any:
        """The :class:`~.plan_specialise.PlanSpecialiser` of this executable's
        symbolic arenas (made once; shared by its VMs and ``memory_plan``)."""
        if self._specialiser is None:
            from .plan_specialise import PlanSpecialiser

            self._specialiser = PlanSpecialiser(self.metadata)
        return self._specialiser

    def memory_plan(self, dims: Mapping[str, int] | None = None) -> dict:
        """The build's memory plan: per function, per device index, ``planned_bytes``,
        ``lower_bound_bytes``, ``no_reuse_bytes``, ``outputs_in_plan`` and
        ``predicted_peak_bytes`` (what ``VirtualMachine.memory_report()`` should show).

        Figures that depend on shape variables without bounds are None, with
        ``formulas`` (text), ``free_dims`` and ``<figure>_expr``; ``dims``
        (e.g. ``{"batch": 4}``) evaluates them at those sizes."""
        return memory_plan_of(self.metadata, dims, self.specialiser() if dims is not None else None)

    def largest_dims_that_fit(
        self, capacity: int | str | Mapping[int, int], dims: Mapping[str, int] | None = None,
        function: str = "main", weights: bool = True,
    ) -> dict:
        """For each free dim (not given in ``dims``): per device index, the largest
        value whose predicted peak plus inputs plus weights fits ``capacity``
        (bytes, "16GiB", or per device index); see ``plan_queries.largest_fitting``."""
        from .plan_queries import largest_fitting, parse_bytes

        cap = parse_bytes(capacity) if isinstance(capacity, str) else capacity
        return largest_fitting(self, cap, dims, function, weights)

    def validate(self) -> Executable:
        """Checks every structural rule; raises BytecodeError naming the place."""
        from .validate import validate_executable

        validate_executable(self)
        return self

    def to_json(self) -> dict:
        """The JSON-able part (everything but the constant arrays)."""
        return {
            "format_version": FORMAT_VERSION,
            "devices": [dict(d) for d in self.devices],
            "constants": [
                {"shape": list(c.shape), "dtype": str(c.dtype)} for c in self.constants
            ],
            "functions": [
                {
                    "name": f.name,
                    "params": list(f.params),
                    "param_info": list(f.param_info),
                    "num_registers": f.num_registers,
                    "instructions": [instruction_to_json(i) for i in f.instructions],
                    "sym_bounds": dict(f.sym_bounds),
                    # absent when empty: executables without provenance keep their old JSON
                    **({"debug_info": [[pc, dict(d)] for pc, d in sorted(f.debug_info.items())]}
                       if f.debug_info else {}),
                }
                for f in self.functions.values()
            ],
            "metadata": self.metadata,
        }

    @classmethod
    def from_json(cls, data: Any, constants: list) -> Executable:
        """Rebuilds an executable; the structure is validated."""
        if not isinstance(data, dict):
            raise BytecodeError("executable: top level must be an object")
        devices = _need(data, "devices", list, "executable")
        funcs_raw = _need(data, "functions", list, "executable")
        metadata = data.get("metadata", {})
        if not isinstance(metadata, dict):
            raise BytecodeError("executable: 'metadata' must be an object")
        functions: dict[str, VMFunction] = {}
        for k, f in enumerate(funcs_raw):
            where = f"function #{k}"
            name = _need(f, "name", str, where)
            where = f"function '{name}'"
            if name in functions:
                raise BytecodeError(f"{where} is defined twice")
            instrs_raw = _need(f, "instructions", list, where)
            instrs = [
                instruction_from_json(d, f"{where}, pc {pc}") for pc, d in enumerate(instrs_raw)
            ]
            functions[name] = VMFunction(
                name,
                _need(f, "params", list, where),
                _need(f, "param_info", list, where),
                _need(f, "num_registers", int, where),
                instrs,
                _need(f, "sym_bounds", dict, where),
                debug_info_from_json(f.get("debug_info"), len(instrs), where),
            )
        exe = cls(devices, list(constants), functions, metadata)
        return exe.validate()

    def export(self, path: str) -> None:
        """Writes one artifact file (see :mod:`hetvm.runtime.artifact`)."""
        from .artifact import export_executable

        export_executable(self, path)

    def as_text(self) -> str:
        """A readable listing of devices, constants and every function."""
        lines = ["devices:"]
        for i, d in enumerate(self.devices):
            lines.append(f"  {i}: {d.get('kind')}:{d.get('index')} [{d.get('memory_scope', 'global')}]")
        if self.constants:
            lines.append("constants:")
            for i, c in enumerate(self.constants):
                lines.append(f"  c[{i}]: {tuple(np.shape(c))} {np.asarray(c).dtype}")
        for f in self.functions.values():
            lines.append(f"function {f.name}({', '.join(map(str, f.params))}) "
                         f"registers={f.num_registers}")
            for pc, ins in enumerate(f.instructions):
                lines.append(f"  {pc:4d}: {format_instruction(ins)}")
        return "\n".join(lines)
