"""Backend faults: a record the database refuses on its own, a lost PostgreSQL connection
(a TCP proxy in front of the real server, cut and restored), a full SQLite disk (SQLite's
own size limit), a full write-behind queue, and the modes ledger files are created with.
Every call is answered with an envelope — `unavailable` where nothing ran, the outcome
flagged `record_pending` where it did — and every row reaches the ledger once it can."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ledger_stores import DSN, STORES, admin, postgres_schema, store
from mcp import Client

from toolkeeper import ErrorCategory, Principal, Proposal, ResultEnvelope, Status, ToolContract
from toolkeeper.errors import LedgerError
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.gateway.server import GatewayServer
from toolkeeper.ledger import InvocationRecord, LedgerEvent, RecordState
from toolkeeper.ledger.sql import SQLLedger
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness

ALICE = Principal("alice", "acme")
BOB = Principal("bob", "acme")
BIG = "x" * 20_000
"""An argument that needs pages of its own: no full database has room for it."""


# -- a harness over any ledger ------------------------------------------------------------


def open_harness(ledger: SQLLedger, tmp_path: Path, policy: str | None = None) -> Harness:
    engine = CedarPolicyEngine(
        policies=policy or "permit(principal, action, resource);", include_defaults=False
    )
    return Harness(home=tmp_path / "tk", ledger=ledger, policy=engine)


def register_tools(
    harness: Harness, runs: list[str], during: Callable[[], None] = lambda: None
) -> None:
    """`lookup` (a read) and `publish` (a keyed committing write that appends to `runs`,
    calling `during` while its effect happens)."""

    def contract(tool_id: str, side_effect: str, idempotency: str) -> ToolContract:
        return ToolContract.from_dict(
            {
                "id": tool_id,
                "version": "1.0.0",
                "description": f"Use {tool_id}.",
                "side_effect": side_effect,
                "idempotency": idempotency,
                "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
            }
        )

    def lookup(text: str = "") -> dict[str, Any]:
        return {"text": text}

    def publish(text: str = "") -> dict[str, Any]:
        runs.append(text)
        during()
        return {"published": text[:40], "body": "y" * 12_000}

    harness.register(contract("lookup", "none", "natural"), executor=lookup)
    harness.register(contract("publish", "committing", "keyed"), executor=publish)


def call(harness: Harness, tool: str, text: str, *, key: str | None = None) -> ResultEnvelope:
    return harness.invoke_sync(
        Proposal(f"call-{tool}-{text[:20]}", tool, {"text": text}, idempotency_key=key),
        principal=ALICE,
    )


def assert_unavailable_and_unrun(envelope: ResultEnvelope) -> None:
    assert envelope.status is Status.FAILED, envelope
    assert envelope.error is not None
    assert envelope.error.category is ErrorCategory.UNAVAILABLE
    assert envelope.error.retryable is True
    assert envelope.error.effect_committed is False


def record_pending(envelope: ResultEnvelope) -> bool:
    return envelope.execution_meta is not None and envelope.execution_meta.record_pending


def flushed(ledger: SQLLedger | Harness) -> None:
    """Flush until the ledger takes writes again (it retries with a backoff)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            ledger.flush()
            return
        except LedgerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def statuses(ledger: SQLLedger) -> dict[str, tuple[str, str | None]]:
    return {r.call_id: (r.state.value, r.status) for r in ledger.query(limit=1000)}


# -- a record the database refuses on its own ------------------------------------------


@pytest.fixture(params=STORES)
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SQLLedger]]:
    with store(request.param, tmp_path) as opener:
        yield opener


def finished(request_id: str, tool: str = "lookup") -> tuple[InvocationRecord, list[LedgerEvent]]:
    record = InvocationRecord(
        request_id=request_id,
        call_id="c-" + request_id,
        tool=tool,
        principal_id="alice",
        tenant="acme",
        state=RecordState.COMPLETED,
        status="succeeded",
        effect_state="none",
    )
    return record, [LedgerEvent(request_id, "record", "succeeded", {})]


def test_a_record_refused_on_its_own_is_split_out_and_written_once_it_can_be(
    ledger: Callable[[], SQLLedger], caplog: pytest.LogCaptureFixture
) -> None:
    """Defect: a batch the database refused was retried whole, forever: one record it
    could never take held back every record behind it, and every flush (so every read and
    every intent) failed."""
    opened = ledger()
    run = admin(opened)
    if isinstance(opened, SQLiteLedger):
        run(
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON invocations "
            "WHEN NEW.tool = 'poison' BEGIN SELECT RAISE(ABORT, 'poison refused'); END"
        )
    else:
        run("ALTER TABLE invocations ADD CONSTRAINT refuse_poison CHECK (tool <> 'poison')")
    with caplog.at_level(logging.ERROR, logger="toolkeeper.ledger.sql"):
        for n in range(7):
            opened.complete(*finished(f"r{n}", "poison" if n == 3 else "lookup"), defer=True)
        opened.flush()
        assert {r.request_id for r in opened.query()} == {f"r{n}" for n in range(7)} - {"r3"}
        assert "request r3" in caplog.text
        opened.complete(*finished("later"), defer=True)
        assert opened.get("later") is not None  # the writer goes on
    if isinstance(opened, SQLiteLedger):
        run("DROP TRIGGER refuse_poison")
    else:
        run("ALTER TABLE invocations DROP CONSTRAINT refuse_poison")
    opened.close()  # retries the record set aside, and raises if it still cannot
    reopened = ledger()
    assert reopened.get("r3") is not None
    reopened.close()


# -- a lost PostgreSQL connection ----------------------------------------------------------


class Proxy:
    """A TCP proxy to the PostgreSQL server that the test cuts (every connection dropped,
    new ones closed at once) and restores. The server itself never stops."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        self.links: set[socket.socket] = set()
        self.cut_off = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                if self.cut_off:
                    client.close()
                    continue
                server = socket.create_connection(self.upstream)
                self.links |= {client, server}
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with self.lock:
            self.cut_off = True
            for link in self.links:
                with contextlib.suppress(OSError):
                    link.shutdown(socket.SHUT_RDWR)
                link.close()
            self.links.clear()

    def restore(self) -> None:
        with self.lock:
            self.cut_off = False

    def close(self) -> None:
        self.closed = True
        self.cut()
        self.listener.close()


@pytest.fixture
def proxied() -> Iterator[tuple[Proxy, Callable[[], SQLLedger]]]:
    """A proxy, and an opener of PostgreSQL ledgers (one fresh schema) that connect through it."""
    with postgres_schema() as schema:
        import psycopg

        from toolkeeper.ledger.postgres import PostgresLedger

        assert DSN is not None
        info = psycopg.conninfo.conninfo_to_dict(DSN)
        proxy = Proxy((str(info.get("host", "127.0.0.1")), int(info.get("port", 5432))))
        dsn = psycopg.conninfo.make_conninfo(DSN, host="127.0.0.1", port=proxy.port)
        try:
            yield proxy, lambda: PostgresLedger(dsn, schema=schema)
        finally:
            proxy.close()


@pytest.mark.invariant("INV-7")
def test_while_postgres_is_unreachable_writes_answer_unavailable_and_reads_queue(
    proxied: tuple[Proxy, Callable[[], SQLLedger]],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Defect: the connection was never opened again. Every call that needed a durable
    write answered JSON-RPC -32603 (`invoke` raised), and queued rows were never written."""
    proxy, opener = proxied
    ledger = opener()
    harness = open_harness(ledger, tmp_path)
    runs: list[str] = []
    register_tools(harness, runs)
    assert call(harness, "publish", "before").ok
    with caplog.at_level(logging.INFO, logger="toolkeeper.ledger"):
        proxy.cut()
        for n in range(3):
            assert_unavailable_and_unrun(call(harness, "publish", f"cut-{n}"))
        assert runs == ["before"]  # nothing reached the executor
        read = call(harness, "lookup", "during")
        assert read.ok and record_pending(read)
        assert "record: pending" in read.to_model_text()
        proxy.restore()
        flushed(harness)
        after = call(harness, "publish", "after")
        assert after.ok and not record_pending(after)
    assert runs == ["before", "after"]
    assert statuses(ledger) == {
        "call-publish-before": ("completed", "succeeded"),
        **{f"call-publish-cut-{n}": ("completed", "failed") for n in range(3)},
        "call-lookup-during": ("completed", "succeeded"),
        "call-publish-after": ("completed", "succeeded"),
    }
    logged = {(r.levelno, r.getMessage().split(":")[0]) for r in caplog.records}
    assert any(level == logging.WARNING and "retrying" in m for level, m in logged), logged
    assert any(level == logging.INFO and "reconnected" in m for level, m in logged), logged
    assert any(level == logging.INFO and "takes writes again" in m for level, m in logged)
    harness.close()


def test_an_outcome_whose_record_cannot_be_written_is_answered_and_written_later(
    proxied: tuple[Proxy, Callable[[], SQLLedger]], tmp_path: Path
) -> None:
    """The connection drops while the effect happens: the outcome stands and is answered
    (flagged), its row is written once the database is back, and a keyed repeat replays."""
    proxy, opener = proxied
    ledger = opener()
    harness = open_harness(ledger, tmp_path)
    runs: list[str] = []
    cuts = [proxy.cut]  # the first effect cuts the connection, later ones do not
    register_tools(harness, runs, during=lambda: cuts and cuts.pop()())
    done = call(harness, "publish", "once", key="k1")
    assert done.ok and record_pending(done)
    assert done.structured_content is not None
    assert done.structured_content["published"] == "once"
    proxy.restore()
    flushed(harness)
    assert statuses(ledger)["call-publish-once"] == ("completed", "succeeded")
    again = call(harness, "publish", "once", key="k1")
    assert again.ok and again.execution_meta is not None
    assert done.execution_meta is not None
    assert again.execution_meta.replay_of == done.execution_meta.request_id
    assert runs == ["once"]
    harness.close()


# -- a full SQLite disk -------------------------------------------------------------------


def fill_disk(ledger: SQLiteLedger) -> None:
    """Fill the ledger's database as a full disk would: SQLite's own limit on the file
    (`max_page_count`, a setting of the ledger's connection) at the pages it has now, and
    those pages filled, so that any write needing a new page fails with SQLITE_FULL."""
    with ledger._lock:
        conn = ledger._conn
        conn.execute("CREATE TABLE IF NOT EXISTS ballast (x BLOB)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        for size in (4096, 512, 64, 1):
            try:
                while True:
                    conn.execute("INSERT INTO ballast VALUES (zeroblob(?))", (size,))
            except sqlite3.OperationalError as exc:
                assert exc.sqlite_errorname == "SQLITE_FULL"


def free_disk(ledger: SQLiteLedger) -> None:
    with ledger._lock:
        ledger._conn.execute("PRAGMA max_page_count = 1073741823")


@pytest.fixture
def sqlite_ledger(tmp_path: Path) -> SQLiteLedger:
    return SQLiteLedger(tmp_path / "ledger.db")


@pytest.mark.invariant("INV-7")
def test_a_full_disk_answers_unavailable_before_the_effect(
    sqlite_ledger: SQLiteLedger, tmp_path: Path
) -> None:
    """Defect: the intent write raised out of `invoke` (JSON-RPC -32603 at the gateway),
    leaving no record of the call."""
    harness = open_harness(sqlite_ledger, tmp_path)
    runs: list[str] = []
    register_tools(harness, runs)
    fill_disk(sqlite_ledger)
    refused = call(harness, "publish", BIG)
    assert_unavailable_and_unrun(refused)
    assert record_pending(refused)
    assert runs == []
    free_disk(sqlite_ledger)
    flushed(harness)
    assert call(harness, "publish", "after").ok
    assert runs == ["after"]
    recorded = statuses(sqlite_ledger)
    assert recorded[f"call-publish-{BIG[:20]}"] == ("completed", "failed")
    harness.close()


@pytest.mark.invariant("INV-7")
def test_a_full_disk_after_the_effect_answers_the_outcome_and_writes_it_later(
    sqlite_ledger: SQLiteLedger, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Defect: the completion write raised out of `invoke` after the effect ran: the caller
    never learned the outcome, and the row stayed `intent`."""
    harness = open_harness(sqlite_ledger, tmp_path)
    runs: list[str] = []
    register_tools(harness, runs, during=lambda: fill_disk(sqlite_ledger))
    with caplog.at_level(logging.WARNING, logger="toolkeeper.ledger.sql"):
        done = call(harness, "publish", "once")
    assert done.ok and record_pending(done)
    assert runs == ["once"]
    assert "queued for retry" in caplog.text
    other = SQLiteLedger(sqlite_ledger.path)  # another process sees the durable intent
    assert statuses(other)["call-publish-once"] == ("intent", None)
    free_disk(sqlite_ledger)
    flushed(harness)
    assert statuses(other)["call-publish-once"] == ("completed", "succeeded")
    other.close()
    harness.close()


def test_with_the_queue_full_and_the_disk_full_a_read_is_withheld_and_logged(
    sqlite_ledger: SQLiteLedger,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A read's row waits in the queue while the disk is full; once the queue is full too,
    its answer is withheld (fail closed) and the row's facts go to the log."""
    monkeypatch.setattr("toolkeeper.ledger.sql._QUEUE_LIMIT", 2)
    harness = open_harness(sqlite_ledger, tmp_path)
    register_tools(harness, [])
    fill_disk(sqlite_ledger)
    assert call(harness, "lookup", f"0{BIG}").ok  # queued before the fault shows
    with pytest.raises(LedgerError, match="full"):
        harness.flush()
    queued = call(harness, "lookup", f"1{BIG}")
    assert queued.ok and record_pending(queued)
    with caplog.at_level(logging.ERROR, logger="toolkeeper.runtime.stages"):
        withheld = call(harness, "lookup", f"2{BIG}")
    assert_unavailable_and_unrun(withheld)
    assert withheld.structured_content is None
    assert "unrecorded call" in caplog.text and "call-lookup-2xxx" in caplog.text
    free_disk(sqlite_ledger)
    flushed(harness)
    assert {call_id[:13] for call_id in statuses(sqlite_ledger)} == {
        "call-lookup-0",
        "call-lookup-1",
    }
    harness.close()


# -- ledger files are their owner's ------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_ledger_files_are_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """Defect: `.toolkeeper/ledger.db` (arguments, results, principals) was created 0644
    under the usual umask, readable by every user of the machine."""
    before = os.umask(umask)
    try:
        home = tmp_path / "project" / ".toolkeeper"
        harness = open_harness(SQLiteLedger(home / "ledger.db"), tmp_path)
        register_tools(harness, [])
        assert call(harness, "lookup", "x").ok
        harness.flush()

        def mode(path: Path) -> int:
            return stat.S_IMODE(path.stat().st_mode)

        assert {name: mode(home / name) for name in ("ledger.db", "ledger.db-wal")} == {
            "ledger.db": 0o600,
            "ledger.db-wal": 0o600,
        }
        assert mode(home / "ledger.db-shm") == 0o600
        assert (mode(home), mode(tmp_path / "project")) == (0o700, 0o700)
        harness.close()
    finally:
        os.umask(before)


def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    SQLiteLedger(shared / "ledger.db").close()
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert stat.S_IMODE((shared / "ledger.db").stat().st_mode) == 0o600


# -- through the gateway ----------------------------------------------------------------


def gateway(harness: Harness) -> tuple[GatewayServer, dict[str, Principal]]:
    caller = {"now": ALICE}
    return GatewayServer(harness, principal_of=lambda _request: caller["now"]), caller


def category(result: Any) -> str:
    assert result.is_error, result
    return str(result.structured_content["error"]["category"])


@pytest.mark.invariant("INV-7")
@pytest.mark.anyio
async def test_gateway_answers_a_full_disk_with_tool_errors(
    sqlite_ledger: SQLiteLedger, tmp_path: Path
) -> None:
    """Defect: the ledger's error left the handler: JSON-RPC -32603, no envelope, no row."""
    harness = open_harness(sqlite_ledger, tmp_path)
    runs: list[str] = []
    register_tools(harness, runs)
    server, caller = gateway(harness)
    async with Client(server.lowlevel) as client:
        fill_disk(sqlite_ledger)
        refused = await client.call_tool("publish", {"text": BIG})
        assert category(refused) == "unavailable"
        assert refused.structured_content is not None
        assert refused.structured_content["error"]["retryable"] is True
        caller["now"] = BOB
        read = await client.call_tool("lookup", {"text": "bob"})
        assert not read.is_error and read.meta is not None
        assert read.meta["toolkeeper.dev/record_pending"] is True
    assert runs == []
    free_disk(sqlite_ledger)
    flushed(harness)
    rows = {(r.principal_id, r.tool, r.status) for r in sqlite_ledger.query()}
    assert rows == {("alice", "publish", "failed"), ("bob", "lookup", "succeeded")}
    harness.close()


@pytest.mark.invariant("INV-7")
@pytest.mark.anyio
async def test_gateway_answers_a_lost_database_with_tool_errors(
    proxied: tuple[Proxy, Callable[[], SQLLedger]], tmp_path: Path
) -> None:
    """Defect: with the connection gone, every call but a read answered JSON-RPC -32603,
    resumes included, until the gateway was restarted."""
    proxy, opener = proxied
    ledger = opener()
    harness = open_harness(
        ledger,
        tmp_path,
        policy='@approval("required") permit(principal, action, resource) '
        'when { resource.id == "publish" };\npermit(principal, action, resource) '
        'when { resource.id == "lookup" };',
    )
    runs: list[str] = []
    register_tools(harness, runs)
    server, caller = gateway(harness)
    async with Client(server.lowlevel) as client:
        pending = await client.call_tool("publish", {"text": "p"})
        assert category(pending) == "approval_required"
        assert pending.structured_content is not None
        approval_id = pending.structured_content["execution_meta"]["approval_id"]
        harness.approvals.decide(approval_id, "approve", by="editor")
        proxy.cut()
        assert category(await client.call_tool("publish", {"text": "q"})) == "unavailable"
        assert category(await client.call_tool(RESUME_TOOL, {"approval_id": approval_id})) == (
            "unavailable"
        )
        caller["now"] = BOB
        read = await client.call_tool("lookup", {"text": "bob"})
        assert not read.is_error
        proxy.restore()
        flushed(harness)
        caller["now"] = ALICE
        resumed = await client.call_tool(RESUME_TOOL, {"approval_id": approval_id})
        assert not resumed.is_error, resumed
    assert runs == ["p"]
    rows = {(r.principal_id, r.tool, r.status) for r in ledger.query()}
    assert rows == {
        ("alice", "publish", "succeeded"),
        ("alice", "publish", "failed"),
        ("bob", "lookup", "succeeded"),
    }
    harness.close()
