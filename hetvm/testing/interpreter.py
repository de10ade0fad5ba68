"""A reference interpreter: evaluates IR directly with NumPy, the oracle of the tests.

It walks a function's bindings in order, keeping values in an environment:
tensors are NumPy arrays, tuples are Python tuples, shapes are :class:`Shape`,
prim values are Python numbers. High-level op calls run the op's CPU kernel
through :func:`hetvm.transform.fold_constant.evaluate_op`, so the interpreter
shares no code with the pipeline, the code generator or the VM -- that is what
makes it an oracle for them. Device annotations (``hint_on_device``,
``to_vdevice``, vdevices in struct info) are identities: every value lives on
the host here.

The interpreter also runs partly lowered IR (after ``LegalizeOps``,
``CallTIRRewrite``, ``StaticPlanBlockMemory``, ``LowerAllocTensor``,
``KillAfterLastUse``) so each pass can be checked alone: planned tensors are
real views into byte arenas (two live tensors placed in overlapping bytes give
wrong results here too), and a variable read after its kill is an error. A
``memory.kill_tensor`` also poisons the tensor's bytes (0xFF, NaN for
floats), so a read through any other variable that shares them -- a view, a
value a callee returned -- gives wrong results instead of passing unnoticed;
killing bytes of a parameter or a constant (which outlive the call) is an
error. The interpreter decides this from the values themselves (which arrays
share memory), not from any compiler analysis of the IR.

Every value is checked against its binding's struct info, with symbolic
variables bound at parameters and ``match_cast`` and checked against the
function's ``tir_var_upper_bound``; a mismatch raises
:class:`~hetvm.errors.HetvmRuntimeError` naming the binding.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..analysis.tail_calls import tail_calls
from ..errors import HetvmRuntimeError, StructInfoError
from ..ir import expr as E
from ..ir import prim as P
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.op_registry import DeviceBehavior, infer_call, op_info
from ..kernels.view_kernels import place_view, view_kernel
from ..op.effects import is_view_op

__all__ = ["Shape", "Storage", "Interpreter", "interpret", "to_numpy_tree", "values_close"]

KERNEL_PREFIXES = ("kernel.", "kernel:")


class Shape(tuple):
    """A shape value (a tuple of ints), told apart from a tuple value."""

    __slots__ = ()


class Storage:
    """A byte arena (``memory.alloc_storage``); tensors are views into it."""

    __slots__ = ("data", "name")

    def __init__(self, nbytes: int, name: str) -> None:
        # filled with a pattern, not zeros, so reading unwritten bytes shows
        self.data = np.full(int(nbytes), 0xA5, dtype=np.uint8)
        self.name = name

    def view(self, offset: int, shape: Sequence[int], dtype: str) -> np.ndarray:
        dt = np_dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
        end = offset + count * dt.itemsize
        if offset < 0 or end > self.data.size:
            raise HetvmRuntimeError(
                f"tensor of {count * dt.itemsize} bytes at offset {offset} does not fit "
                f"storage '{self.name}' of {self.data.size} bytes"
            )
        return self.data[offset:end].view(dt).reshape(tuple(shape))


class _FuncRef:
    """A module function used as a value (a GlobalVar bound to a variable)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype("bool" if dtype == "bool" else dtype)


def _dtype_name(arr: np.ndarray) -> str:
    return "bool" if arr.dtype == np.bool_ else str(arr.dtype)


class _Frame:
    """Per-call state: variable values, symbolic variable values, killed vars."""

    __slots__ = ("env", "sym", "killed", "func_name", "outside", "tails")

    def __init__(self, func_name: str) -> None:
        self.env: dict[E.Var, Any] = {}
        self.sym: dict[P.PrimVar, int] = {}
        self.killed: dict[E.Var, str] = {}
        self.func_name = func_name
        # arrays whose bytes outlive the call (parameters, constants): never killed
        self.outside: dict[int, tuple[str, np.ndarray]] = {}
        self.tails: dict = {}  # binding var -> its call in tail position


class _TailCall(Exception):
    """A call in tail position: the caller's frame ends before the callee runs."""

    def __init__(self, name: str, args: tuple) -> None:
        super().__init__(name)
        self.name = name
        self.args = args


class Interpreter:
    """Evaluates the functions of one IRModule.

    ``globals`` maps ``call_packed`` names to Python callables (NumPy in,
    NumPy out); names not given fall back to hetvm's global function registry.
    ``max_depth`` bounds recursion between functions.
    """

    def __init__(
        self,
        mod: IRModule,
        globals: Mapping[str, Callable[..., Any]] | None = None,  # noqa: A002
        max_depth: int = 64,
    ) -> None:
        self.mod = mod
        self.globals = dict(globals or {})
        self.max_depth = max_depth
        self._depth = 0
        self._tails: dict[str, dict] = {}

    # ------------------------------------------------------------------
    # entry
    # ------------------------------------------------------------------
    def run(self, name: str = "main", *args: Any) -> Any:
        """Calls function ``name`` on NumPy (or NDArray) arguments."""
        func = self.mod[name]
        return self.call_function(name, func, [_as_value(a) for a in args])

    def call_function(self, name: str, func: E.Function, args: Sequence[Any]) -> Any:
        """Runs ``func``; a call it makes in tail position
        (:mod:`hetvm.analysis.tail_calls`) runs after its frame is dropped, as the
        VM does, so a loop (a function calling itself there) runs in constant depth."""
        if self._depth >= self.max_depth:
            raise HetvmRuntimeError(f"call depth over {self.max_depth} entering '{name}'")
        self._depth += 1
        checks: list[tuple[str, E.Function, dict]] = []
        try:
            while True:
                frame = self._enter(name, func, args)
                args = ()
                try:
                    out = self.eval_seq(func.body, frame)
                except _TailCall as tail:
                    if len(checks) < 1:  # the first frame's result type, checked at the end
                        checks.append((name, func, frame.sym))
                    name, func, args = tail.name, self.mod[tail.name], tail.args
                    continue
                checks.append((name, func, frame.sym))
                break
        finally:
            self._depth -= 1
        for fname, f, sym in checks:
            if f.ret_struct_info is not None:
                check = _Frame(fname)
                check.sym = sym
                self._check(f.ret_struct_info, out, check, f"result of '{fname}'", define=False)
        return out

    def _enter(self, name: str, func: E.Function, args: Sequence[Any]) -> _Frame:
        if len(args) != len(func.params):
            raise HetvmRuntimeError(
                f"function '{name}' takes {len(func.params)} argument(s), got {len(args)}"
            )
        frame = _Frame(name)
        frame.tails = self._tail_calls(name, func)
        for param, arg in zip(func.params, args):
            _bind_defs(param.struct_info, arg, frame.sym)
        for param, arg in zip(func.params, args):
            self._check(param.struct_info, arg, frame, f"parameter '{param.name_hint}'")
            frame.env[param] = arg
            for a in _arrays_in(arg):
                frame.outside[id(a)] = (f"parameter '{param.name_hint}'", a)
        self._check_bounds(func, frame)
        return frame

    def _tail_calls(self, name: str, func: E.Function) -> dict:
        if name not in self._tails:
            self._tails[name] = tail_calls(func, self.mod) if name in self.mod else {}
        return self._tails[name]

    def _check_bounds(self, func: E.Function, frame: _Frame) -> None:
        bounds = func.attrs.get("tir_var_upper_bound") or {}
        for var, value in frame.sym.items():
            bound = bounds.get(var.name)
            if bound is not None and value > int(bound):
                raise HetvmRuntimeError(
                    f"function '{frame.func_name}': symbolic variable '{var.name}' = {value} "
                    f"exceeds its upper bound {int(bound)}"
                )

    # ------------------------------------------------------------------
    # blocks and bindings
    # ------------------------------------------------------------------
    def eval_seq(self, seq: E.SeqExpr, frame: _Frame) -> Any:
        for block in seq.blocks:
            for binding in block.bindings:
                self.eval_binding(binding, frame)
        return self.eval(seq.body, frame)

    def eval_binding(self, binding: E.Binding, frame: _Frame) -> None:
        tail = frame.tails.get(binding.var)
        if tail is not None:
            args = tuple(self.eval(a, frame) for a in tail.args)
            raise _TailCall(tail.op.name_hint, args)  # type: ignore[attr-defined]
        value = self.eval(binding.value, frame)  # type: ignore[attr-defined]
        var = binding.var
        where = f"binding '{var.name_hint}' in '{frame.func_name}'"
        if isinstance(binding, E.MatchCast):
            _bind_defs(binding.struct_info, value, frame.sym)
            self._check(binding.struct_info, value, frame, f"match_cast {where}")
            if frame.func_name in self.mod:
                self._check_bounds(self.mod[frame.func_name], frame)
        elif var.struct_info is not None:
            self._check(var.struct_info, value, frame, where, define=False)
        frame.env[var] = value

    def _check(
        self, sinfo: S.StructInfo | None, value: Any, frame: _Frame, what: str, define: bool = True
    ) -> None:
        if sinfo is None:
            return
        if define:
            _bind_defs(sinfo, value, frame.sym)
        problem = _mismatch(sinfo, value, frame.sym)
        if problem is not None:
            raise HetvmRuntimeError(f"{what}: {problem}")

    # ------------------------------------------------------------------
    # expressions
    # ------------------------------------------------------------------
    def eval(self, expr: E.Expr, frame: _Frame) -> Any:
        if isinstance(expr, E.Var):
            if expr in frame.killed:
                raise HetvmRuntimeError(
                    f"'{expr.name_hint}' is used after it was killed ({frame.killed[expr]}) "
                    f"in '{frame.func_name}'"
                )
            try:
                return frame.env[expr]
            except KeyError:
                raise HetvmRuntimeError(
                    f"'{expr.name_hint}' is used before it is defined in '{frame.func_name}'"
                ) from None
        if isinstance(expr, E.Constant):
            frame.outside[id(expr.data)] = ("a constant", expr.data)
            return expr.data
        if isinstance(expr, E.ShapeExpr):
            return Shape(_eval_prim(v, frame.sym) for v in expr.values)
        if isinstance(expr, E.PrimValue):
            if isinstance(expr.value, P.FloatImm):
                return expr.value.value
            return _eval_prim(expr.value, frame.sym)
        if isinstance(expr, (E.StringImm, E.DataTypeImm)):
            return expr.value
        if isinstance(expr, E.Tuple):
            return tuple(self.eval(f, frame) for f in expr.fields)
        if isinstance(expr, E.TupleGetItem):
            tup = self.eval(expr.tuple_value, frame)
            if not isinstance(tup, tuple) or isinstance(tup, Shape):
                raise HetvmRuntimeError(f"TupleGetItem of a non-tuple in '{frame.func_name}'")
            return tup[expr.index]
        if isinstance(expr, E.GlobalVar):
            return _FuncRef(expr.name_hint)
        if isinstance(expr, E.If):
            cond = self.eval(expr.cond, frame)
            branch = expr.true_branch if _truth(cond) else expr.false_branch
            return self.eval_seq(branch, frame)
        if isinstance(expr, E.SeqExpr):
            return self.eval_seq(expr, frame)
        if isinstance(expr, E.Call):
            return self.eval_call(expr, frame)
        if isinstance(expr, (E.ExternFunc, E.Op)):
            return expr
        raise HetvmRuntimeError(f"cannot interpret {type(expr).__name__} in '{frame.func_name}'")

    def eval_call(self, call: E.Call, frame: _Frame) -> Any:
        callee = call.op
        if isinstance(callee, E.Op):
            return self.eval_op(call, callee.name, frame)
        if isinstance(callee, E.GlobalVar):
            args = [self.eval(a, frame) for a in call.args]
            return self.call_function(callee.name_hint, self.mod[callee.name_hint], args)
        if isinstance(callee, E.ExternFunc):
            return self.call_packed(callee.global_symbol, call, frame)
        target = self.eval(callee, frame)
        if isinstance(target, _FuncRef):
            args = [self.eval(a, frame) for a in call.args]
            return self.call_function(target.name, self.mod[target.name], args)
        raise HetvmRuntimeError(f"cannot call a {type(target).__name__} in '{frame.func_name}'")

    # -- op calls ----------------------------------------------------------
    def eval_op(self, call: E.Call, name: str, frame: _Frame) -> Any:
        handler = _OP_HANDLERS.get(name)
        if handler is not None:
            return handler(self, call, frame)
        info = op_info(name)
        if info.device_behavior is not DeviceBehavior.FOLLOW_INPUTS:
            raise HetvmRuntimeError(f"the interpreter has no rule for op '{name}'")
        args = [self.eval(a, frame) for a in call.args]
        out_sinfo = self._static_sinfo(call, args, frame)
        if is_view_op(name):
            # views (the op's declared effect) keep element order: the result is the input read in the new shape
            assert isinstance(out_sinfo, S.TensorStructInfo) and out_sinfo.static_shape is not None
            return np.array(args[0], copy=True).reshape(out_sinfo.static_shape)
        return _run_kernel(name, dict(call.attrs), args, out_sinfo)

    def _static_sinfo(self, call: E.Call, args: Sequence[Any], frame: _Frame) -> S.StructInfo:
        """The call's result struct info with concrete shapes.

        Re-inferred from the concrete argument values, so a struct info that
        erased a shape still gives one; the declared struct info is checked
        against the value afterwards by the binding.
        """
        concrete = [_as_const_expr(a, orig) for a, orig in zip(args, call.args)]
        try:
            return infer_call(E.Call(call.op, tuple(concrete), call.attrs, call.sinfo_args))
        except StructInfoError as err:
            raise HetvmRuntimeError(
                f"op '{call.op.name}' in '{frame.func_name}' rejects its run-time arguments: {err}"  # type: ignore[attr-defined]
            ) from None

    def call_packed(self, symbol: str, call: E.Call, frame: _Frame) -> Any:
        args = [self.eval(a, frame) for a in call.args]
        for prefix in KERNEL_PREFIXES:
            if symbol.startswith(prefix):
                # destination passing: inputs then outputs, written in place
                op = symbol[len(prefix):]
                nout = int(call.attrs.get("num_outputs", 1))
                attrs = dict(call.attrs.get("op_attrs", {}) or {})
                from ..kernels import get_kernel

                get_kernel(op, "cpu")(np, attrs, *_kernel_args(args[:-nout]), *args[-nout:])
                return ()
        if view_kernel(symbol) is not None:
            src = args[0]
            if not isinstance(src, np.ndarray):
                raise HetvmRuntimeError(f"{symbol} needs a tensor in '{frame.func_name}', got {type(src).__name__}")
            offset, dims = place_view(symbol, src.shape, src.itemsize, args[1:])
            return _view_at(src, offset, dims)
        if symbol == "vm.builtin.copy_to":
            src, _dev, dst = args
            if dst is None:
                return np.array(src, copy=True)
            dst[...] = src
            return ()
        fn = self.globals.get(symbol)
        if fn is None:
            from ..runtime.registry import get_global_func

            fn = get_global_func(symbol, allow_missing=True)
        if fn is None:
            raise HetvmRuntimeError(f"no global function '{symbol}' for call_packed")
        out = fn(*args)
        return _as_value(out) if out is not None else ()


# --------------------------------------------------------------------------
# op handlers that are not a CPU kernel
# --------------------------------------------------------------------------


def _identity(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    return self.eval(call.args[0], frame)


def _copy(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    return np.array(self.eval(call.args[0], frame), copy=True)


def _shape_of(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    return Shape(int(d) for d in self.eval(call.args[0], frame).shape)


def _shape_to_tensor(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    return np.asarray(tuple(self.eval(call.args[0], frame)), dtype=np.int64)


def _tensor_to_shape(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    return Shape(int(v) for v in np.asarray(self.eval(call.args[0], frame)).reshape(-1))


def _call_dps_packed(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    func, args_expr = call.args
    symbol = func.global_symbol  # type: ignore[attr-defined]
    args = self.eval(args_expr, frame)
    args = list(args) if isinstance(args, tuple) and not isinstance(args, Shape) else [args]
    out_sinfo = _substitute(call.sinfo_args[0], frame.sym)
    for prefix in KERNEL_PREFIXES:
        if symbol.startswith(prefix):
            attrs = dict(call.attrs.get("op_attrs", {}) or {})
            return _run_kernel(symbol[len(prefix):], attrs, args, out_sinfo)
    raise HetvmRuntimeError(f"call_dps_packed of '{symbol}' is not a kernel")


def _builtin_alloc_tensor(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    shape = self.eval(call.args[0], frame)
    dtype = self.eval(call.args[1], frame)
    # a pattern, not zeros: a kernel that does not write its output shows
    return _garbage(tuple(shape), dtype)


def _alloc_storage(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    size = self.eval(call.args[0], frame)
    nbytes = int(np.prod(tuple(size), dtype=np.int64)) if isinstance(size, tuple) else int(size)
    return Storage(nbytes, f"storage in '{frame.func_name}'")


def _alloc_tensor_from_storage(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    storage = self.eval(call.args[0], frame)
    offset = int(self.eval(call.args[1], frame))
    shape = self.eval(call.args[2], frame)
    dtype = self.eval(call.args[3], frame)
    if not isinstance(storage, Storage):
        raise HetvmRuntimeError(f"alloc_tensor from a non-storage in '{frame.func_name}'")
    return storage.view(offset, tuple(shape), dtype)


def _kill(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    target = call.args[0]
    if isinstance(target, E.Var):
        value = self.eval(target, frame)  # killing twice is a use after a kill
        name = call.op.name  # type: ignore[attr-defined]
        if name == "memory.kill_tensor" and isinstance(value, np.ndarray):
            # a storage's kill only drops the handle (tensors carved from it
            # still live) and kill_object only a register; a tensor's bytes die
            for what, arr in frame.outside.values():
                if np.may_share_memory(value, arr):
                    raise HetvmRuntimeError(
                        f"'{target.name_hint}' is killed in '{frame.func_name}', but its bytes "
                        f"are those of {what}, which outlive the call"
                    )
            _poison(value)
        frame.killed[target] = f"by {name}"
    return ()


def _poison(arr: np.ndarray) -> None:
    """Overwrites a dead tensor's bytes (0xFF: NaN for floats), as the VM's
    ``poison`` mode does with freed memory."""
    if not arr.flags.writeable or arr.size == 0:
        return
    if arr.flags.c_contiguous:
        arr.reshape(-1).view(np.uint8)[...] = 0xFF
    elif arr.dtype.kind == "f":
        arr[...] = np.nan
    else:
        arr[...] = np.array(-1).astype(arr.dtype)


def _arrays_in(value: Any) -> list[np.ndarray]:
    """The arrays in a value (a tensor, or a tuple of them, nested)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, tuple) and not isinstance(value, Shape):
        return [a for v in value for a in _arrays_in(v)]
    return []


def _fresh(out: Any, args: Sequence[Any]) -> Any:
    """``out`` with any array that shares bytes with an argument copied: an op's
    result has bytes of its own (NumPy may answer with a view)."""
    if isinstance(out, tuple) and not isinstance(out, Shape):
        return tuple(_fresh(o, args) for o in out)
    if isinstance(out, np.ndarray):
        inputs = [a for arg in args for a in _arrays_in(arg)]
        if any(np.may_share_memory(out, a) for a in inputs):
            return np.array(out, copy=True)
    return out


def _null_value(self: Interpreter, call: E.Call, frame: _Frame) -> Any:
    return None


_OP_HANDLERS: dict[str, Callable[[Interpreter, E.Call, _Frame], Any]] = {
    "hint_on_device": _identity,
    "to_vdevice": _copy,
    "shape_of": _shape_of,
    "shape_to_tensor": _shape_to_tensor,
    "tensor_to_shape": _tensor_to_shape,
    "call_dps_packed": _call_dps_packed,
    "builtin.alloc_tensor": _builtin_alloc_tensor,
    "memory.alloc_storage": _alloc_storage,
    "vm.alloc_storage": _alloc_storage,
    "memory.alloc_tensor": _alloc_tensor_from_storage,
    "vm.alloc_tensor": _alloc_tensor_from_storage,
    "memory.kill_tensor": _kill,
    "memory.kill_storage": _kill,
    "vm.kill_object": _kill,
    "null_value": _null_value,
}


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _garbage(shape: tuple, dtype: str) -> np.ndarray:
    dt = np_dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return np.full(count * dt.itemsize, 0xA5, dtype=np.uint8).view(dt).reshape(shape)


def _run_kernel(name: str, attrs: dict, args: Sequence[Any], out_sinfo: S.StructInfo) -> Any:
    from ..transform.fold_constant import evaluate_op

    try:
        return _fresh(evaluate_op(name, attrs, _kernel_args(args), out_sinfo), args)
    except ValueError as err:
        raise HetvmRuntimeError(f"op '{name}': {err}") from None


def _kernel_args(args: Sequence[Any]) -> list[Any]:
    """Values as kernels take them: shapes as tuples of ints, tuples as lists."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, Shape):
            out.append(tuple(a))
        elif isinstance(a, tuple):
            out.append(list(a))
        else:
            out.append(a)
    return out


def _as_const_expr(value: Any, orig: E.Expr) -> E.Expr:
    """An IR leaf with static struct info describing a run-time value."""
    if isinstance(value, np.ndarray):
        return E.Var("v", struct_info=S.TensorStructInfo(value.shape, _dtype_name(value)))
    if isinstance(value, Shape):
        return E.ShapeExpr(tuple(value))
    if isinstance(value, tuple):
        return E.Tuple(tuple(_as_const_expr(v, orig) for v in value))
    if isinstance(orig, (E.PrimValue, E.StringImm, E.DataTypeImm, E.Constant)):
        return orig
    if isinstance(value, (bool, np.bool_)):
        return E.PrimValue(P.IntImm(int(value), "bool"))
    if isinstance(value, (int, np.integer)):
        return E.PrimValue(int(value))
    if isinstance(value, (float, np.floating)):
        return E.PrimValue(float(value))
    return orig


def _eval_prim(e: P.PrimExpr, sym: Mapping[P.PrimVar, int]) -> int:
    try:
        return P.evaluate(e, sym)
    except StructInfoError as err:
        raise HetvmRuntimeError(str(err)) from None


def _substitute(sinfo: S.StructInfo, sym: Mapping[P.PrimVar, int]) -> S.StructInfo:
    from ..ir.block_builder import substitute_sinfo

    return substitute_sinfo(sinfo, dict(sym)) if sym else sinfo


def _truth(cond: Any) -> bool:
    arr = np.asarray(cond)
    if arr.size != 1:
        raise HetvmRuntimeError(f"If condition must be a scalar, got shape {arr.shape}")
    return bool(arr.reshape(()))


def _as_value(value: Any) -> Any:
    """NDArrays and nested tuples as interpreter values."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (list, tuple)) and not isinstance(value, Shape):
        return tuple(_as_value(v) for v in value)
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    if isinstance(value, (np.generic,)):
        return np.asarray(value)
    return value


def _bind_defs(sinfo: S.StructInfo | None, value: Any, sym: dict[P.PrimVar, int]) -> None:
    """Binds the bare symbolic variables of ``sinfo`` from ``value`` (first wins)."""
    if isinstance(sinfo, S.TensorStructInfo) and isinstance(value, np.ndarray):
        if sinfo.shape is not None and len(sinfo.shape) == value.ndim:
            for d, n in zip(sinfo.shape, value.shape):
                if isinstance(d, P.PrimVar) and d not in sym:
                    sym[d] = int(n)
    elif isinstance(sinfo, S.ShapeStructInfo) and isinstance(value, tuple):
        if sinfo.values is not None and len(sinfo.values) == len(value):
            for d, n in zip(sinfo.values, value):
                if isinstance(d, P.PrimVar) and d not in sym:
                    sym[d] = int(n)
    elif isinstance(sinfo, S.PrimStructInfo) and isinstance(sinfo.value, P.PrimVar):
        if sinfo.value not in sym and isinstance(value, (int, np.integer)):
            sym[sinfo.value] = int(value)
    elif isinstance(sinfo, S.TupleStructInfo) and isinstance(value, tuple):
        for f, v in zip(sinfo.fields, value):
            _bind_defs(f, v, sym)


def _dims_mismatch(pattern: Sequence[P.PrimExpr], actual: Sequence[int], sym: Mapping) -> str | None:
    if len(pattern) != len(actual):
        return f"expected {len(pattern)} dimension(s), got shape {tuple(actual)}"
    for i, (d, n) in enumerate(zip(pattern, actual)):
        if any(v not in sym for v in P.free_vars(d)):
            continue  # a var nothing defines: the IR cannot check it either
        want = P.evaluate(d, sym)
        if want != int(n):
            return f"dimension {i} is {int(n)}, expected {P.to_str(d)} = {want}"
    return None


def _mismatch(sinfo: S.StructInfo, value: Any, sym: Mapping[P.PrimVar, int]) -> str | None:
    """Why ``value`` does not fit ``sinfo`` (None when it does)."""
    if isinstance(sinfo, S.ObjectStructInfo):
        return None
    if isinstance(sinfo, S.TensorStructInfo):
        if not isinstance(value, np.ndarray):
            return f"expected a tensor, got {type(value).__name__}"
        if sinfo.dtype is not None and _dtype_name(value) != sinfo.dtype:
            return f"dtype is {_dtype_name(value)}, expected {sinfo.dtype}"
        if sinfo.ndim != -1 and value.ndim != sinfo.ndim:
            return f"rank is {value.ndim}, expected {sinfo.ndim}"
        if sinfo.shape is not None:
            return _dims_mismatch(sinfo.shape, value.shape, sym)
        return None
    if isinstance(sinfo, S.ShapeStructInfo):
        if not isinstance(value, Shape):
            return f"expected a shape, got {type(value).__name__}"
        if sinfo.ndim != -1 and len(value) != sinfo.ndim:
            return f"shape has {len(value)} dimension(s), expected {sinfo.ndim}"
        if sinfo.values is not None:
            return _dims_mismatch(sinfo.values, value, sym)
        return None
    if isinstance(sinfo, S.PrimStructInfo):
        if isinstance(value, np.ndarray) or not isinstance(value, (int, float, bool, np.generic)):
            return f"expected a prim value, got {type(value).__name__}"
        if sinfo.value is not None and not isinstance(sinfo.value, P.FloatImm):
            if all(v in sym for v in P.free_vars(sinfo.value)):
                want = P.evaluate(sinfo.value, sym)
                if want != value:
                    return f"value is {value}, expected {want}"
        return None
    if isinstance(sinfo, S.TupleStructInfo):
        if not isinstance(value, tuple) or isinstance(value, Shape):
            return f"expected a tuple, got {type(value).__name__}"
        if len(value) != len(sinfo.fields):
            return f"tuple has {len(value)} field(s), expected {len(sinfo.fields)}"
        for i, (f, v) in enumerate(zip(sinfo.fields, value)):
            problem = _mismatch(f, v, sym)
            if problem is not None:
                return f"field {i}: {problem}"
        return None
    if isinstance(sinfo, S.FuncStructInfo):
        return None if isinstance(value, _FuncRef) else f"expected a function, got {type(value).__name__}"
    return None


def interpret(mod: IRModule, *args: Any, name: str = "main") -> Any:
    """Runs ``mod[name]`` on ``args`` with the reference interpreter."""
    return Interpreter(mod).run(name, *args)


def to_numpy_tree(value: Any) -> Any:
    """VM or interpreter results as NumPy arrays / nested tuples (for comparing)."""
    if isinstance(value, (list, tuple)) and not isinstance(value, Shape):
        return tuple(to_numpy_tree(v) for v in value)
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        return np.asarray(value.numpy())
    if isinstance(value, Shape):
        return tuple(value)
    return np.asarray(value) if isinstance(value, (np.ndarray, np.generic)) else value


def values_close(
    got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-6, path: str = "result"
) -> str | None:
    """None when two result trees agree (NaN equals NaN), else where they differ."""
    got, want = to_numpy_tree(got), to_numpy_tree(want)
    if isinstance(want, tuple):
        if not isinstance(got, tuple) or len(got) != len(want):
            return f"{path}: expected a tuple of {len(want)}, got {type(got).__name__}"
        for i, (g, w) in enumerate(zip(got, want)):
            problem = values_close(g, w, rtol, atol, f"{path}[{i}]")
            if problem is not None:
                return problem
        return None
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"{path}: expected an array, got {type(got).__name__}"
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{path}: got {got.dtype}{got.shape}, expected {want.dtype}{want.shape}"
        if want.dtype.kind in "fc":
            tol = max(rtol, 1e-3) if want.dtype == np.float16 else rtol
            ok = np.allclose(got, want, rtol=tol, atol=atol, equal_nan=True)
        else:
            ok = np.array_equal(got, want)
        if not ok:
            bad = np.argwhere(~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
                              if want.dtype.kind in "fc" else got != want)
            idx = tuple(bad[0]) if len(bad) else ()
            return (f"{path}: values differ at {len(bad)} position(s), first {idx}: "
                    f"got {got[idx]!r}, expected {want[idx]!r}")
        return None
    return None if got == want else f"{path}: got {got!r}, expected {want!r}"


def _view_at(src: np.ndarray, offset: int, shape: tuple) -> np.ndarray:
    """A view builtin's result: ``shape`` over ``src``'s bytes from ``offset``, shared."""
    if not src.flags.c_contiguous:  # interpreter tensors are: reshape(-1) is then a view
        if offset == 0 and int(np.prod(shape, dtype=np.int64)) == src.size:
            return src.reshape(shape)  # a caller's strided array, read in the new shape
        raise HetvmRuntimeError("a view needs a contiguous tensor")
    flat = src.reshape(-1).view(np.uint8)
    count = int(np.prod(shape, dtype=np.int64)) * src.dtype.itemsize
    if offset < 0 or offset + count > flat.size:
        raise HetvmRuntimeError(f"view_at: {shape} at byte {offset} does not fit {src.shape} {src.dtype}")
    return flat[offset : offset + count].view(src.dtype).reshape(shape)
