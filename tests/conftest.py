from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from toolkeeper import Principal

ROOT = Path(__file__).resolve().parent.parent

# Hypothesis budgets (docs/testing.md). "ci" bounds every run, reproducibly (derandomized, no
# example database, as Hypothesis's own CI settings): 200 examples where a test sets no budget
# of its own. "release" is the long run before a release: `pytest --hypothesis-profile=release`.
settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "release",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


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
