"""Operator constructors (``hetvm.op.add``, ``hetvm.op.nn.conv2d`` ...).

Importing this package registers every op's inference rule in the registry
of :mod:`hetvm.ir.op_registry`. Constructors have TVM Relax's signatures.
IR arguments go to ``Call.args``; every other keyword is an attr in
``Call.attrs`` under the same name, normalised to one form (shown below):
``ctor(*call.args, **call.attrs)`` (plus ``out_sinfo=`` for call_dps_packed)
rebuilds the call.

Attr forms: "2-tuple" = tuple of 2 ints; "pad4" = (top, left, bottom, right);
"axes" = tuple of ints, negative allowed; dtypes are strings, None = unset.

=========================  ====================================  ==========================================
op                         args (IR)                             attrs (normalised form)
=========================  ====================================  ==========================================
add subtract multiply      lhs, rhs                              -
divide floor_divide power
maximum minimum
equal not_equal less       lhs, rhs (result bool)                -
less_equal greater
greater_equal logical_and
logical_or
exp log sqrt rsqrt tanh    data                                  -
sigmoid erf negative abs
sin cos floor ceil round
sign reciprocal
logical_not
clip                       data                                  min: float, max: float
matmul                     x1, x2                                out_dtype: str|None
det                        data (..., M, M) -> (...)             - (hetvm-only)
nn.conv2d                  data, weight                          strides: 2-tuple, padding: pad4,
                                                                 dilation: 2-tuple, groups: int,
                                                                 data_layout: str ("NCHW"),
                                                                 kernel_layout: str ("OIHW"),
                                                                 out_layout: str|None, out_dtype: str|None
nn.conv2d_transpose        data, weight (IOHW)                   strides, padding: pad4, output_padding,
nn.conv1d_transpose        (IOW for 1-D)                         dilation, groups, data_layout, kernel_layout
                                                                 ("IOHW"/"IOW"), out_layout, out_dtype
nn.conv2d_bias_act         data, weight, bias (C,)               nn.conv2d's attrs, activation: "none"|"relu"
nn.conv2d_bias_add_act     data, weight, bias (C,), residual     nn.conv2d's attrs, activation (hetvm-only,
                                                                 from FuseConvEpilogue)
nn.scale_shift_act         data, scale (C,), shift (C,)          activation (hetvm-only, FuseChannelAffine)
nn.max_pool2d_bias_act     data, bias (C,)                       nn.max_pool2d's attrs, activation (hetvm-only,
                                                                 from FusePoolEpilogue)
nn.max_pool2d              data                                  pool_size: 2-tuple, strides: 2-tuple,
nn.avg_pool2d                                                    padding: pad4, dilation: 2-tuple,
                                                                 ceil_mode: bool, count_include_pad: bool,
                                                                 layout: str, out_layout: str|None
nn.adaptive_avg_pool2d     data                                  output_size: 2-tuple|None, layout: str,
                                                                 out_layout: str|None
nn.relu nn.gelu            data                                  -
nn.gelu_tanh nn.silu
nn.leakyrelu               data                                  alpha: float
nn.softmax nn.log_softmax  data                                  axis: int
nn.batch_norm              data, gamma, beta, moving_mean,       axis: int, epsilon: float, center: bool,
                           moving_var -> Tuple(out, mean, var)   scale: bool, momentum: float,
                                                                 training: bool (False: moving stats)
nn.layer_norm              data, gamma, beta                     axes: axes, epsilon: float, center: bool,
                                                                 scale: bool
nn.dropout                 data -> Tuple(out, mask)              rate: float
nn.pad                     data                                  pad_width: (before0, after0, before1, ...),
                                                                 pad_mode: "constant"|"reflect"|"edge"|
                                                                 "wrap", pad_value: float
reshape                    x, shape (ShapeExpr; -1 resolved)     -
permute_dims               x                                     axes: axes|None (None reverses)
expand_dims                x                                     axis: axes
squeeze                    x                                     axis: axes|None
flatten                    x (to 1-D)                            -
broadcast_to               x, shape (ShapeExpr)                  -
concat                     tensors (Tuple)                       axis: int|None
split                      x -> Tuple                            indices_or_sections: int|tuple of ints,
                                                                 axis: int (sections: ceil-sized pieces,
                                                                 last one smaller)
take                       x, indices                            axis: int|None, mode: "fast"|"clip"|"wrap"
strided_slice              x                                     axes: axes, begin: tuple, end: tuple,
                                                                 strides: tuple (filled with 1s),
                                                                 assume_inbound: bool
sum mean max min prod      x                                     axis: axes|None, keepdims: bool
argmax argmin              x (result int64)                      axis: int|None, keepdims: bool
astype                     x                                     dtype: str
where                      condition, x1, x2                     -
zeros ones                 shape (ShapeExpr)                     dtype: str
full                       shape, fill_value (0-d Constant or    dtype: str|None
                           PrimValue)
zeros_like ones_like       x                                     dtype: str|None
full_like                  x, fill_value                         dtype: str|None
shape_of                   expr (HOST_ONLY; result Shape)        -
shape_to_tensor            expr: Shape (HOST_ONLY; int64 1-D)    -
hint_on_device             data (ANNOTATION)                     dst_vdevice: VDevice (memory_scope folded in)
to_vdevice                 data (CROSS_DEVICE)                   dst_vdevice: VDevice
memory.alloc_storage       size: ShapeExpr, virtual_device_index: -
                           PrimValue, storage_scope: StringImm,
                           dtype: DataTypeImm -> Object
memory.alloc_tensor        storage, offset: PrimValue, shape:    -
                           ShapeExpr, dtype: DataTypeImm
memory.kill_storage        storage -> ()                         -
memory.kill_tensor         tensor -> ()                          -
builtin.alloc_tensor       shape, dtype: DataTypeImm,            -
                           runtime_device_index: PrimValue
                           [, storage_scope: StringImm]
vm.alloc_storage           size, runtime_device_index, dtype,    -
                           storage_scope: StringImm -> Object
vm.alloc_tensor            storage, offset, shape, dtype         -
vm.kill_object             obj -> ()                             -
call_dps_packed            func: ExternFunc, args: Tuple         op_attrs: Attrs (opt), device: VDevice (opt);
                           (sinfo_args = [out_sinfo])            out_sinfo -> Call.sinfo_args[0]
null_value                 - -> Object                           -
fused_elementwise          inputs (variadic)                     program: steps (hetvm-only, from FuseOps;
                                                                 hetvm/kernels/fused_program.py)
tan asin acos atan sinh    data                                  -
cosh asinh acosh atanh
isnan isinf isfinite       data (result bool)                    -
mod floor_mod bitwise_*    lhs, rhs                              -
left_shift right_shift
bitwise_not                data                                  -
cumsum cumprod             data                                  axis, dtype, exclusive
gather_elements            data, indices                         axis: int
einsum                     operands: Tuple                       subscripts: str
gather_nd                  data, indices                         batch_dims: int
scatter_nd                 data, indices, updates                reduction: "update"|"add"|"mul"|"min"|"max"
one_hot                    indices, on_value, off_value          depth: int, axis: int
                           (PrimValues)
tril triu                  x, k (PrimValue)                      -
topk                       data -> Tuple(values, indices)        k: int, axis: int, ret_type: "both"|"values"|
                                                                 "indices", largest: bool, dtype: str
arange                     start, end, step (PrimValues)         dtype: str|None
range_length               start, limit, delta (1-element        - (hetvm-only; result int64 (1,))
                           tensors)
tensor_to_shape            expr: 1-D int tensor (HOST_ONLY;      -
                           result Shape)
nonzero                    x[, count: Shape of 1 value]          - (result int64 (ndim, count))
unique_count               x (result int64 (1,); hetvm-only)     axis: int|None
unique                     x[, count] -> Tuple(values, first,    sorted: bool, axis: int|None
                           inverse, counts)
image.resize2d             data, size (ShapeExpr (h, w))         roi: 4 float32 FloatImms, layout, method,
                                                                 coordinate_transformation_mode, rounding_method,
                                                                 cubic_alpha, cubic_exclude, extrapolation_value,
                                                                 out_dtype, scales: (h, w)|None, antialias
tile flip repeat           data                                  repeats: tuple / axis: int / repeats: int,
                                                                 axis: int|None
scatter_elements           data, indices, updates                axis: int, reduction: str
variance std               x                                     axis: axes|None, keepdims: bool
nn.conv1d                  data (NCW), weight (OIW)              strides: 1-tuple, padding: (left, right),
                                                                 dilation: 1-tuple, groups, data_layout,
                                                                 kernel_layout, out_layout, out_dtype
nn.rms_norm                data, weight                          axes: axes, epsilon: float
nn.lrn                     data (channel on axis)                size: int, alpha, beta, bias: float, axis
                                                                 (hetvm-only, ONNX LRN)
nn.group_norm              data, gamma, beta                     num_groups, channel_axis, axes, epsilon,
                                                                 center, scale
nn.recurrent_scan          x_proj, r_t, extra, h0, c0, lens      kind, activations, alphas, betas, clip, reverse,
                           -> Tuple(Y, h_n, c_n) (hetvm-only)    linear_before_reset, input_forget, peepholes,
                                                                 masked
print                      values (any number; impure, void)     format: str
assert_op                  condition, format values (impure)     format: str
call_pure_packed           func: ExternFunc, args                (sinfo_args = [result])
=========================  ====================================  ==========================================

Not ops: ``call_packed(func, *args, sinfo_args=None, **attrs)`` builds
``Call(ExternFunc(func), args, attrs, sinfo_args)``; ``device(kind, index)``
builds the VDevice that ``hint_on_device`` takes (``R.device``).
"""

from . import builtin, elementwise, image, memory, nn, vm
from .closure import invoke_closure, invoke_pure_closure, make_closure
from .compat import flip, repeat, scatter_elements, std, tile, variance
from .create import full, full_like, ones, ones_like, zeros, zeros_like
from .datatype import astype, where
from .debug import assert_op, call_pure_packed, print  # noqa: A004 - R.print
from .device import device, hint_on_device, to_vdevice
from .dynamic import arange, nonzero, range_length, tensor_to_shape, unique, unique_count
from .elementwise import *  # noqa: F401,F403
from .elementwise import clip  # noqa: F401
from .extra import *  # noqa: F401,F403  (tan ... einsum: see hetvm/op/extra.py)
from .fused_elementwise import fused_elementwise
from .index import strided_slice, take
from .index_nd import gather_nd, one_hot, scatter_nd, topk, tril, triu
from .linalg import det, matmul
from .manipulate import (
    broadcast_to,
    concat,
    expand_dims,
    flatten,
    permute_dims,
    reshape,
    shape_of,
    shape_to_tensor,
    split,
    squeeze,
)
from .packed import call_dps_packed, call_packed, null_value
from .reduce import argmax, argmin, max, mean, min, prod, sum  # noqa: A004

__all__ = [
    "builtin",
    "make_closure",
    "invoke_closure",
    "invoke_pure_closure",
    "image",
    "memory",
    "nn",
    "vm",
    "matmul",
    "fused_elementwise",
    "reshape",
    "permute_dims",
    "expand_dims",
    "squeeze",
    "flatten",
    "broadcast_to",
    "concat",
    "split",
    "shape_of",
    "shape_to_tensor",
    "take",
    "strided_slice",
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "argmax",
    "argmin",
    "astype",
    "where",
    "zeros",
    "ones",
    "full",
    "zeros_like",
    "ones_like",
    "full_like",
    "device",
    "hint_on_device",
    "to_vdevice",
    "call_dps_packed",
    "call_packed",
    "null_value",
    "clip",
    "gather_nd",
    "scatter_nd",
    "one_hot",
    "tril",
    "triu",
    "topk",
    "det",
    "arange",
    "range_length",
    "tensor_to_shape",
    "nonzero",
    "unique_count",
    "unique",
    "tile",
    "flip",
    "repeat",
    "scatter_elements",
    "variance",
    "std",
    "print",
    "assert_op",
    "call_pure_packed",
]
__all__ += list(
    elementwise.BINARY_ARITH + elementwise.COMPARISONS + elementwise.LOGICAL + elementwise.UNARY_MATH
)
