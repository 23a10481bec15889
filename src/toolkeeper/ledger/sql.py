"""What every SQL ledger shares: rows, queries, idempotency claims, approvals, write-behind.

A backend (`SQLiteLedger`, `PostgresLedger`) supplies only its connection, its DDL, its upsert
syntax and how it makes a transaction durable; the rules — when a key is held, what a
deferred record is, how approvals move — are written once, here. Statements use `?`
placeholders; a backend with another paramstyle rewrites them in `_sql`.

Records of calls that changed nothing (reads, rejections) may be written behind
(`complete(..., defer=True)`): the caller only appends the encoded rows to a queue, and one
writer thread per ledger group-commits them — once `_BATCH_SIZE` are waiting, within
`_BATCH_WAIT` seconds otherwise, at once when someone flushes. Every read method and every
synchronous write flushes first, so a process always reads its own writes and a deferred row
never lands after a newer one. A batch the database refuses stays queued and is retried
(a flush meanwhile raises `LedgerError`); past `_QUEUE_LIMIT` waiting records, callers write
synchronously. `close()` drains the queue and joins the writer, and interpreter exit flushes.
Only a hard crash, or a database that refuses writes for all of `close()`'s grace period
(it raises, saying how many), can lose such a record — never an intent, never the outcome of
a call with side effects. Pass `write_behind=False` for a strictly synchronous trail.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from typing import Any, ClassVar

from toolkeeper.errors import LedgerError
from toolkeeper.ledger.records import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    LedgerEvent,
    RecordState,
)

RECORD_COLUMNS = (
    "request_id",
    "call_id",
    "tool",
    "principal_id",
    "tenant",
    "state",
    "contract_ref",
    "implementation_digest",
    "arguments",
    "arguments_digest",
    "session",
    "parent_request_id",
    "idempotency_key",
    "status",
    "effect_state",
    "attempts",
    "approval_id",
    "envelope",
    "owner",
    "created_at",
    "updated_at",
)
APPROVAL_COLUMNS = ("approval_id", "request_id", "status", "body", "snapshot", "created_at")
_COLUMNS = ", ".join(RECORD_COLUMNS)
_INSERT_EVENT = "INSERT INTO events (request_id, stage, kind, data, at) VALUES (?, ?, ?, ?, ?)"
# A key holder whose call ended without an effect does not block a new attempt.
_RELEASABLE = ("rejected", "failed", "timed_out", "cancelled")
_SETTLED = f"state = '{RecordState.COMPLETED.value}' AND COALESCE(effect_state, '') <> 'unknown'"
"""A row nothing will come back for: completed, its effect known. Only these may be pruned."""
_BATCH_SIZE = 64
_BATCH_WAIT = 0.25
_RETRY_FIRST = 0.05
_RETRY_MAX = 2.0
_QUEUE_LIMIT = 10_000
"""Deferred records waiting at most; beyond it callers write synchronously (backpressure)."""
_CLOSE_GRACE = 10.0
"""How long `close()` keeps retrying a batch the database refuses before giving it up."""

logger = logging.getLogger(__name__)

Row = tuple[Any, ...]
Batch = list[tuple[Row, list[Row]]]
"""Deferred records, already turned into rows by the caller: the writer thread then holds
the GIL only briefly (sqlite3 and psycopg release it while they work), so it never stalls
the event loop with JSON encoding."""


_DDL = """
CREATE TABLE IF NOT EXISTS invocations (
    request_id TEXT PRIMARY KEY,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    principal_id TEXT NOT NULL,
    tenant TEXT NOT NULL,
    state TEXT NOT NULL,
    contract_ref TEXT,
    implementation_digest TEXT,
    arguments TEXT,
    arguments_digest TEXT,
    session TEXT,
    parent_request_id TEXT,
    idempotency_key TEXT UNIQUE,
    status TEXT,
    effect_state TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    approval_id TEXT,
    envelope TEXT,
    owner TEXT,
    created_at {real} NOT NULL,
    updated_at {real} NOT NULL
);
CREATE INDEX IF NOT EXISTS invocations_parent ON invocations (parent_request_id);
DROP INDEX IF EXISTS invocations_state;
DROP INDEX IF EXISTS invocations_created;
CREATE INDEX IF NOT EXISTS invocations_created_id ON invocations (created_at, request_id);
CREATE INDEX IF NOT EXISTS invocations_state_created
    ON invocations (state, created_at, request_id);
CREATE INDEX IF NOT EXISTS invocations_effect_created
    ON invocations (effect_state, created_at, request_id);
CREATE INDEX IF NOT EXISTS invocations_status_created
    ON invocations (status, created_at, request_id);
CREATE INDEX IF NOT EXISTS invocations_principal_created
    ON invocations (principal_id, created_at, request_id);
CREATE INDEX IF NOT EXISTS invocations_tool_created ON invocations (tool, created_at, request_id);
CREATE INDEX IF NOT EXISTS invocations_contract_created
    ON invocations (contract_ref{bytewise}, created_at, request_id);
CREATE TABLE IF NOT EXISTS events (
    seq {serial},
    request_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    at {real} NOT NULL
);
CREATE INDEX IF NOT EXISTS events_request ON events (request_id);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    snapshot {blob},
    created_at {real} NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status);
"""


def schema_ddl(*, real: str, blob: str, serial: str, bytewise: str) -> str:
    """The tables every backend creates, in its own names for float, bytes and sequence, and
    with `bytewise` (a COLLATE clause, or nothing where byte order is the default) on the
    column a prefix filter ranges over. One index per filter `toolkeeper ledger list` offers,
    each ending in the (created_at, request_id) order the listing and the keyset scans use;
    the single-column indexes of earlier versions are dropped as their composites replace
    them."""
    return _DDL.format(real=real, blob=blob, serial=serial, bytewise=bytewise)


# One encoder for every row, and its C core called directly: `JSONEncoder.encode` sets up
# per call what costs more than encoding a small event, and a governed read writes a dozen.
# Without the circular-reference check: rows hold JSON values the pipeline built (validated
# arguments, dumped envelopes, event data), and a cycle would still end in RecursionError.
_ENCODE = json.JSONEncoder(default=str, separators=(",", ":")).encode
_MAKE_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)  # absent without _json
_C_ENCODE = (
    _MAKE_C_ENCODER(
        None, str, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    if _MAKE_C_ENCODER is not None
    else None
)


def _dumps(value: Any) -> str | None:
    if value is None:
        return None
    if _C_ENCODE is None:
        return _ENCODE(value)
    return "".join(_C_ENCODE(value, 0))


def _text(value: Any) -> Any:
    """A text column's value as the database can store it: a lone surrogate (which a
    model's JSON can carry, as ``"\\ud800"``, into a tool name or call id) is written as its
    escape instead of failing the whole write-behind batch."""
    if isinstance(value, str) and not value.isascii():
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def record_row(r: InvocationRecord) -> tuple[Any, ...]:
    values = [_text(getattr(r, name)) for name in RECORD_COLUMNS]
    values[RECORD_COLUMNS.index("state")] = r.state.value
    values[RECORD_COLUMNS.index("arguments")] = _dumps(r.arguments)
    values[RECORD_COLUMNS.index("envelope")] = _dumps(r.envelope)
    return tuple(values)


def record_from(row: Any) -> InvocationRecord:
    data = dict(row)
    data["state"] = RecordState(data["state"])
    for key in ("arguments", "envelope"):
        if data[key] is not None:
            data[key] = json.loads(data[key])
    return InvocationRecord(**data)


def event_rows(events: Sequence[LedgerEvent]) -> list[tuple[Any, ...]]:
    return [(e.request_id, e.stage, e.kind, _dumps(e.data), e.at) for e in events]


def approval_from(body: str, snapshot: bytes | None) -> ApprovalRecord:
    data = json.loads(body)
    data["status"] = ApprovalStatus(data["status"])
    data["policy_ids"] = tuple(data["policy_ids"])
    data["snapshot"] = bytes(snapshot) if snapshot is not None else None
    return ApprovalRecord(**data)


def approval_row(approval: ApprovalRecord) -> tuple[Any, ...]:
    data = asdict(approval)
    data.pop("snapshot")
    body = json.dumps(data, default=str)
    return (
        approval.approval_id,
        approval.request_id,
        approval.status.value,
        body,
        approval.snapshot,
        approval.created_at,
    )


def releasable(holder: InvocationRecord, key_ttl: float | None = None) -> bool:
    """Whether `holder` no longer holds its idempotency key: it ended without an effect, or
    (given `key_ttl`) it settled with a known effect more than `key_ttl` seconds ago. An
    unsettled holder (in flight, effect unknown) holds its key for good: repeating it could
    duplicate an effect nobody has confirmed."""
    if holder.state is not RecordState.COMPLETED:
        return False
    if holder.status in _RELEASABLE and holder.effect_state in ("none", "not_committed"):
        return True
    return (
        key_ttl is not None
        and holder.effect_state in ("none", "not_committed", "committed")
        and holder.updated_at + key_ttl <= time.time()
    )


class SQLLedger:
    """The shared implementation of `Ledger`; subclasses connect and speak their dialect."""

    upsert_invocation: ClassVar[str]
    upsert_approval: ClassVar[str]
    db_errors: ClassVar[tuple[type[Exception], ...]]
    bytewise: ClassVar[str]
    """The COLLATE clause that makes a text comparison bytewise ("" where it is already)."""
    location: str

    def __init__(self, conn: Any, *, write_behind: bool) -> None:
        self._conn = conn
        self.write_behind = write_behind
        self._lock = threading.Lock()
        """Guards the connection: every public method may run on any thread."""
        self._queue = _WriteQueue()
        self._stop_writer = weakref.finalize(self, self._queue.stop)
        # At exit `_flush_at_exit` drains first; stopping the writer before it would hang it.
        self._stop_writer.atexit = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    # -- dialect hooks -----------------------------------------------------------------

    def _sql(self, statement: str) -> str:
        return statement

    def _begin(self, conn: Any, *, durable: bool) -> None:
        conn.execute("BEGIN")

    def _end(self, conn: Any, *, durable: bool) -> None:
        """Runs after COMMIT or ROLLBACK; undo what `_begin` set for the session."""

    def _lock_key(self, conn: Any, key: str) -> None:
        """Serialize claims of one idempotency key between writers."""

    def _insert_events(self, cur: Cursor, rows: list[Row]) -> None:
        """Append a batch's event rows (psycopg pipelines `executemany` in one round trip)."""
        cur.executemany(_INSERT_EVENT, rows)

    # -- plumbing ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, durable: bool = False) -> Iterator[Cursor]:
        with self._lock:
            conn = self._conn
            try:
                self._begin(conn, durable=durable)
                try:
                    yield Cursor(conn, self._sql)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except self.db_errors as exc:
                raise LedgerError(f"ledger write to {self.location} failed: {exc}") from exc
            finally:
                self._end(conn, durable=durable)

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        self.flush()
        with self._lock:
            try:
                rows: list[Any] = self._conn.execute(self._sql(statement), params).fetchall()
            except self.db_errors as exc:
                raise LedgerError(f"ledger read from {self.location} failed: {exc}") from exc
        return rows

    # -- write-behind ------------------------------------------------------------------

    def _enqueue(self, record: InvocationRecord, events: Sequence[LedgerEvent]) -> bool:
        """Queue a deferred record for the writer. False once the ledger is closing, or while
        `_QUEUE_LIMIT` records wait (the database is slow or failing): the caller then writes
        synchronously, so a long fault slows or fails calls instead of filling memory."""
        rows = (record_row(record), event_rows(events))
        queue = self._queue
        with queue.cond:
            if queue.closing or len(queue.rows) >= _QUEUE_LIMIT:
                return False
            if queue.thread is None:
                queue.thread = threading.Thread(
                    target=_write_behind, args=(queue,), name=f"{self!r} writer", daemon=True
                )
                queue.thread.start()
                _WRITING.add(self)
            if not queue.rows:
                queue.owner = self
                queue.due = time.monotonic() + _BATCH_WAIT
                queue.cond.notify_all()
            queue.rows.append(rows)
            queue.enqueued += 1
            if len(queue.rows) == _BATCH_SIZE:
                queue.cond.notify_all()
        return True

    def _write_batch(self, batch: Batch) -> None:
        with self._transaction() as cur:
            cur.executemany(self.upsert_invocation, [row for row, _ in batch])
            self._insert_events(cur, [row for _, rows in batch for row in rows])

    def flush(self) -> None:
        """Return once every record deferred before this call is committed.

        Raises `LedgerError` if the writer's next attempt fails; the records stay queued and
        are retried, so a later flush can succeed."""
        queue = self._queue
        with queue.cond:
            target = queue.enqueued
            if queue.committed >= target:
                return
            attempts = queue.attempts
            queue.urgent = True
            queue.cond.notify_all()
            while queue.committed < target:
                if queue.failed > attempts:
                    raise LedgerError(
                        f"deferred ledger records could not be written to {self.location} "
                        f"({len(queue.rows)} queued, retried in the background): {queue.error}"
                    ) from queue.error
                if queue.stopped:
                    raise LedgerError(f"the ledger at {self.location} is closed")
                queue.cond.wait()

    # -- invocations -------------------------------------------------------------------

    def record_intent(
        self,
        record: InvocationRecord,
        events: Sequence[LedgerEvent],
        *,
        approval_id: str | None = None,
        key_ttl: float | None = None,
    ) -> InvocationRecord | None:
        self.flush()
        with self._transaction(durable=True) as cur:
            key = record.idempotency_key
            if key is not None:
                self._lock_key(cur.conn, key)
                row = cur.execute(
                    f"SELECT {_COLUMNS} FROM invocations WHERE idempotency_key = ?", (key,)
                ).fetchone()
                if row is not None and row["request_id"] != record.request_id:
                    holder = record_from(row)
                    if not releasable(holder, key_ttl):
                        return holder
                    cur.execute(
                        "UPDATE invocations SET idempotency_key = NULL WHERE request_id = ?",
                        (holder.request_id,),
                    )
            if approval_id is not None:
                taker = self._take_up(cur, record.request_id, RecordState.INTENT)
                if taker is not None:
                    return taker
                self._consume(cur, approval_id)
            cur.execute(self.upsert_invocation, record_row(record))
            cur.executemany(_INSERT_EVENT, event_rows(events))
        return None

    def settle_pending(
        self, record: InvocationRecord, events: Sequence[LedgerEvent], *, approval_id: str
    ) -> InvocationRecord | None:
        self.flush()
        with self._transaction(durable=True) as cur:
            taker = self._take_up(cur, record.request_id, record.state)
            if taker is not None:
                return taker
            self._consume(cur, approval_id)
            cur.execute(self.upsert_invocation, record_row(record))
            cur.executemany(_INSERT_EVENT, event_rows(events))
        return None

    def _take_up(self, cur: Cursor, request_id: str, state: RecordState) -> InvocationRecord | None:
        """Move a row waiting for approval to `state`; None when this transaction did, else
        the row as the resume that took it up left it. The conditional UPDATE is the whole
        election: PostgreSQL re-checks its condition once a competing writer commits, and
        SQLite writers are serialized by BEGIN IMMEDIATE."""
        taken = cur.execute(
            "UPDATE invocations SET state = ? WHERE request_id = ? AND state = ? "
            "RETURNING request_id",
            (state.value, request_id, RecordState.PENDING_APPROVAL.value),
        ).fetchone()
        if taken is not None:
            return None
        row = cur.execute(
            f"SELECT {_COLUMNS} FROM invocations WHERE request_id = ?", (request_id,)
        ).fetchone()
        return record_from(row) if row is not None else None

    def _consume(self, cur: Cursor, approval_id: str) -> None:
        """Mark an approved approval consumed (a denied one keeps its status)."""
        self._transition(cur, approval_id, ApprovalStatus.APPROVED, ApprovalStatus.CONSUMED)

    def key_holder(self, key: str, *, key_ttl: float | None = None) -> InvocationRecord | None:
        rows = self._read(f"SELECT {_COLUMNS} FROM invocations WHERE idempotency_key = ?", (key,))
        if not rows:
            return None
        holder = record_from(rows[0])
        return None if releasable(holder, key_ttl) else holder

    def complete(
        self, record: InvocationRecord, events: Sequence[LedgerEvent], *, defer: bool = False
    ) -> None:
        if defer and self.write_behind and self._enqueue(record, events):
            return
        self.flush()
        with self._transaction() as cur:
            cur.execute(self.upsert_invocation, record_row(record))
            if events:
                cur.executemany(_INSERT_EVENT, event_rows(events))

    def append(self, events: Sequence[LedgerEvent]) -> None:
        self.flush()
        with self._transaction() as cur:
            cur.executemany(_INSERT_EVENT, event_rows(events))

    def get(self, request_id: str) -> InvocationRecord | None:
        rows = self._read(f"SELECT {_COLUMNS} FROM invocations WHERE request_id = ?", (request_id,))
        return record_from(rows[0]) if rows else None

    def events(self, request_id: str) -> list[LedgerEvent]:
        rows = self._read(
            "SELECT request_id, stage, kind, data, at FROM events WHERE request_id = ? "
            "ORDER BY seq",
            (request_id,),
        )
        return [
            LedgerEvent(r["request_id"], r["stage"], r["kind"], json.loads(r["data"]), r["at"])
            for r in rows
        ]

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
        statement, params = self.query_statement(
            status=status,
            tool=tool,
            principal=principal,
            since=since,
            effect_state=effect_state,
            limit=limit,
        )
        return [record_from(r) for r in self._read(statement, params)]

    def query_statement(
        self,
        *,
        status: str | None = None,
        tool: str | None = None,
        principal: str | None = None,
        since: float | None = None,
        effect_state: str | None = None,
        limit: int = 100,
    ) -> tuple[str, list[Any]]:
        """The SELECT `query` runs, with its parameters (each filter has an index; tests
        hold the plan to that)."""
        clauses, params = _filters(status, tool, principal, since, effect_state, self.bytewise)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        statement = (
            f"SELECT {_COLUMNS} FROM invocations {where}"
            "ORDER BY created_at DESC, request_id DESC LIMIT ?"
        )
        return statement, [*params, limit]

    def scan(
        self,
        *,
        state: RecordState | None = None,
        effect_state: str | None = None,
        after: tuple[float, str] | None = None,
        before: float | None = None,
        limit: int = 200,
    ) -> list[InvocationRecord]:
        """One page of records in (created_at, request_id) order: those after the key
        `after` (the last page's last record), created before `before`, at most `limit`.

        Keyset pagination over an index: a scan of any length costs one short read per
        page, and between pages the connection is free, so the process's own writes (and
        every other writer) interleave with a reconciliation or an export."""
        statement, params = self.scan_statement(
            state=state, effect_state=effect_state, after=after, before=before, limit=limit
        )
        return [record_from(r) for r in self._read(statement, params)]

    def scan_statement(
        self,
        *,
        state: RecordState | None = None,
        effect_state: str | None = None,
        after: tuple[float, str] | None = None,
        before: float | None = None,
        limit: int = 200,
    ) -> tuple[str, list[Any]]:
        """The SELECT one `scan` page runs, with its parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        if state is not None:
            clauses.append("state = ?")
            params.append(state.value)
        if effect_state is not None:
            clauses.append("effect_state = ?")
            params.append(effect_state)
        if after is not None:
            clauses.append("(created_at, request_id) > (?, ?)")
            params.extend(after)
        if before is not None:
            clauses.append("created_at < ?")
            params.append(before)
        where = f"WHERE {' AND '.join(clauses)} " if clauses else ""
        statement = (
            f"SELECT {_COLUMNS} FROM invocations {where}ORDER BY created_at, request_id LIMIT ?"
        )
        return statement, [*params, limit]

    def settle(
        self, was: InvocationRecord, now: InvocationRecord, events: Sequence[LedgerEvent]
    ) -> bool:
        """Replace the outcome of `was` (state, status, effect state, envelope) by that of
        `now` and append `events`, only if the stored row is still `was` — compare and set
        on its state and `updated_at`. False when the row changed meanwhile: another
        reconciler settled it, or the call's own process finished it. Two reconcilers (a
        gateway and `toolkeeper ledger reconcile`, or two replicas) never overwrite each
        other, and the idempotency key is never touched, so a stale copy cannot take a key
        back from the request that holds it now."""
        self.flush()
        with self._transaction() as cur:
            changed = cur.execute(
                "UPDATE invocations SET state = ?, status = ?, effect_state = ?, envelope = ?, "
                "updated_at = ? WHERE request_id = ? AND state = ? AND updated_at = ? "
                "RETURNING request_id",
                (
                    now.state.value,
                    now.status,
                    now.effect_state,
                    _dumps(now.envelope),
                    now.updated_at,
                    was.request_id,
                    was.state.value,
                    was.updated_at,
                ),
            ).fetchone()
            if changed is None:
                return False
            cur.executemany(_INSERT_EVENT, event_rows(events))
        return True

    def events_for(self, request_ids: Sequence[str]) -> dict[str, list[LedgerEvent]]:
        """The events of several requests in one read, each request's in order."""
        found: dict[str, list[LedgerEvent]] = {request_id: [] for request_id in request_ids}
        if not request_ids:
            return found
        marks = ", ".join("?" for _ in request_ids)
        rows = self._read(
            "SELECT request_id, stage, kind, data, at FROM events "
            f"WHERE request_id IN ({marks}) ORDER BY seq",
            list(request_ids),
        )
        for r in rows:
            found[r["request_id"]].append(
                LedgerEvent(r["request_id"], r["stage"], r["kind"], json.loads(r["data"]), r["at"])
            )
        return found

    def count(self) -> int:
        """How many invocation rows the ledger holds."""
        return int(self._read("SELECT COUNT(*) AS n FROM invocations")[0]["n"])

    def prune(self, records: Sequence[InvocationRecord]) -> list[str]:
        """Delete each of `records` that is settled and unchanged since it was read (its
        `updated_at` is the one given), with its events and its decided approval; return
        the request ids deleted. A row in state INTENT or PENDING_APPROVAL, or whose effect
        is still unknown, is never deleted, whatever the caller passes: those are the rows
        recovery, reconciliation and resume still need. One transaction for the batch."""
        pruned: list[str] = []
        with self._transaction() as cur:
            for record in records:
                gone = cur.execute(
                    f"DELETE FROM invocations WHERE request_id = ? AND updated_at = ? AND "
                    f"{_SETTLED} RETURNING request_id",
                    (record.request_id, record.updated_at),
                ).fetchone()
                if gone is None:
                    continue
                pruned.append(record.request_id)
                cur.execute("DELETE FROM events WHERE request_id = ?", (record.request_id,))
                cur.execute(
                    "DELETE FROM approvals WHERE request_id = ? AND status IN (?, ?)",
                    (
                        record.request_id,
                        ApprovalStatus.CONSUMED.value,
                        ApprovalStatus.DENIED.value,
                    ),
                )
        return pruned

    def in_flight(self) -> list[InvocationRecord]:
        rows = self._read(
            f"SELECT {_COLUMNS} FROM invocations WHERE state = ? ORDER BY created_at",
            (RecordState.INTENT.value,),
        )
        return [record_from(r) for r in rows]

    # -- approvals ---------------------------------------------------------------------

    def save_approval(self, approval: ApprovalRecord) -> None:
        with self._transaction(durable=True) as cur:
            cur.execute(self.upsert_approval, approval_row(approval))

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        rows = self._read(
            "SELECT body, snapshot FROM approvals WHERE approval_id = ?", (approval_id,)
        )
        return approval_from(rows[0]["body"], rows[0]["snapshot"]) if rows else None

    def list_approvals(self, *, status: str | None = None) -> list[ApprovalRecord]:
        where, params = ("WHERE status = ? ", (status,)) if status is not None else ("", ())
        rows = self._read(
            f"SELECT body, snapshot FROM approvals {where}ORDER BY created_at, approval_id", params
        )
        return [approval_from(r["body"], r["snapshot"]) for r in rows]

    def transition_approval(
        self,
        approval_id: str,
        *,
        expected: ApprovalStatus,
        new: ApprovalStatus,
        by: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRecord | None:
        with self._transaction(durable=True) as cur:
            return self._transition(cur, approval_id, expected, new, by, reason)

    def _transition(
        self,
        cur: Cursor,
        approval_id: str,
        expected: ApprovalStatus,
        new: ApprovalStatus,
        by: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRecord | None:
        row = cur.execute(
            "UPDATE approvals SET status = ? WHERE approval_id = ? AND status = ? "
            "RETURNING body, snapshot",
            (new.value, approval_id, expected.value),
        ).fetchone()
        if row is None:
            return None
        changes: dict[str, Any] = {"status": new}
        if by is not None:
            changes.update(decided_by=by, decision_reason=reason, decided_at=time.time())
        updated = replace(approval_from(row["body"], row["snapshot"]), **changes)
        cur.execute(
            "UPDATE approvals SET body = ? WHERE approval_id = ?",
            (approval_row(updated)[3], approval_id),
        )
        return updated

    def close(self) -> None:
        """Write every deferred record, stop the writer thread, close the connection.

        Records the database still refuses after `_CLOSE_GRACE` seconds are lost; the
        `LedgerError` raised then says how many."""
        queue = self._queue
        with queue.cond:
            queue.closing = True
        deadline, pause = time.monotonic() + _CLOSE_GRACE, _RETRY_FIRST
        refused: LedgerError | None = None
        while True:
            try:
                self.flush()
                break
            except LedgerError as exc:
                if time.monotonic() >= deadline:
                    refused = exc
                    break
                time.sleep(pause)
                pause = min(pause * 2, _RETRY_MAX)
        self._stop_writer()
        _WRITING.discard(self)
        with self._lock:
            self._conn.close()
        if refused is not None:
            raise LedgerError(
                f"closed the ledger at {self.location} with {len(queue.rows)} deferred "
                f"record(s) unwritten: {refused}"
            ) from refused


class Cursor:
    """The connection inside a transaction, with the backend's paramstyle applied."""

    def __init__(self, conn: Any, sql: Any) -> None:
        self.conn = conn
        self._sql = sql

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.conn.cursor().executemany(self._sql(statement), rows)


class _WriteQueue:
    """Deferred rows of one ledger and the state its writer thread shares with callers.

    `flush` waits on counters, not on an empty list: rows leave `rows` only once their
    transaction committed, so a batch the writer has taken is still unwritten for every
    reader, and nobody slips between a batch leaving the queue and reaching the table.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rows: Batch = []
        self.enqueued = 0
        """Records ever queued."""
        self.committed = 0
        """Records ever committed; a flush waits until this reaches `enqueued` as it found it."""
        self.attempts = 0
        """Batches the writer has begun to write."""
        self.failed = 0
        """The number of the last attempt that failed: a flush gives up only on an attempt
        begun after it was called, never on one that was already failing."""
        self.error: Exception | None = None
        """Why the last batch failed, while its rows are still queued."""
        self.due = 0.0
        """Monotonic time at which waiting rows are written, full batch or not."""
        self.urgent = False
        """A flush is waiting: write now, without waiting for `due`."""
        self.closing = False
        """`close()` began: deferred records are refused and written synchronously instead."""
        self.stopped = False
        self.owner: SQLLedger | None = None
        """The ledger, held while rows wait, so that dropping it cannot lose them."""
        self.thread: threading.Thread | None = None

    def ready(self) -> bool:
        if not self.rows:
            return False
        if self.urgent or (self.error is None and len(self.rows) >= _BATCH_SIZE):
            return True
        return time.monotonic() >= self.due

    def wait_time(self) -> float | None:
        return max(0.0, self.due - time.monotonic()) if self.rows else None

    def stop(self) -> None:
        """End the writer thread (also run when the ledger is garbage-collected)."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()


def _write_behind(queue: _WriteQueue) -> None:
    """The writer thread: group-commit deferred rows until the ledger closes or is collected.

    A batch that fails stays queued and is retried after a pause that doubles up to
    `_RETRY_MAX`; a flush cuts the pause short. Any exception is caught: a dead writer would
    leave every later flush waiting forever.
    """
    retry = _RETRY_FIRST
    while True:
        with queue.cond:
            while not queue.stopped and not queue.ready():
                queue.cond.wait(queue.wait_time())
            if queue.stopped or queue.owner is None:
                return
            ledger, batch, queue.urgent = queue.owner, list(queue.rows), False
            queue.attempts += 1
            attempt = queue.attempts
        try:
            ledger._write_batch(batch)
        except Exception as exc:
            logger.warning(
                "%d deferred ledger record(s) not written to %s, retrying in %.2f s: %s",
                len(batch),
                ledger.location,
                retry,
                exc,
            )
            with queue.cond:
                queue.failed = attempt
                queue.error = exc
                queue.due = time.monotonic() + retry
                queue.cond.notify_all()
            retry = min(retry * 2, _RETRY_MAX)
        else:
            retry = _RETRY_FIRST
            with queue.cond:
                del queue.rows[: len(batch)]
                queue.committed += len(batch)
                queue.error = None
                queue.due = time.monotonic() + _BATCH_WAIT
                if not queue.rows:
                    queue.owner = None  # nothing left to lose: the ledger may be collected
                queue.cond.notify_all()
        del ledger  # the last reference may be this one; then the finalizer stops the loop


_WRITING: weakref.WeakSet[SQLLedger] = weakref.WeakSet()
"""Ledgers whose writer thread runs, so that interpreter exit can flush them."""


@atexit.register
def _flush_at_exit() -> None:
    for ledger in list(_WRITING):
        try:
            ledger.flush()
        except LedgerError as exc:
            logger.error("%s", exc)


def _filters(
    status: str | None,
    tool: str | None,
    principal: str | None,
    since: float | None,
    effect_state: str | None,
    bytewise: str,
) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("status", status),
        ("principal_id", principal),
        ("effect_state", effect_state),
    ):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if tool is not None:
        # `id` matches every version: the range of refs starting with "id@" ("@" + 1 is
        # "A"), bytewise, which an index serves (LIKE would not, and treats % and _ in
        # the name as wildcards).
        ref = f"contract_ref{bytewise}"
        clauses.append(f"(tool = ? OR {ref} = ? OR ({ref} >= ? AND {ref} < ?))")
        params.extend([tool, tool, f"{tool}@", f"{tool}A"])
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    return clauses, params
