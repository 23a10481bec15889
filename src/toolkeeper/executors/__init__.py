"""Executors: where a governed call finally touches the world.

An executor is anything with ``async execute(arguments, context) -> output``. Tool code
signals a failure it understands by raising `ToolFailure` (category, retryable, whether the
effect committed), and work paused for a human decision by raising `ToolSuspended`; any other
exception is a failure whose effect is unknown for a tool with
side effects. Timeouts and cancellation are applied by the harness around `execute`, so every
executor gets the same semantics.

`inprocess` runs Python functions; `mcp` runs the tools of another MCP server (it needs the
``gateway`` extra, so this package does not import it); `sandbox` runs a process under
bubblewrap (shell commands, CLI tools, sandboxed stdio upstreams). An executor that acts out
of process checks `context.grant` itself (`GrantAuthority.check_call`) before anything leaves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import ErrorCategory, FieldError


class Executor(Protocol):
    """Runs one call. Only the harness calls this, with the grant it minted for exactly this
    call in ``context.grant``."""

    source: str
    """Where results come from, for provenance: 'in_process', 'mcp:<server>', ..."""

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any: ...


@dataclass(frozen=True, slots=True)
class ToolAnswer:
    """An executor's answer that is more than a value: an MCP tool's content blocks, in the
    order it sent them. The `value` is checked against the output schema and projected like
    any output; the blocks are redacted and reach the envelope's ``content``, so a gateway
    can give its client what the tool sent."""

    value: Any
    """The structured content when `structured`; else a rendering of the text blocks."""
    blocks: tuple[dict[str, Any], ...]
    """The content blocks in MCP wire form (by alias)."""
    structured: bool = False
    """The tool sent `value` as its structured content."""
    is_error: bool = False
    """The tool flagged its answer an error (it then travels in a `ToolFailure`)."""
    effect_committed: bool | None = True
    """Whether a write tool's effect happened, when it returned: a tool whose contract
    declares the worst case (run_code, whose programs may only read) says what this call did —
    False nothing was written, None it cannot tell. Ignored for a read-only contract. An
    answer with neither blocks nor `structured` is a plain value that reports its effect:
    no content passes through."""


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
        answer: ToolAnswer | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.category = ErrorCategory(category)
        self.retryable = retryable
        self.effect_committed = effect_committed
        self.field_errors = field_errors
        self.suggested_fix = suggested_fix
        self.answer = answer
        """What the tool answered with its error, when it answered (an MCP ``isError``)."""


class ToolSuspended(Exception):
    """Raised by an executor whose work now waits on a human decision about a call it made
    (a Code Mode program paused at an inner call that needs approval): the call ends
    `pending_approval` under that approval, with `answer` as its structured content."""

    def __init__(
        self,
        message: str,
        *,
        approval_id: str,
        answer: ToolAnswer,
        effect_committed: bool | None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.approval_id = approval_id
        self.answer = answer
        self.effect_committed = effect_committed
        """Whether what the executor did before it paused changed anything."""


__all__ = ["Executor", "ToolAnswer", "ToolFailure", "ToolSuspended"]
