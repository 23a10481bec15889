"""Policy on reads of upstream prompts and resources (`ReadRequest`, `decide_read`): the
shipped permits, operator forbids on the Cedar `Toolkeeper::Resource` and `Toolkeeper::Prompt`
entities, and the seam failing closed."""

from __future__ import annotations

from typing import Any

from toolkeeper import Principal
from toolkeeper.policy import CedarPolicyEngine, Decision, PolicyDecision
from toolkeeper.policy.decision import ReadRequest, decide_read_safely

ALICE = Principal(id="alice", tenant="acme")


def read(kind: str, ident: str, *, server: str = "docs", **extra: Any) -> ReadRequest:
    action = "get_prompt" if kind == "prompt" else "read_resource"
    return ReadRequest(principal=ALICE, action=action, kind=kind, id=ident, server=server, **extra)


def test_the_shipped_policies_permit_reading_approved_resources_and_prompts() -> None:
    engine = CedarPolicyEngine()
    resource = decide_read_safely(engine, read("resource", "docs://readme"))
    assert resource.decision is Decision.ALLOW
    assert resource.policy_ids == ("toolkeeper.upstream_resources",)
    prompt = decide_read_safely(engine, read("prompt", "docs.review"))
    assert prompt.decision is Decision.ALLOW
    assert prompt.policy_ids == ("toolkeeper.upstream_prompts",)


def test_a_mismatched_action_is_denied_by_default() -> None:
    """``get_prompt`` on a resource (or reading a prompt) is permitted by nothing."""
    engine = CedarPolicyEngine()
    request = ReadRequest(ALICE, action="get_prompt", kind="resource", id="x://y", server="s")
    denied = decide_read_safely(engine, request)
    assert denied.decision is Decision.DENY
    assert denied.policy_ids == ("toolkeeper.default_deny",)
    assert "alice to get_prompt resource 'x://y'" in denied.reasons[0]


def test_an_operator_forbids_by_server_kind_and_principal() -> None:
    engine = CedarPolicyEngine(
        policies="""
        @id("ops.no_wiki")
        forbid (principal, action, resource is Toolkeeper::Resource)
        when { resource.server == "wiki" && resource.kind == "template" };
        """
    )
    assert decide_read_safely(engine, read("template", "w://p/1", server="wiki")).policy_ids == (
        "ops.no_wiki",
    )
    assert decide_read_safely(engine, read("resource", "w://home", server="wiki")).decision is (
        Decision.ALLOW
    )
    assert decide_read_safely(engine, read("template", "d://p/1")).decision is Decision.ALLOW


def test_the_tenant_boundary_holds_for_reads() -> None:
    engine = CedarPolicyEngine()
    other = decide_read_safely(engine, read("resource", "d://r", environment={"tenant": "globex"}))
    assert other.decision is Decision.DENY
    assert other.policy_ids == ("toolkeeper.tenant_boundary",)
    same = decide_read_safely(engine, read("resource", "d://r", environment={"tenant": "acme"}))
    assert same.decision is Decision.ALLOW


def test_an_approval_or_conditions_are_no_allow_for_a_read() -> None:
    """A read cannot wait for a human, and has no arguments a condition could hold to."""
    engine = CedarPolicyEngine(
        include_defaults=False,
        policies="""
        @id("ops.ask")
        @approval("required")
        permit (principal, action, resource is Toolkeeper::Prompt);
        """,
    )
    assert decide_read_safely(engine, read("prompt", "p")).decision is Decision.DENY


class _ToolsOnly:
    """An engine from before reads existed: it decides tool calls only."""

    def decide(self, request: Any) -> PolicyDecision:
        return PolicyDecision(Decision.ALLOW)


class _Broken:
    def decide_read(self, request: ReadRequest) -> PolicyDecision:
        raise RuntimeError("engine down")


class _Garbage:
    def decide_read(self, request: ReadRequest) -> Any:
        return "allow"


def test_an_engine_that_cannot_judge_reads_denies_them() -> None:
    for engine, policy in (
        (_ToolsOnly(), "toolkeeper.reads_unjudged"),
        (_Broken(), "toolkeeper.engine_error"),
        (_Garbage(), "toolkeeper.engine_error"),
    ):
        decision = decide_read_safely(engine, read("resource", "d://r"))
        assert decision.decision is Decision.DENY
        assert decision.policy_ids == (policy,)
