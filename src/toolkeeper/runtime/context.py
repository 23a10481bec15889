"""`ToolContext`: what an executor may know about the call it runs.

A tool function that declares a parameter annotated `ToolContext` receives it at dispatch;
that parameter never appears in the input schema, so the model cannot see or forge it. It is
the only road by which secrets reach tool code (DESIGN.md stage 6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, Protocol

from toolkeeper.runtime.grants import Grant
from toolkeeper.runtime.invocation import Principal

ClientRequest = Literal["elicit", "sample", "roots"]
"""What a tool may ask of the client that called it mid-call: input from its user
(elicitation), a completion from its model (sampling), or the filesystem roots it works in
(``roots/list``)."""


class Peer(Protocol):
    """The client that made the call, as a tool may reach it while the call runs (an MCP
    client behind the gateway). Parameters and answers are MCP wire JSON."""

    def unable(self, request: ClientRequest) -> str | None:
        """Why the client cannot be asked `request` now (it did not declare the capability,
        its protocol era has no channel for it), or None."""
        ...

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report the call's progress (a no-op unless the client asked for progress)."""
        ...

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """Pass on a log message about the call."""
        ...

    async def ask(self, request: ClientRequest, params: dict[str, Any]) -> dict[str, Any]:
        """Send `request` to the client and return its answer; raises `InputRefused` when it
        may not or cannot be sent."""
        ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Per-call facts handed to the executor: correlation ids, principal, secrets."""

    request_id: str
    call_id: str
    contract_ref: str
    principal: Principal
    session: str | None = None
    parent_request_id: str | None = None
    idempotency_key: str | None = None
    attempt: int = 1
    secrets: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    grant: Grant | None = None
    """The signed grant this call runs under; executors that act out of process check it."""
    peer: Peer | None = None
    """The client that made the call, governed (runtime/peer.py); None when no client can
    be reached mid-call (a library call, a resumed one)."""
    environment: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The environment policy judged the call in (a Code Mode program's inner calls carry
    it on, so a tenant boundary holds inside the program too)."""

    def __repr__(self) -> str:
        # Secret values must never reach a log line through a repr.
        return (
            f"ToolContext(request_id={self.request_id!r}, call_id={self.call_id!r}, "
            f"contract_ref={self.contract_ref!r}, principal={self.principal.id!r}, "
            f"attempt={self.attempt}, secrets=<{len(self.secrets)} hidden>)"
        )
