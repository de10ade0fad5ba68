"""Reading a program's host schedule (``SplitHosts``) into what each side does.

Both the driver and the workers derive their steps from the schedule the
executable carries, so they agree by construction:

* the **driver** passes a part only what its host does not hold yet: an input
  or a value of another host, the first time that host needs it in a request
  (one value is sent to a host once, whatever the number of its readers);
* the **worker** builds the part's arguments from what it was passed and what
  it holds (values its earlier parts computed, still on their device, and
  values it received earlier in the request), and returns what other hosts
  or the caller need, as host arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import DistributedError
from ..runtime.bytecode import Executable
from ..transform.split_hosts import PARTS_ATTR

__all__ = ["HostSchedule", "PartPlan", "schedule_of"]

#: a key of a value on a worker: ("input", index) or ("value", name)
Key = tuple[str, Any]


@dataclass
class PartPlan:
    """One part: where it runs and how its arguments and results flow."""

    index: int
    function: str
    host: str
    #: what the driver passes, in order (keys of inputs or of other hosts' values)
    passed: list[Key]
    #: per parameter: the key the worker reads it from
    params: list[Key]
    #: outputs in the function's order, and which of them are kept / returned
    outputs: list[str]
    keep: list[str]
    returns: list[str]
    #: the last part of its host in a request (the worker then drops the request)
    last_on_host: bool = False
    send: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class HostSchedule:
    """The parts of one function, the hosts, results and planned transfers."""

    function: str
    hosts: list[str]
    parts: list[PartPlan]
    results: Any  # a value name or a nested list of them
    transfers: list[dict]
    input_hosts: list[str | None]

    @property
    def transfer_bytes(self) -> int:
        """Bytes the plan sends between hosts per request (once per value and host)."""
        return sum(int(t["bytes"]) for t in self.transfers)

    def bytes_to(self, host: str) -> int:
        return sum(int(t["bytes"]) for t in self.transfers if t["dst"] == host)

    def producer(self, name: str) -> PartPlan:
        for p in self.parts:
            if name in p.outputs:
                return p
        raise DistributedError(f"no part of '{self.function}' computes '{name}'", value=name)


def schedule_of(exe: Executable, function: str = "main") -> HostSchedule:
    """The host schedule of ``function`` (an executable built without hosts has one part)."""
    raw = (exe.metadata.get(PARTS_ATTR) or {}).get(function)
    if raw is None:
        if function not in exe.functions:
            raise DistributedError(f"the executable has no function '{function}'")
        raise DistributedError(
            f"function '{function}' was built without devices of named hosts, so it has no host "
            "schedule (declare devices with hetvm.remote(host, kind, index))"
        )
    parts: list[PartPlan] = []
    held: dict[str, set] = {}
    for k, p in enumerate(raw["parts"]):
        host = p["host"]
        have = held.setdefault(host, set())
        passed: list[Key] = []
        params: list[Key] = []
        for kind, what in p["inputs"]:
            key: Key = ("input", int(what)) if kind == "input" else ("value", str(what))
            if kind in ("input", "transfer") and key not in have:
                passed.append(key)
                have.add(key)
            params.append(key)
        for name in p["keep"]:
            have.add(("value", name))
        returns = [o for o in p["outputs"] if o in p["send"] or o in p["result"]]
        parts.append(PartPlan(k, p["function"], host, passed, params, list(p["outputs"]), list(p["keep"]),
                              returns, send={k2: list(v) for k2, v in p["send"].items()}))  # fmt: skip
    for host in {p.host for p in parts}:
        [p for p in parts if p.host == host][-1].last_on_host = True
    return HostSchedule(function, list(raw["hosts"]), parts, raw["results"], list(raw["transfers"]),
                        list(raw.get("inputs", [])))  # fmt: skip


def build_result(tree: Any, values: dict[str, Any]) -> Any:
    """The function's result from the named values (a tuple where it returns one)."""
    if isinstance(tree, list):
        return tuple(build_result(t, values) for t in tree)
    return values[tree]
