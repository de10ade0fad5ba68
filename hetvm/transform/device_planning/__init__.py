"""Device planning internals used by :class:`hetvm.transform.plan_devices.PlanDevices`.

One module per job: ``devices`` (which devices exist, which kernels each lacks),
``graph`` (values, domains and demands collected from the module), ``mincut``
(max-flow / minimum cut), ``solve`` (placing every domain), ``rewrite`` (copy
insertion and struct info), ``check`` (the well-formedness rule of a plan).
"""

from .check import check_device_plan

__all__ = ["check_device_plan"]
