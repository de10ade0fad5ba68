"""The device table: declared vdevices, the default and host device, and kernels.

Vdevices are compared by *key* ``(kind, id, memory scope)``, so ``R.device("sim", 0)``
in a hint names the declared ``I.vdevice("sim", 0)`` even when the declaration
carries extra target attributes, and ``llvm``/``cpu``/``c`` are the same host.

How the compile side learns that a device lacks kernels (documented choice):

* the kernel registry (``hetvm.kernels.has_kernel(op, kind)``) for every kind it
  knows kernels of (a kind with no kernel registered at all is not restricted);
* a declared vdevice's target attributes ``{"kind": "sim", "missing_kernels": [...]}``;
* the ``PlanDevices(missing_kernels={"sim:0": {"nn.softmax"}})`` option, keyed by
  ``"kind:id"`` (or a VDevice).

The runtime side is configured separately with
``hetvm.device("sim", 0, missing_kernels=...)``; the compiler never reads runtime
state, so a build does not depend on what a previous run configured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from ...errors import DevicePlanError
from ...ir.module import IRModule
from ...ir.op_registry import missing_part
from ...ir.vdevice import VDevice, host_of, remote, runtime_kind
from ...op.effects import is_view_op

DeviceKey = tuple[str, int, str]



def device_key(vdev: VDevice) -> DeviceKey:
    """The identity of a vdevice for planning: kind, id and memory scope.

    A device of a named host has the kind ``"host/kind"`` (``"hostB/sim"``), so
    ``sim:0`` of two machines are two devices and every other key stays as it was."""
    host = host_of(vdev)
    kind = runtime_kind(vdev.target)
    return (kind if host is None else f"{host}/{kind}", int(vdev.vdevice_id), vdev.memory_scope)


def key_str(key: DeviceKey) -> str:
    kind, idx, scope = key
    return f"{kind}:{idx}" + ("" if scope == "global" else f"[{scope}]")


def key_host(key: DeviceKey) -> str | None:
    """The host of a device key (None for a device of the running machine)."""
    host, sep, _ = key[0].rpartition("/")
    return host if sep else None


def key_kind(key: DeviceKey) -> str:
    """The runtime kind of a device key (``sim`` for ``hostB/sim``)."""
    return key[0].rpartition("/")[2]


def parse_device_name(name: str | VDevice) -> DeviceKey:
    """``"sim:0"`` / ``"cpu"`` / ``"hostB/sim:0"`` / a VDevice as a device key."""
    if isinstance(name, VDevice):
        return device_key(name)
    host, sep, rest = str(name).strip().rpartition("/")
    kind, _, idx = rest.partition(":")
    try:
        kind = runtime_kind(kind.strip())
        return (f"{host.strip()}/{kind}" if sep else kind, int(idx) if idx else 0, "global")
    except ValueError:
        raise DevicePlanError(f"cannot read a device from {name!r} (use '[host/]kind:index')") from None


def vdevice_of_key(key: DeviceKey) -> VDevice:
    """A fresh vdevice for a key no declaration names."""
    kind, idx, scope = key
    host = key_host(key)
    base = key_kind(key)
    if host is not None:
        return remote(host, base, idx, scope)
    return VDevice("llvm" if base == "cpu" else base, idx, scope)


def _attrs_of(vdev: VDevice) -> dict:
    try:
        return dict(vdev.target_attrs)
    except (TypeError, ValueError):
        return {}


@dataclass
class DeviceTable:
    """Every device a plan may use, in declaration order, plus kernel facts."""

    declared: list[VDevice]
    default: VDevice
    host: VDevice
    missing: dict[DeviceKey, frozenset[str]] = field(default_factory=dict)
    check_registry: bool = True
    added_default: bool = False

    @classmethod
    def from_module(
        cls,
        mod: IRModule,
        default_vdevice: VDevice | str | None = None,
        host_vdevice: VDevice | str | None = None,
        missing_kernels: Mapping[str | VDevice, Iterable[str]] | None = None,
        check_registry: bool = True,
    ) -> DeviceTable:
        declared = list(mod.vdevices)
        by_key = {device_key(v): v for v in declared}
        added = False

        def resolve(spec: VDevice | str | None) -> VDevice | None:
            if spec is None:
                return None
            key = parse_device_name(spec)
            found = by_key.get(key) or next(
                (v for k, v in by_key.items() if k[:2] == key[:2]), None
            )
            if found is None and key_host(key) is None:
                # a plain "cpu" in a module of named hosts: that kind on the first host
                found = next(
                    (v for k, v in by_key.items() if key_kind(k) == key[0] and k[1] == key[1]), None
                )
            if found is not None:
                return found
            return spec if isinstance(spec, VDevice) else vdevice_of_key(key)

        default = resolve(default_vdevice)
        if default is None:
            default = declared[0] if declared else VDevice("llvm", 0)
        if device_key(default) not in by_key:
            declared.append(default)
            by_key[device_key(default)] = default
            added = True
        host = resolve(host_vdevice)
        if host is None:
            host = next((v for v in declared if v.is_host), None) or VDevice("llvm", 0)
        if device_key(host) not in by_key:
            # the host runs shapes and conditions whether or not it is declared
            declared.append(host)
            by_key[device_key(host)] = host
            added = True
        missing: dict[DeviceKey, frozenset[str]] = {}
        for v in declared:
            names = _attrs_of(v).get("missing_kernels")
            if names:
                missing[device_key(v)] = frozenset(names)
        for name, ops in (missing_kernels or {}).items():
            key = parse_device_name(name)
            if isinstance(ops, str):
                ops = (ops,)
            missing[key] = missing.get(key, frozenset()) | frozenset(ops)
        return cls(declared, default, host, missing, check_registry, added)

    # -- lookup ------------------------------------------------------------
    @property
    def keys(self) -> list[DeviceKey]:
        return [device_key(v) for v in self.declared]

    def vdevice(self, key: DeviceKey) -> VDevice:
        for v in self.declared:
            if device_key(v) == key:
                return v
        raise DevicePlanError(f"vdevice {key_str(key)} is not declared")

    def lookup(self, vdev: VDevice, what: str) -> DeviceKey:
        """The declared device a vdevice names; an error names ``what`` uses it."""
        key = device_key(vdev)
        keys = self.keys
        if key in keys:
            return key
        for k in keys:
            if k[:2] == key[:2] and key[2] == "global":
                return k
        declared = ", ".join(key_str(k) for k in keys) or "none"
        raise DevicePlanError(
            f"{what} names vdevice {key_str(key)}, which is not declared in "
            f"global_infos['vdevice'] (declared: {declared})"
        )

    # -- kernels -------------------------------------------------------------
    def lacks_kernel(self, op: str, key: DeviceKey) -> str | None:
        """Why device ``key`` cannot run ``op`` (None when it can)."""
        if is_view_op(op):  # lowered to a view of its input: no kernel on any device
            return None
        part = missing_part(op, self.missing.get(key, ()))
        if part == op:
            return f"{key_str(key)} is configured without a kernel for '{op}'"
        if part is not None:
            return f"{key_str(key)} is configured without a kernel for '{part}', which '{op}' fuses"
        if self.check_registry and not _registry_has(op, key_kind(key)):
            return f"the kernel registry has no '{op}' kernel for kind '{key_kind(key)}'"
        return None


def _registry_has(op: str, kind: str) -> bool:
    """The kernel registry's answer.

    A kind the registry knows no kernel of, or an op it has no kernel for on any
    kind, is not restricted: the registry then simply does not speak about it
    (and the runtime names the missing kernel), rather than failing every plan.
    """
    try:
        from ...kernels import has_kernel, kernel_ops
        from ...kernels.registry import KINDS
    except ImportError:  # pragma: no cover - kernels always ship
        return True
    if has_kernel(op, kind) or not kernel_ops(kind):
        return True
    return not any(has_kernel(op, k) for k in KINDS)
