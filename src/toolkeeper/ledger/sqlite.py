"""The embedded default ledger: one SQLite file in WAL mode (`.toolkeeper/ledger.db`).

WAL lets readers (`toolkeeper ledger tail`) run beside the writer. Every transaction that
records an intent is committed with `synchronous=FULL`, so the intent is on disk before the
effect starts; completion rows use NORMAL, because losing one to a power cut (not a process
crash) only turns a known outcome back into a recoverable unknown one.

Records of calls that changed nothing (reads, rejections) may be written behind
(`complete(..., defer=True)`): a writer thread group-commits them within milliseconds, so a
read costs no transaction on the caller's path. Every read method of this class flushes
first, so the process that wrote a record always reads it back; `close()` and interpreter
exit flush too. Only a hard crash can lose such a record — never an intent, never the outcome
of a call with side effects. Pass `write_behind=False` for a strictly synchronous audit trail.
"""

from __future__ import annotations

import atexit
import json
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from toolkeeper.errors import LedgerError
from toolkeeper.ledger.records import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    LedgerEvent,
    RecordState,
)

_SCHEMA = """
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
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS invocations_state ON invocations (state);
CREATE INDEX IF NOT EXISTS invocations_created ON invocations (created_at);
CREATE INDEX IF NOT EXISTS invocations_parent ON invocations (parent_request_id);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_request ON events (request_id);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY,
    request_id TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    snapshot BLOB,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS approvals_status ON approvals (status);
"""

_RECORD_COLUMNS = (
    "request_id, call_id, tool, principal_id, tenant, state, contract_ref, "
    "implementation_digest, arguments, arguments_digest, session, parent_request_id, "
    "idempotency_key, status, effect_state, attempts, approval_id, envelope, owner, "
    "created_at, updated_at"
)
_UPSERT = (
    f"INSERT OR REPLACE INTO invocations ({_RECORD_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_INSERT_EVENT = "INSERT INTO events (request_id, stage, kind, data, at) VALUES (?, ?, ?, ?, ?)"
# A key holder whose call ended without an effect does not block a new attempt.
_RELEASABLE = ("rejected", "failed", "timed_out", "cancelled")


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, default=str, separators=(",", ":"))


def _record_row(r: InvocationRecord) -> tuple[Any, ...]:
    return (
        r.request_id,
        r.call_id,
        r.tool,
        r.principal_id,
        r.tenant,
        r.state.value,
        r.contract_ref,
        r.implementation_digest,
        _dumps(r.arguments),
        r.arguments_digest,
        r.session,
        r.parent_request_id,
        r.idempotency_key,
        r.status,
        r.effect_state,
        r.attempts,
        r.approval_id,
        _dumps(r.envelope),
        r.owner,
        r.created_at,
        r.updated_at,
    )


def _record_from(row: sqlite3.Row) -> InvocationRecord:
    data = dict(row)
    data["state"] = RecordState(data["state"])
    for key in ("arguments", "envelope"):
        if data[key] is not None:
            data[key] = json.loads(data[key])
    return InvocationRecord(**data)


def _event_rows(events: Sequence[LedgerEvent]) -> list[tuple[Any, ...]]:
    return [(e.request_id, e.stage, e.kind, _dumps(e.data), e.at) for e in events]


def _approval_from(body: str, snapshot: bytes | None) -> ApprovalRecord:
    data = json.loads(body)
    data["status"] = ApprovalStatus(data["status"])
    data["policy_ids"] = tuple(data["policy_ids"])
    data["snapshot"] = snapshot
    return ApprovalRecord(**data)


def _approval_body(approval: ApprovalRecord) -> str:
    data = asdict(approval)
    data.pop("snapshot")
    return json.dumps(data, default=str)


class SQLiteLedger:
    """A `Ledger` in one SQLite file. Safe to share between threads of one process, and
    between processes (SQLite's own locking; WAL readers never block the writer)."""

    def __init__(self, path: str | Path, *, write_behind: bool = True) -> None:
        self.path = Path(path)
        self.write_behind = write_behind
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._conn.row_factory = sqlite3.Row
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(
                f"cannot open the ledger at {self.path}: {exc}. Check that the directory is "
                "writable, or pass another path (Harness(home=...) or --home)."
            ) from exc
        self._lock = threading.Lock()
        self._pending: list[tuple[InvocationRecord, Sequence[LedgerEvent]]] = []
        self._pending_cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"SQLiteLedger({str(self.path)!r})"

    @contextmanager
    def _transaction(self, *, durable: bool = False) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            try:
                if durable:
                    conn.execute("PRAGMA synchronous=FULL")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise LedgerError(f"ledger write to {self.path} failed: {exc}") from exc
            finally:
                if durable:
                    conn.execute("PRAGMA synchronous=NORMAL")

    # -- write-behind --------------------------------------------------------------------

    def _enqueue(self, record: InvocationRecord, events: Sequence[LedgerEvent]) -> None:
        with self._pending_cond:
            self._pending.append((record, events))
            if self._writer is None:
                self._writer = threading.Thread(
                    target=_write_behind, args=(weakref.ref(self),), daemon=True
                )
                self._writer.start()
                atexit.register(_flush_at_exit, weakref.ref(self))
            # Wake the writer only for a full batch; otherwise it wakes on its own every
            # _BATCH_WAIT s. A wake-up per record costs more than the record.
            if len(self._pending) >= _BATCH_SIZE:
                self._pending_cond.notify()

    def _take_pending(
        self, timeout: float | None
    ) -> list[tuple[InvocationRecord, Sequence[LedgerEvent]]]:
        with self._pending_cond:
            if not self._pending and not self._closed:
                self._pending_cond.wait(timeout)
            batch, self._pending = self._pending, []
            return batch

    def _write_batch(self, batch: list[tuple[InvocationRecord, Sequence[LedgerEvent]]]) -> None:
        with self._transaction() as conn:
            conn.executemany(_UPSERT, [_record_row(r) for r, _ in batch])
            conn.executemany(_INSERT_EVENT, [row for _, ev in batch for row in _event_rows(ev)])

    def flush(self) -> None:
        """Write every deferred record now (the caller's thread does the work)."""
        if not self._pending:
            return
        with self._pending_cond:
            batch, self._pending = self._pending, []
        if batch:
            self._write_batch(batch)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        self.flush()
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise LedgerError(f"ledger read from {self.path} failed: {exc}") from exc

    # -- invocations -------------------------------------------------------------------

    def record_intent(
        self, record: InvocationRecord, events: Sequence[LedgerEvent]
    ) -> InvocationRecord | None:
        self.flush()
        with self._transaction(durable=True) as conn:
            if record.idempotency_key is not None:
                row = conn.execute(
                    f"SELECT {_RECORD_COLUMNS} FROM invocations WHERE idempotency_key = ?",
                    (record.idempotency_key,),
                ).fetchone()
                if row is not None and row["request_id"] != record.request_id:
                    holder = _record_from(row)
                    if not _releasable(holder):
                        return holder
                    conn.execute(
                        "UPDATE invocations SET idempotency_key = NULL WHERE request_id = ?",
                        (holder.request_id,),
                    )
            conn.execute(_UPSERT, _record_row(record))
            conn.executemany(_INSERT_EVENT, _event_rows(events))
        return None

    def complete(
        self, record: InvocationRecord, events: Sequence[LedgerEvent], *, defer: bool = False
    ) -> None:
        if defer and self.write_behind and not self._closed:
            self._enqueue(record, events)
            return
        self.flush()
        with self._transaction() as conn:
            conn.execute(_UPSERT, _record_row(record))
            if events:
                conn.executemany(_INSERT_EVENT, _event_rows(events))

    def append(self, events: Sequence[LedgerEvent]) -> None:
        self.flush()
        with self._transaction() as conn:
            conn.executemany(_INSERT_EVENT, _event_rows(events))

    def get(self, request_id: str) -> InvocationRecord | None:
        rows = self._read(
            f"SELECT {_RECORD_COLUMNS} FROM invocations WHERE request_id = ?", (request_id,)
        )
        return _record_from(rows[0]) if rows else None

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
            f"SELECT {_RECORD_COLUMNS} FROM invocations {where} "
            "ORDER BY created_at DESC, rowid DESC LIMIT ?",
            (*params, limit),
        )
        return [_record_from(r) for r in rows]

    def in_flight(self) -> list[InvocationRecord]:
        rows = self._read(
            f"SELECT {_RECORD_COLUMNS} FROM invocations WHERE state = ? ORDER BY created_at",
            (RecordState.INTENT.value,),
        )
        return [_record_from(r) for r in rows]

    # -- approvals ---------------------------------------------------------------------

    def save_approval(self, approval: ApprovalRecord) -> None:
        with self._transaction(durable=True) as conn:
            conn.execute(
                "INSERT OR REPLACE INTO approvals "
                "(approval_id, request_id, status, body, snapshot, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    approval.approval_id,
                    approval.request_id,
                    approval.status.value,
                    _approval_body(approval),
                    approval.snapshot,
                    approval.created_at,
                ),
            )

    def get_approval(self, approval_id: str) -> ApprovalRecord | None:
        rows = self._read(
            "SELECT body, snapshot FROM approvals WHERE approval_id = ?", (approval_id,)
        )
        return _approval_from(rows[0]["body"], rows[0]["snapshot"]) if rows else None

    def list_approvals(self, *, status: str | None = None) -> list[ApprovalRecord]:
        if status is None:
            rows = self._read("SELECT body, snapshot FROM approvals ORDER BY created_at")
        else:
            rows = self._read(
                "SELECT body, snapshot FROM approvals WHERE status = ? ORDER BY created_at",
                (status,),
            )
        return [_approval_from(r["body"], r["snapshot"]) for r in rows]

    def transition_approval(
        self,
        approval_id: str,
        *,
        expected: ApprovalStatus,
        new: ApprovalStatus,
        by: str | None = None,
        reason: str | None = None,
    ) -> ApprovalRecord | None:
        with self._transaction(durable=True) as conn:
            row = conn.execute(
                "SELECT body, snapshot FROM approvals WHERE approval_id = ? AND status = ?",
                (approval_id, expected.value),
            ).fetchone()
            if row is None:
                return None
            current = _approval_from(row["body"], row["snapshot"])
            changes: dict[str, Any] = {"status": new}
            if by is not None:
                changes.update(decided_by=by, decision_reason=reason, decided_at=time.time())
            updated = replace(current, **changes)
            conn.execute(
                "UPDATE approvals SET status = ?, body = ? WHERE approval_id = ?",
                (new.value, _approval_body(updated), approval_id),
            )
        return updated

    def close(self) -> None:
        with self._pending_cond:
            self._closed = True
            self._pending_cond.notify_all()
        self.flush()
        with self._lock:
            self._conn.close()


_BATCH_SIZE = 256
_BATCH_WAIT = 0.05


def _write_behind(ref: weakref.ref[SQLiteLedger]) -> None:
    """The writer thread: group-commit deferred records until the ledger closes or dies."""
    while True:
        ledger = ref()
        if ledger is None or ledger._closed:
            return
        batch = ledger._take_pending(timeout=_BATCH_WAIT)
        if batch:
            try:
                ledger._write_batch(batch)
            except LedgerError:
                # Put the batch back so flush() retries it and raises to a caller who can act.
                with ledger._pending_cond:
                    ledger._pending[:0] = batch
                time.sleep(0.05)
        del ledger


def _flush_at_exit(ref: weakref.ref[SQLiteLedger]) -> None:
    ledger = ref()
    if ledger is not None and not ledger._closed:
        ledger.flush()


def _releasable(holder: InvocationRecord) -> bool:
    return (
        holder.state is RecordState.COMPLETED
        and holder.status in _RELEASABLE
        and holder.effect_state in ("none", "not_committed")
    )


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
