"""Policy decisions through the real Cedar engine, conditions, and the fail-closed seam."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkeeper import Principal, ToolContract
from toolkeeper.errors import PolicyError
from toolkeeper.policy import (
    CONDITION_GRAMMAR,
    CedarPolicyEngine,
    Condition,
    Decision,
    PolicyDecision,
    PolicyRequest,
    decide_safely,
    default_policies,
)

DEV = Principal(id="dev-7", tenant="acme", capabilities=frozenset({"repo.read", "repo.write"}))
DEFAULTS = CedarPolicyEngine()


def tool(name: str, side_effect: str | None, *capabilities: str) -> ToolContract:
    return ToolContract(
        id=name,
        version="1.0.0",
        description=f"{name} for tests.",
        side_effect=side_effect,
        required_capabilities=capabilities,
    )


def decide(
    engine: CedarPolicyEngine,
    contract: ToolContract,
    arguments: dict[str, Any] | None = None,
    *,
    principal: Principal = DEV,
    environment: dict[str, Any] | None = None,
    resource: str | None = None,
) -> PolicyDecision:
    request = PolicyRequest(principal, contract, arguments or {}, environment or {}, resource)
    return decide_safely(engine, request)


# -- the shipped default policy set ---------------------------------------------------------


def test_read_only_call_with_the_required_capabilities_is_allowed() -> None:
    result = decide(DEFAULTS, tool("read_file", "none", "repo.read"))
    assert result.decision is Decision.ALLOW
    assert result.policy_ids == ("toolkeeper.read_only",)


def test_read_only_call_without_a_required_capability_is_denied() -> None:
    result = decide(DEFAULTS, tool("read_secrets", "none", "vault.read"))
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.missing_capability",)


def test_committing_call_requires_approval() -> None:
    result = decide(DEFAULTS, tool("deploy", "committing", "repo.write"))
    assert result.decision is Decision.REQUIRE_APPROVAL
    assert result.policy_ids == ("toolkeeper.committing_requires_approval",)


def test_undeclared_side_effect_counts_as_committing() -> None:
    assert decide(DEFAULTS, tool("mystery", None)).decision is Decision.REQUIRE_APPROVAL


def test_reversible_call_is_denied_until_an_operator_permits_it() -> None:
    result = decide(DEFAULTS, tool("edit_file", "reversible", "repo.write"))
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.default_deny",)
    assert "dev-7" in result.reasons[0]
    assert "edit_file@1.0.0" in result.reasons[0]


def test_tenant_named_by_the_environment_excludes_other_tenants() -> None:
    contract = tool("read_file", "none")
    assert decide(DEFAULTS, contract, environment={"tenant": "acme"}).decision is Decision.ALLOW
    other = decide(DEFAULTS, contract, environment={"tenant": "globex"})
    assert other.decision is Decision.DENY
    assert other.policy_ids == ("toolkeeper.tenant_boundary",)


def test_default_policies_text_names_every_shipped_policy() -> None:
    text = default_policies()
    assert DEFAULTS.policy_ids == (
        "toolkeeper.read_only",
        "toolkeeper.committing_requires_approval",
        "toolkeeper.code_mode",
        "toolkeeper.upstream_requests",
        "toolkeeper.upstream_resources",
        "toolkeeper.upstream_prompts",
        "toolkeeper.missing_capability",
        "toolkeeper.tenant_boundary",
    )
    assert all(f'@id("{policy_id}")' in text for policy_id in DEFAULTS.policy_ids)


def test_without_defaults_nothing_is_permitted() -> None:
    empty = CedarPolicyEngine(include_defaults=False)
    assert decide(empty, tool("read_file", "none")).policy_ids == ("toolkeeper.default_deny",)


# -- operator policies ----------------------------------------------------------------------


def test_operator_forbid_in_a_file_overrides_the_default_permit(tmp_path: Path) -> None:
    night = tmp_path / "night.cedar"
    night.write_text(
        '@id("ops.no_night_reads")\n'
        "forbid (principal, action, resource)\n"
        "when { context.environment has hour && context.environment.hour < 6 };\n"
    )
    engine = CedarPolicyEngine(policy_files=[night])
    contract = tool("read_file", "none")
    assert decide(engine, contract, environment={"hour": 14}).decision is Decision.ALLOW
    at_night = decide(engine, contract, environment={"hour": 3})
    assert at_night.decision is Decision.DENY
    assert at_night.policy_ids == ("ops.no_night_reads",)


PAYMENTS = """
@id("ops.small_payments")
@conditions("amount <= 100; dry_run == true")
permit (principal, action, resource)
when { resource.id == "pay" };

@id("ops.large_payments")
@approval("required")
permit (principal, action, resource)
when { resource.id == "pay" && context.arguments has amount && context.arguments.amount > 1000 };
"""


def test_conditions_annotation_allows_with_parsed_conditions() -> None:
    engine = CedarPolicyEngine(policies=PAYMENTS)
    result = decide(engine, tool("pay", "reversible"), {"amount": 50, "dry_run": True})
    assert result.decision is Decision.ALLOW_WITH_CONDITIONS
    assert result.policy_ids == ("ops.small_payments",)
    assert result.conditions == (Condition("amount", "<=", 100), Condition("dry_run", "==", True))
    assert all(condition.holds({"amount": 50, "dry_run": True}) for condition in result.conditions)


def test_most_cautious_permit_wins_with_the_approval_permits_conditions() -> None:
    engine = CedarPolicyEngine(policies=PAYMENTS)
    result = decide(engine, tool("pay", "reversible"), {"amount": 5000, "dry_run": False})
    assert result.decision is Decision.REQUIRE_APPROVAL
    assert result.policy_ids == ("ops.small_payments", "ops.large_payments")
    assert result.reasons == ("approval required by ops.large_payments",)
    # The small-payment permit's conditions were another road to yes; the human decides.
    assert result.conditions == ()


def test_conditions_of_all_satisfied_permits_must_hold_together() -> None:
    engine = CedarPolicyEngine(
        policies=PAYMENTS + '@id("ops.eu_only") @conditions("region == \\"eu\\"") '
        'permit (principal, action, resource) when { resource.id == "pay" };'
        + '@id("ops.reviewed") @approval("required") @conditions("ticket != null") '
        'permit (principal, action, resource) when { resource.id == "pay" && '
        "context.arguments has urgent };"
    )
    pay = tool("pay", "reversible")
    allowed = decide(engine, pay, {"amount": 5})
    assert allowed.decision is Decision.ALLOW_WITH_CONDITIONS
    assert [c.describe() for c in allowed.conditions] == [
        "amount <= 100",
        "dry_run == true",
        'region == "eu"',
    ]
    asked = decide(engine, pay, {"amount": 5, "urgent": True})
    assert asked.decision is Decision.REQUIRE_APPROVAL
    assert asked.conditions == (Condition("ticket", "!=", None),)


def test_policy_without_id_annotation_is_named_by_cedar_id() -> None:
    engine = CedarPolicyEngine(
        policies='permit (principal, action, resource) when { resource.id == "lint" };'
    )
    # Cedar numbers policies in order: the eight shipped ones come first.
    assert decide(engine, tool("lint", "reversible")).policy_ids == (
        "policy8",
    )  # after the eight shipped policies


def test_target_resource_is_in_the_context() -> None:
    engine = CedarPolicyEngine(
        policies='@id("ops.own_repo") permit (principal, action, resource) '
        'when { context has target && context.target like "repo:acme/*" };'
    )
    contract = tool("push", "reversible")
    assert decide(engine, contract, resource="repo:acme/site").decision is Decision.ALLOW
    assert decide(engine, contract, resource="repo:globex/site").decision is Decision.DENY


TASK2048 = """
// TASK2048: the agent may edit its candidate branch; merging needs the commit right.
@id("task2048.edit_branch")
permit (principal, action == Toolkeeper::Action::"invoke", resource is Toolkeeper::Tool)
when { resource.id like "edit_branch*" && principal.capabilities.contains("repo.write") };

@id("task2048.no_merge")
forbid (principal, action, resource is Toolkeeper::Tool)
when { resource.id == "merge_request" };
"""


def test_seed000_s12_task2048_branch_grant_denies_merge_request(tmp_path: Path) -> None:
    """Seed 000 §12: authorization limited to branch edits must deny the merge request."""
    policy_file = tmp_path / "task2048.cedar"
    policy_file.write_text(TASK2048)
    engine = CedarPolicyEngine(policy_files=[policy_file])
    edit = decide(engine, tool("edit_branch_file", "reversible", "repo.write"), {"path": "a.py"})
    assert edit.decision is Decision.ALLOW
    assert edit.policy_ids == ("task2048.edit_branch",)
    merge = decide(engine, tool("merge_request", "committing", "repo.write"), {"branch": "fix"})
    assert merge.decision is Decision.DENY
    assert merge.policy_ids == ("task2048.no_merge",)
    # Without the operator file the same merge would only have waited for approval.
    assert decide(DEFAULTS, tool("merge_request", "committing", "repo.write")).decision is (
        Decision.REQUIRE_APPROVAL
    )


# -- arguments Cedar cannot hold ------------------------------------------------------------


def test_floats_become_cedar_decimals() -> None:
    engine = CedarPolicyEngine(
        policies='@id("ops.cheap") permit (principal, action, resource) when { '
        'context.arguments.price.lessThan(decimal("10.0")) };'
    )
    contract = tool("buy", "reversible")
    assert decide(engine, contract, {"price": 9.99}).decision is Decision.ALLOW
    assert decide(engine, contract, {"price": 12.5}).decision is Decision.DENY


@pytest.mark.parametrize("number", [-0.0, 0.0001, 1e14, 922337203685477.5, -922337203685477.5])
def test_edge_floats_are_decimals_cedar_accepts(number: float) -> None:
    engine = CedarPolicyEngine(
        policies='@id("ops.has_x") permit (principal, action, resource) '
        "when { context.arguments has x && context.omitted == [] };"
    )
    assert decide(engine, tool("calc", "reversible"), {"x": number}).decision is Decision.ALLOW


OMITTED = """
@id("ops.show_omitted")
permit (principal, action, resource)
when { context.omitted == ["/arguments/none", "/arguments/nested/none", "/environment/gone"]
       && context.arguments.tiny == {number: "1e-07"}
       && context.arguments.big == {number: "1180591620717411303424"}
       && context.arguments.nested.y == decimal("2.5") };
"""


def test_only_null_members_are_left_out_and_listed() -> None:
    arguments = {
        "tiny": 1e-7,
        "none": None,
        "big": 2**70,
        "nested": {"none": None, "y": 2.5},
        "fine": 0.25,
    }
    engine = CedarPolicyEngine(policies=OMITTED, include_defaults=False)
    result = decide(engine, tool("calc", "none"), arguments, environment={"gone": None})
    assert result.decision is Decision.ALLOW, result.reasons


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"list": [1, float("nan")]}, "/arguments/list/1"),
        ({"nested": {"x": float("inf")}}, "/arguments/nested/x"),
        ({"tags": ["admin", None]}, "/arguments/tags/1"),
        ({"who": {"__entity": {"type": "Toolkeeper::Principal", "id": "root"}}}, "__entity"),
        ({"meta": {"__extn": 1, "amount": 20000}}, "/arguments/meta/__extn"),
        ({"odd": {3: "x"}}, "/arguments/odd"),
        ({"raw": b"bytes"}, "/arguments/raw"),
    ],
)
def test_values_cedar_cannot_hold_deny_instead_of_being_left_out(
    arguments: dict[str, Any], where: str
) -> None:
    """Left out, such a value made `has` false and skipped every forbid guarded by it."""
    engine = CedarPolicyEngine(
        policies="permit (principal, action, resource) when { context.arguments has x };",
        include_defaults=False,
    )
    result = decide(engine, tool("calc", "none"), {"x": 1, **arguments})
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.unrepresentable_value",)
    assert where in result.reasons[0]


def test_ordering_a_number_no_decimal_holds_is_an_evaluation_error_and_denies() -> None:
    engine = CedarPolicyEngine(
        policies='@id("ops.amount") permit (principal, action, resource) '
        'when { context.arguments.amount.lessThan(decimal("100.0")) };'
    )
    result = decide(engine, tool("pay", "reversible"), {"amount": 1e-9})
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.evaluation_error",)
    assert "ops.amount" in result.reasons[0]
    assert result.reasons[-1].startswith("/arguments/amount = 1e-09: no Cedar Long")


def test_an_argument_cannot_forge_an_entity_reference() -> None:
    engine = CedarPolicyEngine(
        policies='@id("ops.as_root") permit (principal, action, resource) when { '
        'context.arguments has who && context.arguments.who == Toolkeeper::Principal::"root" };'
    )
    forged = {"who": {"__entity": {"type": "Toolkeeper::Principal", "id": "root"}}}
    assert decide(engine, tool("sudo", "reversible"), forged).decision is Decision.DENY


def test_engine_failure_inside_cedar_engine_is_a_deny_not_a_raise() -> None:
    result = decide(DEFAULTS, tool("read_file", "none"), environment={"tenant": 42})
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.engine_error",)
    assert "tenant" in result.reasons[0]


# -- policy text errors ---------------------------------------------------------------------


def test_malformed_policy_file_names_file_line_and_cedar_message(tmp_path: Path) -> None:
    broken = tmp_path / "broken.cedar"
    broken.write_text(
        "// ok first\n"
        'permit (principal, action, resource) when { context.note == "a;b" };\n'
        "\n"
        '@id("bad")\n'
        "permit (principal, action resource);\n"
    )
    with pytest.raises(PolicyError) as caught:
        CedarPolicyEngine(policy_files=[broken])
    assert caught.value.source == str(broken)
    assert caught.value.line == 4
    assert "broken.cedar, line 4" in str(caught.value)
    assert "unexpected token `resource`" in str(caught.value)


def test_unreadable_policy_file_raises_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"missing\.cedar"):
        CedarPolicyEngine(policy_files=[tmp_path / "missing.cedar"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('@conditions("amount <=") permit (principal, action, resource);', "amount <="),
        ('@approval("maybe") permit (principal, action, resource);', "@approval"),
        ('@approval("required") forbid (principal, action, resource);', "permit policies only"),
        ("permit (principal == ?principal, action, resource);", "templates"),
        ('@id("toolkeeper.read_only") permit (principal, action, resource);', "already used"),
    ],
)
def test_bad_toolkeeper_annotations_are_rejected_at_construction(text: str, message: str) -> None:
    with pytest.raises(PolicyError, match="<policies>, line 1") as caught:
        CedarPolicyEngine(policies=text)
    assert message in str(caught.value)


# -- conditions -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amount <= 100", Condition("amount", "<=", 100)),
        ("dry_run == true", Condition("dry_run", "==", True)),
        ('region in ["eu","us"]', Condition("region", "in", ("eu", "us"))),
        ("  /items/0/qty>3  ", Condition("/items/0/qty", ">", 3)),
        ('note != "a; b"', Condition("note", "!=", "a; b")),
    ],
)
def test_condition_parse_reads_json_literals(text: str, expected: Condition) -> None:
    assert Condition.parse(text) == expected


@pytest.mark.parametrize(
    "text", ["amount", "amount => 5", "amount <= NaN", 'region in "eu"', "amount < true", "= 5"]
)
def test_condition_parse_error_names_the_text_and_the_grammar(text: str) -> None:
    with pytest.raises(PolicyError) as caught:
        Condition.parse(text)
    assert caught.value.text == text
    assert repr(text) in str(caught.value)
    assert CONDITION_GRAMMAR in str(caught.value)


@pytest.mark.parametrize(
    ("condition", "arguments", "holds"),
    [
        ("amount <= 100", {"amount": 100}, True),
        ("amount <= 100", {"amount": 100.5}, False),
        ("amount <= 100", {}, False),
        ("amount != 3", {}, False),
        ("amount <= 100", {"amount": "50"}, False),
        ("amount <= 100", {"amount": True}, False),
        ("dry_run == true", {"dry_run": 1}, False),
        ("dry_run == true", {"dry_run": True}, True),
        ("count == 1", {"count": 1.0}, True),
        ('region in ["eu", "us"]', {"region": "us"}, True),
        ('region in ["eu", "us"]', {"region": "cn"}, False),
        ("/items/1/qty >= 2", {"items": [{"qty": 1}, {"qty": 2}]}, True),
        ("/items/2/qty >= 2", {"items": [{"qty": 1}, {"qty": 2}]}, False),
        ("/a~1b == 1", {"a/b": 1}, True),
        ('name < "m"', {"name": "kim"}, True),
        ("mode == null", {"mode": None}, True),
    ],
)
def test_condition_holds_only_when_the_field_is_there_and_satisfies_it(
    condition: str, arguments: dict[str, Any], holds: bool
) -> None:
    assert Condition.parse(condition).holds(arguments) is holds


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
_FIELDS = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True) | st.from_regex(
    r"/[^\s<>=!]{0,10}", fullmatch=True
)
_CONDITIONS = st.one_of(
    st.builds(Condition, _FIELDS, st.sampled_from(["==", "!="]), _SCALARS),
    st.builds(
        Condition,
        _FIELDS,
        st.sampled_from(["<", "<=", ">", ">="]),
        st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    ),
    st.builds(Condition, _FIELDS, st.just("in"), st.lists(_SCALARS, max_size=4).map(tuple)),
)


@given(_CONDITIONS)
def test_condition_describe_parses_back_to_the_same_condition(condition: Condition) -> None:
    assert Condition.parse(condition.describe()) == condition


# -- the fail-closed seam -------------------------------------------------------------------


class _Raising:
    def decide(self, request: PolicyRequest) -> PolicyDecision:
        raise RuntimeError("backend unreachable")


class _Returning:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def decide(self, request: PolicyRequest) -> Any:
        return self.answer


REQUEST = PolicyRequest(DEV, tool("read_file", "none"), {})


def test_engine_exception_becomes_deny_naming_the_error() -> None:
    result = decide_safely(_Raising(), REQUEST)
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.engine_error",)
    assert "RuntimeError: backend unreachable" in result.reasons[0]
    assert "Traceback" not in result.reasons[0]


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "allow",
        {"decision": "allow"},
        PolicyDecision("maybe"),  # type: ignore[arg-type]
        PolicyDecision(Decision.ALLOW, conditions=("amount <= 1",)),  # type: ignore[arg-type]
        PolicyDecision(Decision.ALLOW, policy_ids=["p"]),  # type: ignore[arg-type]
    ],
)
def test_garbage_or_unknown_decision_becomes_deny(answer: Any) -> None:
    result = decide_safely(_Returning(answer), REQUEST)
    assert result.decision is Decision.DENY
    assert result.policy_ids == ("toolkeeper.engine_error",)


def test_plain_string_decision_is_accepted_as_the_enum() -> None:
    answer = PolicyDecision("allow", ("ops.p",))  # type: ignore[arg-type]
    assert decide_safely(_Returning(answer), REQUEST).decision is Decision.ALLOW


def test_decisions_are_kept_per_principal_tool_and_context() -> None:
    engine = CedarPolicyEngine(
        policies='@id("small") permit(principal, action, resource) '
        "when { context.arguments.amount < 100 };",
        include_defaults=False,
    )
    pay = tool("pay", "committing")

    def direct(arguments: dict[str, Any], principal: Principal = DEV) -> PolicyDecision:
        return engine.decide(PolicyRequest(principal, pay, arguments))

    first = direct({"amount": 5})
    assert first.decision is Decision.ALLOW
    assert direct({"amount": 5}) is first
    assert direct({"amount": 500}).decision is Decision.DENY
    assert direct({"amount": 5}, Principal(id="ops-1", tenant="acme")) is not first
    # a policy that reads nothing of the context is decided once per principal and tool
    blind = CedarPolicyEngine(
        policies='permit(principal, action, resource) when { resource.id == "pay" };',
        include_defaults=False,
    )
    once = blind.decide(PolicyRequest(DEV, pay, {"amount": 1}))
    assert blind.decide(PolicyRequest(DEV, pay, {"amount": 2})) is once
