"""Reconciliation: settle what crashes and unconfirmed writes left open.

One pass has two steps, each paged through an index with `Ledger.scan`, so it holds the
ledger for one short read per page and one write per row, never for a whole scan:

1. **recover** — a row left in INTENT by a process that is gone becomes `effect_unknown`:
   never lost, never silently retried. A process on this host is asked (its pid); one on
   another host cannot be, so its intent counts as abandoned only once it is older than
   `foreign_after` seconds — an intent of a live replica must not be settled under it.
2. **read back** — each `effect_unknown` row whose contract declares a verifier is read
   back: confirmed → `succeeded` (committed); absent → `failed` (not committed, which
   releases its idempotency key, so the caller's retry with that key runs the call once);
   cannot tell → it stays unknown. A row with no verifier, or whose contract is no longer
   registered, stays unknown too; the pass reports each with its reason.

Every change is a compare-and-set (`Ledger.settle`): two reconcilers (a gateway and
`toolkeeper ledger reconcile`, two replicas) or a reconciler and the call's own process
never overwrite each other's newer outcome.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolkeeper.artifacts.store import ArtifactError, ArtifactStore, stored_aside
from toolkeeper.ledger import InvocationRecord, Ledger, LedgerEvent, RecordState
from toolkeeper.runtime import stages
from toolkeeper.runtime.call import Services, Trail
from toolkeeper.runtime.context import ToolContext
from toolkeeper.runtime.envelope import EffectState, ErrorCategory, Status, ToolError
from toolkeeper.runtime.invocation import Principal
from toolkeeper.runtime.recording import OWNER, STARTED, envelope_for_record

PAGE = 100
"""Rows per page: small, so that a page read is short and writes interleave."""
FOREIGN_INTENT_AFTER = 3600.0
"""Seconds after which an intent written on another host counts as abandoned."""


@dataclass(frozen=True, slots=True)
class Unsettled:
    """A call whose effect is still unknown after a pass, and why."""

    request_id: str
    tool: str
    reason: str


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """What one pass did."""

    recovered: tuple[InvocationRecord, ...] = ()
    """Intents of gone processes, now `effect_unknown`."""
    running: int = 0
    """Intents whose process may still run them, left alone."""
    settled: tuple[InvocationRecord, ...] = ()
    """Rows the read-back settled: `succeeded` or `failed`."""
    unsettled: tuple[Unsettled, ...] = ()
    """Rows still `effect_unknown`: for an operator to look at."""

    def counts(self) -> dict[str, int]:
        succeeded = sum(1 for r in self.settled if r.status == Status.SUCCEEDED.value)
        return {
            "recovered": len(self.recovered),
            "succeeded": succeeded,
            "failed": len(self.settled) - succeeded,
            "unknown": len(self.unsettled),
            "running": self.running,
        }

    def summary(self) -> str:
        counts = self.counts()
        return (
            f"recovered {counts['recovered']} abandoned intent(s); read back "
            f"{counts['succeeded']} succeeded, {counts['failed']} failed; "
            f"{counts['unknown']} still effect_unknown; {counts['running']} still running"
        )


def owner_alive(record: InvocationRecord, *, foreign_after: float) -> bool:
    """Whether the process that wrote an intent may still be running it."""
    owner = record.owner
    if not owner:
        return False
    if owner == OWNER:
        # This process, or an earlier one with the same host and pid (a container's pid 1
        # every time): an intent written before this process started is the earlier one's.
        return record.created_at >= STARTED
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return time.time() - record.created_at < foreign_after
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(
    ledger: Ledger, *, foreign_after: float = FOREIGN_INTENT_AFTER
) -> tuple[list[InvocationRecord], int]:
    """Turn intents of gone processes into `effect_unknown` records; return them and how
    many intents were left alone because their process may still run."""
    recovered: list[InvocationRecord] = []
    running = 0
    after: tuple[float, str] | None = None
    while page := ledger.scan(state=RecordState.INTENT, after=after, limit=PAGE):
        after = (page[-1].created_at, page[-1].request_id)
        for record in page:
            if owner_alive(record, foreign_after=foreign_after):
                running += 1
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
            if ledger.settle(record, done, [event]):
                recovered.append(done)
    return recovered, running


async def reconcile(services: Services, *, foreign_after: float) -> Reconciliation:
    """One pass: recover, then read back every `effect_unknown` row created before it."""
    started = time.time()
    recovered, running = await stages.offload(
        lambda: recover(services.ledger, foreign_after=foreign_after)
    )
    settled: list[InvocationRecord] = []
    unsettled: list[Unsettled] = []
    after: tuple[float, str] | None = None
    while True:
        page = await stages.offload(
            functools.partial(
                services.ledger.scan,
                effect_state=EffectState.UNKNOWN.value,
                after=after,
                before=started,
                limit=PAGE,
            )
        )
        if not page:
            break
        after = (page[-1].created_at, page[-1].request_id)
        for record in page:
            if record.state is not RecordState.COMPLETED:
                continue
            outcome = await _read_back(services, record)
            if isinstance(outcome, Unsettled):
                unsettled.append(outcome)
            elif outcome is not None:
                settled.append(outcome)
    return Reconciliation(tuple(recovered), running, tuple(settled), tuple(unsettled))


async def _read_back(
    services: Services, record: InvocationRecord
) -> InvocationRecord | Unsettled | None:
    """Settle one row by its verifier: the settled row, why it stays unknown, or None
    when another writer changed it meanwhile."""
    tool = record.contract_ref or record.tool
    entry = services.registry.get(record.contract_ref or "")
    if entry is None:
        return Unsettled(record.request_id, tool, f"{tool} is not registered in this process")
    if entry.verifier is None:
        return Unsettled(record.request_id, tool, f"{tool} declares no read-back (verifier)")
    try:
        arguments = await stages.offload(_arguments_of, record, services.artifacts)
    except ArtifactError as exc:
        return Unsettled(record.request_id, tool, f"its arguments cannot be read: {exc}")
    context = ToolContext(
        request_id=record.request_id,
        call_id=record.call_id,
        contract_ref=entry.contract.ref,
        principal=Principal(record.principal_id, record.tenant),
        session=record.session,
        idempotency_key=record.idempotency_key,
    )
    timeout = entry.contract.timeout or services.hook_timeout
    verified = await stages.read_back(services, entry, arguments, context, timeout)
    if verified is None:
        return Unsettled(record.request_id, tool, "the read-back could not tell")
    trail = Trail(record.request_id)
    trail.add("check", "read_back", verified=verified)
    status = Status.SUCCEEDED if verified else Status.FAILED
    error = None
    if not verified:
        error = ToolError(
            category=ErrorCategory.INTERNAL,
            message="reconciliation: the read-back shows the effect did not happen",
            suggested_fix="The call may be proposed again.",
            effect_committed=False,
        )
    state = EffectState.COMMITTED if verified else EffectState.NOT_COMMITTED
    envelope = envelope_for_record(record, status, error, state)
    trail.add("reconcile", status.value, effect_state=state.value)
    done = replace(
        record,
        status=status.value,
        effect_state=state.value,
        envelope=envelope.model_dump(mode="json"),
        updated_at=time.time(),
    )
    changed = await stages.offload(services.ledger.settle, record, done, trail.drain())
    return done if changed else None


def _arguments_of(record: InvocationRecord, artifacts: ArtifactStore) -> dict[str, Any]:
    """The arguments a verifier reads back with: the row's, or the artifact it points to."""
    ref = stored_aside(record.arguments)
    if ref is not None:
        value = artifacts.get_json(ref)
        return dict(value) if isinstance(value, Mapping) else {}
    return dict(record.arguments) if isinstance(record.arguments, Mapping) else {}
