"""Testing support: a reference interpreter, program generators and property checks.

The interpreter (:mod:`.interpreter`) is the oracle: it evaluates IR with
NumPy and shares no code with the pipeline or the VM. The generators
(:mod:`.generators`) are Hypothesis strategies for random well-formed modules;
Hypothesis is imported only by them, so ``hetvm.testing.interpreter`` works
without it.
"""

from .interpreter import Interpreter, Shape, interpret, to_numpy_tree, values_close

__all__ = ["Interpreter", "Shape", "interpret", "to_numpy_tree", "values_close"]
