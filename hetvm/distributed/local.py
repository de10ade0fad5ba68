"""Running a multi-host program in this process: one worker per host, no Ray.

The same schedule and workers as on a cluster, with the network replaced by
handing host arrays from one worker to the next. For tests and for checking a
plan (bytes each host receives) on a machine without Ray.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping

import numpy as np

from ..runtime.bytecode import Executable
from .memory import check_memory_limits
from .plan import build_result, schedule_of
from .worker import HostWorker

__all__ = ["LocalHosts"]


class LocalHosts:
    """``LocalHosts(exe)(*args)`` runs ``function`` part by part, host by host."""

    def __init__(self, exe: Executable, function: str = "main", memory_limits: Mapping[str, int] | None = None) -> None:
        self.schedule = schedule_of(exe, function)
        if memory_limits:
            check_memory_limits(exe, memory_limits, function)
        hosts = list(dict.fromkeys(p.host for p in self.schedule.parts))
        self.workers = {h: HostWorker(exe, h, function) for h in hosts}
        self._ids = itertools.count()

    def __call__(self, *args: Any) -> Any:
        request = next(self._ids)
        values: dict[str, Any] = {}
        for part in self.schedule.parts:
            passed = [np.asarray(args[k]) if kind == "input" else values[k] for kind, k in part.passed]
            out = self.workers[part.host].run(request, part.index, *passed)
            values.update(zip(part.returns, out[:-1]))
        return build_result(self.schedule.results, values)

    def stats(self) -> dict[str, dict]:
        return {h: w.stats() for h, w in self.workers.items()}
