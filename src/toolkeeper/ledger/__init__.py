"""The durable ledger: append-only events plus one current-state row per invocation.

`Ledger` is the seam every backend fits. The harness calls it at two moments for a
side-effecting call — `record_intent` before the effect, `complete` after, both durable — and
once (`complete(..., defer=True)`) for a call that changed nothing, which a backend may write
behind: the caller then pays no transaction of its own.

Every method may block on database I/O and is thread-safe, so async code calls them off the
event loop, e.g. through `anyio.to_thread.run_sync`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from toolkeeper.ledger.records import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    LedgerEvent,
    RecordState,
)


class Ledger(Protocol):
    """Storage for invocations, their events and approvals. Implementations are thread-safe,
    and a process always reads back what it wrote, deferred or not."""

    def record_intent(
        self,
        record: InvocationRecord,
        events: Sequence[LedgerEvent],
        *,
        approval_id: str | None = None,
        key_ttl: float | None = None,
    ) -> InvocationRecord | None:
        """Durably store `record` (state INTENT) and `events` before the effect happens.

        If `record.idempotency_key` is already held by another request whose outcome stands
        (succeeded, in flight, or with an unknown effect), store nothing and return that
        request's record. A holder that failed with no effect releases the key, and so does a
        settled holder (its effect known) last changed more than `key_ttl` seconds ago.

        With `approval_id` (a resumed call), the approval is taken up in the same transaction:
        only while the request's row still waits for approval is the intent stored and the
        approval marked consumed; otherwise nothing is stored and the row as another resume
        left it is returned (its request id is `record.request_id`). So a crash can never
        leave an approval consumed without its intent.
        """
        ...

    def settle_pending(
        self, record: InvocationRecord, events: Sequence[LedgerEvent], *, approval_id: str
    ) -> InvocationRecord | None:
        """Store the final row of a resumed call that ended without an intent (refused on
        re-check, denied, replayed) and mark an approved `approval_id` consumed, in one
        transaction — only while the row still waits for approval. Otherwise store nothing
        and return the row as another resume left it: one resume settles a call, once."""
        ...

    def key_holder(self, key: str, *, key_ttl: float | None = None) -> InvocationRecord | None:
        """The record `record_intent` would replay for `key` now, or None (read-only)."""
        ...

    def complete(
        self, record: InvocationRecord, events: Sequence[LedgerEvent], *, defer: bool = False
    ) -> bool:
        """Insert or replace the state row and append `events`, in one transaction.

        `defer=True` (only for calls that changed nothing) lets the backend write it behind,
        group-committed: every later read from the same ledger object still sees it.

        Returns False when the record is not written and waits, queued, for the database
        to take writes again: a completion the database refuses is queued and retried,
        never dropped. Raises `LedgerError` only for a deferred record the backend can
        neither write nor queue (its queue is full).
        """
        ...

    def flush(self) -> None:
        """Return once every record deferred before this call is written; raise `LedgerError`
        if they cannot be written now (they stay queued and are retried). A record the
        database refuses on its own is set aside, logged and retried; it holds up no flush."""
        ...

    def append(self, events: Sequence[LedgerEvent]) -> None: ...

    def get(self, request_id: str) -> InvocationRecord | None: ...

    def events(self, request_id: str) -> list[LedgerEvent]: ...

    def query(
        self,
        *,
        status: str | None = None,
        tool: str | None = None,
        principal: str | None = None,
        since: float | None = None,
        effect_state: str | None = None,
        limit: int = 100,
    ) -> list[InvocationRecord]:
        """Records newest first, filtered."""
        ...

    def children(self, request_id: str, *, limit: int = 10_000) -> list[InvocationRecord]:
        """The calls made under `request_id` (a Code Mode program's inner calls, the run_code
        call that continued it), oldest first."""
        ...

    def in_flight(self) -> list[InvocationRecord]:
        """Records left in state INTENT."""
        ...

    def scan(
        self,
        *,
        state: RecordState | None = None,
        effect_state: str | None = None,
        after: tuple[float, str] | None = None,
        before: float | None = None,
        limit: int = 200,
    ) -> list[InvocationRecord]:
        """One page of records in (created_at, request_id) order after the key `after`,
        created before `before`: keyset pagination, one short read per page, so a long
        scan never holds the ledger between pages."""
        ...

    def settle(
        self, was: InvocationRecord, now: InvocationRecord, events: Sequence[LedgerEvent]
    ) -> bool:
        """Replace the outcome of `was` by that of `now` if the stored row is still `was`
        (compare and set); False when it changed meanwhile."""
        ...

    def events_for(self, request_ids: Sequence[str]) -> dict[str, list[LedgerEvent]]:
        """The events of several requests, each request's in order."""
        ...

    def count(self) -> int:
        """How many invocation rows the ledger holds."""
        ...

    def prune(self, records: Sequence[InvocationRecord]) -> list[str]:
        """Delete those of `records` that are settled and unchanged since read, with their
        events and decided approvals; never an INTENT, pending or effect-unknown row."""
        ...

    def save_approval(self, approval: ApprovalRecord) -> None: ...

    def get_approval(self, approval_id: str) -> ApprovalRecord | None: ...

    def list_approvals(self, *, status: str | None = None) -> list[ApprovalRecord]: ...

    def store_snapshot(
        self, approval_id: str, snapshot: bytes, *, account: str | None = None
    ) -> bool:
        """Keep `snapshot` (a suspended program's state) with the approval, and replace its
        account when one is given; False when there is no such approval."""
        ...

    def take_snapshot(self, approval_id: str, *, taker: str) -> bytes | None:
        """Return the approval's snapshot and leave ``b"taken:" + taker`` in its place,
        atomically: of concurrent takers one gets it, the others None (so a suspended
        program continues at most once, and later resumes can find who continued it)."""
        ...

    def transition_approval(
        self,
        approval_id: str,
        *,
        expected: ApprovalStatus,
        new: ApprovalStatus,
        by: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRecord | None:
        """Atomically move an approval from `expected` to `new`; None if it was not there."""
        ...

    def close(self) -> None:
        """Write every deferred record, then release the connection and any writer thread."""
        ...


__all__ = [
    "ApprovalRecord",
    "ApprovalStatus",
    "InvocationRecord",
    "Ledger",
    "LedgerEvent",
    "RecordState",
]
