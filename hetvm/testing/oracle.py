"""ONNX Runtime as a test oracle, required rather than optional.

Why: a comparison with ONNX Runtime that skips when it is not installed passes
silently on a machine that never ran it (nine did under the README's test
command). ``onnxruntime`` is in the ``test`` extra; without it the comparison
fails and says how to install it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["onnxruntime_or_fail"]


def onnxruntime_or_fail() -> Any:
    """The ``onnxruntime`` module; a test failure (not a skip) when it is missing."""
    try:
        import onnxruntime
    except ImportError:
        import pytest

        pytest.fail("this comparison needs ONNX Runtime, which is in the test extra: "
                    "pip install -e '.[test]' (or pip install 'onnxruntime>=1.17')", pytrace=False)
    return onnxruntime
