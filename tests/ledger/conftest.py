"""Fixtures for both ledger backends. PostgreSQL runs when TOOLKEEPER_TEST_POSTGRES_DSN is set
(`.ci/run` sets it to the local server)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from ledger_rows import Opener

from toolkeeper.ledger import Ledger
from toolkeeper.ledger.sqlite import SQLiteLedger

DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")


@pytest.fixture(params=["sqlite", "postgres"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another connection to one fresh ledger store, as another process would."""
    if request.param == "sqlite":
        yield lambda: SQLiteLedger(tmp_path / "ledger.db")
        return
    if not DSN:
        pytest.skip("TOOLKEEPER_TEST_POSTGRES_DSN is not set; .ci/run sets it to the local server")
    from toolkeeper.ledger.postgres import PostgresLedger

    schema = f"tk_test_{uuid.uuid4().hex[:12]}"
    yield lambda: PostgresLedger(DSN, schema=schema)
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture
def ledger(opener: Opener) -> Iterator[Ledger]:
    opened = opener()
    yield opened
    opened.close()
