"""The rows the ledger keeps: invocation state, stage events, approvals.

Plain dataclasses so that every backend (SQLite now, PostgreSQL for shared gateways) stores
the same facts. Arguments and envelopes are stored after redaction: the ledger is read by
auditors and dashboards, never a place secrets may surface.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class RecordState(StrEnum):
    """Where an invocation is in its life, independent of its outcome."""

    RECEIVED = "received"
    PENDING_APPROVAL = "pending_approval"
    INTENT = "intent"
    """Durably written before a side effect; a crash here leaves an unknown effect."""
    COMPLETED = "completed"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    CONSUMED = "consumed"
    """Approved and taken up: its call holds an intent or has its final row, written in the
    same transaction, so the approval cannot run a second time."""


@dataclass(frozen=True, slots=True)
class LedgerEvent:
    """One stage's decision about one request."""

    request_id: str
    stage: str
    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class InvocationRecord:
    """The current state of one request: one row per request id."""

    request_id: str
    call_id: str
    tool: str
    principal_id: str
    tenant: str
    state: RecordState
    contract_ref: str | None = None
    implementation_digest: str | None = None
    arguments: Any = None
    arguments_digest: str | None = None
    session: str | None = None
    parent_request_id: str | None = None
    idempotency_key: str | None = None
    status: str | None = None
    effect_state: str | None = None
    attempts: int = 0
    approval_id: str | None = None
    envelope: dict[str, Any] | None = None
    owner: str | None = None
    """host:pid of the process that wrote the intent, for crash recovery."""
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)


@dataclass(frozen=True, slots=True)
class ApprovalRecord:
    """A pending (or decided) human approval of one normalized action."""

    approval_id: str
    request_id: str
    call_id: str
    contract_ref: str
    implementation_digest: str
    arguments: dict[str, Any]
    arguments_digest: str
    principal: dict[str, Any]
    session: str | None
    parent_request_id: str | None
    idempotency_key: str | None
    resource_versions: dict[str, str]
    account: str
    """The human-readable account of the action shown to the approver."""
    policy_ids: tuple[str, ...] = ()
    status: ApprovalStatus = ApprovalStatus.PENDING
    decided_by: str | None = None
    decision_reason: str | None = None
    decided_at: float | None = None
    snapshot: bytes | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    """The environment policy saw when the call was proposed; a resume authorizes with it."""
    """Opaque resumable state (a Code Mode program suspended at this call)."""
    created_at: float = field(default_factory=time.time)
