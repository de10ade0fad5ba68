"""Destination-passing kernels per device kind, registered by op name.

Importing the package registers every kernel (see :mod:`.registry` for the
calling convention).
"""

from . import compat as _compat  # noqa: F401  (kernels of hetvm.op.compat, op.nn.compat_nn)
from . import (  # noqa: F401  (register kernels)
    conv,
    conv_transpose,
    elementwise,
    fused,
    fused_elementwise,
    manipulate,
    nn,
    pool,
    recurrent,
    resize,
)
from . import extra as _extra  # noqa: F401  (kernels of hetvm.op.extra)
from . import index_nd as _index_nd  # noqa: F401  (kernels of hetvm.op.index_nd and .dynamic)
from . import layouts as _layouts
from .registry import bind_kernel, get_kernel, has_kernel, kernel_ops, register_kernel

_layouts.install()  # last: wraps the canonical conv/pool kernels for other layouts

__all__ = ["register_kernel", "get_kernel", "has_kernel", "kernel_ops", "bind_kernel"]
