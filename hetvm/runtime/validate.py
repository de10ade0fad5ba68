"""Structural validation of an Executable before it is loaded or run.

The VM turns bytecode into Python source, so nothing unvalidated may reach
the code generator: every register, constant, jump target, device index and
symbolic expression is checked here, and errors name function and pc.
"""

from __future__ import annotations

from typing import Any

from ..kernels.view_kernels import view_kernel
from .bytecode import (
    ARG_TAGS,
    BUILTIN_PREFIX,
    BUILTINS,
    MAX_REGISTERS,
    PARAM_KINDS,
    BytecodeError,
    Call,
    Executable,
    Goto,
    If,
    KernelCall,
    Kill,
    Ret,
    VMFunction,
)
from .shapes import validate_prim, validate_shape

__all__ = ["validate_executable", "validate_info"]

MAX_DEVICES = 4096


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def validate_info(info: Any, where: str, ndev: int, depth: int = 0) -> None:
    """Checks a param_info / match_cast info dict."""
    if depth > 32:
        raise BytecodeError(f"{where}: param info nested too deeply")
    if not isinstance(info, dict) or info.get("kind") not in PARAM_KINDS:
        raise BytecodeError(f"{where}: param info needs a 'kind' in {PARAM_KINDS}, got {info!r}")
    kind = info["kind"]
    if kind in ("tensor", "shape"):
        shape = info.get("shape")
        if shape is not None:
            validate_shape(shape, where)
        ndim = info.get("ndim", -1)
        if ndim is not None and (not _is_int(ndim) or ndim < -1):
            raise BytecodeError(f"{where}: bad ndim {ndim!r}")
    if kind == "tensor":
        dtype = info.get("dtype")
        if dtype is not None and not isinstance(dtype, str):
            raise BytecodeError(f"{where}: bad dtype {dtype!r}")
        dev = info.get("device")
        if dev is not None and (not _is_int(dev) or not 0 <= dev < max(ndev, 1)):
            raise BytecodeError(f"{where}: device index {dev!r} out of range ({ndev} devices)")
    if kind == "prim" and info.get("value") is not None:
        validate_prim(info["value"], where, allow_float=True)
    if kind == "tuple":
        fields = info.get("fields")
        if fields is not None:
            if not isinstance(fields, list):
                raise BytecodeError(f"{where}: tuple 'fields' must be a list")
            for i, f in enumerate(fields):
                validate_info(f, f"{where}, field {i}", ndev, depth + 1)


def _check_reg(reg: Any, func: VMFunction, where: str) -> None:
    if not _is_int(reg) or not 0 <= reg < func.num_registers:
        raise BytecodeError(
            f"{where}: register {reg!r} out of range (function has {func.num_registers})"
        )


def _check_args(args: Any, func: VMFunction, exe: Executable, where: str) -> None:
    if not isinstance(args, tuple):
        raise BytecodeError(f"{where}: args must be a tuple of (tag, value) pairs")
    for a in args:
        if not isinstance(a, tuple) or len(a) != 2 or a[0] not in ARG_TAGS:
            raise BytecodeError(f"{where}: bad argument {a!r}")
        tag, value = a
        if tag == "r":
            _check_reg(value, func, where)
        elif tag == "c":
            if not _is_int(value) or not 0 <= value < len(exe.constants):
                raise BytecodeError(
                    f"{where}: constant c[{value!r}] out of range ({len(exe.constants)} constants)"
                )
        elif tag == "f":
            if not isinstance(value, str) or value not in exe.functions:
                raise BytecodeError(f"{where}: unknown function reference {value!r}")


# builtins that take a device index, and its position among their arguments
_DEVICE_ARG = {"alloc_storage": 1, "alloc_tensor_direct": 2, "copy_to": 1}


def _check_device_arg(ins: Call, ndev: int, where: str) -> None:
    """An immediate device index of a builtin is an int naming a device (one in
    a register is checked when it runs)."""
    pos = _DEVICE_ARG.get(ins.func[len(BUILTIN_PREFIX):]) if ins.func.startswith(BUILTIN_PREFIX) else None
    if pos is None or len(ins.args) <= pos or ins.args[pos][0] != "i":
        return
    dev = ins.args[pos][1]
    if not _is_int(dev) or not 0 <= dev < max(ndev, 1):
        raise BytecodeError(f"{where}: device index {dev!r} out of range ({ndev} devices)")


def _validate_function(func: VMFunction, exe: Executable) -> None:
    fw = f"function '{func.name}'"
    if not isinstance(func.params, list) or not all(isinstance(p, str) for p in func.params):
        raise BytecodeError(f"{fw}: params must be a list of names")
    if not isinstance(func.param_info, list) or len(func.param_info) != len(func.params):
        raise BytecodeError(f"{fw}: needs one param_info per parameter")
    if not _is_int(func.num_registers) or not len(func.params) <= func.num_registers <= MAX_REGISTERS:
        raise BytecodeError(f"{fw}: bad num_registers {func.num_registers!r}")
    for i, info in enumerate(func.param_info):
        validate_info(info, f"{fw}, parameter {i}", len(exe.devices))
    if not isinstance(func.sym_bounds, dict):
        raise BytecodeError(f"{fw}: sym_bounds must be a dict")
    for name, b in func.sym_bounds.items():
        if (
            not isinstance(b, (list, tuple))
            or len(b) != 2
            or not all(x is None or _is_int(x) for x in b)
        ):
            raise BytecodeError(f"{fw}: bound of '{name}' must be [lower|null, upper|null]")
    n = len(func.instructions)
    if n == 0:
        raise BytecodeError(f"{fw}: has no instructions")
    for pc, ins in enumerate(func.instructions):
        where = f"{fw}, pc {pc}"
        if isinstance(ins, Call):
            if ins.dst is not None:
                _check_reg(ins.dst, func, where)
            if not isinstance(ins.func, str) or not ins.func:
                raise BytecodeError(f"{where}: call target must be a name")
            if ins.func.startswith(BUILTIN_PREFIX):
                if ins.func[len(BUILTIN_PREFIX):] not in BUILTINS and view_kernel(ins.func) is None:
                    raise BytecodeError(f"{where}: unknown builtin '{ins.func}'")
            _check_args(ins.args, func, exe, where)
            _check_device_arg(ins, len(exe.devices), where)
        elif isinstance(ins, KernelCall):
            if not isinstance(ins.op, str) or not ins.op:
                raise BytecodeError(f"{where}: kernel op must be a name")
            if not isinstance(ins.attrs, dict):
                raise BytecodeError(f"{where}: kernel attrs must be a dict")
            if not _is_int(ins.device) or not 0 <= ins.device < max(len(exe.devices), 1):
                raise BytecodeError(f"{where}: device index {ins.device!r} out of range")
            _check_args(ins.args, func, exe, where)
            if any(tag == "f" for tag, _ in ins.args):
                raise BytecodeError(f"{where}: a kernel cannot take a function reference")
            if not _is_int(ins.num_outputs) or not 0 <= ins.num_outputs <= len(ins.args):
                raise BytecodeError(f"{where}: bad num_outputs {ins.num_outputs!r}")
            for tag, _ in ins.args[len(ins.args) - ins.num_outputs:]:
                if tag != "r":
                    raise BytecodeError(f"{where}: kernel outputs must be registers")
            if ins.names is not None and (
                not isinstance(ins.names, tuple)
                or len(ins.names) != len(ins.args)
                or not all(x is None or isinstance(x, str) for x in ins.names)
            ):
                raise BytecodeError(f"{where}: 'names' needs one name (or null) per argument")
        elif isinstance(ins, (Kill, Ret)):
            _check_reg(ins.reg, func, where)
        elif isinstance(ins, Goto):
            if not _is_int(ins.offset) or not 0 <= pc + ins.offset < n:
                raise BytecodeError(f"{where}: jump target {pc}{ins.offset:+} out of range")
        elif isinstance(ins, If):
            _check_reg(ins.cond, func, where)
            if not _is_int(ins.false_offset) or not 0 <= pc + ins.false_offset < n:
                raise BytecodeError(f"{where}: jump target {pc}{ins.false_offset:+} out of range")
            if pc + 1 >= n:
                raise BytecodeError(f"{where}: 'If' cannot be the last instruction")
        else:
            raise BytecodeError(f"{where}: not an instruction: {ins!r}")
    if not isinstance(func.instructions[-1], (Ret, Goto)):
        raise BytecodeError(f"{fw}: the last instruction must be Ret or Goto")


def validate_executable(exe: Executable) -> None:
    """Raises BytecodeError naming the first broken rule."""
    if not isinstance(exe.devices, list) or len(exe.devices) > MAX_DEVICES:
        raise BytecodeError("executable: 'devices' must be a list")
    for i, d in enumerate(exe.devices):
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("kind"), str)
            or not _is_int(d.get("index"))
            or d["index"] < 0
            or not isinstance(d.get("memory_scope", "global"), str)
        ):
            raise BytecodeError(f"executable: device {i} must be {{kind, index, memory_scope}}")
    if not isinstance(exe.functions, dict):
        raise BytecodeError("executable: 'functions' must be a dict")
    for name, func in exe.functions.items():
        if not isinstance(func, VMFunction) or func.name != name:
            raise BytecodeError(f"executable: function entry '{name}' is malformed")
        _validate_function(func, exe)
