"""The ledger's keeping of a paused program's state with its approval, and the call tree, in
both backends: a snapshot is taken at most once however many processes race for it."""

from __future__ import annotations

import threading

from ledger_rows import Opener, record

from toolkeeper.ledger import ApprovalRecord, Ledger, RecordState


def approval(approval_id: str) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=approval_id,
        request_id="req-inner",
        call_id="code-1.2",
        contract_ref="send@1.0.0",
        implementation_digest="sha256:x",
        arguments={"to": "a"},
        arguments_digest="sha256:y",
        principal={"id": "alice", "tenant": "acme", "capabilities": [], "kind": "agent"},
        session=None,
        parent_request_id="req-run",
        idempotency_key=None,
        resource_versions={},
        account="alice asks to send",
    )


def test_a_snapshot_is_kept_with_its_account_and_taken_once(ledger: Ledger) -> None:
    ledger.save_approval(approval("apr-1"))
    assert ledger.store_snapshot("apr-1", b"\x00state\xff", account="program call #2: send")
    assert not ledger.store_snapshot("apr-missing", b"x")
    kept = ledger.get_approval("apr-1")
    assert kept is not None and kept.snapshot == b"\x00state\xff"
    assert kept.account == "program call #2: send"
    assert ledger.take_snapshot("apr-1", taker="req-cont") == b"\x00state\xff"
    assert ledger.take_snapshot("apr-1", taker="req-other") is None
    taken = ledger.get_approval("apr-1")
    assert taken is not None and taken.snapshot == b"taken:req-cont"  # who continued it
    assert ledger.take_snapshot("apr-missing", taker="x") is None


def test_of_racing_processes_one_takes_the_snapshot(opener: Opener) -> None:
    first = opener()
    first.save_approval(approval("apr-race"))
    first.store_snapshot("apr-race", b"state")
    ledgers = [opener() for _ in range(6)]
    won: list[str] = []
    start = threading.Barrier(len(ledgers))

    def take(ledger: Ledger, name: str) -> None:
        start.wait()
        if ledger.take_snapshot("apr-race", taker=name) is not None:
            won.append(name)

    threads = [
        threading.Thread(target=take, args=(ledger, f"taker-{n}"))
        for n, ledger in enumerate(ledgers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    for ledger in [first, *ledgers]:
        ledger.close()


def test_children_lists_the_calls_made_under_a_request_oldest_first(ledger: Ledger) -> None:
    ledger.complete(record("req-run", state=RecordState.COMPLETED), [])
    for n in (1, 2, 3):
        child = record(
            f"req-{n}",
            parent_request_id="req-run",
            state=RecordState.COMPLETED,
            created_at=1000.0 + n,
        )
        ledger.complete(child, [])
    ledger.complete(record("req-else", state=RecordState.COMPLETED), [])
    assert [r.request_id for r in ledger.children("req-run")] == ["req-1", "req-2", "req-3"]
    assert [r.request_id for r in ledger.children("req-run", limit=2)] == ["req-1", "req-2"]
    assert ledger.children("req-1") == []
