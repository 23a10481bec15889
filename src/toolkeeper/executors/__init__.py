"""Executors: where a governed call finally touches the world.

An executor is anything with ``async execute(arguments, context) -> output``. Tool code
signals a failure it understands by raising `ToolFailure` (category, retryable, whether the
effect committed); any other exception is a failure whose effect is unknown for a tool with
side effects. Timeouts and cancellation are applied by the harness around `execute`, so every
executor gets the same semantics.

`inprocess` runs Python functions; `mcp` runs the tools of another MCP server (it needs the
``gateway`` extra, so this package does not import it). An executor that acts out of process
checks `context.grant` itself (`GrantAuthority.check_call`) before anything leaves.
"""

from __future__ import annotations

from typing import Any, Protocol

from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import ErrorCategory, FieldError


class Executor(Protocol):
    """Runs one call. Only the harness calls this, with the grant it minted for exactly this
    call in ``context.grant``."""

    source: str
    """Where results come from, for provenance: 'in_process', 'mcp:<server>', ..."""

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any: ...


class ToolFailure(Exception):
    """Raised by tool code to report a failure it understands, as a structured error."""

    def __init__(
        self,
        message: str,
        *,
        category: ErrorCategory | str = ErrorCategory.INTERNAL,
        retryable: bool = False,
        effect_committed: bool | None = False,
        field_errors: tuple[FieldError, ...] = (),
        suggested_fix: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.category = ErrorCategory(category)
        self.retryable = retryable
        self.effect_committed = effect_committed
        self.field_errors = field_errors
        self.suggested_fix = suggested_fix


__all__ = ["Executor", "ToolFailure"]
