"""hetvm: a compiler and virtual machine for tensor programs across devices."""

from .errors import (
    ArtifactError,
    DeviceMismatchError,
    DevicePlanError,
    FrontendError,
    HetvmError,
    HetvmRuntimeError,
    MemoryPlanError,
    OutOfMemoryError,
    ParseError,
    StructInfoError,
    WellFormedError,
)

__version__ = "0.1.0"

__all__ = [
    "ArtifactError",
    "DeviceMismatchError",
    "DevicePlanError",
    "FrontendError",
    "HetvmError",
    "HetvmRuntimeError",
    "MemoryPlanError",
    "OutOfMemoryError",
    "ParseError",
    "StructInfoError",
    "WellFormedError",
]
