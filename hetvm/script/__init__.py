"""The text form: TVMScript-compatible printer and parser for hetvm's IR.

``from hetvm.script import ir as I, relax as R, tir as T`` gives the names a
script uses; :func:`from_source` parses a script held in a string and
:func:`print_module` prints a module back. See docs/script.md.
"""

from ..errors import ParseError
from . import ir, relax, tir
from .parser import from_source
from .printer import print_module, print_node

__all__ = ["ParseError", "from_source", "print_module", "print_node", "ir", "relax", "tir"]
