"""`ToolContext`: what an executor may know about the call it runs.

A tool function that declares a parameter annotated `ToolContext` receives it at dispatch;
that parameter never appears in the input schema, so the model cannot see or forge it. It is
the only road by which secrets reach tool code (DESIGN.md stage 6).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from toolkeeper.runtime.grants import Grant
from toolkeeper.runtime.invocation import Principal


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

    def __repr__(self) -> str:
        # Secret values must never reach a log line through a repr.
        return (
            f"ToolContext(request_id={self.request_id!r}, call_id={self.call_id!r}, "
            f"contract_ref={self.contract_ref!r}, principal={self.principal.id!r}, "
            f"attempt={self.attempt}, secrets=<{len(self.secrets)} hidden>)"
        )
