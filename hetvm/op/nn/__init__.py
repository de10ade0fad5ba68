"""``hetvm.op.nn``: neural-network ops (``R.nn.*``)."""

from .activation import gelu, gelu_tanh, leakyrelu, log_softmax, relu, silu, softmax
from .compat_nn import conv1d, group_norm, rms_norm
from .conv import conv2d
from .conv_transpose import conv1d_transpose, conv2d_transpose
from .fused import conv2d_bias_act, conv2d_bias_add_act, max_pool2d_bias_act, scale_shift_act
from .lrn import lrn
from .norm import batch_norm, dropout, layer_norm
from .pad import pad
from .pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from .recurrent import recurrent_scan

__all__ = [
    "conv1d",
    "rms_norm",
    "group_norm",
    "conv2d",
    "conv1d_transpose",
    "conv2d_transpose",
    "conv2d_bias_act",
    "conv2d_bias_add_act",
    "scale_shift_act",
    "max_pool2d",
    "max_pool2d_bias_act",
    "avg_pool2d",
    "adaptive_avg_pool2d",
    "relu",
    "leakyrelu",
    "gelu",
    "gelu_tanh",
    "silu",
    "softmax",
    "log_softmax",
    "batch_norm",
    "layer_norm",
    "lrn",
    "dropout",
    "pad",
    "recurrent_scan",
]
