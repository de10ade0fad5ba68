"""Shared settings of the reliability suite.

CI runs a fixed seed and modest example counts; ``HETVM_LONG=1`` multiplies
every count (by ``HETVM_FUZZ_FACTOR``, default 20) for the long run, e.g.
``HETVM_LONG=1 python -m pytest tests/reliability -m slow`` or
``python tools/long_fuzz.py``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

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
