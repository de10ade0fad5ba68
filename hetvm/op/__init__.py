"""Operator constructors (``hetvm.op.add``, ``hetvm.op.nn.conv2d`` ...).

Importing this package registers every op's inference rule in the registry
of :mod:`hetvm.ir.op_registry`.
"""

from .elementwise import *  # noqa: F401,F403
from .elementwise import clip  # noqa: F401
