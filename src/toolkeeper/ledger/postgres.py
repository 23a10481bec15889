"""The shared ledger for multi-replica gateways: PostgreSQL via psycopg 3.

Every replica points at the same database, so any replica can resume any approval, replay
any idempotency key and reconcile any unknown effect; the gateway process itself keeps
nothing a second replica would need. Idempotency-key claims are serialized with a
transaction-scoped advisory lock on the key, and the unique index backs that up.
Commits that record an intent or an approval keep `synchronous_commit` on; rows of calls
that changed nothing are written with it off (they are also written behind, in batches).

A lost connection is opened again at the next use; while that fails, attempts are spaced by
a backoff that doubles up to `_RECONNECT_MAX` seconds, and every call in between fails at
once with a transient `LedgerError` (the pipeline answers `unavailable`), instead of each
waiting on a connect of its own. A connect gives up after `_CONNECT_TIMEOUT` seconds unless
the DSN sets `connect_timeout`. Queued records are written once the connection is back.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from toolkeeper.errors import LedgerError
from toolkeeper.ledger.sql import APPROVAL_COLUMNS, RECORD_COLUMNS, SQLLedger, schema_ddl

try:
    import psycopg
    from psycopg.rows import dict_row
except ImportError as exc:
    # ModuleNotFoundError, named, so the CLI can say which extra to install.
    raise ModuleNotFoundError(
        "the PostgreSQL ledger needs psycopg 3: pip install 'toolkeeper[postgres]'",
        name=exc.name or "psycopg",
    ) from exc

_BYTEWISE = ' COLLATE "C"'
"""Byte order whatever the database's collation: a prefix is then a range an index serves."""
_SCHEMA = schema_ddl(
    real="DOUBLE PRECISION", blob="BYTEA", serial="BIGSERIAL PRIMARY KEY", bytewise=_BYTEWISE
)
_CONNECT_TIMEOUT = 5
_RECONNECT_FIRST = 0.05
_RECONNECT_MAX = 5.0

logger = logging.getLogger(__name__)


def _upsert(table: str, columns: tuple[str, ...], key: str) -> str:
    marks = ", ".join("?" for _ in columns)
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns if c != key)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) "
        f"ON CONFLICT ({key}) DO UPDATE SET {updates}"
    )


class PostgresLedger(SQLLedger):
    """A `Ledger` in a PostgreSQL schema (default `toolkeeper`), shared by replicas."""

    upsert_invocation = _upsert("invocations", RECORD_COLUMNS, "request_id")
    upsert_approval = _upsert("approvals", APPROVAL_COLUMNS, "approval_id")
    db_errors = (psycopg.Error,)
    bytewise = _BYTEWISE
    row_errors = (psycopg.DataError, psycopg.IntegrityError, psycopg.errors.ProgramLimitExceeded)
    """SQLSTATE classes 22 (a value: NUL in text, out of range), 23 (a constraint) and 54 (a
    key too long for its index). A lost connection, a full disk, a read-only standby or a
    missing table hold whatever the rows."""

    def __init__(self, dsn: str, *, schema: str = "toolkeeper", write_behind: bool = True) -> None:
        if not schema.isidentifier():
            raise LedgerError(
                f"schema name {schema!r} must be a plain identifier, e.g. 'toolkeeper'",
                transient=False,
            )
        self.schema = schema
        self._dsn = dsn
        self.location = _without_password(dsn) + f" (schema {schema})"
        self._reconnect_at = 0.0
        self._reconnect_pause = _RECONNECT_FIRST
        self._lost: Exception | None = None
        """Why the connection was lost, while it is not back."""
        try:
            conn = self._connect()
            with conn.transaction():
                # Replicas may start together; the lock makes the DDL run one at a time.
                conn.execute("SELECT pg_advisory_xact_lock(7262733)")
                conn.execute(_SCHEMA)
        except psycopg.Error as exc:
            raise LedgerError(
                f"cannot open the PostgreSQL ledger at {self.location}: {exc}. Check the DSN "
                "(postgresql://user@host:5432/db) and that the server is running."
            ) from exc
        super().__init__(conn, write_behind=write_behind)

    def _connect(self) -> psycopg.Connection[Any]:
        info = psycopg.conninfo.conninfo_to_dict(self._dsn)
        timeout: dict[str, Any] = {}
        if "connect_timeout" not in info:
            timeout["connect_timeout"] = _CONNECT_TIMEOUT
        conn = psycopg.connect(self._dsn, autocommit=True, row_factory=dict_row, **timeout)
        try:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"SET search_path TO {self.schema}")
        except psycopg.Error:
            conn.close()
            raise
        return conn

    def _connected(self) -> Any:
        conn = self._conn
        if not conn.closed:
            return conn
        if self._queue.stopped:
            raise LedgerError(f"the ledger at {self.location} is closed", transient=False)
        now = time.monotonic()
        if now < self._reconnect_at:
            self._refusing = True
            raise LedgerError(
                f"the PostgreSQL ledger at {self.location} is unreachable (next attempt in "
                f"{self._reconnect_at - now:.2f} s): {self._lost}"
            )
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            if self._lost is None:
                logger.warning(
                    "lost the connection to the PostgreSQL ledger at %s; reconnecting: %s",
                    self.location,
                    exc,
                )
            self._lost = exc
            self._reconnect_at = now + self._reconnect_pause
            self._reconnect_pause = min(self._reconnect_pause * 2, _RECONNECT_MAX)
            self._refusing = True
            raise LedgerError(
                f"cannot reconnect to the PostgreSQL ledger at {self.location}: {exc}"
            ) from exc
        logger.info("reconnected to the PostgreSQL ledger at %s", self.location)
        self._lost, self._reconnect_pause = None, _RECONNECT_FIRST
        return self._conn

    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def _begin(self, conn: Any, *, durable: bool) -> None:
        conn.execute("BEGIN")
        if not durable:
            conn.execute("SET LOCAL synchronous_commit = off")

    def _lock_key(self, conn: Any, key: str) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))


def _without_password(dsn: str) -> str:
    """The DSN as it may appear in messages and logs."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparseable DSN>"
    info.pop("password", None)
    return psycopg.conninfo.make_conninfo("", **info)
