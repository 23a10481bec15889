"""Recording outcomes: the ledger rows and envelopes a call leaves behind.

The harness decides; this module writes down what was decided, in the one shape every path
shares — a finished rejection, a completed call, a replay of an idempotency key, a
cancellation, a suspension for approval, a recovery after a crash — so that every envelope
correlates to exactly one call id and request id, and every row is redacted.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Any

import toolkeeper.runtime.stages as stages
from toolkeeper.contract.model import ToolContract
from toolkeeper.ledger import InvocationRecord, Ledger, LedgerEvent, RecordState
from toolkeeper.policy import PolicyDecision
from toolkeeper.runtime.approvals import Approvals
from toolkeeper.runtime.envelope import (
    EffectState,
    ErrorCategory,
    ExecutionMeta,
    Provenance,
    ResultEnvelope,
    Status,
    ToolError,
)
from toolkeeper.runtime.invocation import InvocationRequest, Principal, Proposal
from toolkeeper.runtime.registry import ToolEntry
from toolkeeper.secrets.redaction import Redactor

OWNER = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class Trail:
    """Ledger events of one request, buffered so a read-only call costs one transaction."""

    request_id: str
    events: list[LedgerEvent] = field(default_factory=list)

    def add(self, stage: str, kind: str, **data: Any) -> None:
        self.events.append(LedgerEvent(self.request_id, stage, kind, data))

    def drain(self) -> list[LedgerEvent]:
        events, self.events = self.events, []
        return events


class Recorder:
    """Writes each outcome to the ledger and builds its envelope."""

    def __init__(self, ledger: Ledger, redactor: Redactor, approvals: Approvals) -> None:
        self._ledger = ledger
        self._redactor = redactor
        self._approvals = approvals

    def suspend(
        self,
        base: InvocationRecord,
        trail: Trail,
        contract: ToolContract,
        request: InvocationRequest,
        decision: PolicyDecision,
        started: float,
    ) -> ResultEnvelope:
        approval = self._approvals.create(
            request=request,
            account=self._redactor.redact_text(
                stages.approval_account(contract, request, decision)
            ),
            policy_ids=decision.policy_ids,
            arguments=self._redactor.redact(request.arguments),
        )
        trail.add("approve", "pending", approval_id=approval.approval_id)
        error = ToolError(
            category=ErrorCategory.APPROVAL_REQUIRED,
            message=f"{contract.id} needs a human approval before it runs",
            suggested_fix=(
                f"Wait for approval {approval.approval_id}; do not call the tool again meanwhile."
            ),
            effect_committed=False,
        )
        envelope = ResultEnvelope(
            status=Status.PENDING_APPROVAL,
            error=error,
            summary=approval.account,
            provenance=provenance(contract, request, None),
            execution_meta=execution_meta(base, request, 0, started, EffectState.NONE).model_copy(
                update={"approval_id": approval.approval_id}
            ),
        )
        record = replace(
            base,
            state=RecordState.PENDING_APPROVAL,
            status=envelope.status.value,
            effect_state=EffectState.NONE.value,
            approval_id=approval.approval_id,
            envelope=envelope.model_dump(mode="json"),
            updated_at=time.time(),
        )
        self._ledger.complete(record, trail.drain())
        return envelope

    def recover(self) -> list[InvocationRecord]:
        """Turn calls left between intent and completion by a dead process into
        `effect_unknown` records: never lost, never silently retried."""
        recovered = []
        for record in self._ledger.in_flight():
            if owner_alive(record.owner):
                continue
            error = ToolError(
                category=ErrorCategory.EFFECT_UNKNOWN,
                message="the process running this call stopped before it finished",
                suggested_fix="Do not repeat the call; reconciliation will resolve it.",
                effect_committed=None,
            )
            envelope = envelope_for_record(record, Status.EFFECT_UNKNOWN, error)
            done = replace(
                record,
                state=RecordState.COMPLETED,
                status=Status.EFFECT_UNKNOWN.value,
                effect_state=EffectState.UNKNOWN.value,
                envelope=envelope.model_dump(mode="json"),
                updated_at=time.time(),
            )
            event = LedgerEvent(
                record.request_id, "recover", "effect_unknown", {"owner": record.owner}
            )
            self._ledger.complete(done, [event])
            recovered.append(done)
        return recovered

    def finish(
        self,
        base: InvocationRecord,
        trail: Trail,
        stop: stages.Stop,
        contract: ToolContract | None,
        request: InvocationRequest | None,
        started: float,
    ) -> ResultEnvelope:
        error = ToolError.model_validate(self._redactor.redact(stop.error.model_dump()))
        envelope = ResultEnvelope(
            status=stop.status,
            error=error,
            summary=error.message,
            provenance=provenance(contract, request, None) if contract else None,
            execution_meta=execution_meta(base, request, 0, started, stop.effect_state),
        )
        return self.record(base, trail, envelope, 0)

    def record(
        self, base: InvocationRecord, trail: Trail, envelope: ResultEnvelope, attempts: int
    ) -> ResultEnvelope:
        meta = envelope.execution_meta
        record = replace(
            base,
            state=RecordState.COMPLETED,
            status=envelope.status.value,
            effect_state=meta.effect_state.value if meta else EffectState.NONE.value,
            attempts=attempts,
            envelope=envelope.model_dump(mode="json"),
            updated_at=time.time(),
        )
        trail.add("record", envelope.status.value)
        # A call that changed nothing may be written behind: it is off the caller's path,
        # and a crash can cost at most its audit row, never an effect's.
        unchanged = record.effect_state == EffectState.NONE.value
        self._ledger.complete(record, trail.drain(), defer=unchanged)
        return envelope

    def replay(
        self,
        holder: InvocationRecord,
        base: InvocationRecord,
        trail: Trail,
        request: InvocationRequest,
        started: float,
    ) -> ResultEnvelope:
        """Same idempotency key: answer with the holder's outcome, run nothing."""
        trail.add("dispatch", "idempotent_replay", of=holder.request_id)
        if holder.envelope is not None and holder.state is RecordState.COMPLETED:
            original = ResultEnvelope.model_validate(holder.envelope)
        else:
            error = ToolError(
                category=ErrorCategory.EFFECT_UNKNOWN,
                message=f"the same call is still in progress as {holder.request_id}",
                suggested_fix="Wait and read its outcome; do not repeat the call.",
                retryable=True,
                effect_committed=None,
            )
            original = ResultEnvelope(status=Status.EFFECT_UNKNOWN, error=error)
        old = original.execution_meta
        meta = ExecutionMeta(
            request_id=request.request_id,
            call_id=request.call_id,
            attempt=0,
            latency_ms=(time.perf_counter() - started) * 1000,
            effect_state=old.effect_state if old else EffectState.UNKNOWN,
            idempotency_key=request.idempotency_key,
            replay_of=holder.request_id,
        )
        envelope = original.model_copy(update={"execution_meta": meta})
        return self.record(base, trail, envelope, 0)

    def cancelled(
        self,
        base: InvocationRecord,
        trail: Trail,
        contract: ToolContract,
        request: InvocationRequest,
        attempt: int,
    ) -> None:
        committed = False if contract.is_read_only else None
        state = EffectState.NONE if contract.is_read_only else EffectState.UNKNOWN
        error = ToolError(
            category=ErrorCategory.CANCELLED,
            message=f"{contract.id} was cancelled while running",
            effect_committed=committed,
        )
        envelope = ResultEnvelope(
            status=Status.CANCELLED,
            error=error,
            summary=error.message,
            provenance=provenance(contract, request, None),
            execution_meta=execution_meta(base, request, attempt, time.perf_counter(), state),
        )
        trail.add("dispatch", "cancelled", attempt=attempt)
        self.record(base, trail, envelope, attempt)


def owner_alive(owner: str | None) -> bool:
    """Whether the process that wrote an intent still runs (same host only)."""
    if not owner or owner == OWNER:
        return False
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
        implementation_digest=contract.digest(),
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
        summary=error.message if error else f"{tool_id} succeeded (confirmed by read-back)",
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
