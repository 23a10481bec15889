"""Approvals under revocation, crashes and concurrency (issue 9, items 4 and 5).

A resume is judged for the principal as it is now; taking an approval up and writing the
call's intent are one transaction, so no crash leaves an approval consumed without its call;
and every resume of one approval — in one process or across replicas sharing a ledger —
answers with the call's final outcome while the effect runs once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from approvals_child import ALICE, PUBLISH, WRITES_NEED_APPROVAL, harness_for, open_ledger
from mcp import Client

from toolkeeper import Principal, Proposal, ResultEnvelope, Status
from toolkeeper.errors import LedgerError
from toolkeeper.gateway.app import open_gateway
from toolkeeper.gateway.config.settings import load_config
from toolkeeper.gateway.results import RESUME_TOOL
from toolkeeper.ledger import ApprovalStatus
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.envelope import ErrorCategory
from toolkeeper.runtime.harness import Harness

DSN = os.environ.get("TOOLKEEPER_TEST_POSTGRES_DSN")
CHILD = Path(__file__).with_name("approvals_child.py")


@dataclass(frozen=True)
class Store:
    """One ledger store that several harnesses open, as replicas of one gateway would."""

    spec: str
    """A SQLite path, or ``postgresql://...#schema`` (what `approvals_child.open_ledger` reads)."""
    execute: Callable[[str], None]
    """Run raw SQL on the store: the database faults operators meet, not a mocked ledger."""
    opened: list[Harness] = field(default_factory=list)
    """Harnesses on the store, closed before it is dropped (a failed test leaves them open)."""

    def keep(self, harness: Harness) -> Harness:
        self.opened.append(harness)
        return harness

    def close_all(self) -> None:
        for harness in self.opened:
            with contextlib.suppress(Exception):
                harness.close()


def _sqlite_execute(path: Path) -> Callable[[str], None]:
    def execute(sql: str) -> None:
        import sqlite3

        with sqlite3.connect(path) as conn:
            conn.executescript(sql)

    return execute


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        sqlite_store = Store(str(path), _sqlite_execute(path))
        yield sqlite_store
        sqlite_store.close_all()
        return
    if not DSN:
        pytest.skip("TOOLKEEPER_TEST_POSTGRES_DSN is not set; .ci/run sets it to the local server")
    import psycopg

    schema = f"tk_apr_{uuid.uuid4().hex[:12]}"

    def execute(sql: str) -> None:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(sql)  # type: ignore[arg-type]

    postgres_store = Store(f"{DSN}#{schema}", execute)
    yield postgres_store
    postgres_store.close_all()
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]


def replica(store: Store, tmp_path: Path, executor: Callable[..., Any], **options: Any) -> Harness:
    policy = CedarPolicyEngine(policies=WRITES_NEED_APPROVAL, include_defaults=False)
    home = tmp_path / f"replica-{uuid.uuid4().hex[:8]}"
    harness = Harness(home=home, ledger=open_ledger(store.spec), policy=policy, **options)
    harness.register(PUBLISH, executor=executor)
    return store.keep(harness)


def approved(harness: Harness, doc: str = "d", decision: str = "approve") -> str:
    """Propose a publish as alice and decide its approval; returns the approval id."""
    pending = harness.invoke_sync(Proposal(f"c-{doc}", "publish", {"doc": doc}), principal=ALICE)
    assert pending.status is Status.PENDING_APPROVAL, pending.error
    assert pending.execution_meta is not None and pending.execution_meta.approval_id
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, decision, by="editor")  # type: ignore[arg-type]
    return approval_id


def request_of(harness: Harness, approval_id: str) -> str:
    return harness.approvals.get(approval_id).request_id


def stage_events(harness: Harness, approval_id: str, stage: str) -> list[str]:
    events = harness.ledger.events(request_of(harness, approval_id))
    return [e.kind for e in events if e.stage == stage]


# -- item 4: the principal as it is now ----------------------------------------------------


def test_a_revoked_capability_refuses_the_resume_for_good(tmp_path: Path) -> None:
    """Defect: a principal that lost the capability a tool requires got `stale`, with the
    advice to propose the call again (which cannot succeed). It is a denial: the principal
    may no longer use the tool, and the refusal stands when the capability comes back."""
    runs: list[str] = []
    harness = Harness(
        home=tmp_path,
        policy=CedarPolicyEngine(policies=WRITES_NEED_APPROVAL, include_defaults=False),
    )
    harness.register(PUBLISH, executor=lambda doc: runs.append(doc) or {"doc": doc})
    approval_id = approved(harness)
    revoked = Principal("alice", "acme", frozenset())
    refused = harness.resume_sync(approval_id, principal=revoked)
    assert refused.status is Status.REJECTED and refused.error is not None
    assert refused.error.category is ErrorCategory.POLICY_DENIED
    assert "no longer available to alice" in refused.error.message
    assert harness.approvals.get(approval_id).status is ApprovalStatus.CONSUMED
    assert harness.resume_sync(approval_id, principal=ALICE) == refused
    assert runs == []
    harness.close()


def test_a_resume_names_the_principal_as_it_is_now(tmp_path: Path) -> None:
    """Defect: `resume(approval_id)` without a principal judged the call for the principal
    stored with the approval — its capabilities as they were at proposal time — so a
    revoked capability still ran the committing call. The caller must say who resumes."""
    runs: list[str] = []
    harness = Harness(
        home=tmp_path,
        policy=CedarPolicyEngine(policies=WRITES_NEED_APPROVAL, include_defaults=False),
    )
    harness.register(PUBLISH, executor=lambda doc: runs.append(doc) or {"doc": doc})
    approval_id = approved(harness)
    with pytest.raises(TypeError, match="principal"):
        harness.resume_sync(approval_id)  # type: ignore[call-arg]
    assert runs == []
    assert harness.approvals.get(approval_id).status is ApprovalStatus.APPROVED
    harness.close()


GATEWAY_TOOLS = '''
from pathlib import Path

from toolkeeper import tool

EFFECTS = Path(__file__).with_name("effects.txt")


@tool(version="1.0.0", side_effect="committing", required_capabilities=["docs"])
def publish_doc(doc: str) -> dict[str, str]:
    """Publish a document.

    Args:
        doc: The document.
    """
    with EFFECTS.open("a") as fh:
        fh.write(doc + "\\n")
    return {"doc": doc}
'''

GATEWAY_CONFIG = """
home = "{home}"
tools = ["revocation_tools"]
stdio_principal = "alice"

[principals.alice]
tenant = "acme"
capabilities = {capabilities}
"""


@pytest.mark.anyio
async def test_the_gateway_resumes_for_the_configured_principal_as_it_is_now(
    tmp_path: Path,
) -> None:
    """An operator revokes alice's `docs` capability in the configuration and restarts the
    gateway: her earlier approved call is refused on `toolkeeper.resume` and never runs."""
    (tmp_path / "revocation_tools.py").write_text(GATEWAY_TOOLS)
    config = tmp_path / "toolkeeper.toml"
    home = tmp_path / "home"
    config.write_text(GATEWAY_CONFIG.format(home=home, capabilities='["docs"]'))
    async with open_gateway(load_config(config), transport="stdio") as server:
        async with Client(server.lowlevel) as client:
            pending = await client.call_tool("publish_doc", {"doc": "d"})
        structured: Any = pending.structured_content
        assert structured["status"] == "pending_approval"
        approval_id = structured["execution_meta"]["approval_id"]
        server.harness.approvals.decide(approval_id, "approve", by="editor")
    config.write_text(GATEWAY_CONFIG.format(home=home, capabilities="[]"))
    async with (
        open_gateway(load_config(config), transport="stdio") as server,
        Client(server.lowlevel) as client,
    ):
        refused = await client.call_tool(RESUME_TOOL, {"approval_id": approval_id})
    assert refused.is_error
    answer: Any = refused.structured_content
    assert answer["error"]["category"] == "policy_denied"
    assert not (tmp_path / "effects.txt").exists()


# -- item 5: a crash between taking the approval up and the intent -------------------------


def run_child(store: Store, approval_id: str, effects: Path, kill: str) -> None:
    child = subprocess.run(
        [sys.executable, str(CHILD), store.spec, approval_id, str(effects), kill],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr  # SIGKILL, where it was told to die


def test_a_replica_killed_during_a_resume_loses_no_approved_call(
    store: Store, tmp_path: Path
) -> None:
    """Defect: resume marked the approval consumed in its own transaction before the call
    reached its intent; a replica killed in between left it consumed with no intent, and
    every later resume answered that the call was still running — the approved call was lost
    for good. Now a kill before the intent leaves the approval to resume, and a kill after
    the effect leaves a recorded unknown effect that is never run again."""
    effects = tmp_path / "effects.txt"
    proposer = store.keep(harness_for(store.spec, tmp_path / "proposer", effects, None))
    early = approved(proposer, "early")
    late = approved(proposer, "late")
    proposer.close()
    run_child(store, early, effects, "before_intent")
    run_child(store, late, effects, "after_effect")
    assert effects.read_text().splitlines() == ["late"]

    # The survivor opens on the same store and recovers what the dead child left.
    survivor = store.keep(harness_for(store.spec, tmp_path / "survivor", effects, None))
    done = survivor.resume_sync(early, principal=ALICE)
    assert done.status is Status.SUCCEEDED, done.error
    unknown = survivor.resume_sync(late, principal=ALICE)
    assert unknown.status is Status.EFFECT_UNKNOWN
    assert survivor.resume_sync(early, principal=ALICE) == done
    assert survivor.resume_sync(late, principal=ALICE) == unknown
    assert sorted(effects.read_text().splitlines()) == ["early", "late"]
    assert survivor.approvals.get(early).status is ApprovalStatus.CONSUMED
    survivor.close()


FAIL_INTENTS = {
    "sqlite": """
        CREATE TRIGGER fail_intents BEFORE INSERT ON invocations WHEN NEW.state = 'intent'
        BEGIN SELECT RAISE(ABORT, 'injected: the intent cannot be written'); END;
    """,
    "postgres": """
        CREATE FUNCTION fail_intents() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.state = 'intent' THEN
                RAISE EXCEPTION 'injected: the intent cannot be written';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER fail_intents BEFORE INSERT OR UPDATE ON invocations
        FOR EACH ROW EXECUTE FUNCTION fail_intents();
    """,
}
HEAL = {
    "sqlite": "DROP TRIGGER fail_intents;",
    "postgres": "DROP TRIGGER fail_intents ON invocations; DROP FUNCTION fail_intents();",
}


def test_an_intent_the_database_refuses_leaves_the_approval_to_resume(
    store: Store, tmp_path: Path
) -> None:
    """Defect: the approval was consumed in a transaction of its own, so a database that
    refused the intent afterwards left it consumed with no call behind it."""
    runs: list[str] = []
    harness = replica(store, tmp_path, lambda doc: runs.append(doc) or {"doc": doc})
    approval_id = approved(harness)
    kind = "postgres" if store.spec.startswith("postgresql://") else "sqlite"
    store.execute(FAIL_INTENTS[kind])
    try:
        refused = harness.resume_sync(approval_id, principal=ALICE)
    except LedgerError:
        pass  # how the fault reaches the caller is the ledger's concern; the approval is ours
    else:
        assert refused.status is not Status.SUCCEEDED
    assert runs == []
    assert harness.approvals.get(approval_id).status is ApprovalStatus.APPROVED
    store.execute(HEAL[kind])
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.SUCCEEDED, done.error
    assert runs == ["d"]
    harness.close()


def test_a_resume_stopped_for_a_passing_reason_can_be_resumed_again(tmp_path: Path) -> None:
    """Defect: a resume whose resource-version reader failed once (a retryable `unavailable`,
    nothing run) settled the call for good: every later resume repeated the failure."""
    runs: list[str] = []
    reads: list[int] = []

    def versions(arguments: dict[str, Any], context: Any) -> dict[str, str]:
        reads.append(1)
        if len(reads) == 2:  # the first resume's read: the target is briefly unreachable
            raise ConnectionError("the document store is restarting")
        return {"doc": "v1"}

    harness = Harness(
        home=tmp_path,
        policy=CedarPolicyEngine(policies=WRITES_NEED_APPROVAL, include_defaults=False),
    )
    harness.register(
        PUBLISH, executor=lambda doc: runs.append(doc) or {"doc": doc}, resource_version=versions
    )
    approval_id = approved(harness)
    failed = harness.resume_sync(approval_id, principal=ALICE)
    assert failed.status is Status.FAILED and failed.error is not None
    assert failed.error.retryable and failed.error.category is ErrorCategory.UNAVAILABLE
    done = harness.resume_sync(approval_id, principal=ALICE)
    assert done.status is Status.SUCCEEDED, done.error
    assert runs == ["d"]
    harness.close()


# -- item 5: concurrent resumes ------------------------------------------------------------


def test_concurrent_resumes_in_one_replica_all_answer_with_the_outcome(
    store: Store, tmp_path: Path
) -> None:
    """Defect: of concurrent resumes, the ones that lost the claim answered `pending_approval`
    or "still running" while the one effect ran; they now read its outcome. Only a call that
    outlasts the resume's bounded wait is answered as still running — retryable, never as
    waiting for approval — and a later resume reads the outcome."""
    runs: list[str] = []
    gate = asyncio.Event()

    async def publish(doc: str) -> dict[str, str]:
        runs.append(doc)
        if doc == "held":
            await gate.wait()
        await asyncio.sleep(0.05)
        return {"doc": doc}

    harness = replica(store, tmp_path, publish)
    approval_id = approved(harness)

    async def together() -> list[ResultEnvelope]:
        return list(
            await asyncio.gather(*(harness.resume(approval_id, principal=ALICE) for _ in range(8)))
        )

    answers = asyncio.run(together())
    assert runs == ["d"]
    assert {a.status for a in answers} == {Status.SUCCEEDED}
    assert all(a == answers[0] for a in answers)
    assert stage_events(harness, approval_id, "approve") == ["pending", "approved"]
    assert stage_events(harness, approval_id, "record") == ["succeeded"]
    harness.close()

    impatient = replica(store, tmp_path, publish, resume_wait=0.0)
    held = approved(impatient, "held")

    async def outwaited() -> tuple[ResultEnvelope, ResultEnvelope]:
        first = asyncio.ensure_future(impatient.resume(held, principal=ALICE))
        while "held" not in runs:
            await asyncio.sleep(0.01)
        second = await impatient.resume(held, principal=ALICE)
        gate.set()
        return await first, second

    winner, running = asyncio.run(outwaited())
    assert winner.status is Status.SUCCEEDED
    assert running.status is Status.EFFECT_UNKNOWN and running.error is not None
    assert running.error.retryable and "still running" in running.error.message
    assert impatient.resume_sync(held, principal=ALICE) == winner
    assert runs == ["d", "held"]
    impatient.close()


def test_concurrent_resumes_across_two_replicas_all_answer_with_the_outcome(
    store: Store, tmp_path: Path
) -> None:
    """Two harnesses on one ledger (one SQLite file, one PostgreSQL schema) resume the same
    approval together: the effect runs once and every caller gets its outcome."""
    runs: list[str] = []

    async def publish(doc: str) -> dict[str, str]:
        runs.append(doc)
        await asyncio.sleep(0.1)
        return {"doc": doc}

    a = replica(store, tmp_path, publish)
    b = replica(store, tmp_path, publish)
    approval_id = approved(a)

    async def together() -> list[ResultEnvelope]:
        resumes = [r.resume(approval_id, principal=ALICE) for r in (a, b) * 4]
        return list(await asyncio.gather(*resumes))

    answers = asyncio.run(together())
    assert runs == ["d"]
    assert {a.status for a in answers} == {Status.SUCCEEDED}
    assert all(answer == answers[0] for answer in answers)
    assert stage_events(b, approval_id, "record") == ["succeeded"]
    a.close()
    b.close()


def test_concurrent_resumes_of_a_denied_approval_record_one_outcome(
    store: Store, tmp_path: Path
) -> None:
    """Defect: every resume of a denied approval re-ran the re-check and wrote its own
    events and final row, so concurrent resumes duplicated the call's trail."""
    runs: list[str] = []
    a = replica(store, tmp_path, lambda doc: runs.append(doc) or {"doc": doc})
    b = replica(store, tmp_path, lambda doc: runs.append(doc) or {"doc": doc})
    approval_id = approved(a, decision="deny")

    async def together() -> list[ResultEnvelope]:
        resumes = [r.resume(approval_id, principal=ALICE) for r in (a, b) * 3]
        return list(await asyncio.gather(*resumes))

    answers = asyncio.run(together())
    assert runs == []
    assert all(answer.error is not None for answer in answers)
    assert {answer.error.category for answer in answers if answer.error} == {
        ErrorCategory.APPROVAL_DENIED
    }
    assert all(answer == answers[0] for answer in answers)
    assert stage_events(a, approval_id, "approve") == ["pending", "denied"]
    assert stage_events(a, approval_id, "record") == ["rejected"]
    assert a.approvals.get(approval_id).status is ApprovalStatus.DENIED
    a.close()
    b.close()
