"""The embedded default ledger: one SQLite file in WAL mode (`.toolkeeper/ledger.db`).

WAL lets readers (`toolkeeper ledger tail`) run beside the writer. A transaction that records
an intent or an approval is committed with `synchronous=FULL`, so it is on disk before the
effect starts; other rows use NORMAL, because losing one to a power cut (not a process crash)
only turns a known outcome back into a recoverable unknown one. `BEGIN IMMEDIATE` takes the
write lock up front, which is what serializes idempotency-key claims between processes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from toolkeeper.errors import LedgerError
from toolkeeper.ledger.sql import APPROVAL_COLUMNS, RECORD_COLUMNS, SQLLedger

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


def _insert_or_replace(table: str, columns: tuple[str, ...]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})"


class SQLiteLedger(SQLLedger):
    """A `Ledger` in one SQLite file, shared safely by threads and by processes."""

    upsert_invocation = _insert_or_replace("invocations", RECORD_COLUMNS)
    upsert_approval = _insert_or_replace("approvals", APPROVAL_COLUMNS)
    db_errors = (sqlite3.Error,)

    def __init__(self, path: str | Path, *, write_behind: bool = True) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise LedgerError(
                f"cannot open the ledger at {self.path}: {exc}. Check that the directory is "
                "writable, or pass another path (Harness(home=...) or --home)."
            ) from exc
        super().__init__(conn, write_behind=write_behind)

    def _begin(self, conn: Any, *, durable: bool) -> None:
        if durable:
            conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")

    def _end(self, conn: Any, *, durable: bool) -> None:
        if durable:
            conn.execute("PRAGMA synchronous=NORMAL")
