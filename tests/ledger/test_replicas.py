"""Two harnesses sharing one PostgreSQL ledger behave as replicas of one gateway: either can
resume the other's approval, and a keyed call is never run twice across them."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from toolkeeper import Harness, Principal, Proposal, Status, tool

DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")
pytestmark = pytest.mark.skipif(
    not DSN, reason="TOOLKEEPER_TEST_POSTGRES_DSN is not set; .ci/run sets it to the local server"
)


@pytest.fixture
def schema() -> Iterator[str]:
    name = f"tk_replica_{uuid.uuid4().hex[:12]}"
    yield name
    import psycopg

    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def replica(schema: str, effects: list[str], tmp: Any) -> Harness:
    from toolkeeper.ledger.postgres import PostgresLedger

    harness = Harness(home=tmp, ledger=PostgresLedger(DSN, schema=schema))  # type: ignore[arg-type]

    @tool(version="1.0.0", side_effect="committing", idempotency="keyed", timeout=5)
    def publish_release(tag: str) -> dict[str, str]:
        """Publish a release."""
        effects.append(tag)
        return {"tag": tag}

    harness.register(publish_release)
    return harness


def test_any_replica_resumes_any_approval_once(schema: str, tmp_path: Any) -> None:
    effects: list[str] = []
    a = replica(schema, effects, tmp_path / "a")
    b = replica(schema, effects, tmp_path / "b")
    who = Principal("release-bot")
    pending = a.invoke_sync(Proposal("c1", "publish_release", {"tag": "v1"}), principal=who)
    approval_id = pending.execution_meta.approval_id
    assert [x.approval_id for x in b.approvals.list()] == [approval_id]
    b.approvals.decide(approval_id, "approve", by="ops")
    assert b.resume_sync(approval_id, principal=who).status is Status.SUCCEEDED
    assert (
        a.resume_sync(approval_id, principal=who).status is Status.SUCCEEDED
    )  # recorded, not re-run
    # the same keyed call through the other replica replays instead of publishing again
    replayed = a.invoke_sync(Proposal("c2", "publish_release", {"tag": "v1"}), principal=who)
    assert replayed.status is Status.SUCCEEDED  # no approval asked for a replay
    assert replayed.execution_meta.replay_of == pending.execution_meta.request_id
    assert effects == ["v1"]
    a.close()
    b.close()
