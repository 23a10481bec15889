"""The shared ledger for multi-replica gateways: PostgreSQL via psycopg 3.

Every replica points at the same database, so any replica can resume any approval, replay
any idempotency key and reconcile any unknown effect; the gateway process itself keeps
nothing a second replica would need. Idempotency-key claims are serialized with a
transaction-scoped advisory lock on the key, and the unique index backs that up.
Commits that record an intent or an approval keep `synchronous_commit` on; rows of calls
that changed nothing are written with it off (they are also written behind, in batches).
"""

from __future__ import annotations

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

    def __init__(self, dsn: str, *, schema: str = "toolkeeper", write_behind: bool = True) -> None:
        if not schema.isidentifier():
            raise LedgerError(
                f"schema name {schema!r} must be a plain identifier, e.g. 'toolkeeper'"
            )
        self.schema = schema
        self.location = _without_password(dsn) + f" (schema {schema})"
        try:
            conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(f"SET search_path TO {schema}")
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
