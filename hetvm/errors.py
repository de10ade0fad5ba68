"""Every error hetvm raises on purpose derives from :class:`HetvmError`.

Users catch ``HetvmError`` to tell hetvm's diagnostics apart from bugs; the
subclasses say which layer refused the input.
"""

from __future__ import annotations


class HetvmError(Exception):
    """Base class of all deliberate hetvm errors."""


class ParseError(HetvmError):
    """A script could not be turned into IR (syntax or semantics).

    The message carries file, line, column, the source line and a caret.
    """

    def __init__(
        self,
        message: str,
        *,
        filename: str | None = None,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
    ) -> None:
        self.raw_message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        super().__init__(self._format())

    def _format(self) -> str:
        if self.line is None:
            return self.raw_message
        where = f"{self.filename or '<string>'}:{self.line}:{(self.column or 0) + 1}"
        text = f"{where}: error: {self.raw_message}"
        if self.source_line is not None:
            caret = " " * (self.column or 0) + "^"
            text += f"\n    {self.source_line.rstrip()}\n    {caret}"
        return text


class StructInfoError(HetvmError):
    """An op or binding got arguments whose shapes, dtypes or arity do not fit."""


class WellFormedError(HetvmError):
    """The IR breaks a structural rule (SSA, scoping, undeclared vdevice...)."""


class DevicePlanError(HetvmError):
    """Device constraints cannot all hold, or a vdevice is unknown."""


class MemoryPlanError(HetvmError):
    """A memory plan cannot be made or does not fit a device."""


class HetvmRuntimeError(HetvmError):
    """Execution failed inside the VM or graph executor."""


class DeviceMismatchError(HetvmRuntimeError):
    """A kernel was handed a tensor that lives on another device."""


class OutOfMemoryError(HetvmRuntimeError, MemoryError):
    """An allocation exceeded a device's capacity."""


class ArtifactError(HetvmError):
    """A saved executable or library is truncated, tampered or incompatible."""


class FrontendError(HetvmError):
    """A model (ONNX ...) cannot be imported."""


__all__ = [
    "HetvmError",
    "ParseError",
    "StructInfoError",
    "WellFormedError",
    "DevicePlanError",
    "MemoryPlanError",
    "HetvmRuntimeError",
    "DeviceMismatchError",
    "OutOfMemoryError",
    "ArtifactError",
    "FrontendError",
]


class DistributedError(HetvmRuntimeError):
    """A program spread over several hosts (``hetvm.distributed``) failed.

    ``host`` names the machine and ``value`` the value being computed or sent
    (None where no single one applies)."""

    def __init__(self, message: str, *, host: str | None = None, value: str | None = None) -> None:
        super().__init__(message)
        self.host = host
        self.value = value


class HostMissingError(DistributedError):
    """A host the program needs has no live node in the Ray cluster."""


class WorkerDiedError(DistributedError):
    """The worker (Ray actor) of a host died while a request was running."""


class TransferTimeoutError(DistributedError):
    """A part or a transfer gave no answer within the timeout."""
