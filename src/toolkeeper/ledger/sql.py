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
never lands after a newer one. `close()` drains the queue and joins the writer, and
interpreter exit flushes. Pass `write_behind=False` for a synchronous trail.

Faults (docs/ledger-faults.md says what a caller sees):

- Text a database cannot store is written as its escape, at the one place rows and
  parameters are encoded (`_text`): a lone surrogate, which a JSON escape (``"\\ud800"``)
  carries into any id, name or argument and which sqlite3 and psycopg refuse with
  UnicodeEncodeError, becomes ``\\ud800``; NUL, which PostgreSQL refuses in text, becomes
  ``\\u0000``. JSON columns are encoded as ASCII, which escapes both.
- A batch refused for a reason that holds whatever the rows (`LedgerError.transient`: the
  connection is lost, the disk is full, the file is locked) stays queued and is retried with
  a backoff; a flush meanwhile raises `LedgerError`. Any other failure may lie in one row, so
  the batch is split until every row that can be written is; a record refused on its own is
  set aside, logged at ERROR and retried every `_REFUSED_RETRY` seconds, and never holds
  up the rows behind it (nor a flush).
- A synchronous completion the database refuses is queued like a deferred one, past any
  limit, and `complete` returns False: the outcome of a call that ran is retried, not lost.
  Past `_QUEUE_LIMIT` waiting records, deferred ones are written synchronously instead
  (backpressure), and if that fails too `complete` raises: the caller decides.

What can still be lost: queued records at a hard crash (an effect's completion then leaves
its durable intent, which recovery turns into `effect_unknown`), and records the database
still refuses when `close()`'s grace period ends (it raises, saying how many).
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from toolkeeper.errors import LedgerError
from toolkeeper.ledger.records import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    LedgerEvent,
    RecordState,
)
from toolkeeper.schema.document import utf8_text

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
_BIND_ERRORS = (UnicodeError, OverflowError)
"""What sqlite3 and psycopg raise for a value they cannot bind (before `_text`, a lone
surrogate; an integer out of range): always about the row."""
_REFUSED_RETRY = 30.0
"""Seconds between attempts at a record the database refused on its own."""

logger = logging.getLogger(__name__)

Row = tuple[Any, ...]
Entry = tuple[Row, list[Row]]
"""One queued record: its invocation row and its event rows."""
Batch = list[Entry]
"""Deferred records, already turned into rows by the caller: the writer thread then holds
the GIL only briefly (sqlite3 and psycopg release it while they work), so it never stalls
the event loop with JSON encoding."""


TAKEN = b"taken:"
"""The prefix of an approval snapshot that was taken (`take_snapshot`); the taker follows."""


@dataclass(frozen=True, slots=True)
class Settlement:
    """How a batch went: what is left to retry after a transient `error`, and the records
    the database refused on their own (with why); every other record is committed."""

    left: Batch
    refused: list[tuple[Entry, Exception]]
    error: LedgerError | None


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
    """A parameter as every backend can store it: text with a lone surrogate or NUL is
    written as its escape (``\\ud800``, ``\\u0000``), so the stored row is faithful rather
    than refused. Escaped text maps to itself, so applying this twice is harmless."""
    if isinstance(value, str):
        value = utf8_text(value)
        if "\x00" in value:
            value = value.replace("\x00", "\\u0000")
    return value


def _bound(params: Sequence[Any]) -> list[Any]:
    return [_text(p) for p in params]


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
    return [
        (_text(e.request_id), _text(e.stage), _text(e.kind), _dumps(e.data), e.at) for e in events
    ]


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
        _text(approval.approval_id),
        _text(approval.request_id),
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
    row_errors: ClassVar[tuple[type[Exception], ...]]
    """The driver's errors that may lie in the rows written (a value it cannot store, a
    constraint): a batch failing so is split. Any other error holds whatever the rows
    (connection lost, disk full, file locked, table missing): the batch is retried whole."""
    location: str

    def __init__(self, conn: Any, *, write_behind: bool) -> None:
        self._conn = conn
        self.write_behind = write_behind
        self._lock = threading.Lock()
        """Guards the connection: every public method may run on any thread."""
        self._errors: tuple[type[Exception], ...] = (*self.db_errors, *_BIND_ERRORS)
        """What a statement can raise: the driver's errors, and values it cannot bind."""
        self._refusing = False
        """The last database operation failed for a transient reason and no write has
        succeeded since: a deferred record now waits in the queue until the fault ends."""
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

    def _connected(self) -> Any:
        """The connection to use, called with the lock held; a backend that can lose its
        connection opens a new one here, or raises a transient `LedgerError`."""
        return self._conn

    # -- plumbing ----------------------------------------------------------------------

    @contextmanager
    def _transaction(self, *, durable: bool = False) -> Iterator[Cursor]:
        with self._lock:
            conn = self._connected()
            try:
                try:
                    self._begin(conn, durable=durable)
                    try:
                        yield Cursor(conn, self._sql)
                    except BaseException:
                        self._rollback(conn)
                        raise
                    conn.execute("COMMIT")
                finally:
                    self._end(conn, durable=durable)
            except self._errors as exc:
                raise self._fault("write to", exc) from exc
            self._refusing = False

    def _rollback(self, conn: Any) -> None:
        """Roll back after a failure, which is the error to report: the database may have
        rolled back already (SQLite does on SQLITE_FULL), or the connection may be gone."""
        with suppress(*self.db_errors):
            conn.execute("ROLLBACK")

    def _fault(self, doing: str, exc: BaseException) -> LedgerError:
        """The `LedgerError` for a driver error (or a value the driver could not bind)."""
        transient = not isinstance(exc, (*self.row_errors, *_BIND_ERRORS))
        if transient:
            self._refusing = True
        message = f"ledger {doing} {self.location} failed: {exc}"
        return LedgerError(message, transient=transient)

    def _read(self, statement: str, params: Sequence[Any] = ()) -> list[Any]:
        self.flush()
        with self._lock:
            conn = self._connected()
            try:
                rows: list[Any] = conn.execute(self._sql(statement), _bound(params)).fetchall()
            except self._errors as exc:
                raise self._fault("read from", exc) from exc
        return rows

    # -- write-behind ------------------------------------------------------------------

    def _enqueue(self, entry: Entry, *, force: bool = False) -> bool:
        """Queue a record for the writer. False once the ledger is closing, or while
        `_QUEUE_LIMIT` records wait (the database is slow or failing): the caller then writes
        synchronously, so a long fault slows or fails calls instead of filling memory.
        `force` queues it all the same (the outcome of a call that ran, which the database
        just refused); only a closed ledger refuses it."""
        queue = self._queue
        with queue.cond:
            if queue.stopped:
                return False
            if not force and (queue.closing or queue.waiting() >= _QUEUE_LIMIT):
                return False
            if queue.thread is None:
                queue.thread = threading.Thread(
                    target=_write_behind, args=(queue,), name=f"{self!r} writer", daemon=True
                )
                queue.thread.start()
                _WRITING.add(self)
            queue.owner = self
            if not queue.rows:
                queue.due = max(queue.due, time.monotonic() + _BATCH_WAIT)
                queue.cond.notify_all()
            queue.rows.append(entry)
            queue.enqueued += 1
            if len(queue.rows) == _BATCH_SIZE:
                queue.cond.notify_all()
        return True

    def _write_batch(self, batch: Batch) -> None:
        with self._transaction() as cur:
            cur.executemany(self.upsert_invocation, [row for row, _ in batch])
            self._insert_events(cur, [row for _, rows in batch for row in rows])

    def _write_split(self, batch: Batch) -> Settlement:
        """Write `batch`; when the database refuses it for a reason that may lie in one
        row, write its halves, and so on down to single records, so that one bad record
        never holds up the others."""
        written: set[int] = set()
        refused: list[tuple[int, Exception]] = []
        error: LedgerError | None = None
        parts = [(0, len(batch))]  # a stack, not recursion: a closure cycle would hold self
        while parts:
            lo, hi = parts.pop()
            try:
                self._write_batch(batch[lo:hi])
            except Exception as exc:  # a dead writer would leave every flush waiting
                if isinstance(exc, LedgerError) and exc.transient:
                    error = exc
                    break
                if hi - lo == 1:
                    refused.append((lo, exc))
                else:
                    mid = (lo + hi) // 2
                    parts += [(mid, hi), (lo, mid)]
            else:
                written.update(range(lo, hi))
        settled = written.union(i for i, _ in refused)
        left = [batch[i] for i in range(len(batch)) if i not in settled]
        return Settlement(left, [(batch[i], exc) for i, exc in refused], error)

    def flush(self) -> None:
        """Return once every record deferred before this call is committed, or set aside
        because the database refused it on its own (logged, and retried later).

        Raises `LedgerError` if the writer's next attempt fails for a transient reason; the
        records stay queued and are retried, so a later flush can succeed."""
        queue = self._queue
        with queue.cond:
            target = queue.enqueued
            if queue.settled >= target:
                return
            attempts = queue.attempts
            queue.urgent = True
            queue.cond.notify_all()
            while queue.settled < target:
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
            key = _text(record.idempotency_key)
            if key is not None:
                self._lock_key(cur.conn, key)
                row = cur.execute(
                    f"SELECT {_COLUMNS} FROM invocations WHERE idempotency_key = ?", (key,)
                ).fetchone()
                if row is not None and row["request_id"] != _text(record.request_id):
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
    ) -> bool:
        entry = (record_row(record), event_rows(events))
        if defer and self.write_behind and self._enqueue(entry):
            return not self._refusing
        try:
            self.flush()
            with self._transaction() as cur:
                cur.execute(self.upsert_invocation, entry[0])
                if entry[1]:
                    cur.executemany(_INSERT_EVENT, entry[1])
        except LedgerError as exc:
            # A deferred record met a full queue: the caller decides. Any other is the
            # outcome of a call as it ended, which must not be lost: the writer retries it.
            if defer or not self._enqueue(entry, force=True):
                raise
            logger.warning(
                "the record of %s was not written to %s and is queued for retry: %s",
                record.request_id,
                self.location,
                exc,
            )
            return False
        return True

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

    def children(self, request_id: str, *, limit: int = 10_000) -> list[InvocationRecord]:
        return [
            record_from(r)
            for r in self._read(
                f"SELECT {_COLUMNS} FROM invocations WHERE parent_request_id = ? "
                "ORDER BY created_at, request_id LIMIT ?",
                (request_id, limit),
            )
        ]

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

    def store_snapshot(
        self, approval_id: str, snapshot: bytes, *, account: str | None = None
    ) -> bool:
        with self._transaction(durable=True) as cur:
            row = cur.execute(
                "UPDATE approvals SET snapshot = ? WHERE approval_id = ? RETURNING body, snapshot",
                (snapshot, approval_id),
            ).fetchone()
            if row is not None and account is not None:
                updated = replace(approval_from(row["body"], row["snapshot"]), account=account)
                cur.execute(
                    "UPDATE approvals SET body = ? WHERE approval_id = ?",
                    (approval_row(updated)[3], approval_id),
                )
        return row is not None

    def take_snapshot(self, approval_id: str, *, taker: str) -> bytes | None:
        rows = self._read("SELECT snapshot FROM approvals WHERE approval_id = ?", (approval_id,))
        if not rows or rows[0]["snapshot"] is None:
            return None
        snapshot = bytes(rows[0]["snapshot"])
        if snapshot.startswith(TAKEN):
            return None
        # Compare and set: of concurrent takers, only the one whose UPDATE still finds the
        # bytes it read gets them, in SQLite and PostgreSQL alike; the taker is left behind.
        with self._transaction(durable=True) as cur:
            taken = cur.execute(
                "UPDATE approvals SET snapshot = ? WHERE approval_id = ? AND snapshot = ? "
                "RETURNING approval_id",
                (TAKEN + taker.encode(), approval_id, snapshot),
            ).fetchone()
        return snapshot if taken is not None else None

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
        """Write every queued record, stop the writer thread, close the connection.

        Records the database still refuses after `_CLOSE_GRACE` seconds are lost; the
        `LedgerError` raised then says how many."""
        queue = self._queue
        with queue.cond:
            queue.closing = True
        deadline, pause = time.monotonic() + _CLOSE_GRACE, _RETRY_FIRST
        problem: Exception | None = None
        while True:
            with queue.cond:
                queue.recall_refused(now=True)  # a last chance for records refused alone
            try:
                self.flush()
            except LedgerError as exc:
                problem = exc
            else:
                with queue.cond:
                    if not queue.refused:
                        break
                    problem = queue.refused[0][1]
            if time.monotonic() >= deadline:
                break
            time.sleep(pause)
            pause = min(pause * 2, _RETRY_MAX)
        self._stop_writer()
        _WRITING.discard(self)
        with self._lock:
            self._conn.close()
        unwritten = queue.waiting()
        if unwritten:
            raise LedgerError(
                f"closed the ledger at {self.location} with {unwritten} deferred record(s) "
                f"unwritten: {problem}"
            ) from problem


class Cursor:
    """The connection inside a transaction, with the backend's paramstyle applied."""

    def __init__(self, conn: Any, sql: Any) -> None:
        self.conn = conn
        self._sql = sql

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        return self.conn.execute(self._sql(statement), _bound(params))

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self.conn.cursor().executemany(self._sql(statement), rows)


class _WriteQueue:
    """Deferred rows of one ledger and the state its writer thread shares with callers.

    `flush` waits on counters, not on an empty list: rows leave `rows` only once their
    transaction committed (or the database refused them on their own), so a batch the
    writer has taken is still unwritten for every reader, and nobody slips between a batch
    leaving the queue and reaching the table.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rows: Batch = []
        self.refused: list[tuple[Entry, Exception]] = []
        """Records the database refused on their own, set aside until `refused_due`."""
        self.refused_due = 0.0
        self.enqueued = 0
        """Records ever queued."""
        self.settled = 0
        """Records ever committed or set aside; a flush waits until this reaches `enqueued`
        as it found it."""
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

    def waiting(self) -> int:
        return len(self.rows) + len(self.refused)

    def ready(self) -> bool:
        now = time.monotonic()
        if self.refused and now >= self.refused_due:
            return True
        if not self.rows:
            return False
        if self.urgent or (self.error is None and len(self.rows) >= _BATCH_SIZE):
            return True
        return now >= self.due

    def wait_time(self) -> float | None:
        times = ([self.due] if self.rows else []) + ([self.refused_due] if self.refused else [])
        return max(0.0, min(times) - time.monotonic()) if times else None

    def recall_refused(self, *, now: bool = False) -> None:
        """Put the records set aside back at the head of the queue once their retry is due
        (`now`: at once); a flush then waits for them again, for one more attempt."""
        if self.refused and (now or time.monotonic() >= self.refused_due):
            self.rows[:0] = [entry for entry, _ in self.refused]
            self.settled -= len(self.refused)
            self.refused = []
            self.urgent = True
            self.cond.notify_all()

    def settle(self, taken: int, settlement: Settlement) -> None:
        """Account for the `taken` rows at the head of `rows` the writer tried: those left
        go back to the head, those refused are set aside, the rest are committed."""
        del self.rows[:taken]
        self.rows[:0] = settlement.left
        if settlement.refused:
            self.refused.extend(settlement.refused)
            self.refused_due = time.monotonic() + _REFUSED_RETRY
        self.settled += taken - len(settlement.left)

    def stop(self) -> None:
        """End the writer thread (also run when the ledger is garbage-collected)."""
        with self.cond:
            self.stopped = True
            self.cond.notify_all()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()


def _write_behind(queue: _WriteQueue) -> None:
    """The writer thread: group-commit queued rows until the ledger closes or is collected.

    A batch refused for a transient reason stays queued and is retried after a pause that
    doubles up to `_RETRY_MAX`; a flush cuts the pause short. The writer says so in the log:
    WARNING while it retries (at most once a minute past the first), INFO once the database
    takes writes again, ERROR for a record refused on its own. Nothing it calls can end it:
    a dead writer would leave every later flush waiting forever.
    """
    retry, failures, warned = _RETRY_FIRST, 0, 0.0
    while True:
        with queue.cond:
            while not queue.stopped and not queue.ready():
                queue.cond.wait(queue.wait_time())
            if queue.stopped or queue.owner is None:
                return
            queue.recall_refused()
            ledger, batch, queue.urgent = queue.owner, list(queue.rows), False
            queue.attempts += 1
            attempt = queue.attempts
        settlement = ledger._write_split(batch)
        # Logged before the queue is settled: whoever a flush releases finds the log written.
        if settlement.refused:
            ids = ", ".join(str(entry[0][0]) for entry, _ in settlement.refused[:5])
            logger.error(
                "%s refused %d record(s) on their own (request %s%s), kept aside and "
                "retried every %.0f s; the rest of their batch is written: %s",
                ledger.location,
                len(settlement.refused),
                ids,
                ", ..." if len(settlement.refused) > 5 else "",
                _REFUSED_RETRY,
                settlement.refused[0][1],
            )
        pause = retry
        if settlement.error is not None:
            failures += 1
            if failures == 1 or time.monotonic() - warned >= 60.0:
                warned = time.monotonic()
                logger.warning(
                    "%d deferred ledger record(s) not written to %s, retrying in %.2f s: %s",
                    len(settlement.left),
                    ledger.location,
                    pause,
                    settlement.error,
                )
            retry = min(retry * 2, _RETRY_MAX)
        elif failures:
            logger.info(
                "%s takes writes again: %d deferred ledger record(s) written after %d failed "
                "attempt(s)",
                ledger.location,
                len(batch) - len(settlement.refused),
                failures,
            )
            retry, failures = _RETRY_FIRST, 0
        with queue.cond:
            queue.settle(len(batch), settlement)
            queue.error = settlement.error
            if settlement.error is None:
                queue.due = time.monotonic() + _BATCH_WAIT
            else:
                queue.failed = attempt
                queue.due = time.monotonic() + pause
            if not queue.waiting():
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
        if ledger._queue.refused:
            logger.error(
                "%d record(s) refused by %s on their own are lost at exit",
                len(ledger._queue.refused),
                ledger.location,
            )


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
