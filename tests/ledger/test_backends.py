"""Both ledger backends, through the `Ledger` protocol: intents, idempotency keys, queries,
approvals, concurrency between connections. PostgreSQL runs when
TOOLKEEPER_TEST_POSTGRES_DSN is set (`.ci/run` sets it to the local server)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from ledger_rows import Opener, record

from toolkeeper.errors import LedgerError
from toolkeeper.ledger import ApprovalRecord, ApprovalStatus, Ledger, LedgerEvent, RecordState
from toolkeeper.ledger.sqlite import SQLiteLedger


def test_wal_mode(tmp_path: Path) -> None:
    SQLiteLedger(tmp_path / "ledger.db")
    mode = sqlite3.connect(tmp_path / "ledger.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_round_trip(ledger: Ledger) -> None:
    r = record("r1", arguments={"a": [1, 2]}, envelope={"status": "succeeded"})
    ledger.complete(r, [LedgerEvent("r1", "resolve", "resolved", {"x": 1})])
    assert ledger.get("r1") == r
    assert [(e.stage, e.data) for e in ledger.events("r1")] == [("resolve", {"x": 1})]
    assert ledger.get("missing") is None


def test_idempotency_key_is_held_until_the_holder_failed_without_effect(
    ledger: Ledger,
) -> None:
    assert ledger.record_intent(record("r1", idempotency_key="k"), []) is None
    holder = ledger.record_intent(record("r2", idempotency_key="k"), [])
    assert holder is not None and holder.request_id == "r1"
    assert ledger.get("r2") is None
    # the holder completes with an unknown effect: still held
    ledger.complete(
        record(
            "r1",
            idempotency_key="k",
            state=RecordState.COMPLETED,
            status="effect_unknown",
            effect_state="unknown",
        ),
        [],
    )
    assert ledger.record_intent(record("r3", idempotency_key="k"), []).request_id == "r1"
    # the holder is settled as failed, not committed: the key is released
    ledger.complete(
        record(
            "r1",
            idempotency_key="k",
            state=RecordState.COMPLETED,
            status="failed",
            effect_state="not_committed",
        ),
        [],
    )
    assert ledger.record_intent(record("r4", idempotency_key="k"), []) is None
    assert ledger.get("r1").idempotency_key is None
    assert ledger.get("r4").idempotency_key == "k"


def test_concurrent_claims_of_one_key_have_one_winner(opener: Opener) -> None:
    opener().close()
    winners = []

    def claim(i: int) -> None:
        own = opener()  # separate connections, as separate processes would have
        if own.record_intent(record(f"r{i}", idempotency_key="same"), []) is None:
            winners.append(i)
        own.close()

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1


def test_query_filters(ledger: Ledger) -> None:
    ledger.complete(record("a", status="succeeded", created_at=100.0), [])
    ledger.complete(record("b", status="failed", principal_id="bob", created_at=200.0), [])
    ledger.complete(
        record("c", status="succeeded", tool="get_y", contract_ref="get_y@2.0.0", created_at=300.0),
        [],
    )
    assert [r.request_id for r in ledger.query()] == ["c", "b", "a"]
    assert [r.request_id for r in ledger.query(status="succeeded")] == ["c", "a"]
    assert [r.request_id for r in ledger.query(principal="bob")] == ["b"]
    assert [r.request_id for r in ledger.query(tool="get_y")] == ["c"]
    assert [r.request_id for r in ledger.query(since=150.0)] == ["c", "b"]
    assert [r.request_id for r in ledger.query(limit=1)] == ["c"]


def test_in_flight_lists_intents(ledger: Ledger) -> None:
    ledger.record_intent(record("a"), [])
    ledger.complete(record("b", state=RecordState.COMPLETED), [])
    assert [r.request_id for r in ledger.in_flight()] == ["a"]


def test_approval_transitions_are_atomic(ledger: Ledger) -> None:
    approval = ApprovalRecord(
        approval_id="apr_1",
        request_id="r1",
        call_id="c",
        contract_ref="write_x@1.0.0",
        implementation_digest="sha256:i",
        arguments={"a": 1},
        arguments_digest="sha256:a",
        principal={"id": "alice", "tenant": "acme", "capabilities": [], "kind": "agent"},
        session=None,
        parent_request_id=None,
        idempotency_key=None,
        resource_versions={},
        account="alice asks",
        policy_ids=("p",),
        snapshot=b"\x00snap",
    )
    ledger.save_approval(approval)
    assert ledger.get_approval("apr_1") == approval
    assert [a.approval_id for a in ledger.list_approvals(status="pending")] == ["apr_1"]
    decided = ledger.transition_approval(
        "apr_1", expected=ApprovalStatus.PENDING, new=ApprovalStatus.APPROVED, by="ed", reason="ok"
    )
    assert decided.status is ApprovalStatus.APPROVED and decided.decided_by == "ed"
    assert decided.snapshot == b"\x00snap"
    again = ledger.transition_approval(
        "apr_1", expected=ApprovalStatus.PENDING, new=ApprovalStatus.DENIED, by="x"
    )
    assert again is None
    assert ledger.list_approvals(status="pending") == []


def test_unwritable_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LedgerError, match="cannot open the ledger"):
        SQLiteLedger(blocker / "ledger.db")


def test_deferred_records_are_read_back_and_survive_close(opener: Opener) -> None:
    writer = opener()
    for i in range(300):  # more than one batch
        writer.complete(
            record(f"d{i}", state=RecordState.COMPLETED, effect_state="none"), [], defer=True
        )
    assert writer.get("d299") is not None  # the writing process reads its own records
    writer.complete(record("last", state=RecordState.COMPLETED), [], defer=True)
    writer.close()
    reader = opener()
    assert reader.get("last") is not None
    assert len(reader.query(limit=1000)) == 301
    reader.close()
