"""Pending human approvals: create, list, show and decide.

An approval binds one normalized action (contract id@version and digest, argument digest,
resource versions, principal). Deciding it does not run anything; `Harness.resume` does,
after re-checking that nothing it was bound to has changed. Approvals live in the ledger, so
they survive a restart and any process sharing the ledger can resume them.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Literal

from toolkeeper.errors import ApprovalError
from toolkeeper.ledger import ApprovalRecord, ApprovalStatus, Ledger
from toolkeeper.runtime.invocation import InvocationRequest, new_id


class Approvals:
    """The approval queue, over the ledger's approval table."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def create(
        self,
        *,
        request: InvocationRequest,
        account: str,
        policy_ids: tuple[str, ...],
        arguments: dict[str, Any],
        snapshot: bytes | None = None,
        environment: dict[str, Any] | None = None,
    ) -> ApprovalRecord:
        principal = asdict(request.principal)
        principal["capabilities"] = sorted(principal["capabilities"])
        approval = ApprovalRecord(
            approval_id=new_id("apr"),
            request_id=request.request_id,
            call_id=request.call_id,
            contract_ref=request.contract_ref,
            implementation_digest=request.implementation_digest,
            arguments=arguments,
            arguments_digest=request.arguments_digest,
            principal=principal,
            session=request.session,
            parent_request_id=request.parent_request_id,
            idempotency_key=request.idempotency_key,
            resource_versions=dict(request.resource_versions),
            account=account,
            policy_ids=tuple(policy_ids),
            snapshot=snapshot,
            environment=dict(environment or {}),
        )
        self._ledger.save_approval(approval)
        return approval

    def get(self, approval_id: str) -> ApprovalRecord:
        approval = self._ledger.get_approval(approval_id)
        if approval is None:
            raise ApprovalError(
                f"no approval {approval_id!r}; list pending ones with `toolkeeper approvals list`",
                approval_id=approval_id,
            )
        return approval

    def list(self, status: str | None = ApprovalStatus.PENDING.value) -> list[ApprovalRecord]:
        return self._ledger.list_approvals(status=status)

    def decide(
        self,
        approval_id: str,
        decision: Literal["approve", "deny"],
        *,
        by: str,
        reason: str | None = None,
    ) -> ApprovalRecord:
        """Record a human decision on a pending approval. Only a pending approval can be
        decided, once; resume the call with `Harness.resume(approval_id)`."""
        if decision not in ("approve", "deny"):
            raise ApprovalError(
                f"decision must be 'approve' or 'deny', not {decision!r}", approval_id=approval_id
            )
        if not by:
            raise ApprovalError("say who decides: by='name'", approval_id=approval_id)
        new = ApprovalStatus.APPROVED if decision == "approve" else ApprovalStatus.DENIED
        updated = self._ledger.transition_approval(
            approval_id, expected=ApprovalStatus.PENDING, new=new, by=by, reason=reason
        )
        if updated is None:
            current = self.get(approval_id)
            raise ApprovalError(
                f"approval {approval_id} is already {current.status.value}; only a pending "
                "approval can be decided",
                approval_id=approval_id,
            )
        return updated
