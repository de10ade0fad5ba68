"""Shared settings of the reliability suite.

CI runs a fixed seed and modest example counts; ``HETVM_LONG=1`` multiplies
every count (by ``HETVM_FUZZ_FACTOR``, default 20) for the long run, e.g.
``HETVM_LONG=1 python -m pytest tests/reliability -m slow`` or
``python tools/long_fuzz.py``. The settings are ``hetvm.testing.fuzz_settings``,
shared with the other randomised suites.
"""

from __future__ import annotations

from hetvm.testing.fuzz_settings import FACTOR, LONG, fuzz_settings

__all__ = ["FACTOR", "LONG", "fuzz_settings"]
