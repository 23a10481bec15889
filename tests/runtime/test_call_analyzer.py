"""The call analyzer seam (`CallFacts`): one contract whose calls differ in effect is judged
per call — policy sees the call's effect class, the approver reads its account, the ledger
keeps its summary, a refusal ends it before policy, and an approval is bound to its facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from toolkeeper import ErrorCategory, Principal, Proposal, Status, ToolContract
from toolkeeper.contract.model import SideEffect
from toolkeeper.policy import Decision, PolicyDecision
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.registry import CallFacts
from toolkeeper.runtime.stages import stricter

CONTRACT = ToolContract(
    id="act",
    version="1.0.0",
    description="Does what its verb says.",
    input_schema={
        "type": "object",
        "properties": {"verb": {"type": "string"}},
        "required": ["verb"],
    },
    side_effect=SideEffect.COMMITTING,
    open_world=True,
)


class Tool:
    """A tool that records its runs, and an analyzer whose bound facts can change."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.target_version = "v1"

    def run(self, verb: str) -> dict[str, Any]:
        self.ran.append(verb)
        return {"did": verb}

    def analyze(self, arguments: dict[str, Any], principal: Principal) -> CallFacts:
        verb = arguments["verb"]
        reads = verb == "look"
        return CallFacts(
            side_effect=SideEffect.NONE if reads else SideEffect.COMMITTING,
            open_world=False,
            account=f"{verb}s at the target",
            summary={"verb": verb, "principal": principal.id},
            refusal="it cannot be read unambiguously" if verb == "\x1b" else None,
            decision=PolicyDecision(Decision.DENY, ("tool.never_burn",), ("burning is out",))
            if verb == "burn"
            else None,
            bound={"target": self.target_version},
        )


@pytest.fixture
def tool() -> Tool:
    return Tool()


@pytest.fixture
def harness(tmp_path: Path, tool: Tool) -> Harness:
    harness = Harness(home=tmp_path / "tk")
    harness.register(CONTRACT, executor=tool.run, analyzer=tool.analyze)
    return harness


def invoke(harness: Harness, verb: str, principal: Principal) -> Any:
    return harness.invoke_sync(Proposal("c1", "act", {"verb": verb}), principal=principal)


def test_a_read_only_call_of_a_committing_contract_runs_without_approval(
    harness: Harness, tool: Tool, alice: Principal
) -> None:
    done = invoke(harness, "look", alice)
    assert done.status is Status.SUCCEEDED and tool.ran == ["look"]
    events = harness.ledger.events(done.execution_meta.request_id)
    analyzed = [e for e in events if e.kind == "analyzed"]
    assert analyzed and analyzed[0].data["summary"] == {"verb": "look", "principal": "alice"}
    assert analyzed[0].data["side_effect"] == "none"


def test_a_writing_call_waits_with_the_analyzers_account(
    harness: Harness, tool: Tool, alice: Principal
) -> None:
    pending = invoke(harness, "paint", alice)
    assert pending.status is Status.PENDING_APPROVAL and tool.ran == []
    account = harness.approvals.get(pending.execution_meta.approval_id).account
    assert "paints at the target" in account and "[committing" in account


def test_a_refusal_ends_the_call_before_policy(
    harness: Harness, tool: Tool, alice: Principal
) -> None:
    refused = invoke(harness, "\x1b", alice)
    assert refused.status is Status.REJECTED
    assert refused.error.category is ErrorCategory.POLICY_DENIED
    assert "cannot be read unambiguously" in refused.error.message
    stages = [e.stage for e in harness.ledger.events(refused.execution_meta.request_id)]
    assert "authorize" not in stages and tool.ran == []


def test_the_tools_own_deny_beats_the_engines_allow(
    harness: Harness, tool: Tool, alice: Principal
) -> None:
    denied = invoke(harness, "burn", alice)
    assert denied.status is Status.REJECTED
    assert "tool.never_burn" in denied.error.message and tool.ran == []


def test_an_analyzer_that_raises_refuses_the_call(tmp_path: Path, alice: Principal) -> None:
    def broken(arguments: dict[str, Any], principal: Principal) -> CallFacts:
        raise RuntimeError("parser exploded")

    harness = Harness(home=tmp_path / "tk")
    ran: list[str] = []
    harness.register(CONTRACT, executor=lambda verb: ran.append(verb) or {}, analyzer=broken)
    refused = invoke(harness, "look", alice)
    assert refused.error.category is ErrorCategory.POLICY_DENIED and ran == []


def test_an_approval_is_bound_to_the_facts(harness: Harness, tool: Tool, alice: Principal) -> None:
    pending = invoke(harness, "paint", alice)
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="reviewer")
    tool.target_version = "v2"  # what the approval was bound to changed meanwhile
    stale = harness.resume_sync(approval_id, principal=alice)
    assert stale.error.category is ErrorCategory.STALE and tool.ran == []


def test_an_approval_whose_facts_hold_runs(harness: Harness, tool: Tool, alice: Principal) -> None:
    pending = invoke(harness, "paint", alice)
    approval_id = pending.execution_meta.approval_id
    harness.approvals.decide(approval_id, "approve", by="reviewer")
    assert harness.resume_sync(approval_id, principal=alice).status is Status.SUCCEEDED
    assert tool.ran == ["paint"]


def test_stricter_keeps_the_stricter_and_merges_equals() -> None:
    allow = PolicyDecision(Decision.ALLOW, ("a",))
    ask = PolicyDecision(Decision.REQUIRE_APPROVAL, ("b",))
    deny = PolicyDecision(Decision.DENY, ("c",), ("no",))
    assert stricter(allow, ask) is ask and stricter(deny, ask) is deny
    both = stricter(ask, PolicyDecision(Decision.REQUIRE_APPROVAL, ("d",)))
    assert both.decision is Decision.REQUIRE_APPROVAL and both.policy_ids == ("b", "d")
