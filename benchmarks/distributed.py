"""Throughput of a light model split over two hosts (stage mode) on Ray, against one host.

Starts a local two-node Ray cluster (``ray.cluster_utils.Cluster``; each node is
one "host" with one CPU and a small object store) and builds the model twice:

* one host: everything on ``hostA/cpu`` (one Ray actor);
* two hosts: stage mode over ``hostA/cpu`` and ``hostB/sim:0`` (two actors; the
  activations at the cut cross through Ray's object store);

The model is SqueezeNet, one of the onnx package's light CNNs, with seeded
random weights (``--model squeezenet``, the default; ``--model mlp`` is an
MLP of ``--layers`` x ``--width``). It runs the same requests with 1 and with
``--in-flight`` requests submitted at once (pipelining) and prints requests/s,
and where one request's time goes with one in flight: compute (the workers' VM
time, per host), staging (device -> host copies of what is sent), Ray calls
(an empty actor round trip per part) and the rest (object-store transfer and
scheduling); then one boundary activation's hop from hostA to hostB through
the object store against a Ray Compiled Graph channel.

Both nodes share this machine's cores, so two "hosts" do not add compute here:
the figures show the overheads and whether stages overlap, not a real network.

    python benchmarks/distributed.py --requests 32 --in-flight 4
    python benchmarks/distributed.py --requests 32 --in-flight 4 --cross-bandwidth 1e6   # a cut under 100 KiB
    python benchmarks/distributed.py --model mlp --requests 40 --layers 8 --width 256
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def _build(args: argparse.Namespace, two_hosts: bool):
    """The module, its executable and a function making request inputs (by seed)."""
    import hetvm
    from hetvm.testing.multi_host import HOST_A_CPU, HOST_B_SIM, STAGES, inputs_for, light_cnn, mlp

    devices = [HOST_A_CPU, HOST_B_SIM] if two_hosts else [HOST_A_CPU]
    opts: dict = {"stages": STAGES} if two_hosts else {}
    if two_hosts and args.cross_bandwidth:  # the planner's network: a slower one cuts where fewer bytes cross
        opts["links"] = {"cross_host": {"bandwidth": args.cross_bandwidth}}
    if args.model == "mlp":
        mod = mlp(args.layers, args.width, args.batch, devices=devices, constant_weights=True)
        return mod, hetvm.build(mod, plan_devices_options=opts), lambda seed: inputs_for(mod, seed=seed)
    mod = light_cnn(args.model, devices=devices, seed=0)
    shape = tuple(int(d.value) for d in mod["main"].params[0].struct_info.shape)

    def make(seed: int) -> list[np.ndarray]:
        return [np.random.default_rng(seed).standard_normal(shape).astype("float32")]

    return mod, hetvm.build(mod, plan_devices_options=opts), make


def _ping_s(ray, actor, n: int = 20) -> float:
    ray.get(actor.ping.remote(), timeout=60)
    t0 = time.perf_counter()
    for _ in range(n):
        ray.get(actor.ping.remote(), timeout=60)
    return (time.perf_counter() - t0) / n


def _store_vs_channel(ray, nbytes: int, n: int = 30) -> tuple[float, float | str]:
    """Seconds per hostA -> hostB hop of an array of ``nbytes``: through the object
    store (two chained actor calls, as DistributedVM does) and through a Ray
    Compiled Graph (channels), or why the compiled graph could not run."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from hetvm.distributed import host_resource

    def node(host: str) -> str:
        return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(host_resource(host)))

    @ray.remote(num_cpus=0)
    class Echo:
        def fwd(self, x):
            return x

    a, b = (Echo.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node(h), soft=False)).remote()
            for h in ("hostA", "hostB"))  # fmt: skip
    x = np.zeros(max(nbytes // 4, 1), "float32")
    ray.get(b.fwd.remote(a.fwd.remote(x)), timeout=60)
    t = time.perf_counter()
    for _ in range(n):
        ray.get(b.fwd.remote(a.fwd.remote(x)), timeout=60)
    store = (time.perf_counter() - t) / n
    try:
        from ray.dag import InputNode

        with InputNode() as inp:
            dag = b.fwd.bind(a.fwd.bind(inp))
        compiled = dag.experimental_compile()
        try:
            ray.get(compiled.execute(x), timeout=60)
            t = time.perf_counter()
            for _ in range(n):
                ray.get(compiled.execute(x), timeout=60)
            channel: float | str = (time.perf_counter() - t) / n
        finally:
            compiled.teardown()
    except Exception as exc:  # noqa: BLE001 - report why, keep the benchmark going
        channel = f"not available ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    for actor in (a, b):
        ray.kill(actor)
    return store, channel


def _measure(ray, dvm, requests, in_flight: int) -> float:
    dvm.run_many(requests[:2], in_flight=1)  # warm
    t0 = time.perf_counter()
    dvm.run_many(requests, in_flight=in_flight)
    return len(requests) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet", help="a light ONNX model's name (squeezenet, ...) or mlp")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--cross-bandwidth", type=float, default=None, metavar="BYTES/S",
                    help="the cross-host bandwidth the planner assumes (default 1.25e9, 10 Gbit/s)")
    ap.add_argument("--layers", type=int, default=8, help="mlp only")
    ap.add_argument("--width", type=int, default=256, help="mlp only")
    ap.add_argument("--batch", type=int, default=32, help="mlp only")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    import hetvm
    from hetvm.distributed import DistributedVM, host_resource, schedule_of

    small = dict(num_cpus=1, object_store_memory=100 * 2**20)
    t0 = time.perf_counter()
    cluster = Cluster(initialize_head=True,
                      head_node_args=dict(include_dashboard=False, resources={host_resource("hostA"): 1}, **small))
    cluster.add_node(resources={host_resource("hostB"): 1}, **small)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    print(f"two-node cluster started in {time.perf_counter() - t0:.1f} s; model {args.model}")
    boundary = 0
    try:
        for two in (False, True):
            mod, exe, make = _build(args, two)
            sched = schedule_of(exe)
            if two:
                boundary = max((int(t["bytes"]) for t in sched.transfers), default=0)
                cut = exe.metadata["device_stages"]["ranges"]
                print(f"stage cut: ops {cut[0][0]}..{cut[0][1]} on hostA/cpu, {cut[1][0]}..{cut[1][1]} on hostB/sim:0")
            reqs = [make(s) for s in range(args.requests)]
            local = hetvm.VirtualMachine(exe, threads=1)  # as a Ray worker runs (OMP_NUM_THREADS=1)
            for r in reqs[:2]:  # warm: first calls set up kernels and pools
                local["main"](*r)
            t = time.perf_counter()
            for r in reqs:
                local["main"](*r)
            local_rps = len(reqs) / (time.perf_counter() - t)
            with DistributedVM(exe, timeout=300) as dvm:
                ref = np.asarray(local["main"](*reqs[0]).copyto(hetvm.cpu()).numpy())
                np.testing.assert_allclose(dvm(*reqs[0]), ref, rtol=1e-5, atol=1e-6)
                dvm.reset_stats()
                t = time.perf_counter()
                dvm.run_many(reqs, in_flight=1)
                wall1 = (time.perf_counter() - t) / len(reqs)
                stats = dvm.stats()
                rps1 = 1 / wall1
                rpsn = _measure(ray, dvm, reqs, args.in_flight)
                ping = statistics.mean(_ping_s(ray, dvm.actor(h)) for h in sched.hosts if h in stats)
            per_host = {h: s["compute_s"] / len(reqs) for h, s in stats.items()}
            compute = sum(per_host.values())
            staging = sum(s["staging_s"] for s in stats.values()) / len(reqs)
            received = sum(s["received_bytes"] for s in stats.values()) / len(reqs)
            overhead = ping * len(sched.parts)
            rest = max(wall1 - compute - staging - overhead, 0.0)
            name = "two hosts (stage mode)" if two else "one host"
            print(f"\n{name}: {len(sched.parts)} part(s), {sched.transfer_bytes} bytes cross hosts per request "
                  f"(measured {received:.0f})")
            print(f"  in-process VM, 1 thread, no Ray:    {local_rps:8.2f} req/s")
            print(f"  Ray, 1 in flight:                   {rps1:8.2f} req/s  ({wall1 * 1e3:.1f} ms/request)")
            print(f"  Ray, {args.in_flight} in flight:                   {rpsn:8.2f} req/s")
            hosts_text = ", ".join(f"{h} {c * 1e3:.1f}" for h, c in per_host.items())
            print(f"  one request: compute {compute * 1e3:.1f} ms ({hosts_text}), staging {staging * 1e3:.2f} ms, "
                  f"Ray calls {overhead * 1e3:.2f} ms ({len(sched.parts)} x {ping * 1e3:.2f} ms round trip), "
                  f"transfer and scheduling {rest * 1e3:.1f} ms")
        act = boundary or 4
        store, channel = _store_vs_channel(ray, act)
        print(f"\none {act}-byte boundary activation hostA -> hostB: object store {store * 1e3:.2f} ms, "
              + (f"compiled graph channel {channel * 1e3:.2f} ms" if isinstance(channel, float)
                 else f"compiled graph {channel}"))  # fmt: skip
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
