"""Real ledger stores for the fault tests: a SQLite file, or a fresh schema on the test
PostgreSQL server (`TOOLKEEPER_TEST_POSTGRES_DSN`, which `.ci/run` sets)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from toolkeeper.ledger.sql import SQLLedger
from toolkeeper.ledger.sqlite import SQLiteLedger

DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")
STORES = ("sqlite", "postgres")


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A schema name no other test uses, dropped afterwards (the server itself is shared)."""
    if not DSN:
        pytest.skip("TOOLKEEPER_TEST_POSTGRES_DSN is not set; .ci/run sets it to the local server")
    import psycopg

    schema = f"tk_adv_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@contextmanager
def store(kind: str, tmp_path: Path) -> Iterator[Callable[[], SQLLedger]]:
    """Opens connections to one fresh store of `kind`, as another process would."""
    if kind == "sqlite":
        yield lambda: SQLiteLedger(tmp_path / "ledger.db")
        return
    from toolkeeper.ledger.postgres import PostgresLedger

    with postgres_schema() as schema:
        assert DSN is not None
        yield lambda: PostgresLedger(DSN, schema=schema)


def admin(ledger: SQLLedger) -> Callable[[str], None]:
    """Run DDL on the ledger's store over a connection of its own, as an operator would."""
    if isinstance(ledger, SQLiteLedger):

        def run_sqlite(statement: str) -> None:
            import sqlite3

            with sqlite3.connect(ledger.path, isolation_level=None) as conn:
                conn.executescript(statement)

        return run_sqlite
    import psycopg

    assert DSN is not None

    def run_postgres(statement: str) -> None:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {ledger.schema}")  # type: ignore[attr-defined]
            conn.execute(statement)

    return run_postgres
