"""The worker of one host: its own VM, the values it holds, one part at a time.

A :class:`HostWorker` is plain Python; ``hetvm.distributed`` runs one per host
inside a Ray actor pinned to that host's node (and the in-process runner uses
it directly). What it holds between the parts of a request stays where the
part left it (an NDArray on its device): only values another host or the
caller needs are copied to host memory and returned.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import numpy as np

from ..errors import DistributedError, HetvmError
from ..runtime.bytecode import Executable
from ..runtime.device import cpu
from ..runtime.ndarray import NDArray
from .plan import HostSchedule, schedule_of

__all__ = ["HostWorker", "to_host"]


def to_host(value: Any) -> Any:
    """A value as host NumPy data (tuples stay tuples): what may cross a network."""
    if isinstance(value, NDArray):
        if value.device.kind == "cpu":
            return value.numpy().copy()
        return value.copyto(cpu()).numpy()
    if isinstance(value, (tuple, list)):
        return tuple(to_host(v) for v in value)
    return value


def _nbytes(value: Any) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def load_executable(data: bytes | Executable) -> Executable:
    """An executable from artifact bytes (how it travels to a worker) or as is."""
    if isinstance(data, Executable):
        return data
    from ..runtime.artifact import load_module

    fd, path = tempfile.mkstemp(suffix=".hetvm")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return load_module(path)
    finally:
        os.unlink(path)


class HostWorker:
    """Runs the parts of one host; see the module docstring."""

    def __init__(self, exe: bytes | Executable, host: str, function: str = "main") -> None:
        from ..runtime.vm import VirtualMachine

        self.host = host
        self.exe = load_executable(exe)
        self.schedule: HostSchedule = schedule_of(self.exe, function)
        # every device of the executable maps onto this machine's device of the same
        # kind and index; this host's parts only touch this host's devices
        self.vm = VirtualMachine(self.exe)
        self.store: dict[Any, dict] = {}
        self.received_bytes = 0
        self.received_values = 0
        self.compute_s = 0.0
        self.staging_s = 0.0
        self.parts_run = 0
        self.delay_s = 0.0  # a test hook: a slow part, to exercise timeouts

    def ready(self) -> str:
        """The host name, once the worker is up (the driver waits for it)."""
        return self.host

    def node_id(self) -> str | None:
        try:
            import ray

            return ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - not in Ray
            return None

    def run(self, request: Any, part_index: int, *passed: Any) -> tuple:
        """Runs part ``part_index`` of ``request``; returns its returned values and stats."""
        part = self.schedule.parts[part_index]
        if part.host != self.host:
            raise DistributedError(f"part {part.function} runs on host {part.host}, not on {self.host}",
                                   host=self.host)  # fmt: skip
        if len(passed) != len(part.passed):
            raise DistributedError(
                f"part {part.function} on host {self.host} expects {len(part.passed)} value(s), got {len(passed)}",
                host=self.host,
            )
        held = self.store.setdefault(request, {})
        for key, value in zip(part.passed, passed):
            held[key] = value
            if key[0] == "value":
                self.received_bytes += _nbytes(value)
                self.received_values += 1
        try:
            args = [held[key] for key in part.params]
        except KeyError as exc:
            raise DistributedError(f"host {self.host} does not hold {exc.args[0]} for {part.function}",
                                   host=self.host) from None  # fmt: skip
        if self.delay_s:
            time.sleep(self.delay_s)
        t0 = time.perf_counter()
        try:
            out = self.vm[part.function](*args)
        except HetvmError as exc:
            self.store.pop(request, None)
            raise DistributedError(f"host {self.host}, {part.function}: {exc}", host=self.host,
                                   value=", ".join(part.outputs) or None) from exc  # fmt: skip
        t1 = time.perf_counter()
        if part.function == self.schedule.function:  # one part: the function itself, its own result
            values = dict(_match(self.schedule.results, out))
        else:  # a part returns its outputs as one tuple
            values = dict(zip(part.outputs, out))
        for name in part.keep:
            held[("value", name)] = values[name]
        returned = tuple(to_host(values[name]) for name in part.returns)
        t2 = time.perf_counter()
        if part.last_on_host:
            self.store.pop(request, None)
        self.compute_s += t1 - t0
        self.staging_s += t2 - t1
        self.parts_run += 1
        return returned + ({"compute_s": t1 - t0, "staging_s": t2 - t1},)

    def stats(self) -> dict:
        """Counters since the worker started (bytes and values received, time spent)."""
        return {
            "host": self.host,
            "received_bytes": self.received_bytes,
            "received_values": self.received_values,
            "compute_s": self.compute_s,
            "staging_s": self.staging_s,
            "parts_run": self.parts_run,
            "requests_held": len(self.store),
        }

    def reset_stats(self) -> None:
        self.received_bytes = self.received_values = self.parts_run = 0
        self.compute_s = self.staging_s = 0.0

    def set_delay(self, seconds: float) -> None:
        self.delay_s = float(seconds)

    def ping(self) -> bool:
        return True


def _match(tree: Any, value: Any) -> list[tuple[str, Any]]:
    """(name, value) pairs of a result tree of names against the returned value."""
    if isinstance(tree, list):
        return [pair for t, v in zip(tree, value) for pair in _match(t, v)]
    return [(tree, value)]


def as_numpy_tree(value: Any) -> Any:
    """NDArrays (and tuples of them) of a single-process run as NumPy, for comparing."""
    if isinstance(value, (tuple, list)):
        return tuple(as_numpy_tree(v) for v in value)
    if isinstance(value, NDArray):
        return to_host(value)
    return np.asarray(value)
