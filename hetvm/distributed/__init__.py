"""Programs whose devices sit on several machines, run on a Ray cluster.

Build with devices of named hosts (``hetvm.remote("hostB", "sim", 0)``); the
build plans placement across hosts and cuts each function into per-host parts
(:mod:`hetvm.transform.split_hosts`), still one executable. Then:

* :class:`DistributedVM` runs it on a Ray cluster: one actor per host, pinned
  to that host's node, each with its own VM; values cross hosts through Ray's
  object store; several requests may be in flight (``run_many``), so the parts
  of consecutive requests overlap like pipeline stages;
* :class:`LocalHosts` runs the same schedule in this process, without Ray.

Ray is an optional dependency (``pip install hetvm[distributed]``); it is
imported only by :class:`DistributedVM`. See docs/distributed.md.
"""

from .local import LocalHosts
from .memory import check_memory_limits, memory_by_device
from .plan import HostSchedule, schedule_of

__all__ = [
    "DistributedVM", "LocalHosts", "HostSchedule", "schedule_of", "host_resource",
    "memory_by_device", "check_memory_limits",
]


def __getattr__(name: str):
    if name in ("DistributedVM", "host_resource"):
        from . import ray_runner

        return getattr(ray_runner, name)
    raise AttributeError(f"module 'hetvm.distributed' has no attribute '{name}'")
