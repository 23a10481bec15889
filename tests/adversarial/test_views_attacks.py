"""Attacks on views and suggestions: pinned versions a principal may not see, names built to
make the suggestion index work, many capability sets and odd names."""

from __future__ import annotations

from pathlib import Path

from toolkeeper import ErrorCategory, Principal, Proposal, Status, ToolContract
from toolkeeper.policy import CedarPolicyEngine
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.views import NameIndex


def contract(tool_id: str, version: str, capabilities: list[str]) -> ToolContract:
    return ToolContract.from_dict(
        {
            "id": tool_id,
            "version": version,
            "description": "Read something.",
            "side_effect": "none",
            "required_capabilities": capabilities,
            "input_schema": {"type": "object", "properties": {}},
        }
    )


def test_a_pinned_version_resolves_only_for_whoever_may_see_that_version(
    tmp_path: Path,
) -> None:
    """Defect: a view admitted every registered ``id@version`` of a tool whose latest
    version the principal may see, so ``report@1.0.0`` (needing `admin`) resolved for a
    principal without it; under a policy that leaves capabilities to the views it ran."""
    harness = Harness(
        home=tmp_path / "tk",
        policy=CedarPolicyEngine(
            policies="permit(principal, action, resource);", include_defaults=False
        ),
    )
    harness.register(contract("report", "1.0.0", ["admin"]), executor=lambda: {"v": 1})
    harness.register(contract("report", "2.0.0", []), executor=lambda: {"v": 2})
    nobody = Principal("nobody", "acme", frozenset())
    admin = Principal("root", "acme", frozenset({"admin"}))
    pinned = harness.invoke_sync(Proposal("c1", "report@1.0.0", {}), principal=nobody)
    assert pinned.status is Status.REJECTED
    assert pinned.error is not None and pinned.error.category is ErrorCategory.UNKNOWN_TOOL
    latest = harness.invoke_sync(Proposal("c2", "report", {}), principal=nobody)
    assert latest.structured_content == {"v": 2}
    allowed = harness.invoke_sync(Proposal("c3", "report@1.0.0", {}), principal=admin)
    assert allowed.structured_content == {"v": 1}
    harness.close()


def test_an_overlong_unknown_name_costs_no_suggestion_work() -> None:
    """Defect: suggestions for a 1 MB name read every trigram of it and scored it with
    difflib: 140 ms on the event loop per call against 2,000 tools (goal: 5 ms). No name
    that long can be close to an indexed one, so nothing is read."""
    names = [f"tool_{i}_name" for i in range(2000)]
    index = NameIndex(names)
    found = index.suggest("tool_" * 20_000)
    assert (found.names, found.compared, found.scanned) == ((), 0, 0)
    assert index.suggest("tool_12_nam").names[0] == "tool_12_name"


def test_a_name_whose_lowercase_is_longer_still_gets_suggestions() -> None:
    """The length bound compares lowercased lengths, as the scoring does."""
    index = NameIndex(["İİİİİİ"])  # lowercases to twelve characters
    assert index.suggest("i̇i̇i̇i̇i̇i̇x").names == ("İİİİİİ",)


def test_principals_differing_only_in_capabilities_no_tool_needs_share_one_view(
    tmp_path: Path,
) -> None:
    """Defect: views were keyed by the whole capability set, so 33 principals each holding a
    per-user capability (`user:<n>`) besides `docs` overflowed the 32 kept views, and every
    call rebuilt a view of the whole catalog on the event loop (0.3 → 30 ms a call at
    5,000 tools)."""
    harness = Harness(home=tmp_path / "tk")
    harness.register(contract("read_doc", "1.0.0", ["docs"]), executor=lambda: {})
    harness.register(contract("ping", "1.0.0", []), executor=lambda: {})
    users = [Principal(f"u{n}", "acme", frozenset({"docs", f"user:{n}"})) for n in range(40)]
    first = harness.views.view(users[0])
    assert all(harness.views.view(user) is first for user in users)
    assert len(harness.views) == 1
    assert {c.id for c in harness.visible_contracts(users[7])} == {"read_doc", "ping"}
    # A tool needing a capability only one user holds: that user's view tells it apart.
    harness.register(contract("mine", "1.0.0", ["user:3"]), executor=lambda: {})
    assert "mine" in {c.id for c in harness.visible_contracts(users[3])}
    assert "mine" not in {c.id for c in harness.visible_contracts(users[4])}
    nobody = Principal("n", "acme", frozenset({"user:99"}))
    assert {c.id for c in harness.visible_contracts(nobody)} == {"ping"}
