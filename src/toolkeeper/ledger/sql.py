"""What every SQL ledger shares: rows, queries, idempotency claims, approvals, write-behind.

A backend (`SQLiteLedger`, `PostgresLedger`) supplies only its connection, its DDL, its upsert
syntax and how it makes a transaction durable; the rules — when a key is held, what a
deferred record is, how approvals move — are written once, here. Statements use `?`
placeholders; a backend with another paramstyle rewrites them in `_sql`.

Records of calls that changed nothing (reads, rejections) may be written behind
(`complete(..., defer=True)`): they are group-committed, by the caller once `_BATCH_SIZE`
are waiting and otherwise by a writer thread within `_BATCH_WAIT` seconds, so a read costs a
fraction of a transaction on the caller's path. Every read method flushes
first, so the process that wrote a record always reads it back; `close()` and interpreter
exit flush too. Only a hard crash can lose such a record — never an intent, never the outcome
of a call with side effects. Pass `write_behind=False` for a strictly synchronous trail.
"""

from __future__ import annotations

import atexit
import json
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
_BATCH_SIZE = 64
_BATCH_WAIT = 0.25

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
CREATE INDEX IF NOT EXISTS invocations_state ON invocations (state);
CREATE INDEX IF NOT EXISTS invocations_created ON invocations (created_at);
CREATE INDEX IF NOT EXISTS invocations_parent ON invocations (parent_request_id);
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


def schema_ddl(*, real: str, blob: str, serial: str) -> str:
    """The tables every backend creates, in its own names for float, bytes and sequence."""
    return _DDL.format(real=real, blob=blob, serial=serial)


# One encoder for every row: json.dumps with options builds a new encoder per call, which
# costs more than encoding a small event.
_ENCODE = json.JSONEncoder(default=str, separators=(",", ":")).encode


def _dumps(value: Any) -> str | None:
    return None if value is None else _ENCODE(value)


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


def releasable(holder: InvocationRecord) -> bool:
    return (
        holder.state is RecordState.COMPLETED
        and holder.status in _RELEASABLE
        and holder.effect_state in ("none", "not_committed")
    )


class SQLLedger:
    """The shared implementation of `Ledger`; subclasses connect and speak their dialect."""

    upsert_invocation: ClassVar[str]
    upsert_approval: ClassVar[str]
    db_errors: ClassVar[tuple[type[Exception], ...]]
    location: str

    def __init__(self, conn: Any, *, write_behind: bool) -> None:
        self._conn = conn
        self.write_behind = write_behind
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._pending: Batch = []
        self._pending_cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._closed = False

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

    # -- plumbing ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, durable: bool = False) -> Iterator[_Cursor]:
        with self._lock:
            conn = self._conn
            try:
                self._begin(conn, durable=durable)
                try:
                    yield _Cursor(conn, self._sql)
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
                return self._conn.execute(self._sql(statement), params).fetchall()
            except self.db_errors as exc:
                raise LedgerError(f"ledger read from {self.location} failed: {exc}") from exc

    # -- write-behind ------------------------------------------------------------------

    def _enqueue(self, record: InvocationRecord, events: Sequence[LedgerEvent]) -> None:
        with self._pending_cond:
            self._pending.append((record_row(record), event_rows(events)))
            if self._writer is None:
                self._writer = threading.Thread(
                    target=_write_behind, args=(weakref.ref(self),), daemon=True
                )
                self._writer.start()
                atexit.register(_flush_at_exit, weakref.ref(self))
            full = len(self._pending) >= _BATCH_SIZE
        if full:
            # A busy caller commits its own batch: a writer thread busy at the same moment
            # would contend for the GIL with every call. The thread only sweeps up what
            # a quiet caller leaves, every _BATCH_WAIT s.
            self.flush()

    def _wait_for_work(self) -> None:
        with self._pending_cond:
            if not self._pending and not self._closed:
                self._pending_cond.wait(_BATCH_WAIT)

    def flush(self) -> None:
        """Write every deferred record now. Taking and writing a batch happen under one lock,
        so no reader can slip between a batch leaving the queue and reaching the table."""
        if not self._pending:
            return
        with self._flush_lock:
            with self._pending_cond:
                batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                with self._transaction() as cur:
                    cur.executemany(self.upsert_invocation, [row for row, _ in batch])
                    cur.executemany(_INSERT_EVENT, [row for _, rows in batch for row in rows])
            except LedgerError:
                with self._pending_cond:
                    self._pending[:0] = batch
                raise

    # -- invocations -------------------------------------------------------------------

    def record_intent(
        self, record: InvocationRecord, events: Sequence[LedgerEvent]
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
                    if not releasable(holder):
                        return holder
                    cur.execute(
                        "UPDATE invocations SET idempotency_key = NULL WHERE request_id = ?",
                        (holder.request_id,),
                    )
            cur.execute(self.upsert_invocation, record_row(record))
            cur.executemany(_INSERT_EVENT, event_rows(events))
        return None

    def complete(
        self, record: InvocationRecord, events: Sequence[LedgerEvent], *, defer: bool = False
    ) -> None:
        if defer and self.write_behind and not self._closed:
            self._enqueue(record, events)
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
        clauses, params = _filters(status, tool, principal, since, effect_state)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._read(
            f"SELECT {_COLUMNS} FROM invocations {where} "
            "ORDER BY created_at DESC, request_id DESC LIMIT ?",
            (*params, limit),
        )
        return [record_from(r) for r in rows]

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
        with self._pending_cond:
            self._closed = True
            self._pending_cond.notify_all()
        self.flush()
        with self._lock:
            self._conn.close()


class _Cursor:
    """The connection inside a transaction, with the backend's paramstyle applied."""

    def __init__(self, conn: Any, sql: Any) -> None:
        self.conn = conn
        self._sql = sql

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.conn.cursor().executemany(self._sql(statement), rows)


def _write_behind(ref: weakref.ref[SQLLedger]) -> None:
    """The writer thread: group-commit deferred records until the ledger closes or dies."""
    while True:
        ledger = ref()
        if ledger is None or ledger._closed:
            return
        ledger._wait_for_work()
        try:
            ledger.flush()
        except LedgerError:
            time.sleep(_BATCH_WAIT)  # the batch is back in the queue; a caller's flush raises
        del ledger


def _flush_at_exit(ref: weakref.ref[SQLLedger]) -> None:
    ledger = ref()
    if ledger is not None and not ledger._closed:
        ledger.flush()


def _filters(
    status: str | None,
    tool: str | None,
    principal: str | None,
    since: float | None,
    effect_state: str | None,
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
        clauses.append("(tool = ? OR contract_ref = ? OR contract_ref LIKE ?)")
        params.extend([tool, tool, f"{tool}@%"])
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    return clauses, params
