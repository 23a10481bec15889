"""Operating the ledger as an operator would: reconcile while calls keep arriving, export and
prune under a retention policy, read it from the CLI when clients have put terminal escapes
in ids and names — and a SIGKILL loop over HTTP. Nothing unsettled is ever dropped, no scan
holds the ledger, nothing a client wrote can forge an audit line."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkeeper import Principal, Proposal, ToolContext, ToolContract
from toolkeeper.artifacts.store import stored_aside
from toolkeeper.cli import main
from toolkeeper.cli.escaping import visible
from toolkeeper.ledger import (
    ApprovalRecord,
    ApprovalStatus,
    InvocationRecord,
    LedgerEvent,
    RecordState,
)
from toolkeeper.ledger.retention import (
    ArchiveEntry,
    RetentionPolicy,
    apply_policy,
    entry_from,
    entry_json,
    export,
    prune_archived,
    read_archive,
)
from toolkeeper.ledger.sql import SQLLedger
from toolkeeper.ledger.sqlite import SQLiteLedger
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.recording import OWNER

DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")
ROOT = Path(__file__).resolve().parents[2]
ALLOW = CedarPolicyEngine(policies="permit(principal, action, resource);", include_defaults=False)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SQLLedger, str]]:
    """A fresh ledger, and for PostgreSQL the schema it lives in ('' for SQLite)."""
    if request.param == "sqlite":
        ledger: SQLLedger = SQLiteLedger(tmp_path / "ledger.db")
        yield ledger, ""
        ledger.close()
        return
    if not DSN:
        pytest.skip("TOOLKEEPER_TEST_POSTGRES_DSN is not set; .ci/run sets it to the local server")
    import psycopg

    from toolkeeper.ledger.postgres import PostgresLedger

    schema = f"tk_ops_{uuid.uuid4().hex[:12]}"
    ledger = PostgresLedger(DSN, schema=schema)
    yield ledger, schema
    ledger.close()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def row(request_id: str, **fields: Any) -> InvocationRecord:
    base = InvocationRecord(
        request_id=request_id,
        call_id="c-" + request_id,
        tool="write_x",
        principal_id="alice",
        tenant="acme",
        state=RecordState.COMPLETED,
        contract_ref="write_x@1.0.0",
        arguments={"key": request_id},
        status="succeeded",
        effect_state="committed",
    )
    return replace(base, **fields)


def unknown(request_id: str, created_at: float) -> InvocationRecord:
    return row(
        request_id,
        status="effect_unknown",
        effect_state="unknown",
        created_at=created_at,
        updated_at=created_at,
    )


def write_x_harness(ledger: SQLLedger, home: Path, verifier: Any) -> Harness:
    harness = Harness(home=home, ledger=ledger, policy=ALLOW, recover=False)
    contract = ToolContract(
        id="write_x",
        version="1.0.0",
        description="Write x.",
        side_effect="committing",
        idempotency="keyed",
        verifier="read_x",
        input_schema={"type": "object", "properties": {"key": {"type": "string"}}},
    )
    harness.register_verifier("read_x", verifier)
    harness.register(contract, executor=lambda key: {"key": key})
    return harness


# -- reconciliation -------------------------------------------------------------------------


def test_reconcile_pages_so_a_write_made_mid_scan_lands_and_is_seen_by_the_same_pass(
    backend: tuple[SQLLedger, str], tmp_path: Path
) -> None:
    """Over 450 unknown rows (five pages), a write from another thread completes while the
    pass is on its first page, and the row it wrote is settled by that same pass: the scan
    is paged, never one read holding the ledger."""
    ledger, _ = backend
    base = time.time() - 3600
    for start in range(0, 450, 150):
        batch = [unknown(f"req_{i:04d}", base + i) for i in range(start, start + 150)]
        for record in batch:
            ledger.complete(record, [])
    landed = threading.Event()

    def write_mid_scan() -> None:
        ledger.complete(unknown("req_mid_scan", base + 400.5), [])
        landed.set()

    def read_x(arguments: dict[str, Any], context: ToolContext) -> bool:
        if context.request_id == "req_0000":
            writer = threading.Thread(target=write_mid_scan)
            writer.start()
            writer.join(timeout=60)
            assert landed.is_set(), "a write waited behind the reconciliation"
        return True

    harness = write_x_harness(ledger, tmp_path, read_x)
    report = harness.reconcile_sync()
    settled = {r.request_id for r in report.settled}
    assert "req_mid_scan" in settled
    assert len(settled) == 451 and report.unsettled == ()
    assert ledger.get("req_mid_scan").status == "succeeded"  # type: ignore[union-attr]


def test_a_pass_never_recovers_a_call_this_process_or_a_live_replica_is_running(
    backend: tuple[SQLLedger, str], tmp_path: Path
) -> None:
    """An interval pass runs beside live calls: this process's own intents, and a fresh one
    another host wrote, stay in flight; another host's intent older than the horizon, and one
    an earlier process with this process's host:pid left (a container's pid 1), are
    recovered."""
    ledger, _ = backend
    now = time.time()
    ledger.record_intent(row("req_mine", state=RecordState.INTENT, owner=OWNER), [])
    ledger.record_intent(row("req_peer", state=RecordState.INTENT, owner="peer-host:7"), [])
    old = now - 7200
    for request_id, owner in (("req_gone", "peer-host:8"), ("req_earlier", OWNER)):
        intent = row(
            request_id, state=RecordState.INTENT, owner=owner, created_at=old, updated_at=old
        )
        ledger.record_intent(intent, [])
    harness = write_x_harness(ledger, tmp_path, lambda arguments, context: None)
    report = harness.reconcile_sync()
    assert {r.request_id for r in report.recovered} == {"req_gone", "req_earlier"}
    assert report.running == 2
    for request_id in ("req_mine", "req_peer"):
        assert ledger.get(request_id).state is RecordState.INTENT  # type: ignore[union-attr]
    reasons = {u.request_id: u.reason for u in report.unsettled}
    assert reasons == {
        "req_gone": "the read-back could not tell",
        "req_earlier": "the read-back could not tell",
    }


def test_a_stale_settlement_never_overwrites_a_newer_outcome_nor_takes_back_a_key(
    backend: tuple[SQLLedger, str],
) -> None:
    """Two reconcilers read the same unknown row; the first settles it (not committed, so
    the key is released) and a retry takes the key; the second's settlement, from its stale
    copy, must change nothing."""
    ledger, _ = backend
    first = replace(unknown("req_old", time.time() - 60), idempotency_key="k-1")
    ledger.complete(first, [])
    stale = ledger.get("req_old")
    assert stale is not None
    failed = replace(stale, status="failed", effect_state="not_committed", updated_at=time.time())
    assert ledger.settle(stale, failed, [LedgerEvent("req_old", "reconcile", "failed")])
    retry = row("req_new", state=RecordState.INTENT, idempotency_key="k-1", owner=OWNER)
    assert ledger.record_intent(retry, []) is None
    late = replace(stale, status="succeeded", effect_state="committed", updated_at=time.time())
    assert not ledger.settle(stale, late, [])
    assert ledger.get("req_old").status == "failed"  # type: ignore[union-attr]
    holder = ledger.get("req_new")
    assert holder is not None and holder.idempotency_key == "k-1"
    assert [e.kind for e in ledger.events("req_old")] == ["failed"]


# -- retention ------------------------------------------------------------------------------

KINDS = ("settled", "failed", "intent", "unknown", "pending")


def kind_row(request_id: str, kind: str, created_at: float) -> InvocationRecord:
    fields: dict[str, Any] = {
        "settled": {},
        "failed": {"status": "failed", "effect_state": "not_committed"},
        "intent": {"state": RecordState.INTENT, "status": None, "effect_state": None},
        "unknown": {"status": "effect_unknown", "effect_state": "unknown"},
        "pending": {
            "state": RecordState.PENDING_APPROVAL,
            "status": "pending_approval",
            "effect_state": "none",
            "approval_id": "apr_" + request_id,
        },
    }[kind]
    return row(request_id, created_at=created_at, updated_at=created_at, **fields)


def approval_for(record: InvocationRecord, status: ApprovalStatus) -> ApprovalRecord:
    return ApprovalRecord(
        approval_id=record.approval_id or "apr_" + record.request_id,
        request_id=record.request_id,
        call_id=record.call_id,
        contract_ref="write_x@1.0.0",
        implementation_digest="sha256:0",
        arguments={"key": record.request_id},
        arguments_digest="sha256:1",
        principal={"id": "alice", "tenant": "acme", "capabilities": []},
        session=None,
        parent_request_id=None,
        idempotency_key=None,
        resource_versions={},
        account="alice asks to write x",
        status=status,
        snapshot=b"\x00\xffsnapshot",
    )


def store(ledger: SQLLedger, kinds: list[str], ages: list[float]) -> list[InvocationRecord]:
    tag, now = uuid.uuid4().hex[:8], time.time()
    rows = []
    for n, (kind, age) in enumerate(zip(kinds, ages, strict=False)):
        record = kind_row(f"req_{tag}_{n}", kind, now - age)
        events = [LedgerEvent(record.request_id, "dispatch", "intent", {"n": n})]
        if record.state is RecordState.INTENT:
            ledger.record_intent(record, events)
        else:
            ledger.complete(record, events)
        if record.approval_id:
            ledger.save_approval(approval_for(record, ApprovalStatus.PENDING))
        rows.append(record)
    return rows


def settled(record: InvocationRecord) -> bool:
    return record.state is RecordState.COMPLETED and record.effect_state != "unknown"


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=12),
    ages=st.lists(st.floats(0, 10 * 86400), min_size=12, max_size=12),
    max_rows=st.integers(0, 12),
)
def test_retention_never_drops_an_intent_or_an_unsettled_row(
    backend: tuple[SQLLedger, str], kinds: list[str], ages: list[float], max_rows: int
) -> None:
    ledger, _ = backend
    rows = store(ledger, kinds, ages)
    apply_policy(ledger, RetentionPolicy(max_age=86400.0, max_rows=max_rows))
    for record in rows:
        kept = ledger.get(record.request_id)
        if not settled(record):
            assert kept == record, f"{record.state} {record.status} row was dropped"
            assert ledger.events(record.request_id), "its events were dropped"
        elif time.time() - record.created_at > 86400 + 60:
            assert kept is None, "a settled row past max_age was kept"
    assert ledger.count() <= max(
        max_rows, sum(1 for r in ledger.scan(limit=10**6) if not settled(r))
    )
    for record in rows:
        if record.approval_id:
            assert ledger.get_approval(record.approval_id) is not None


def test_export_round_trips_and_prune_deletes_only_what_it_holds_unchanged(
    backend: tuple[SQLLedger, str], tmp_path: Path
) -> None:
    ledger, _ = backend
    rows = store(ledger, list(KINDS) * 2, [86400.0 * (n + 1) for n in range(10)])
    decided = replace(rows[1], approval_id="apr_decided")
    ledger.complete(decided, [])
    ledger.save_approval(approval_for(decided, ApprovalStatus.CONSUMED))
    current = [rows[0], decided, *rows[2:]]
    archive = tmp_path / "ledger.jsonl"
    assert export(ledger, archive) == len(rows)
    entries = {e.record.request_id: e for e in read_archive(archive)}
    for record in current:
        entry = entries[record.request_id]
        assert entry.record == ledger.get(record.request_id)
        assert entry.events == ledger.events(record.request_id)
        if record.approval_id:
            assert entry.approval == ledger.get_approval(record.approval_id)
    changed = replace(rows[5], updated_at=time.time())  # settled, re-written after the export
    ledger.complete(changed, [])
    pruned = prune_archived(ledger, archive)
    gone = {r.request_id for r in current if ledger.get(r.request_id) is None}
    expected = {r.request_id for r in current if settled(r)} - {changed.request_id}
    assert gone == expected and pruned.pruned == len(expected)
    assert ledger.get(changed.request_id) == changed
    assert ledger.get_approval("apr_decided") is None  # a decided approval goes with its call
    for record in rows:
        if record.approval_id:  # a pending approval stays with its pending call
            assert ledger.get_approval(record.approval_id) is not None
    assert ledger.events_for(sorted(gone)) == {request_id: [] for request_id in sorted(gone)}


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00")),
    arguments=st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
        max_leaves=8,
    ),
    snapshot=st.none() | st.binary(min_size=1, max_size=40),
)
def test_an_archive_line_round_trips_any_record(
    text: str, arguments: Any, snapshot: bytes | None
) -> None:
    record = row(text or "r", call_id=text, tool=text, principal_id=text, arguments=arguments)
    events = [LedgerEvent(record.request_id, "check", text, {"value": arguments}, 12.5)]
    approval = replace(approval_for(record, ApprovalStatus.DENIED), snapshot=snapshot)
    entry = ArchiveEntry(record, events, approval)
    line = json.dumps(entry_json(entry), default=str)
    assert entry_from(json.loads(line)) == entry


def test_large_arguments_are_an_artifact_the_row_references(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    def read_x(arguments: dict[str, Any], context: ToolContext) -> bool:
        seen.append(arguments)
        return True

    harness = write_x_harness(SQLiteLedger(tmp_path / "ledger.db"), tmp_path, read_x)
    harness.argument_threshold = 1024
    big = {"key": "k" * 5000}
    envelope = harness.invoke_sync(Proposal("c1", "write_x", big), principal=Principal("alice"))
    record = harness.ledger.get(envelope.execution_meta.request_id)  # type: ignore[union-attr]
    ref = stored_aside(record.arguments)  # type: ignore[union-attr]
    assert ref is not None, "a 5 KB argument object was written into the row"
    blob = harness.artifacts.get(ref)
    assert json.loads(blob) == big
    assert ref.digest == "sha256:" + hashlib.sha256(blob).hexdigest()
    assert seen == [big]  # the verifier read back with the arguments, not the reference
    small = harness.invoke_sync(Proposal("c2", "write_x", {"key": "k"}), principal=Principal("a"))
    inline = harness.ledger.get(small.execution_meta.request_id)  # type: ignore[union-attr]
    assert inline.arguments == {"key": "k"}  # type: ignore[union-attr]
    harness.close()


# -- indexes --------------------------------------------------------------------------------

FILTERS: list[dict[str, Any]] = [
    {"status": "failed"},
    {"tool": "write_x"},
    {"tool": "write_x@1.0.0"},
    {"principal": "alice"},
    {"effect_state": "unknown"},
    {"since": 1000.0},
    {"status": "failed", "since": 1000.0},
]
SCANS: list[dict[str, Any]] = [
    {"state": RecordState.INTENT, "after": (1.0, "req_a")},  # recovery
    {"effect_state": "unknown", "after": (1.0, "req_a"), "before": 2e9},  # read-back
    {"after": (1.0, "req_a"), "before": 2e9},  # export
    {"state": RecordState.COMPLETED, "before": 2e9},  # retention
]


def plans(ledger: SQLLedger, schema: str, statements: list[tuple[str, list[Any]]]) -> list[str]:
    if not schema:
        conn = ledger._conn  # the ledger's own connection: the plan its queries get
        return [
            "\n".join(r[3] for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
            for sql, params in statements
        ]
    import psycopg

    assert DSN is not None
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute("SET enable_seqscan = off")  # a usable index must then be chosen
        return [
            "\n".join(r[0] for r in conn.execute(f"EXPLAIN {sql.replace('?', '%s')}", params))
            for sql, params in statements
        ]


def test_every_ledger_list_filter_and_every_scan_runs_on_an_index(
    backend: tuple[SQLLedger, str],
) -> None:
    ledger, schema = backend
    statements = [ledger.query_statement(**f) for f in FILTERS]
    statements += [ledger.scan_statement(**s) for s in SCANS]
    for (sql, _), plan in zip(statements, plans(ledger, schema, statements), strict=True):
        if schema:
            assert "Seq Scan" not in plan and "Index" in plan, f"{sql}\n{plan}"
        else:
            assert "SCAN invocations" not in plan and "USING INDEX" in plan, f"{sql}\n{plan}"


def test_the_tool_filter_matches_every_version_and_nothing_else(
    backend: tuple[SQLLedger, str],
) -> None:
    ledger, _ = backend
    for request_id, ref, tool in (
        ("a", "write_x@1.0.0", "write_x"),
        ("b", "write_x@2.0.0", "wx"),
        ("c", "write_xy@1.0.0", "write_xy"),
        ("d", "write_%@1.0.0", "write_%"),
    ):
        ledger.complete(row(request_id, contract_ref=ref, tool=tool), [])
    assert {r.request_id for r in ledger.query(tool="write_x")} == {"a", "b"}
    assert {r.request_id for r in ledger.query(tool="write_x@2.0.0")} == {"b"}
    assert {r.request_id for r in ledger.query(tool="write_%")} == {"d"}


# -- the CLI --------------------------------------------------------------------------------

HOSTILE = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "\n",
                "\r",
                "\x1b[2J",
                "\x1b]0;x\x07",
                "\x85",
                "\u202e",
                "\u2066",
                "\u2028",
                "\\",
                "\t",
                "\x7f",
                "\u200b",
                "\ufeff",
                "\x00",
            ]
        ),
        st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
    ),
    min_size=1,
    max_size=12,
).map("".join)
"""Ids and names a client could send: terminal escapes, bidi overrides, line breaks."""


def printed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    assert main(list(argv)) == 0
    return capsys.readouterr().out.split("\n")


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(request_id=HOSTILE, tool=HOSTILE, principal=HOSTILE, reason=HOSTILE)
def test_no_control_character_from_the_ledger_reaches_the_terminal(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    request_id: str,
    tool: str,
    principal: str,
    reason: str,
) -> None:
    home = tmp_path_factory.mktemp("home")
    ledger = SQLiteLedger(home / "ledger.db")
    record = row(request_id, call_id=tool, tool=tool, contract_ref=None, principal_id=principal)
    ledger.complete(record, [LedgerEvent(request_id, reason, reason, {"why": reason})])
    approval = replace(
        approval_for(record, ApprovalStatus.PENDING),
        approval_id=request_id,
        contract_ref=tool,
        principal={"id": principal, "tenant": "acme", "capabilities": []},
        account=reason,
    )
    ledger.save_approval(approval)
    # What the ledger's columns hold (a NUL or lone surrogate is stored as its escape) is
    # what is shown; an approval's body is JSON and keeps the text as it was.
    stored = ledger.get(request_id)
    assert stored is not None
    ledger.close()
    listing = printed(capsys, "ledger", "list", "--home", str(home))
    shown = printed(capsys, "ledger", "show", request_id, "--home", str(home))
    approvals = printed(capsys, "approvals", "list", "--home", str(home))
    approval_shown = printed(capsys, "approvals", "show", request_id, "--home", str(home))
    assert len(listing) == 3 and len(approvals) == 3  # one line each, the count, the end
    for line in [*listing, *shown, *approvals, *approval_shown]:
        assert line.isprintable(), f"raw control character in {line!r}"
    assert visible(stored.request_id) in listing[0] and visible(stored.tool) in listing[0]
    assert visible(principal) in approvals[0] and visible(reason) in approval_shown[1]


def test_visible_escapes_are_unambiguous() -> None:
    assert visible("a\nb") == "a\\nb" and visible("a\\nb") == "a\\\\nb"
    assert visible("\x1b[31m") == "\\x1b[31m" and visible("\u202egnp.exe") == "\\u202egnp.exe"
    assert visible("café ✓") == "café ✓"


def test_reconcile_from_the_command_line_recovers_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a configuration nothing can be read back: the dead process's intent becomes
    effect_unknown and is reported; with the gateway's configuration its tool reads back."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    home = tmp_path / "home"
    ledger = SQLiteLedger(home / "ledger.db")
    intent = row(
        "req_dead",
        state=RecordState.INTENT,
        contract_ref="mark@1.0.0",
        tool="mark",
        arguments={"name": "x"},
        owner=f"{socket.gethostname()}:{dead.pid}",
    )
    ledger.record_intent(intent, [])
    ledger.close()
    assert main(["ledger", "reconcile", "--home", str(home), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["recovered"], report["unknown"], report["succeeded"]) == (1, 1, 0)
    assert report["unsettled"][0]["request_id"] == "req_dead"
    (tmp_path / "marks.py").write_text(MARKS.format(marks=str(tmp_path / "marks.txt")))
    (tmp_path / "marks.txt").write_text("x\n")
    config = tmp_path / "toolkeeper.toml"
    config.write_text(f'home = "{home}"\ntools = ["marks"]\n')
    assert main(["ledger", "reconcile", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "settled  req_dead  succeeded" in out and "1 succeeded" in out
    again = SQLiteLedger(home / "ledger.db")
    assert again.get("req_dead").effect_state == "committed"  # type: ignore[union-attr]
    again.close()


MARKS = '''
from pathlib import Path
from toolkeeper import ToolContext, tool

MARKS = Path({marks!r})


@tool(version="1.0.0", side_effect="committing", idempotency="keyed", verifier="marked")
def mark(name: str) -> dict[str, str]:
    """Mark a name."""
    with MARKS.open("a") as out:
        out.write(name + "\\n")
    return {{"name": name}}


def marked(arguments: dict[str, str], context: ToolContext) -> bool:
    return arguments["name"] in MARKS.read_text().splitlines()
'''


# -- SIGKILL over HTTP ----------------------------------------------------------------------


def test_the_sigkill_loop_loses_and_doubles_nothing(tmp_path: Path) -> None:
    """scripts/sigkill_loop.py, briefly: the gateway killed once during keyed calls,
    restarted, reconciled; every call answered, every effect applied exactly once."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "sigkill_loop.py"),
            "--calls",
            "30",
            "--min-gap",
            "0.02",
            "--max-gap",
            "0.1",
            "--kills",
            "1",
            "--workers",
            "2",
            "--json",
            "--workdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert figures["kills"] == 1
    assert figures["lost_effects"] == figures["duplicate_effects"] == 0
    assert figures["acknowledged"] == figures["effects"] == 30
    assert figures["effect_unknown_left"] == 0
    assert "ledger reconciliation:" in (tmp_path / "gateway.log").read_text()
