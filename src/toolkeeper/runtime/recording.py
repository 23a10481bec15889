"""The parts of a ledger row and an envelope that every outcome shares (provenance,
execution meta, the row a call starts as, the envelope of a row settled after the fact).
Settling what a dead process left is `toolkeeper.runtime.reconciliation`.
"""

from __future__ import annotations

import os
import socket
import time

from toolkeeper.contract.model import ToolContract
from toolkeeper.ledger import InvocationRecord, RecordState
from toolkeeper.runtime.envelope import (
    EffectState,
    ExecutionMeta,
    Provenance,
    ResultEnvelope,
    Status,
    ToolError,
)
from toolkeeper.runtime.invocation import InvocationRequest, Principal, Proposal
from toolkeeper.runtime.registry import ToolEntry

OWNER = f"{socket.gethostname()}:{os.getpid()}"
"""host:pid written on each intent this process records."""
STARTED = time.time()
"""When this process began: an intent under its OWNER but older is an earlier process's
(same host and pid, as a container's pid 1 always is)."""


def base_record(
    proposal: Proposal,
    principal: Principal,
    session: str | None,
    parent: str | None,
    request_id: str,
) -> InvocationRecord:
    return InvocationRecord(
        request_id=request_id,
        call_id=proposal.call_id,
        tool=proposal.tool,
        principal_id=principal.id,
        tenant=principal.tenant,
        state=RecordState.RECEIVED,
        session=session,
        parent_request_id=parent,
    )


def provenance(
    contract: ToolContract | None, request: InvocationRequest | None, entry: ToolEntry | None
) -> Provenance | None:
    if contract is None:
        return None
    target = None
    if request is not None and (request.write_set or request.read_set):
        target = (request.write_set or request.read_set)[0]
    source = getattr(entry.executor, "source", None) if entry else None
    return Provenance(
        tool_id=contract.id,
        tool_version=contract.version or "0.0.0",
        implementation_digest=(
            request.implementation_digest
            if request is not None
            else entry.digest
            if entry is not None
            else contract.digest()
        ),
        target=target,
        source=source,
    )


def execution_meta(
    base: InvocationRecord,
    request: InvocationRequest | None,
    attempts: int,
    started: float,
    effect_state: EffectState,
) -> ExecutionMeta:
    return ExecutionMeta(
        request_id=base.request_id,
        call_id=base.call_id,
        attempt=attempts,
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
        effect_state=effect_state,
        approval_id=request.approval_id if request else base.approval_id,
        idempotency_key=request.idempotency_key if request else None,
    )


def envelope_for_record(
    record: InvocationRecord,
    status: Status,
    error: ToolError | None,
    state: EffectState = EffectState.UNKNOWN,
) -> ResultEnvelope:
    previous = ResultEnvelope.model_validate(record.envelope) if record.envelope else None
    tool_id, _, version = (record.contract_ref or record.tool).partition("@")
    return ResultEnvelope(
        status=status,
        error=error,
        summary=error.message
        if error
        else f"{tool_id} succeeded (confirmed by read-back)"
        + ("" if previous and previous.structured_content else "; its output was not recorded"),
        structured_content=previous.structured_content if previous else None,
        provenance=Provenance(
            tool_id=tool_id,
            tool_version=version or "0.0.0",
            implementation_digest=record.implementation_digest,
        ),
        execution_meta=ExecutionMeta(
            request_id=record.request_id,
            call_id=record.call_id,
            attempt=record.attempts,
            effect_state=state,
            approval_id=record.approval_id,
            idempotency_key=record.idempotency_key,
        ),
    )
