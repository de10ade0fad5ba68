"""Hypothesis settings shared by every randomised suite (reliability, bad inputs,
ONNX properties).

One contract: CI runs a fixed seed and modest example counts; ``HETVM_LONG=1``
multiplies every count by ``HETVM_FUZZ_FACTOR`` (default 20) and draws random
seeds, as ``tools/long_fuzz.py`` does.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["LONG", "FACTOR", "fuzz_settings"]

LONG = os.environ.get("HETVM_LONG") == "1"
FACTOR = int(os.environ.get("HETVM_FUZZ_FACTOR", "20")) if LONG else 1


def fuzz_settings(examples: int) -> settings:
    """Derandomised (a fixed seed in CI), no deadline, ``examples`` x the long factor."""
    return settings(
        max_examples=examples * FACTOR,
        derandomize=not LONG,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
