"""The embedded default ledger: one SQLite file in WAL mode (`.toolkeeper/ledger.db`).

WAL lets readers (`toolkeeper ledger tail`) run beside the writer. A transaction that records
an intent or an approval is committed with `synchronous=FULL`, so it is on disk before the
effect starts; other rows use NORMAL, because losing one to a power cut (not a process crash)
only turns a known outcome back into a recoverable unknown one. `BEGIN IMMEDIATE` takes the
write lock up front, which is what serializes idempotency-key claims between processes.

The ledger holds arguments and results, so a file it creates is its owner's alone, whatever
the umask: the database 0600 (SQLite gives its -wal and -shm files the database's mode),
and every directory it creates on the way 0700. Files and directories that already exist
keep their modes.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from toolkeeper.errors import LedgerError
from toolkeeper.ledger.sql import (
    APPROVAL_COLUMNS,
    RECORD_COLUMNS,
    Cursor,
    Row,
    SQLLedger,
    schema_ddl,
)

_BYTEWISE = ""
"""SQLite compares text bytewise (BINARY) unless told otherwise."""
_SCHEMA = schema_ddl(
    real="REAL", blob="BLOB", serial="INTEGER PRIMARY KEY AUTOINCREMENT", bytewise=_BYTEWISE
)
_EVENTS_PER_STATEMENT = 200
"""Event rows per INSERT the writer runs. sqlite3 releases the GIL around every statement
step, so `executemany` would make the writer thread wait for the GIL once per row while the
caller is busy; one multi-row statement steps once per chunk. 200 rows bind 1,000 values,
well under SQLite's limit of 32,766."""


def _insert_or_replace(table: str, columns: tuple[str, ...]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({marks})"


class SQLiteLedger(SQLLedger):
    """A `Ledger` in one SQLite file, shared safely by threads and by processes."""

    upsert_invocation = _insert_or_replace("invocations", RECORD_COLUMNS)
    upsert_approval = _insert_or_replace("approvals", APPROVAL_COLUMNS)
    db_errors = (sqlite3.Error,)
    bytewise = _BYTEWISE
    row_errors = (sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError)

    def __init__(self, path: str | Path, *, write_behind: bool = True) -> None:
        self.path = Path(path)
        self.location = str(self.path)
        try:
            _create_private(self.path)
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

    def _insert_events(self, cur: Cursor, rows: list[Row]) -> None:
        for start in range(0, len(rows), _EVENTS_PER_STATEMENT):
            chunk = rows[start : start + _EVENTS_PER_STATEMENT]
            values = ", ".join(["(?, ?, ?, ?, ?)"] * len(chunk))
            cur.execute(
                f"INSERT INTO events (request_id, stage, kind, data, at) VALUES {values}",
                [value for row in chunk for value in row],
            )


def _create_private(path: Path) -> None:
    """Create `path` and the directories missing above it for their owner alone (0600 and
    0700, whatever the umask); leave whatever exists as it is."""
    missing = [d for d in (path.parent, *path.parent.parents) if not d.exists()]
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o700)  # the umask can only take bits away from these
        except FileExistsError:
            continue  # another process made it first; not ours to change
        os.chmod(directory, 0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
