"""ONNX's own conformance runner over hetvm (``onnx.backend.test.BackendTest``).

By default a bounded subset runs (a few dozen node cases of the operators real
models use); ``HETVM_CONFORMANCE=full`` runs every node case and the nine light
real models, minus the commented exclusions in ``exclusions.py``::

    HETVM_CONFORMANCE=full python -m pytest tests/onnx_backend/test_conformance.py -n 2 -q

Only the ``Node`` and ``Real`` categories are run: ``Simple`` and the PyTorch
categories are outside the issue's scope (sequences, strings, training ops).
"""

from __future__ import annotations

import os
import unittest
import warnings

import pytest

pytest.importorskip("onnx")

from onnx.backend.test import BackendTest  # noqa: E402

from hetvm.onnx_backend import HetvmBackend  # noqa: E402

try:
    from .exclusions import patterns
    from .subset import SUBSET
except ImportError:  # run as a file, not a package
    from exclusions import patterns  # type: ignore[no-redef]
    from subset import SUBSET  # type: ignore[no-redef]

FULL = os.environ.get("HETVM_CONFORMANCE", "").lower() == "full"

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _backend_test = BackendTest(HetvmBackend, __name__)

if FULL:
    for _p in patterns():
        _backend_test.exclude(_p)
else:
    for _name in SUBSET:
        _backend_test.include(rf"^{_name}_cpu$")



def _kept(func: object) -> bool:
    """Drop cases the subset does not include and devices hetvm lacks; keep
    excluded cases (they show as skipped with their pattern, never hidden)."""
    reason = getattr(func, "__unittest_skip_why__", "") or ""
    return not (reason.startswith("no matched include") or reason.startswith("Backend doesn't support"))


def _test_classes() -> dict[str, type]:
    out = {}
    for name, cls in _backend_test.test_cases.items():
        if name not in ("OnnxBackendNodeModelTest", "OnnxBackendRealModelTest"):
            continue
        methods = {k: v for k, v in vars(cls).items() if k.startswith("test_") and _kept(v)}
        out[name] = type(name, (unittest.TestCase,), {"__module__": __name__, **methods})
    return out


globals().update(_test_classes())
