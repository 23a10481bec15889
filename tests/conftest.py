from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkeeper import Principal

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """The PostgreSQL tests skip on a developer's machine without a server, but never in CI:
    there a missing DSN is a broken setup, not a reason to skip."""
    if os.environ.get("CI") and not os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN"):
        raise pytest.UsageError(
            "CI runs the PostgreSQL tests: set TOOLKEEPER_TEST_POSTGRES_DSN (.ci/run sets it "
            "to the local server)"
        )


@pytest.fixture
def alice() -> Principal:
    return Principal(id="alice", tenant="acme", capabilities=frozenset({"manuscripts"}))
