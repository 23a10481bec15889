"""DESIGN.md's invariants, one id each (`INVARIANTS`), and checks both ways: every invariant
has a test tagged ``@pytest.mark.invariant("INV-n")`` somewhere under tests/, and every such
tag names an invariant of this list."""

from __future__ import annotations

import ast
import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import (
    ErrorCategory,
    Principal,
    Proposal,
    Status,
    ToolContract,
)
from toolkeeper.executors import ToolFailure
from toolkeeper.ledger import InvocationRecord, RecordState
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime import stages
from toolkeeper.runtime.call import Call, Stop, Trail
from toolkeeper.runtime.grants import Grant
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.invocation import InvocationRequest
from toolkeeper.runtime.pipeline import STAGE_NAMES

INVARIANTS = {
    "INV-1": "deny or unknown never reaches an executor",
    "INV-2": "the same idempotency key never produces two effects",
    "INV-3": "an unknown effect is never auto-retried for a non-idempotent write",
    "INV-4": "every envelope correlates to exactly one call id and request id",
    "INV-5": "a crash between intent and completion leaves an effect_unknown record, never a "
    "lost one",
    "INV-6": "every entry point (library call, vendor adapter, gateway, resume, Code Mode inner "
    "call, shell command) passes through the one pipeline function: one road to execution",
    "INV-7": "every fault (unencodable input, a full disk, a lost database, a crashed writer) "
    "answers the caller with a categorized tool error and leaves or later writes its ledger "
    "row: fail closed, with a record, never a protocol error for a tool call",
    "INV-8": "resume re-checks against the principal and environment as they are now",
}
"""DESIGN.md's invariants ("Invariants the tests must prove"), in its order."""
TEN_STAGES = list(STAGE_NAMES)


def _harness(tmp_path: Path, policies: str = "") -> tuple[Harness, list[dict[str, Any]]]:
    harness = Harness(home=tmp_path / "tk", policy=CedarPolicyEngine(policies=policies))
    runs: list[dict[str, Any]] = []
    for name, effect in (
        ("get_doc", "none"),
        ("delete_doc", "committing"),
        ("edit_doc", "reversible"),
    ):
        contract = ToolContract(
            id=name,
            version="1.0.0",
            description="A test tool.",
            side_effect=effect,
            idempotency="none",
            input_schema={
                "type": "object",
                "properties": {"doc": {"type": "string"}},
                "additionalProperties": False,
            },
        )
        harness.register(
            contract, executor=lambda name=name, **a: runs.append({"tool": name, **a}) or {}
        )
    return harness, runs


@pytest.mark.invariant("INV-1")
def test_deny_and_unknown_never_reach_an_executor(tmp_path: Path) -> None:
    harness, runs = _harness(tmp_path)
    nobody = Principal("mallory")
    outcomes = [
        harness.invoke_sync(Proposal("1", "drop_everything", {}), principal=nobody),
        harness.invoke_sync(
            Proposal("2", "edit_doc", {"doc": "d"}), principal=nobody
        ),  # reversible: default deny
        harness.invoke_sync(
            Proposal("3", "delete_doc", {"doc": "d"}), principal=nobody
        ),  # needs approval
        harness.invoke_sync(Proposal("4", "get_doc", {"docc": "d"}), principal=nobody),  # invalid
    ]
    assert [o.status for o in outcomes] == [
        Status.REJECTED,
        Status.REJECTED,
        Status.PENDING_APPROVAL,
        Status.REJECTED,
    ]
    assert runs == []


@pytest.mark.invariant("INV-1")
def test_executor_refuses_missing_expired_or_forged_grants(tmp_path: Path) -> None:
    harness, runs = _harness(tmp_path)
    request = InvocationRequest(
        request_id="req_x",
        call_id="c",
        contract_ref="delete_doc@1.0.0",
        implementation_digest="sha256:x",
        arguments={"doc": "d"},
        arguments_digest="sha256:y",
        principal=Principal("alice"),
    )
    good = harness.grants.mint(request)
    forged = Grant(
        **{
            **{f: getattr(good, f) for f in Grant.__dataclass_fields__},
            "arguments_digest": "sha256:other",
        }
    )
    expired = Grant(
        **{
            **{f: getattr(good, f) for f in Grant.__dataclass_fields__},
            "expires_at": time.time() - 1,
        }
    )
    entry = harness.registry.get("delete_doc@1.0.0")
    base = InvocationRecord(
        request_id="req_x",
        call_id="c",
        tool="delete_doc",
        principal_id="alice",
        tenant="default",
        state=RecordState.RECEIVED,
    )
    services = harness.open()._services
    assert services is not None
    for grant in (None, forged, expired):
        call = Call(
            proposal=Proposal("c", "delete_doc", {"doc": "d"}),
            principal=Principal("alice"),
            session=None,
            parent_request_id=None,
            environment={},
            trail=Trail("req_x"),
            record=base,
            started=time.perf_counter(),
            entry=entry,
            arguments={"doc": "d"},
            request=request,
            grant=grant,
        )
        stop = asyncio.run(stages.dispatch(services, call))
        assert isinstance(stop, Stop) and stop.error.category is ErrorCategory.POLICY_DENIED
    assert runs == []


@pytest.mark.invariant("INV-3")
def test_unknown_effect_of_a_non_idempotent_write_is_never_retried(tmp_path: Path) -> None:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies='permit(principal, action, resource) when { resource.id == "charge_card" };',
            include_defaults=False,
        ),
    )
    attempts = []

    def charge_card() -> dict[str, Any]:
        attempts.append(1)
        raise ToolFailure(
            "connection reset after send",
            category="unavailable",
            retryable=True,
            effect_committed=None,
        )

    harness.register(
        ToolContract(
            id="charge_card",
            version="1.0.0",
            description="Charge.",
            side_effect="committing",
            idempotency="none",
            retry={"max_attempts": 5, "backoff_initial": 0},
        ),
        executor=charge_card,
    )
    envelope = harness.invoke_sync(Proposal("c", "charge_card", {}), principal=Principal("a"))
    assert envelope.status is Status.EFFECT_UNKNOWN
    assert envelope.error.effect_committed is None
    assert attempts == [1]


@pytest.mark.invariant("INV-4")
def test_every_envelope_correlates_to_one_call_and_one_request(tmp_path: Path) -> None:
    harness, _ = _harness(tmp_path)
    alice = Principal("alice")
    proposals = [
        Proposal("a", "get_doc", {"doc": "1"}),
        Proposal("b", "nope", {}),
        Proposal("c", "get_doc", "{bad json"),
        Proposal("d", "delete_doc", {"doc": "1"}),
        Proposal("e", "edit_doc", {"doc": "1"}),
        Proposal("f", "get_doc", {"doc": "2"}),
    ]
    envelopes = [harness.invoke_sync(p, principal=alice) for p in proposals]
    assert [e.execution_meta.call_id for e in envelopes] == [p.call_id for p in proposals]
    request_ids = [e.execution_meta.request_id for e in envelopes]
    assert len(set(request_ids)) == len(request_ids)
    for envelope in envelopes:
        record = harness.ledger.get(envelope.execution_meta.request_id)
        assert record.call_id == envelope.execution_meta.call_id
        assert record.envelope["execution_meta"]["request_id"] == record.request_id


@pytest.mark.invariant("INV-5")
def test_intent_without_completion_becomes_effect_unknown(tmp_path: Path) -> None:
    harness, _ = _harness(tmp_path)
    intent = InvocationRecord(
        request_id="req_crashed",
        call_id="c",
        tool="delete_doc",
        principal_id="alice",
        tenant="default",
        state=RecordState.INTENT,
        contract_ref="delete_doc@1.0.0",
        owner="no-such-host:1",
        # Another host's process cannot be asked whether it lives: its intent counts as
        # abandoned once older than the harness's foreign_intent_after (an hour).
        created_at=time.time() - 7200,
    )
    harness.ledger.record_intent(intent, [])
    harness.close()
    reborn = Harness(home=tmp_path / "tk")
    record = reborn.ledger.get("req_crashed")
    assert record.status == "effect_unknown" and record.effect_state == "unknown"
    assert record.state is RecordState.COMPLETED
    assert record.envelope["error"]["effect_committed"] is None


@pytest.mark.invariant("INV-5")
def test_intent_is_on_disk_before_the_effect_runs(tmp_path: Path) -> None:
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies='permit(principal, action, resource) when { resource.id == "write_it" };',
            include_defaults=False,
        ),
    )
    seen = []

    def write_it() -> dict[str, Any]:
        # another connection, as a crash-surviving reader would see the file
        with sqlite3.connect(tmp_path / "tk" / "ledger.db") as conn:
            seen.extend(conn.execute("SELECT state FROM invocations").fetchall())
        return {}

    harness.register(
        ToolContract(
            id="write_it",
            version="1.0.0",
            description="d",
            side_effect="committing",
            idempotency="none",
        ),
        executor=write_it,
    )
    harness.invoke_sync(Proposal("c", "write_it", {}), principal=Principal("a"))
    assert seen == [("intent",)]


@pytest.mark.invariant("INV-6")
def test_library_entry_points_pass_all_ten_stages(tmp_path: Path) -> None:
    harness, _ = _harness(
        tmp_path,
        policies='permit(principal, action, resource) when { resource.id == "delete_doc" };',
    )
    alice = Principal("alice")
    read = harness.invoke_sync(Proposal("r", "get_doc", {"doc": "1"}), principal=alice)
    pending = harness.invoke_sync(Proposal("w", "delete_doc", {"doc": "1"}), principal=alice)
    harness.approvals.decide(pending.execution_meta.approval_id, "approve", by="editor")
    resumed = harness.resume_sync(pending.execution_meta.approval_id, principal=alice)
    for envelope in (read, resumed):
        assert envelope.status is Status.SUCCEEDED
        stages_seen = [e.stage for e in harness.ledger.events(envelope.execution_meta.request_id)]
        assert set(TEN_STAGES) <= set(stages_seen)
        first_seen = list(dict.fromkeys(stages_seen))
        assert first_seen == TEN_STAGES


def invariant_tags(root: Path) -> dict[str, list[str]]:
    """Each argument of a ``pytest.mark.invariant(...)`` under `root` → where it is written.

    Read from the source (decorators, ``pytestmark``, ``pytest.param(marks=...)`` alike), so
    a tag counts whether or not its test is collected. An argument that is not a string
    literal is kept as its source text, which names no invariant."""
    tags: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "invariant"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "mark"
            ):
                continue
            where = f"{path.relative_to(root.parent)}:{node.lineno}"
            for argument in node.args or [node]:
                literal = isinstance(argument, ast.Constant) and isinstance(argument.value, str)
                tag = argument.value if literal else ast.unparse(argument)
                tags.setdefault(tag, []).append(where)
    return tags


TESTS = Path(__file__).parent


def test_every_invariant_has_a_test() -> None:
    tagged = invariant_tags(TESTS)
    untested = {key: text for key, text in INVARIANTS.items() if key not in tagged}
    assert untested == {}


def test_every_invariant_tag_names_a_real_invariant() -> None:
    unknown = {tag: where for tag, where in invariant_tags(TESTS).items() if tag not in INVARIANTS}
    assert unknown == {}


def test_tags_are_read_from_decorators_module_marks_and_params(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_tagged.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.invariant('INV-2')\n"
        "@pytest.mark.invariant('INV-1')\n"
        "def test_a(): ...\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.invariant('INV-9'))])\n"
        "def test_b(x): ...\n"
        "ID = 'INV-3'\n"
        "@pytest.mark.invariant(ID)\n"
        "def test_c(): ...\n"
        "@pytest.mark.invariant\n"
        "def test_d(): ...\n"
    )
    assert invariant_tags(tests) == {
        "INV-2": ["tests/test_tagged.py:2"],
        "INV-1": ["tests/test_tagged.py:3"],
        "INV-9": ["tests/test_tagged.py:5"],
        "ID": ["tests/test_tagged.py:8"],
    }
