"""What a Code Mode sandbox tier and the host share: the inner call a program makes, the
limits it runs under, and what comes back when it ends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple


class HostCall(NamedTuple):
    """One inner call as the program made it: the function's name and its arguments."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class CodeLimits:
    """What one program may spend; each exceeded limit ends it with an error naming the limit."""

    wall_seconds: float
    cpu_seconds: int
    memory_bytes: int
    output_bytes: int
    max_inner_calls: int


@dataclass
class ProgramOutcome:
    """How a program ended: its value, its printed output (bounded) and its error, if any."""

    value: Any
    stdout: str
    truncated: bool
    error: str | None
    error_type: str | None


class InnerCallError(Exception):
    """Raised by the host callback to fail one inner call; the program sees an exception
    named `type_name` with `message`, and can catch it."""

    def __init__(self, type_name: str, message: str, details: Any = None):
        super().__init__(message)
        self.type_name = type_name
        self.message = message
        self.details = details


class Abort(Exception):
    """Raised by the host callback to stop the program now (e.g. to pause for approval)."""
