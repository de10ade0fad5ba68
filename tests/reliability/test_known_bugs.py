"""Minimal reproducers of bugs the generated-program properties found in other layers.

Each is a strict xfail naming the layer and file; when the bug is fixed the test
passes, the xfail turns into a failure, and the marker should be removed (and
the generator's workaround, referenced from hetvm/testing, dropped).
"""

# None open: erf/gelu on 0-d tensors, the constant copied to a sim outside the
# memory plan and the cpu hint's round trip are fixed (test_regressions.py).
