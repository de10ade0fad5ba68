"""A stand-in for CuPy on machines without a GPU: ``PYTHONPATH=tools/fake_cupy``
makes ``import cupy`` give :class:`hetvm.testing.cuda_host.FakeCupy` (NumPy
arrays, generated CUDA element-wise kernels compiled for the host), so every
program, test or conformance case that asks for a CUDA device runs hetvm's
CuPy code paths here. For tests only; never on a machine with the real CuPy."""

import sys

from hetvm.testing.cuda_host import FakeCupy

sys.modules[__name__] = FakeCupy()  # type: ignore[assignment]
