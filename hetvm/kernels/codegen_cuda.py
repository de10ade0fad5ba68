"""CUDA code generation for ``fused_elementwise`` programs, run through CuPy.

Why: on a GPU the NumPy runner launches one CuPy kernel and allocates one
temporary per step; a generated ``cupy.ElementwiseKernel`` computes the whole
program per element in registers, one launch, one pass over memory. CuPy does
the indexing (broadcasting, strides, empty arrays) and caches the compiled
binary on disk (``~/.cupy/kernel_cache``); hetvm keeps one kernel object per
(program, input dtypes).

What is generated comes only from a validated program (see
:mod:`.fused_program`), as in :mod:`.codegen_numba`: each step's op selects a
fixed C++ template (``_FLOAT_TEMPLATES``, ``_INT_TEMPLATES``, ``_ANY_TEMPLATES``), refs become local names (``x0``,
``t3``), numbers are written from Python floats and ints, C types come from a
fixed table. The kernel's body is plain C++ over scalars plus the helper
functions of :data:`PRELUDE`, so the same text also compiles for the host
(the tests run it there against the NumPy runner; a GPU runs it through CuPy).

Semantics follow the NumPy kernels: NaN propagates through ``maximum``,
``minimum``, ``clip`` and ``relu``; ``floor_divide`` of floats is
``floor(a / b)`` (TVM's, and the unfused kernel's); integer add, subtract, multiply, negative
and abs are computed in ``unsigned long long`` and cast back, so they wrap as
NumPy's do (signed overflow is undefined in C++); a float-to-int32/int64 cast
gives the value NumPy's cast gives here for NaN and out of range
(:func:`.codegen_numba.invalid_cast`). Kernels are compiled without fused
multiply-adds (``--fmad=false``), so arithmetic rounds as NumPy's does.
Programs with steps whose NumPy meaning differs per machine or is awkward
per element (integer ``divide``, ``floor_divide``, ``power``, ``reciprocal``,
``floor``, ``ceil`` and ``round``; float to int8/int16/unsigned; arithmetic
on bool) are not covered and run on the NumPy runner with CuPy's arrays, as
does a program whose kernel fails to compile at its first call (with a warning).
"""

from __future__ import annotations

from typing import Any, Sequence

from .codegen_numba import INT_TRUNCATES, invalid_cast
from .cuda_launch import FirstLaunch, enabled
from .fused_program import STEP_OPS, NumpyRunner, check_broadcast, parse_ref

__all__ = ["C_TYPES", "PRELUDE", "FMAD_OFF", "covers", "kernel_body", "generated_kernel"]

C_TYPES = {
    "float32": "float", "float64": "double", "bool": "bool",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long",
}  # fmt: skip
_FLOATS = ("float32", "float64")
_INTS = frozenset(C_TYPES) - {"float32", "float64", "bool"}
_SIGNED = frozenset({"int8", "int16", "int32", "int64"})

#: NVRTC options of every generated kernel: no contraction of a * b + c into
#: one rounding, which NumPy's two roundings would not match
FMAD_OFF = ("--fmad=false",)

#: helpers the templates call; ``__device__`` functions on the GPU, plain
#: inline functions where a host compiler defines ``__device__`` away.
#: ``{f}`` / ``{d}`` pairs are the float and double versions.
_FLOAT_HELPERS = """\
__device__ inline {T} hv_sigmoid_{s}({T} x) {{
    {T} e = exp{m}(-fabs{m}(x));
    return x >= ({T})0 ? ({T})1 / (({T})1 + e) : e / (({T})1 + e);
}}
__device__ inline {T} hv_sign_{s}({T} a) {{
    return a > ({T})0 ? ({T})1 : (a < ({T})0 ? ({T})-1 : (a == ({T})0 ? ({T})0 : a));
}}
"""

PRELUDE = (
    """\
// hetvm fused_elementwise helpers
template <typename T> __device__ inline T hv_max(T a, T b) { return (a > b || a != a) ? a : b; }
template <typename T> __device__ inline T hv_min(T a, T b) { return (a < b || a != a) ? a : b; }
#if defined(__CUDA_ARCH__) || defined(__CUDACC_RTC__)
__device__ inline float hv_inf_f() { return __int_as_float(0x7f800000); }
__device__ inline double hv_inf_d() { return __longlong_as_double(0x7ff0000000000000LL); }
#else
inline float hv_inf_f() { return HUGE_VALF; }
inline double hv_inf_d() { return HUGE_VAL; }
#endif
"""
    + _FLOAT_HELPERS.format(T="float", s="f", m="f")
    + _FLOAT_HELPERS.format(T="double", s="d", m="")
)

# op -> template over operands {a} {b} {c}, params {p0} {p1}, the step's C type
# {T}, the math suffix {m} ("f" for float32) and helper suffix {s}
_FLOAT_TEMPLATES: dict[str, str] = {
    "add": "{a} + {b}", "subtract": "{a} - {b}", "multiply": "{a} * {b}", "divide": "{a} / {b}",
    "floor_divide": "floor{m}({a} / {b})", "power": "pow{m}({a}, {b})",
    "maximum": "hv_max<{T}>({a}, {b})", "minimum": "hv_min<{T}>({a}, {b})",
    "negative": "-{a}", "abs": "fabs{m}({a})", "floor": "floor{m}({a})", "ceil": "ceil{m}({a})",
    "round": "rint{m}({a})", "sign": "hv_sign_{s}({a})", "reciprocal": "({T})1 / {a}",
    "nn.relu": "hv_max<{T}>({a}, ({T})0)",
    "exp": "exp{m}({a})", "log": "log{m}({a})", "sqrt": "sqrt{m}({a})", "rsqrt": "({T})1 / sqrt{m}({a})",
    "tanh": "tanh{m}({a})", "sin": "sin{m}({a})", "cos": "cos{m}({a})", "erf": "erf{m}({a})",
    "sigmoid": "hv_sigmoid_{s}({a})", "nn.silu": "{a} * hv_sigmoid_{s}({a})",
    "nn.gelu": "({T})0.5 * {a} * (({T})1 + erf{m}({a} * ({T})0.7071067811865476))",
    "nn.gelu_tanh": "({T})0.5 * {a} * (({T})1 + tanh{m}(({T})0.7978845608028654 * "
                    "({a} + ({T})0.044715 * {a} * {a} * {a})))",
    "nn.leakyrelu": "({a} > ({T})0 ? {a} : {a} * {p0})",
    "clip": "hv_min<{T}>(hv_max<{T}>({a}, {p0}), {p1})",
}  # fmt: skip

# integer and bool steps; the wrapping ones go through unsigned long long
_U = "(unsigned long long)"
_INT_TEMPLATES: dict[str, str] = {
    "add": f"{_U}{{a}} + {_U}{{b}}", "subtract": f"{_U}{{a}} - {_U}{{b}}",
    "multiply": f"{_U}{{a}} * {_U}{{b}}", "negative": f"0ULL - {_U}{{a}}",
    "maximum": "hv_max<{T}>({a}, {b})", "minimum": "hv_min<{T}>({a}, {b})",
    "sign": "({a} > ({T})0 ? ({T})1 : ({a} < ({T})0 ? ({T})-1 : ({T})0))",
    "nn.relu": "hv_max<{T}>({a}, ({T})0)",
}  # fmt: skip
_SIGNED_ABS = f"({{a}} < ({{T}})0 ? 0ULL - {_U}{{a}} : {_U}{{a}})"

# steps of any operand dtype whose result is bool, and where
_ANY_TEMPLATES: dict[str, str] = {
    "equal": "{a} == {b}", "not_equal": "{a} != {b}", "less": "{a} < {b}",
    "less_equal": "{a} <= {b}", "greater": "{a} > {b}", "greater_equal": "{a} >= {b}",
    "logical_and": "({a} != 0) && ({b} != 0)", "logical_or": "({a} != 0) || ({b} != 0)",
    "logical_not": "{a} == 0", "where": "{a} ? {b} : {c}",
}  # fmt: skip

def _invalid(dtype: str) -> int | None:
    """What NumPy's float-to-``dtype`` cast gives out of range here, or None."""
    return invalid_cast(dtype) if dtype in INT_TRUNCATES else None


def float_literal(value: float) -> str:
    """A finite double as C++ text (``repr`` is the shortest round-trip form)."""
    text = repr(float(value))
    return text if any(ch in text for ch in ".en") else text + ".0"


def int_literal(value: int, dtype: str) -> str:
    """An integer of ``dtype`` as C++ text: its bits as an unsigned literal, cast
    (``-9223372036854775808`` is no literal in C++)."""
    return f"({C_TYPES[dtype]}){int(value) % (1 << 64):#x}ULL"


def _literal(value: Any, dtype: str) -> str:
    if dtype == "bool":
        return "true" if value else "false"
    if dtype in _FLOATS:
        return f"({C_TYPES[dtype]}){float_literal(value)}"
    return int_literal(value, dtype)


def _float_to_int(name: str, dtype: str) -> str:
    in_range = " && ".join(c.format(v=f"(double){name}") for c in INT_TRUNCATES[dtype])
    invalid = int_literal(_invalid(dtype), dtype)  # type: ignore[arg-type]
    return f"(({in_range}) ? ({C_TYPES[dtype]}){name} : {invalid})"


def _int_clip_covered(dtype: str, params: Sequence[Any]) -> bool:
    if dtype in INT_TRUNCATES:
        return _invalid(dtype) is not None
    import numpy as np

    info = np.iinfo(dtype)
    return all(info.min <= float(p) <= info.max for p in params)


def covers(program: Sequence[Sequence[Any]], input_dtypes: Sequence[str]) -> bool:
    """Whether every step of ``program`` with these input dtypes has a template
    (see the module doc for what is left to the NumPy runner)."""
    if not input_dtypes or any(d not in C_TYPES for d in input_dtypes):
        return False
    dtypes: list[str] = []
    for step in program:
        op, dtype = step[0], step[1]
        n_refs = STEP_OPS[op][0]
        src = [input_dtypes[i] if kind == "x" else dtypes[i] for kind, i in map(parse_ref, step[2 : 2 + n_refs])]
        dtypes.append(dtype)
        if op == "const" or op in _ANY_TEMPLATES:
            if op == "where" and dtype == "bool":
                return False
            continue
        if op == "astype":
            if src[0] in _FLOATS and dtype in _INTS and _invalid(dtype) is None:
                return False
            continue
        if dtype in _FLOATS:
            if op not in _FLOAT_TEMPLATES:
                return False
        elif dtype in _INTS:
            if op == "clip":
                if not _int_clip_covered(dtype, step[3:]):
                    return False
            elif op not in _INT_TEMPLATES and op != "abs":
                return False
        else:  # arithmetic on bool
            return False
    return True


def kernel_body(program: Sequence[Sequence[Any]], input_dtypes: Sequence[str]) -> str:
    """The per-element C++ statements: inputs ``x0``.., steps ``t0``.., the result
    stored in ``y`` (CuPy's output parameter). ``covers`` must hold.

    CuPy binds each input as ``const T &x0`` and the output as ``T &y`` to the
    element's memory, so ``y`` is written once, last: an output that shares its
    buffer with an input (InplaceElementwise) is read before it is written."""
    lines: list[str] = []
    dtypes: list[str] = []
    for k, step in enumerate(program):
        op, dtype = step[0], step[1]
        n_refs = STEP_OPS[op][0]
        refs, params = step[2 : 2 + n_refs], step[2 + n_refs :]
        t = C_TYPES[dtype]
        dtypes.append(dtype)
        if op == "const":
            lines.append(f"const {t} t{k} = {_literal(params[0], dtype)};")
            continue
        names: dict[str, str] = {}
        srcs: list[str] = []
        for key, ref in zip("abc", refs):
            kind, i = parse_ref(ref)  # type: ignore[misc]
            names[key] = f"{kind}{i}"
            srcs.append(input_dtypes[i] if kind == "x" else dtypes[i])
        if op == "astype":
            if dtype == "bool":
                expr = f"{names['a']} != 0"  # nonzero, NaN included, is true (NumPy's)
            elif srcs[0] in _FLOATS and dtype in _INTS:
                expr = _float_to_int(names["a"], dtype)
            else:
                expr = names["a"]
        elif op in _ANY_TEMPLATES:
            expr = _ANY_TEMPLATES[op].format(**names)
        elif op == "clip" and dtype in _INTS:
            # NumPy clips integers by Python floats in double (NEP 50), then stores
            lo, hi = (float_literal(p) for p in params)
            lines.append(f"const double c{k} = hv_min<double>(hv_max<double>((double){names['a']}, {lo}), {hi});")
            expr = _float_to_int(f"c{k}", dtype) if dtype in INT_TRUNCATES else f"c{k}"
        else:
            for i, p in enumerate(params):  # params in the step's dtype, as NumPy converts them
                names[f"p{i}"] = _literal(p, dtype)
            if dtype in _FLOATS:
                fmt = {"T": t, "m": "f" if dtype == "float32" else "", "s": "f" if dtype == "float32" else "d"}
                expr = _FLOAT_TEMPLATES[op].format(**names, **fmt)
            elif op == "abs":
                expr = _SIGNED_ABS.format(**names, T=t) if dtype in _SIGNED else names["a"]
            else:
                expr = _INT_TEMPLATES[op].format(**names, T=t)
        lines.append(f"const {t} t{k} = ({t})({expr});")
    lines.append(f"y = t{len(program) - 1};")
    return "\n".join(lines)


def _params(input_dtypes: Sequence[str]) -> str:
    return ", ".join(f"{d} x{i}" for i, d in enumerate(input_dtypes))


class _CupyKernel:
    """``fn(*inputs, out)`` for one program: a generated ElementwiseKernel per
    set of input dtypes that :func:`covers` holds for, the NumPy runner (on the
    same array module) for the rest."""

    def __init__(self, xp: Any, program: tuple) -> None:
        self.xp = xp
        self.program = program
        self.kernels: dict[tuple[str, ...], Any] = {}
        self.first_launch = FirstLaunch()
        self.shapes_checked: set[tuple] = set()  # (input shapes, output shape) already checked
        self.fallback: NumpyRunner | None = None

    def _kernel(self, input_dtypes: tuple[str, ...]) -> Any:
        if input_dtypes not in self.kernels:
            kernel = None
            if covers(self.program, input_dtypes):
                kernel = self.xp.ElementwiseKernel(
                    _params(input_dtypes), f"{self.program[-1][1]} y", kernel_body(self.program, input_dtypes),
                    "hetvm_fused", preamble=PRELUDE, options=FMAD_OFF, no_return=True,
                )  # fmt: skip
            self.kernels[input_dtypes] = kernel
        return self.kernels[input_dtypes]

    def __call__(self, *args: Any) -> None:
        inputs, out = args[:-1], args[-1]
        shapes = (tuple(a.shape for a in inputs), out.shape)
        if shapes not in self.shapes_checked:  # once per shape set: the VM calls with few
            check_broadcast(inputs, out)
            self.shapes_checked.add(shapes)
        key = tuple(str(a.dtype) for a in inputs)
        kernel = self._kernel(key)
        if kernel is not None and str(out.dtype) == self.program[-1][1]:
            if self.first_launch.run(key, lambda: kernel(*inputs, out)):
                return
            self.kernels[key] = None
        if self.fallback is None:
            self.fallback = NumpyRunner(self.xp, self.program)
        self.fallback(*args)


def generated_kernel(xp: Any, program: tuple) -> Any:
    """A kernel of ``program`` for CuPy's arrays, or None where ``xp`` has no
    ``ElementwiseKernel`` (NumPy) or ``HETVM_CUDA_CODEGEN`` is ``0``."""
    if getattr(xp, "ElementwiseKernel", None) is None or not enabled():
        return None
    return _CupyKernel(xp, program)
