"""Random edits of JSON documents, for tests of artifact loaders.

A file edited *and* re-hashed passes a loader's hash check, so what stops it
is the structure validation behind it; these edits are what a fuzz test of
that validation feeds it: numbers nudged or replaced, fields dropped, values
of another type.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["mutate_json"]


def mutate_json(value: Any, rng: random.Random) -> Any:
    """``value`` with one random edit somewhere inside it (in place for
    containers; the edited value is returned either way)."""
    if isinstance(value, dict) and value:
        key = rng.choice(sorted(value))
        if rng.random() < 0.15:
            del value[key]
        else:
            value[key] = mutate_json(value[key], rng)
        return value
    if isinstance(value, list) and value:
        i = rng.randrange(len(value))
        if rng.random() < 0.15:
            del value[i]
        else:
            value[i] = mutate_json(value[i], rng)
        return value
    bumped = value + 1 if isinstance(value, int) and not isinstance(value, bool) else "f64"
    return rng.choice([-1, 0, 1 << 40, 3.5, "x", None, [], {}, bumped])
