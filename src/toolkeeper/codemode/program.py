"""The values a Code Mode program and its host exchange, whatever sandbox runs it.

Every tier (Monty in `monty.py`, CPython under bubblewrap in `cpython.py`) runs a program
with a set of function names, answers each call the program makes through one host callback
(`HostCall` in, a JSON value or `InnerCallError` out), under `CodeLimits`, and reports a
`ProgramOutcome`. The callback is where a call becomes a governed one (`run_code.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

RUN_CODE_ID = "toolkeeper.run_code"
"""The run_code tool's id (here, so a road can recognize it without loading the sandbox)."""


class HostCall(NamedTuple):
    """One call a program made to an SDK function, as the sandbox saw it."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class CodeLimits:
    """What one program may use. Each limit, when hit, ends the program with an error that
    names it and the setting that changes it (`Harness(code_limits=CodeLimits(...))`)."""

    wall_seconds: float = 60.0
    """The whole run, inner calls included."""
    cpu_seconds: int = 10
    """Time the program itself computes (not waiting on inner calls)."""
    memory_bytes: int = 256 * 1024 * 1024
    output_bytes: int = 16 * 1024
    """Printed output kept inline in the answer; the rest is stored as an artifact."""
    max_inner_calls: int = 10_000


DEFAULT_CODE_LIMITS = CodeLimits()


@dataclass
class ProgramOutcome:
    """How a program ended: its value, what it printed, or the exception that stopped it."""

    value: Any
    """The JSON-able return value (the last expression)."""
    stdout: str
    truncated: bool
    """Printed output went past `CodeLimits.output_bytes` (the sandbox kept only the start)."""
    error: str | None = None
    """The Python exception text, when the program failed."""
    error_type: str | None = None


class Abort(Exception):
    """Raised by a host callback to stop the program now; the tier kills its sandbox and
    raises it on."""


class InnerCallError(Exception):
    """Raised by a host callback to make the program see an exception named `type_name`
    (a denied call, invalid arguments, an unknown function), with `details` for the tier
    that can carry them."""

    def __init__(self, type_name: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.type_name = type_name
        self.message = message
        self.details = details or {}


__all__ = [
    "DEFAULT_CODE_LIMITS",
    "RUN_CODE_ID",
    "Abort",
    "CodeLimits",
    "HostCall",
    "InnerCallError",
    "ProgramOutcome",
]
