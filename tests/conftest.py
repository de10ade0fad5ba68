"""Suite-wide settings.

Hypothesis runs derandomized by default so a CI run is reproducible (a property
that fails once fails every time, with the same example). Set
``HETVM_HYPOTHESIS=explore`` to draw fresh examples instead, as a long search does.
"""

import os

import pytest
from hypothesis import settings

# Generated kernels (Numba, where installed) compile on first use, about a second
# each: the suite runs the NumPy kernels, and tests/kernels/test_codegen_numba.py
# turns generation on for itself.
os.environ.setdefault("HETVM_NUMBA", "0")

settings.register_profile("hetvm-ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("hetvm-explore", deadline=None, print_blob=True)
settings.load_profile(
    "hetvm-explore" if os.environ.get("HETVM_HYPOTHESIS") == "explore" else "hetvm-ci"
)


@pytest.fixture(autouse=True)
def _devices_unconfigured_after_each_test():
    """A device's configuration (missing kernels, capacity) is process-wide state:
    a test that restricts ``sim:1`` must not restrict the next test run in the same
    worker (the long fuzz run found a regression test failing only after a
    property test had configured ``sim:1`` without ``negative``)."""
    yield
    from hetvm.runtime.device import _APIS

    for api in _APIS.values():
        api.missing_kernels = frozenset()
        api.capacity = None


@pytest.fixture(autouse=True)
def _generated_kernels_as_the_suite_set_them():
    """Whether generated kernels run is cached process-wide (``codegen_numba``'s
    ``_checked``/``_numba``): a test that turns Numba on must not leave it on for the
    next test in the same worker, whose kernels (and scratch, and raised errors)
    would then depend on the order the tests ran in."""
    from hetvm.kernels import codegen_numba

    saved = (os.environ.get("HETVM_NUMBA"), codegen_numba._checked, codegen_numba._numba)
    yield
    env, codegen_numba._checked, codegen_numba._numba = saved
    if env is None:
        os.environ.pop("HETVM_NUMBA", None)
    else:
        os.environ["HETVM_NUMBA"] = env
