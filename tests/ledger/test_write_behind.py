"""Deferred records (`complete(..., defer=True)`) on both backends: the writer thread loses
nothing when the ledger closes, a process reads its own writes at once, a batch the database
refuses stays queued until it can be written, and the blocking methods are safe to call from
worker threads as `anyio.to_thread.run_sync` does."""

from __future__ import annotations

import gc
import logging
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import anyio
import anyio.to_thread
import pytest
from ledger_rows import Opener, record

from toolkeeper.errors import LedgerError
from toolkeeper.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    Ledger,
    LedgerEvent,
    RecordState,
)
from toolkeeper.ledger.sqlite import SQLiteLedger

DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")


@pytest.fixture(autouse=True)
def frequent_thread_switches() -> Iterator[None]:
    """Switch threads every few bytecodes, so that races between callers and the writer
    happen in a short run rather than once in a thousand."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def deferred(request_id: str) -> tuple[InvocationRecord, list[LedgerEvent]]:
    done = record(request_id, state=RecordState.COMPLETED, status="succeeded", effect_state="none")
    return done, [LedgerEvent(request_id, "record", "succeeded", {"n": request_id})]


def in_threads(count: int, work: Callable[[int], None]) -> None:
    """Run `work(0..count-1)` on as many threads and re-raise the first failure."""
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # collected and re-raised in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]


def writer_threads(ledger: Ledger) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == f"{ledger!r} writer"]


def test_close_with_batches_in_flight_loses_nothing(opener: Opener) -> None:
    for round_ in range(5):
        ledger = opener()

        def write(i: int, ledger: Ledger = ledger, round_: int = round_) -> None:
            for n in range(150):
                row, events = deferred(f"r{round_}-{i}-{n}")
                ledger.complete(row, events, defer=True)

        in_threads(6, write)
        ledger.close()  # the writer may hold a batch it has taken and not yet committed
        assert writer_threads(ledger) == []
    reader = opener()
    assert len(reader.query(limit=100_000)) == 5 * 6 * 150
    assert len(reader.events("r4-5-149")) == 1
    reader.close()


@pytest.mark.parametrize("then", ["read", "close"])
def test_a_batch_in_flight_behind_a_synchronous_write_is_not_skipped(
    opener: Opener, then: str
) -> None:
    """The writer takes a batch and waits for the connection, which a synchronous write holds
    while another client locks the table; right after that write returns, a read must see the
    batch and close() must write it (before the fix both could slip ahead of the writer)."""
    rounds = 5
    for round_ in range(rounds):
        ledger = opener()
        held = _hold_write_lock(ledger, seconds=0.4)

        def defer_rows(ledger: Ledger = ledger, round_: int = round_) -> None:
            time.sleep(0.05)  # after the synchronous write below has taken the connection
            for n in range(20):
                ledger.complete(*deferred(f"{round_}-{n}"), defer=True)

        deferring = threading.Thread(target=defer_rows)
        deferring.start()
        ledger.complete(record(f"sync-{round_}", state=RecordState.COMPLETED), [])
        deferring.join()
        if then == "read":
            assert ledger.get(f"{round_}-19") is not None, "a deferred row was not read back"
        ledger.close()
        held.join()
    reader = opener()
    assert len(reader.query(limit=1000)) == rounds * 21
    reader.close()


def test_a_read_right_after_a_deferred_write_sees_it(ledger: Ledger) -> None:
    def write_then_read(i: int) -> None:
        for n in range(120):
            request_id = f"t{i}-{n}"
            row, events = deferred(request_id)
            ledger.complete(row, events, defer=True)
            assert ledger.get(request_id) is not None, f"{request_id} was not read back"
            assert [e.kind for e in ledger.events(request_id)] == ["succeeded"]

    in_threads(6, write_then_read)
    assert len(ledger.query(limit=10_000)) == 6 * 120


def test_a_refused_batch_stays_queued_and_is_written_once_the_fault_clears(
    ledger: Ledger, caplog: pytest.LogCaptureFixture
) -> None:
    ledger.complete(*deferred("before"), defer=True)
    ledger.flush()
    other = _admin_connection(ledger)
    other("ALTER TABLE events RENAME TO events_away")
    for n in range(10):
        ledger.complete(*deferred(f"d{n}"), defer=True)
    with caplog.at_level(logging.WARNING, logger="toolkeeper.ledger.sql"):
        with pytest.raises(LedgerError, match="could not be written"):
            ledger.flush()
        with pytest.raises(LedgerError):
            ledger.get("d0")  # a read never answers without the writes it must see
    assert "10 deferred ledger record(s) not written" in caplog.text
    time.sleep(0.3)  # the writer retries in the background meanwhile, and fails
    other("ALTER TABLE events_away RENAME TO events")
    ledger.flush()
    assert ledger.get("d9") is not None
    assert [e.kind for e in ledger.events("d9")] == ["succeeded"]
    assert len(ledger.query(limit=100)) == 11


def test_a_full_queue_makes_callers_write_synchronously(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolkeeper.ledger.sql._QUEUE_LIMIT", 5)
    other = _admin_connection(ledger)
    other("ALTER TABLE events RENAME TO events_away")
    for n in range(5):
        ledger.complete(*deferred(f"d{n}"), defer=True)
    with pytest.raises(LedgerError):  # the sixth waits for the five, which cannot be written
        ledger.complete(*deferred("d5"), defer=True)
    other("ALTER TABLE events_away RENAME TO events")
    ledger.complete(*deferred("d5"), defer=True)
    assert len(ledger.query(limit=100)) == 6


def test_close_waits_out_a_passing_fault(opener: Opener) -> None:
    ledger = opener()
    other = _admin_connection(ledger)
    other("ALTER TABLE invocations RENAME TO invocations_away")
    for n in range(20):
        ledger.complete(*deferred(f"d{n}"), defer=True)
    healer = threading.Timer(
        0.5, other, args=("ALTER TABLE invocations_away RENAME TO invocations",)
    )
    healer.start()
    ledger.close()
    healer.join()
    reader = opener()
    assert len(reader.query(limit=100)) == 20
    reader.close()


def test_close_gives_up_on_a_lasting_fault_and_says_what_was_lost(
    opener: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolkeeper.ledger.sql._CLOSE_GRACE", 0.3)
    ledger = opener()
    _admin_connection(ledger)("ALTER TABLE events RENAME TO events_away")
    for n in range(7):
        ledger.complete(*deferred(f"d{n}"), defer=True)
    with pytest.raises(LedgerError, match="with 7 deferred record"):
        ledger.close()
    assert writer_threads(ledger) == []


def test_a_dropped_ledger_writes_its_rows_and_stops_its_writer(tmp_path: Path) -> None:
    ledger = SQLiteLedger(tmp_path / "ledger.db")
    for n in range(10):
        ledger.complete(*deferred(f"d{n}"), defer=True)
    name = f"{ledger!r} writer"
    del ledger  # never closed: the writer holds it until its rows are written
    gc.collect()
    deadline = time.monotonic() + 5
    while any(t.name == name for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == name for t in threading.enumerate()), "the writer thread leaked"
    assert len(SQLiteLedger(tmp_path / "ledger.db").query(limit=100)) == 10


def test_exit_without_close_writes_deferred_rows(tmp_path: Path) -> None:
    program = (
        "import sys\n"
        "from toolkeeper.ledger import InvocationRecord, RecordState\n"
        "from toolkeeper.ledger.sqlite import SQLiteLedger\n"
        "ledger = SQLiteLedger(sys.argv[1])\n"
        "for n in range(100):\n"
        "    ledger.complete(InvocationRecord(f'r{n}', 'c', 't', 'p', 'x', "
        "RecordState.COMPLETED), [], defer=True)\n"
    )
    subprocess.run(
        [sys.executable, "-c", program, str(tmp_path / "ledger.db")],
        check=True,
        env={"PYTHONPATH": ":".join(sys.path)},
    )
    assert len(SQLiteLedger(tmp_path / "ledger.db").query(limit=1000)) == 100


def test_every_method_is_safe_from_worker_threads(ledger: Ledger) -> None:
    """The harness calls the blocking ledger through `anyio.to_thread.run_sync`."""

    async def one_call(i: int) -> None:
        call = anyio.to_thread.run_sync
        read = record(f"read-{i}", state=RecordState.COMPLETED, effect_state="none")
        await call(lambda: ledger.complete(read, [], defer=True))
        assert await call(ledger.get, f"read-{i}") == read
        intent = record(f"write-{i}", idempotency_key=f"k{i % 5}")
        holder = await call(ledger.record_intent, intent, [])
        if holder is None:
            done = record(
                f"write-{i}",
                idempotency_key=f"k{i % 5}",
                state=RecordState.COMPLETED,
                status="succeeded",
                effect_state="committed",
            )
            await call(ledger.complete, done, [LedgerEvent(f"write-{i}", "record", "done")])
        approval = _approval(f"apr_{i}")
        await call(ledger.save_approval, approval)
        decided = await call(
            lambda: ledger.transition_approval(
                approval.approval_id, expected=ApprovalStatus.PENDING, new=ApprovalStatus.APPROVED
            )
        )
        assert decided is not None and decided.status is ApprovalStatus.APPROVED
        await call(lambda: ledger.query(status="succeeded"))
        await call(ledger.in_flight)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            for i in range(60):
                tasks.start_soon(one_call, i)

    anyio.run(main)
    keyed = ledger.query(status="succeeded", limit=1000)
    assert len(keyed) == 5  # one holder per idempotency key, whatever the interleaving
    assert len(ledger.query(limit=1000)) == 65
    assert ledger.list_approvals(status="pending") == []
    assert len(ledger.list_approvals(status="approved")) == 60


def _approval(approval_id: str) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=approval_id,
        request_id="r-" + approval_id,
        call_id="c",
        contract_ref="write_x@1.0.0",
        implementation_digest="sha256:i",
        arguments={},
        arguments_digest="sha256:a",
        principal={"id": "alice", "tenant": "acme", "capabilities": [], "kind": "agent"},
        session=None,
        parent_request_id=None,
        idempotency_key=None,
        resource_versions={},
        account="alice asks",
    )


def _admin_connection(ledger: Ledger) -> Callable[[str], None]:
    """Runs DDL on the ledger's store through a connection of its own, as an operator would."""
    if isinstance(ledger, SQLiteLedger):

        def run_sqlite(statement: str) -> None:
            with closing(sqlite3.connect(ledger.path, isolation_level=None, timeout=30)) as conn:
                conn.execute(statement)

        return run_sqlite
    import psycopg

    from toolkeeper.ledger.postgres import PostgresLedger

    assert isinstance(ledger, PostgresLedger) and DSN
    schema = ledger.schema

    def run_postgres(statement: str) -> None:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(statement)

    return run_postgres


def _hold_write_lock(ledger: Ledger, *, seconds: float) -> threading.Thread:
    """Lock the ledger's tables from another connection for `seconds`, in a thread; return
    that thread once the lock is held."""
    held = threading.Event()

    def hold() -> None:
        if isinstance(ledger, SQLiteLedger):
            with closing(sqlite3.connect(ledger.path, isolation_level=None)) as conn:
                conn.execute("BEGIN IMMEDIATE")
                held.set()
                time.sleep(seconds)
                conn.execute("COMMIT")
            return
        import psycopg

        from toolkeeper.ledger.postgres import PostgresLedger

        assert isinstance(ledger, PostgresLedger) and DSN
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {ledger.schema}")
            with conn.transaction():
                conn.execute("LOCK TABLE invocations IN EXCLUSIVE MODE")
                held.set()
                time.sleep(seconds)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(timeout=30), "the other connection could not lock the ledger"
    return thread
