"""``DistributedVM``: a multi-host executable on a Ray cluster.

One Ray actor per host, pinned to that host's node, each holding its own VM
(:class:`~.worker.HostWorker`). The driver submits a request's parts in
schedule order without waiting: a part's arguments are the object refs of
what other hosts computed, so Ray starts it once they exist and moves each
value from the producer's object store to the consumer's node (once per node;
a value a host already holds is not passed again). An actor runs its calls in
submission order, so with several requests in flight host A computes request
2's first part while host B computes request 1's second part: the parts
overlap like pipeline stages.

Why the object store and not Ray Compiled Graph channels: channels need a
static graph compiled once per actor set and fixed-size buffers per edge
(shapes known ahead), and they are still experimental across nodes; the object
store takes any shape, survives a restarted actor and moves each value to a
node once. A request pays Ray's per-call overhead per part (measured by
``benchmarks/distributed.py``), which is what channels would save.

Failures (every wait has a timeout):

* a host with no live node at start: :class:`HostMissingError`;
* a worker that dies: :class:`WorkerDiedError` naming the host and the values
  of the part it was running;
* a part or transfer without an answer within ``timeout``: :class:`TransferTimeoutError`
  naming the host and value still awaited.

After a failed request every actor of the run is killed and started again on
the next call (a fresh VM and no half-finished request anywhere), so the
driver stays usable; if a host's node is gone for good, that next call raises
:class:`HostMissingError`.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import (
    DistributedError,
    HetvmError,
    HostMissingError,
    TransferTimeoutError,
    WorkerDiedError,
)
from ..runtime.bytecode import Executable
from .memory import check_memory_limits
from .plan import HostSchedule, PartPlan, build_result, schedule_of
from .worker import HostWorker

__all__ = ["DistributedVM", "host_resource"]


def host_resource(host: str) -> str:
    """The custom Ray resource a node offers to say it is ``host``
    (``ray start --resources='{"hetvm_host_hostB": 1}'``)."""
    return f"hetvm_host_{host}"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise DistributedError(
            "hetvm.distributed needs Ray, which is not installed (pip install 'hetvm[distributed]')"
        ) from exc
    return ray


def _artifact_bytes(exe: Executable) -> bytes:
    fd, path = tempfile.mkstemp(suffix=".hetvm")
    os.close(fd)
    try:
        exe.export(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


class _Request:
    """The refs of one request in flight and where each comes from."""

    def __init__(self, rid: int) -> None:
        self.rid = rid
        self.values: dict[str, Any] = {}  # value name -> ref
        self.calls: list[tuple[PartPlan, list]] = []  # part, its refs (returns + stats)
        self.passed: dict[int, list[tuple[str, Any]]] = {}  # part index -> (value name, ref) received
        self.submitted = time.perf_counter()


class DistributedVM:
    """Runs ``function`` of a multi-host executable on the connected Ray cluster.

    ``nodes`` maps a host to a Ray node id; a host not in it is found by the
    custom resource :func:`host_resource` or by the node's host name / address.
    ``timeout`` bounds every wait of a request (seconds), ``start_timeout`` the
    start of the workers. ``memory_limits`` (``{"hostB/sim:0": bytes}``) refuses a
    placement whose memory plan does not fit, before anything starts. ``ray.init`` must have been called (this class never
    starts a cluster).
    """

    def __init__(
        self,
        exe: Executable,
        function: str = "main",
        nodes: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        start_timeout: float = 60.0,
        memory_limits: Mapping[str, int] | None = None,
    ) -> None:
        if memory_limits:
            check_memory_limits(exe, memory_limits, function)
        self.ray = _import_ray()
        if not self.ray.is_initialized():
            raise DistributedError("DistributedVM needs a running Ray: call ray.init(address=...) first")
        self.schedule: HostSchedule = schedule_of(exe, function)
        self.function = function
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self.nodes = dict(nodes or {})
        self.hosts = list(dict.fromkeys(p.host for p in self.schedule.parts))
        self._artifact = _artifact_bytes(exe)
        self._ids = itertools.count()
        self._actors: dict[str, Any] = {}
        self._node_of: dict[str, str] = {}
        self._actor_class = self.ray.remote(num_cpus=0, max_restarts=0, max_concurrency=1)(HostWorker)
        self._start()

    # -- workers -------------------------------------------------------------
    def _find_node(self, host: str, alive: list[dict]) -> str:
        if host in self.nodes:
            node = self.nodes[host]
            if any(n["NodeID"] == node for n in alive):
                return node
            raise HostMissingError(f"host {host}: Ray node {node} is not alive in the cluster", host=host)
        res = host_resource(host)
        for n in alive:
            if n.get("Resources", {}).get(res, 0) > 0:
                return n["NodeID"]
        for n in alive:
            if host in (n.get("NodeManagerHostname"), n.get("NodeManagerAddress"), n.get("NodeName")):
                return n["NodeID"]
        known = ", ".join(
            f"{n['NodeID'][:8]} ({n.get('NodeManagerHostname')}; "
            + ", ".join(k for k in n.get("Resources", {}) if k.startswith("hetvm_host_")) + ")"
            for n in alive
        ) or "none"
        raise HostMissingError(
            f"host {host} is not in the Ray cluster: no live node offers resource '{res}', has that host "
            f"name or is mapped in nodes= (live nodes: {known})",
            host=host,
        )

    def _start(self) -> None:
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        alive = [n for n in ray.nodes() if n.get("Alive")]
        for host in self.hosts:
            if host in self._actors:
                continue
            node = self._find_node(host, alive)
            actor = self._actor_class.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node, soft=False),
                name=None,
            ).remote(self._artifact, host, self.function)
            self._actors[host] = actor
            self._node_of[host] = node
        for host in self.hosts:
            ref = self._actors[host].ready.remote()
            try:
                ray.get(ref, timeout=self.start_timeout)
            except ray.exceptions.GetTimeoutError:
                self._kill_all()
                raise HostMissingError(
                    f"the worker of host {host} did not start within {self.start_timeout:g} s "
                    f"(node {self._node_of.get(host, '?')[:8]})", host=host,
                ) from None
            except ray.exceptions.RayError as exc:
                self._kill_all()
                raise HostMissingError(f"the worker of host {host} failed to start: {_short(exc)}", host=host) from None

    def _kill_all(self) -> None:
        for actor in self._actors.values():
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass
        self._actors.clear()

    def actor(self, host: str) -> Any:
        """The Ray actor of ``host`` (for tests and inspection)."""
        return self._actors[host]

    # -- requests --------------------------------------------------------------
    def _submit(self, args: Sequence[Any]) -> _Request:
        if len(args) != len(self.schedule.input_hosts):
            raise DistributedError(
                f"'{self.function}' takes {len(self.schedule.input_hosts)} argument(s), given {len(args)}"
            )
        if not self._actors:
            self._start()
        req = _Request(next(self._ids))
        for part in self.schedule.parts:
            passed = []
            for kind, what in part.passed:
                passed.append(np.asarray(args[what]) if kind == "input" else req.values[what])
            req.passed[part.index] = [(what, req.values[what]) for kind, what in part.passed if kind == "value"]
            method = self._actors[part.host].run.options(num_returns=len(part.returns) + 1)
            refs = method.remote(req.rid, part.index, *passed)
            refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
            req.values.update(zip(part.returns, refs[:-1]))
            req.calls.append((part, refs))
        return req

    def _collect(self, req: _Request) -> Any:
        ray = self.ray
        names = _flat_names(self.schedule.results)
        refs = [req.values[n] for n in names]
        done_refs = [r for _, rs in req.calls for r in rs[-1:]]  # every part's stats: all parts finished
        try:
            got = ray.get(refs + done_refs, timeout=self.timeout)
        except ray.exceptions.GetTimeoutError:
            raise self._fail(req, "timeout") from None
        except ray.exceptions.RayActorError:
            raise self._fail(req, "died") from None
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, HetvmError):
                self._kill_all()
                raise cause from None
            if cause is not None and not isinstance(cause, ray.exceptions.RayError):
                raise self._failed_part(req, cause) from None
            raise self._fail(req, "died", exc) from None
        except ray.exceptions.RayError as exc:  # object lost, worker crashed ...
            raise self._fail(req, "died", exc) from None
        return build_result(self.schedule.results, dict(zip(names, got[: len(names)])))

    def _failed_part(self, req: _Request, cause: BaseException) -> DistributedError:
        """A part raised something other than a hetvm error (a bug): name its host."""
        ray = self.ray
        failed = None
        for part, refs in req.calls:
            try:
                ray.get(refs[-1], timeout=0.1)
            except Exception:  # noqa: BLE001 - the first part that did not finish
                failed = part
                break
        self._kill_all()
        host = failed.host if failed else None
        where = f"host {host}, {failed.function}" if failed else f"request {req.rid}"
        return DistributedError(f"{where} failed: {type(cause).__name__}: {str(cause)[:300]}",
                                host=host, value=(failed.outputs[0] if failed and failed.outputs else None))  # fmt: skip

    def _fail(self, req: _Request, why: str, exc: Exception | None = None) -> DistributedError:
        """The error of a failed request, naming the host and value; every actor is then reset."""
        ray = self.ray
        pending = None
        for part, refs in req.calls:
            ready, _ = ray.wait(refs[-1:], timeout=0)
            if not ready:
                pending = part
                break
        if why == "died" or pending is None:
            dead = None
            for host, actor in self._actors.items():
                try:
                    ray.get(actor.ping.remote(), timeout=min(5.0, self.timeout))
                except Exception:  # noqa: BLE001 - dead or unreachable
                    dead = host
                    break
            self._kill_all()
            host = dead or (pending.host if pending else "?")
            part = next((p for p, _ in req.calls if p.host == host and (pending is None or p.index >= pending.index)), pending)
            values = ", ".join(part.outputs) if part else "?"
            return WorkerDiedError(
                f"the worker of host {host} died during request {req.rid} while computing {values!s} "
                f"({part.function if part else '?'}); the request is lost, the workers restart on the next call"
                + (f" ({_short(exc)})" if exc is not None else ""),
                host=host, value=(part.outputs[0] if part and part.outputs else None),
            )
        awaited = [name for name, dsts in pending.send.items()] or pending.outputs
        waiting_for = None  # a value this part receives that has not arrived
        for name, ref in req.passed.get(pending.index, []):
            if not ray.wait([ref], timeout=0)[0]:
                waiting_for = name
                break
        self._kill_all()
        src = self.schedule.producer(waiting_for).host if waiting_for else None
        what = (f"waiting for '{waiting_for}' from {src}" if waiting_for is not None
                else f"computing {', '.join(awaited) or 'its part'}")  # fmt: skip
        return TransferTimeoutError(
            f"request {req.rid}: host {pending.host} gave no answer within {self.timeout:g} s "
            f"({pending.function}, {what}); the workers restart on the next call",
            host=pending.host, value=waiting_for or (awaited[0] if awaited else None),
        )

    def __call__(self, *args: Any) -> Any:
        """Runs one request and returns its result as NumPy arrays."""
        return self._collect(self._submit(args))

    def run_many(self, batches: Iterable[Sequence[Any]], in_flight: int = 4) -> list[Any]:
        """Runs many requests with up to ``in_flight`` submitted at once (pipelining)."""
        if in_flight < 1:
            raise DistributedError(f"in_flight must be >= 1, got {in_flight}")
        out: list[Any] = []
        window: list[_Request] = []
        for args in batches:
            window.append(self._submit(tuple(args)))
            if len(window) >= in_flight:
                out.append(self._collect(window.pop(0)))
        while window:
            out.append(self._collect(window.pop(0)))
        return out

    # -- inspection ------------------------------------------------------------
    def stats(self) -> dict[str, dict]:
        """Per host: bytes and values received, compute and staging seconds, parts run."""
        refs = {h: a.stats.remote() for h, a in self._actors.items()}
        return {h: self.ray.get(r, timeout=self.timeout) for h, r in refs.items()}

    def reset_stats(self) -> None:
        self.ray.get([a.reset_stats.remote() for a in self._actors.values()], timeout=self.timeout)

    def close(self) -> None:
        """Stops the workers (the driver may be started again with a new DistributedVM)."""
        self._kill_all()

    def __enter__(self) -> DistributedVM:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _flat_names(tree: Any) -> list[str]:
    if isinstance(tree, list):
        return [n for t in tree for n in _flat_names(t)]
    return [tree]


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
