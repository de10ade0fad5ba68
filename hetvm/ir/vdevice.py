"""Virtual devices: where a tensor lives, as named in a module's global infos."""

from __future__ import annotations

from dataclasses import dataclass, field

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

    def __str__(self) -> str:
        return f"{self.kind}:{self.vdevice_id}" + (
            "" if self.memory_scope == "global" else f"[{self.memory_scope}]"
        )
