"""Conformance cases hetvm does not run, each with the reason (never silent).

Patterns are regular expressions over the runner's test names
(``test_<case>_cpu``). Filled from a measured full run; see
docs/conformance.md for how to regenerate and the pass counts.
"""

from __future__ import annotations

#: reason -> patterns
EXCLUDED: dict[str, list[str]] = {}


def patterns() -> list[str]:
    return [p for group in EXCLUDED.values() for p in group]
