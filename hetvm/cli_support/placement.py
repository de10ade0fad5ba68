"""Devices for a command-line run: ``--devices``, ``--place`` and missing kernels.

``--devices sim:0,cpu`` declares the module's vdevices in that order (the VM's
device list follows it); the first is the default device, and the first CPU
is the host (added when not listed, since shapes and copies need one).
``--devices hostA/cpu,hostB/sim:0`` names devices of two machines (see
docs/distributed.md); ``--stages`` then cuts the model into pipeline stages.

``--place RULE=DEVICE`` pins values before the device planner runs. RULE is
an ONNX op type (``Softmax``), an ONNX node name, a hetvm op name
(``nn.softmax``) or an IR variable name. A pin is a vdevice in the bound
variable's struct info — the constraint the planner reads for bindings — so
the op computes on that device and the planner inserts the copies around it.
A rule that matches nothing is an error, not a silent no-op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..errors import DevicePlanError, HetvmError
from ..ir import expr as E
from ..ir import struct_info as S
from ..ir.module import IRModule
from ..ir.vdevice import VDevice, remote
from ..ir.visitor import ExprMutator

__all__ = ["DeviceSetup", "parse_devices", "parse_place_rules", "parse_missing", "parse_stages", "apply_pins"]


@dataclass
class DeviceSetup:
    """The devices of one run: declared vdevices, default, host and kernel gaps."""

    vdevices: list[VDevice]
    default: VDevice
    host: VDevice
    missing_kernels: dict[str, set[str]] = field(default_factory=dict)
    #: stage mode: the devices of the pipeline stages, in order (``--stages``)
    stages: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [device_name(v) for v in self.vdevices]

    @property
    def heterogeneous(self) -> bool:
        return len(self.vdevices) > 1


def device_name(v: VDevice) -> str:
    return ("" if v.host is None else f"{v.host}/") + f"{v.kind}:{v.vdevice_id}"


def _vdevice(text: str) -> VDevice:
    """``sim:0``, ``cpu`` or a device of another machine, ``hostB/sim:0``."""
    host, sep, rest = text.strip().rpartition("/")
    kind, _, idx = rest.partition(":")
    kind = kind.strip().lower()
    if kind in ("cpu", "llvm", "host", "c"):
        kind = "llvm"
    if kind not in ("llvm", "sim", "cuda", "rocm"):
        raise DevicePlanError(f"--devices: unknown device '{text}' (use cpu, sim:N, cuda:N or HOST/KIND:N)")
    try:
        index = int(idx) if idx.strip() else 0
    except ValueError:
        raise DevicePlanError(f"--devices: bad device index in '{text}' (use kind:N)") from None
    if sep:
        return remote(host.strip(), kind, index)
    return VDevice(kind, index)


def parse_devices(text: str | None, missing: Mapping[str, set[str]] | None = None) -> DeviceSetup:
    """``"sim:0,cpu"`` -> DeviceSetup (default: the CPU alone)."""
    items = [t for t in (text or "cpu").split(",") if t.strip()]
    if not items:
        raise DevicePlanError("--devices: no device given")
    vdevs: list[VDevice] = []
    for item in items:
        v = _vdevice(item)
        if any(device_name(v) == device_name(w) for w in vdevs):
            raise DevicePlanError(f"--devices: '{item.strip()}' is listed twice")
        vdevs.append(v)
    host = next((v for v in vdevs if v.is_host), None)
    if host is None:
        # the CPU of the first device's machine (devices of named hosts) or this one
        host = VDevice("llvm", 0) if vdevs[0].host is None else remote(vdevs[0].host, "cpu", 0)
        vdevs.append(host)
    names = {device_name(v) for v in vdevs}
    missing = {k: set(v) for k, v in (missing or {}).items()}
    for key in missing:
        if key not in names:
            raise DevicePlanError(
                f"--missing-kernel names device '{key}', which is not in --devices ({', '.join(sorted(names))})"
            )
    return DeviceSetup(vdevs, vdevs[0], host, missing)


def parse_stages(text: str | None, setup: DeviceSetup) -> DeviceSetup:
    """``--stages hostA/cpu,hostB/sim:0`` (or ``--stages all``: every listed device
    in order) -> the setup with its stage devices; each must be in ``--devices``."""
    if not text:
        return setup
    names = setup.names
    items = names if text.strip() == "all" else [device_name(_vdevice(t)) for t in text.split(",") if t.strip()]
    for item in items:
        if item not in names:
            raise DevicePlanError(f"--stages: device '{item}' is not in --devices ({', '.join(names)})")
    if len(items) < 2:
        raise DevicePlanError("--stages: give at least two devices")
    setup.stages = list(items)
    return setup


def parse_missing(items: Sequence[str] | None) -> dict[str, set[str]]:
    """``["sim:0=nn.softmax,exp"]`` -> ``{"sim:0": {"nn.softmax", "exp"}}``."""
    out: dict[str, set[str]] = {}
    for item in items or ():
        dev, sep, ops = item.partition("=")
        if not sep or not ops.strip():
            raise DevicePlanError(f"--missing-kernel '{item}': expected DEVICE=op[,op...]")
        key = device_name(_vdevice(dev))
        names = [o.strip() for o in ops.split(",") if o.strip()]
        for name in names:
            _check_op_name(name, item)
        out.setdefault(key, set()).update(names)
    return out


def _check_op_name(name: str, item: str) -> None:
    """A missing kernel is named by a hetvm op (``nn.conv2d``); an ONNX op type
    (``Conv``) or a typo would otherwise configure nothing, silently."""
    import difflib

    from ..ir.op_registry import registered_ops

    ops = registered_ops()
    if name in ops:
        return
    low = name.lower()
    close = [o for o in ops if low in o.lower()][:4] or difflib.get_close_matches(low, ops, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise DevicePlanError(
        f"--missing-kernel '{item}': '{name}' is not a hetvm op (name hetvm ops, not ONNX op types{hint})"
    )


def parse_place_rules(items: Sequence[str] | None, setup: DeviceSetup) -> list[tuple[str, VDevice]]:
    """``["Softmax=cpu"]`` -> ``[("Softmax", VDevice)]``; the device must be declared."""
    rules = []
    by_name = {device_name(v): v for v in setup.vdevices}
    for item in items or ():
        rule, sep, dev = item.rpartition("=")
        if not sep or not rule.strip() or not dev.strip():
            raise DevicePlanError(f"--place '{item}': expected OP_OR_NODE=DEVICE")
        key = device_name(_vdevice(dev))
        if key not in by_name:
            raise DevicePlanError(
                f"--place '{item}': device '{dev.strip()}' is not in --devices ({', '.join(by_name)})"
            )
        rules.append((rule.strip(), by_name[key]))
    return rules


def declare(mod: IRModule, setup: DeviceSetup) -> IRModule:
    """``mod`` with the run's vdevices declared (an existing declaration is kept)."""
    if mod.vdevices:
        return mod
    return mod.with_global_infos(vdevice=list(setup.vdevices))


def _pinned(sinfo: Any, vdev: VDevice) -> Any:
    if isinstance(sinfo, S.TensorStructInfo):
        return sinfo.with_vdevice(vdev)
    if isinstance(sinfo, S.TupleStructInfo):
        return S.TupleStructInfo([_pinned(f, vdev) for f in sinfo.fields])
    return sinfo


class _KeepInfo(ExprMutator):
    """Substitutes variables without re-inferring struct info downstream.

    The default mutator re-normalizes every call whose arguments change, which
    would copy a pinned vdevice into every later binding's struct info — and a
    binding's vdevice is itself a pin to the planner. Keeping the old struct
    info (no vdevice) leaves those values free for the planner to place.
    """

    def visit_call(self, call: E.Call) -> E.Expr:
        op = self.visit_expr(call.op)
        args = tuple(self.visit_expr(a) for a in call.args)
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return E.replace(call, op=op, args=args)

    def visit_tuple(self, tup: E.Tuple) -> E.Expr:
        fields = tuple(self.visit_expr(f) for f in tup.fields)
        if all(a is b for a, b in zip(fields, tup.fields)):
            return tup
        return E.replace(tup, fields=fields)

    def _retype(self, var: E.Var, value: E.Expr) -> E.Var:
        return var


class _Pinner(_KeepInfo):
    """Gives matching bindings' variables a vdevice in their struct info."""

    def __init__(self, mod: IRModule, rules: list[tuple[str, VDevice]], node_of: Mapping[str, Any]):
        super().__init__(mod)
        self.rules = rules
        self.node_of = node_of
        self.hits = [0] * len(rules)

    def _match(self, binding: E.VarBinding) -> VDevice | None:
        name = binding.var.name_hint
        node = self.node_of.get(name)
        node_name, op_type = (node[0], node[1]) if node else (None, None)
        value = binding.value
        op = value.op.name if isinstance(value, E.Call) and isinstance(value.op, E.Op) else None
        found = None
        for i, (rule, vdev) in enumerate(self.rules):
            if rule in (name, node_name, op_type) or (op is not None and rule == op):
                self.hits[i] += 1
                found = vdev  # the last matching rule wins, like later flags overriding earlier
        return found

    def visit_var_binding(self, binding: E.VarBinding) -> None:
        vdev = self._match(binding)
        if vdev is None or not isinstance(binding.var.struct_info, (S.TensorStructInfo, S.TupleStructInfo)):
            super().visit_var_binding(binding)
            return
        value = self.visit_expr(binding.value)
        old = binding.var
        var = type(old)(old.name_hint, struct_info=_pinned(old.struct_info, vdev), span=old.span)
        self.var_remap[old] = var
        self.emit_binding(E.VarBinding(var, value, span=binding.span))


def pin_params(mod: IRModule, vdev: VDevice) -> IRModule:
    """Parameters without a vdevice live on ``vdev`` (where a run puts its inputs).

    Without this the device planner is free to place the inputs, and the
    cheapest plan for a model with one CPU-only op is "everything on the CPU":
    correct, but not what a user who listed an accelerator first asks for.
    """
    func = mod["main"]
    params = []
    remap: dict[E.Var, E.Var] = {}
    for p in func.params:
        sinfo = p.struct_info
        if isinstance(sinfo, S.TensorStructInfo) and sinfo.vdevice is None:
            new = type(p)(p.name_hint, struct_info=sinfo.with_vdevice(vdev), span=p.span)
            remap[p] = new
            params.append(new)
        else:
            params.append(p)
    if not remap:
        return mod

    class _Params(_KeepInfo):
        def visit_var_def(self, var: E.Var) -> E.Var:
            return remap.get(var, var)

        def visit_var(self, var: E.Var) -> E.Expr:
            return self.var_remap.get(var, remap.get(var, var))

    new_func = _Params(mod).visit_expr(func)
    return mod.with_function("main", new_func)


def apply_pins(mod: IRModule, rules: list[tuple[str, VDevice]]) -> tuple[IRModule, dict[str, int]]:
    """Pins every binding a rule matches; returns the module and hits per rule."""
    if not rules:
        return mod, {}
    node_of = mod.attrs.get("onnx_node_of", {}) or {}
    pinner = _Pinner(mod, rules, node_of)
    try:
        out = pinner.visit_module(mod)
    except HetvmError:
        raise
    hits = {f"{r}={device_name(v)}": n for (r, v), n in zip(rules, pinner.hits)}
    unmatched = [k for k, n in hits.items() if n == 0]
    if unmatched:
        ops = sorted({v[1] for v in node_of.values()}) if node_of else []
        nodes = list(dict.fromkeys(v[0] for v in node_of.values()))
        hint = ""
        if ops:
            shown = ", ".join(nodes[:6]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > 6 else "")
            hint = f" (the model's op types: {', '.join(ops)}; nodes: {shown})"
        raise DevicePlanError(f"--place {', '.join(unmatched)}: matches no op type, node or value{hint}")
    out.attrs.update({k: v for k, v in mod.attrs.items() if k not in out.attrs})
    return out, hits
