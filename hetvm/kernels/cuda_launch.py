"""The first launch of each generated CUDA kernel, guarded.

Why: CuPy compiles a generated kernel (NVRTC) at its first call, and no GPU
compiles hetvm's templates in CI (a host compiler and nvcc's PTX check stand in,
see ``hetvm/testing/cuda_host.py``). A kernel NVRTC rejects must cost speed, not
a model: its first launch failing is logged once and remembered, and the caller
runs its step-by-step kernels instead, then and on every later call. Later
launches of a kernel that compiled are not guarded (an error there is real).

``HETVM_CUDA_CODEGEN=0`` turns every generated CUDA kernel off (the
step-by-step kernels run on CuPy's arrays): for measuring what they gain, or
for ruling them out when a result looks wrong."""

from __future__ import annotations

import logging
import os
from typing import Callable, Hashable

log = logging.getLogger("hetvm.codegen")

__all__ = ["FirstLaunch", "enabled"]


def enabled() -> bool:
    """Whether generated CUDA kernels may run (``HETVM_CUDA_CODEGEN`` is not ``0``)."""
    return os.environ.get("HETVM_CUDA_CODEGEN", "1") != "0"


class FirstLaunch:
    """Per key (a kernel and its dtypes): whether its first launch worked."""

    def __init__(self) -> None:
        self.compiled: dict[Hashable, bool] = {}

    def run(self, key: Hashable, launch: Callable[[], None]) -> bool:
        """Runs ``launch`` unless ``key`` failed before; False where it did not
        run (the caller falls back)."""
        ok = self.compiled.get(key)
        if ok:
            launch()
            return True
        if ok is False:
            return False
        try:
            launch()
        except Exception as err:  # noqa: BLE001 - CuPy's compile error, whatever its class
            first = str(err).splitlines()[0] if str(err) else type(err).__name__
            log.warning("generated CUDA kernel failed to compile (%s); using the step-by-step kernels", first)
            self.compiled[key] = False
            return False
        self.compiled[key] = True
        return True
