"""Virtual devices: where a tensor lives, as named in a module's global infos."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import DevicePlanError

# Target kinds that all mean "the host CPU".
HOST_TARGET_KINDS = frozenset({"llvm", "c", "cpu"})


def runtime_kind(target_kind: str) -> str:
    """The runtime device kind (cpu, cuda, sim, ...) for a target kind."""
    return "cpu" if target_kind in HOST_TARGET_KINDS else target_kind


@dataclass(frozen=True, slots=True)
class VDevice:
    """A virtual device: a target kind, a device id and a memory scope.

    ``target_attrs`` keeps any extra keys of a target given as a dict
    (``{"kind": "cuda", "arch": "sm_80"}``) so printing loses nothing.
    """

    target: str = "llvm"
    vdevice_id: int = 0
    memory_scope: str = "global"
    target_attrs: tuple = field(default=(), compare=True)

    @property
    def kind(self) -> str:
        """Runtime device kind: ``cpu`` for llvm/c/cpu targets."""
        return runtime_kind(self.target)

    @property
    def is_host(self) -> bool:
        return self.kind == "cpu"

    @property
    def host(self) -> str | None:
        """The machine this device is on (``None``: the machine that runs the program)."""
        return host_of(self)

    def __str__(self) -> str:
        host = host_of(self)
        return ("" if host is None else f"{host}/") + f"{self.kind}:{self.vdevice_id}" + (
            "" if self.memory_scope == "global" else f"[{self.memory_scope}]"
        )


#: A device of another machine records the machine in its target's ``tag``
#: (``{"kind": "sim", "tag": "host:hostB"}``): a key TVM's Target accepts for
#: every kind, so the text form still parses there.
HOST_TAG_PREFIX = "host:"


def host_of(vdev: VDevice) -> str | None:
    """The host a vdevice names in its target tag, or None."""
    for key, value in vdev.target_attrs:
        if key == "tag" and isinstance(value, str) and value.startswith(HOST_TAG_PREFIX):
            return value[len(HOST_TAG_PREFIX):]
    return None


def remote(host: str, kind: str = "cpu", index: int = 0, memory_scope: str = "global") -> VDevice:
    """The vdevice ``kind:index`` of machine ``host`` (a Ray node, see docs/distributed.md)."""
    if not isinstance(host, str) or not host or any(c in host for c in "/:, \t\n"):
        raise DevicePlanError(f"a host name must be a non-empty word without '/', ':' or ',', got {host!r}")
    target = "llvm" if runtime_kind(kind) == "cpu" else kind
    return VDevice(target, int(index), memory_scope, (("tag", HOST_TAG_PREFIX + host),))
