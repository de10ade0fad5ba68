"""The node cases the default test suite runs (seconds, not minutes)."""

SUBSET = [
    "test_add",
    "test_relu",
]
