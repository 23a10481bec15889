"""Per-principal views (runtime/views.py): changed in place as tools are registered, equal to
what a full rebuild gives, bounded in number, and suggesting close names from an index whose
cost per query is bounded and which holds only what the principal may see."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkeeper import Principal, Proposal, ToolContract
from toolkeeper.contract.naming import vendor_names
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.harness import Harness
from toolkeeper.runtime.registry import Registry, ToolEntry
from toolkeeper.runtime.views import MAX_COMPARED, SCAN_BUDGET, NameIndex, ToolViews

FAMILIES = ("mcp", "openai", "gemini")


def contract(tool_id: str, version: str = "1.0.0", *needs: str, **fields: Any) -> ToolContract:
    return ToolContract(
        id=tool_id,
        version=version,
        description=f"Use {tool_id}.",
        side_effect="none",
        required_capabilities=needs,
        **fields,
    )


def echo(**arguments: Any) -> dict[str, Any]:
    return dict(arguments)


def principal(*capabilities: str) -> Principal:
    return Principal("p", capabilities=frozenset(capabilities))


def full_rebuild(registry: Registry, who: Principal | None, family: str) -> dict[str, ToolEntry]:
    """What a view must hold, computed from scratch the way the harness did before views
    were kept incrementally: ids, then vendor names (which win), then id@version refs."""
    contracts = [
        c
        for c in registry.latest_contracts()
        if who is None or set(c.required_capabilities) <= who.capabilities
    ]
    names: dict[str, ToolEntry] = {}
    for c in contracts:
        names[c.id] = registry.latest(c.id)  # type: ignore[assignment]
    for ref, name in vendor_names(contracts, family).items():
        names[name] = registry.get(ref)  # type: ignore[assignment]
    visible = {c.id for c in contracts}
    for ref, entry in registry._entries.items():
        needed = set(entry.contract.required_capabilities)
        # A pinned version is visible when its tool is and the version itself may be seen.
        if ref.split("@", 1)[0] in visible and (who is None or needed <= who.capabilities):
            names[ref] = registry.get(ref)  # type: ignore[assignment]
    return names


# Ids chosen to collide once mapped to vendor names ("a.b" and "a_b" both want "a_b" for
# openai), versions that reorder the latest, and capabilities that hide some of them.
tool_ids = st.sampled_from(["a.b", "a_b", "a:b", "lookup", "look_up", "x/y", "x_y", "q"])
versions = st.sampled_from(["1.0.0", "1.0.0-rc.2", "1.0.0-rc.10", "2.0.0", "0.9.0"])
needs = st.sampled_from([(), ("read",), ("write",), ("read", "write")])
registrations = st.lists(st.tuples(tool_ids, versions, needs), min_size=1, max_size=25)
PRINCIPALS = (None, principal(), principal("read"), principal("read", "write"), principal("*"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(registrations)
def test_views_changed_in_place_equal_a_full_rebuild(
    steps: list[tuple[str, str, tuple[str, ...]]],
) -> None:
    registry = Registry()
    views = ToolViews(registry)
    early = {(who, family): views.view(who, family) for who in PRINCIPALS for family in FAMILIES}
    seen: set[str] = set()
    for tool_id, version, required in steps:
        c = contract(tool_id, version, *required)
        if c.ref in seen:  # one content per ref, as the registry demands
            continue
        seen.add(c.ref)
        entry = ToolEntry(c, None)
        registry.add(entry)
        for who, family in early:
            view = views.view(who, family)
            assert dict(view) == full_rebuild(registry, who, family), (who, family)
    for who in PRINCIPALS:
        for family in FAMILIES:
            view = views.view(who, family)
            # Kept, never rebuilt — unless a tool came to require a capability `who` holds:
            # `who` then needs a view telling that capability apart.
            if who is None or not who.capabilities & {n for s in steps for n in s[2]}:
                assert view is early[(who, family)]
            assert dict(fresh_views(registry).view(who, family)) == dict(view)


def fresh_views(registry: Registry) -> ToolViews:
    """Views over `registry` built from scratch, as a new process would."""
    return ToolViews(registry)


def test_a_registration_changes_live_views_instead_of_clearing_them(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path)
    reader = principal("read")
    harness.register(contract("lookup", "1.0.0", "read"), executor=echo)
    view = harness.views.view(reader, "openai")
    before = view.version
    harness.register(contract("kb.search", "1.0.0", "read"), executor=echo)
    harness.register(contract("vault", "1.0.0", "admin"), executor=echo)
    assert harness.views.view(reader, "openai") is view
    assert view.version != before
    assert view.get("kb_search") is not None and view.get("kb.search@1.0.0") is not None
    assert view.get("vault") is None
    assert [c.id for c in harness.visible_contracts(reader)] == ["kb.search", "lookup"]


def test_a_tool_the_registry_stops_serving_leaves_every_view() -> None:
    """Views follow every registry change through its listener — a registration, or a
    disable and an enable from the gateway's federation — in place, without a rebuild."""
    registry = Registry()
    views = ToolViews(registry)
    old = ToolEntry(contract("lookup", "1.0.0"), None)
    new = ToolEntry(contract("lookup", "2.0.0"), None)
    registry.add(old)
    view = views.view(None, "mcp")
    registry.add(new)
    assert views.view(None, "mcp") is view
    assert view["lookup"] is new
    registry.disable(new.ref, "withheld")
    assert views.view(None, "mcp") is view
    assert view["lookup"] is old and view.get(new.ref) is None
    registry.enable(new.ref)
    assert view["lookup"] is new


def test_views_made_after_registration_know_every_tool() -> None:
    registry = Registry()
    registry.add(ToolEntry(contract("lookup", "1.0.0"), None))
    registry.add(ToolEntry(contract("search"), None))
    registry.disable("search@1.0.0", "withheld")
    views = ToolViews(registry)
    view = views.view(None)
    assert view.get("lookup") is not None and view.get("search") is None
    registry.enable("search@1.0.0")
    assert view.get("search") is not None


def test_the_number_of_views_is_bounded() -> None:
    registry = Registry()
    for n in range(10):  # a capability tells views apart only when some tool requires it
        registry.add(ToolEntry(contract(f"tool{n}", "1.0.0", f"c{n}"), None))
    views = ToolViews(registry, limit=4)
    first = views.view(principal("c0"))
    for n in range(1, 10):
        views.view(principal(f"c{n}"))
    assert len(views) == 4
    assert views.view(principal("c0")) is not first  # evicted, then rebuilt on demand


def test_no_principal_and_a_principal_holding_star_are_different_views(tmp_path: Path) -> None:
    """Regression: both were cached under the capability set {"*"}, so whichever asked first
    decided what the other saw (a principal could resolve tools it may not see)."""
    harness = Harness(home=tmp_path)
    harness.register(contract("admin_tool", "1.0.0", "admin"), executor=echo)
    proposal = Proposal("c1", "admin_tool", {})
    assert harness.lookup(proposal) is not None  # no principal: the whole catalog
    assert harness.lookup(proposal, principal("*")) is None


def test_an_unknown_family_is_refused_without_breaking_later_registrations(
    tmp_path: Path,
) -> None:
    harness = Harness(home=tmp_path)
    with pytest.raises(ConfigError, match="unknown model family 'cobol'"):
        harness.lookup(Proposal("c1", "lookup", {}, family="cobol"))
    harness.register(contract("lookup"), executor=echo)
    assert harness.lookup(Proposal("c2", "lookup", {}, family="openai")) is not None


def test_a_suggestion_names_each_tool_once(tmp_path: Path) -> None:
    """Regression: "lookupp" was answered with 'lookup', 'lookup@2.0.0' and 'lookup@1.0.0'."""
    harness = Harness(home=tmp_path)
    for version in ("1.0.0", "2.0.0"):
        harness.register(contract("lookup", version), executor=echo)
    harness.register(contract("lockup"), executor=echo)
    envelope = harness.invoke_sync(Proposal("c1", "lookupp", {}), principal=principal())
    assert envelope.error is not None and envelope.error.category.value == "unknown_tool"
    assert envelope.error.suggested_fix == "Did you mean 'lookup' or 'lockup'?"


def test_suggestions_compare_a_bounded_number_of_candidates() -> None:
    """Regression: every visible name was compared with difflib (0.5 s at 10,000 tools)."""
    names = [f"svc{n % 97}.get_item_{n}" for n in range(10_000)]
    index = NameIndex(names)
    for n in (7, 4_242, 9_999):
        typo = f"svc{n % 97}.get_itme_{n}"
        found = index.suggest(typo)
        assert found.compared <= MAX_COMPARED and found.scanned <= SCAN_BUDGET
        assert found.names[0] == f"svc{n % 97}.get_item_{n}"
    # a name sharing one trigram with everything still reads no more than the budget
    assert index.suggest("_").scanned <= SCAN_BUDGET


def test_suggestions_agree_with_difflib_on_a_small_catalog() -> None:
    names = ["get_weather", "get_whether", "set_weather", "lookup", "search_docs", "send_mail"]
    index = NameIndex(names)
    for typo in ("get_wether", "lokup", "serch_docs", "sendmail", "weather", "zzz"):
        expected = difflib.get_close_matches(typo, names, n=3, cutoff=0.6)
        assert list(index.suggest(typo).names) == expected, typo


def test_an_index_forgets_what_is_discarded() -> None:
    index = NameIndex(["lookup", "lockup"])
    index.discard("lookup")
    index.discard("never_added")
    assert index.suggest("lookupp").names == ("lockup",)
    assert len(index) == 1


hidden_words = st.text(alphabet="abcdefg_.", min_size=1, max_size=12)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(hidden_words, st.booleans()), min_size=1, max_size=30),
    st.lists(hidden_words, min_size=1, max_size=5),
    st.sampled_from(FAMILIES),
)
def test_suggestions_never_name_a_tool_the_principal_cannot_see(
    tools: list[tuple[str, bool]], typos: list[str], family: str
) -> None:
    registry = Registry()
    views = ToolViews(registry)
    reader = principal("read")
    visible_names: set[str] = set()
    for word, hidden in tools:
        tool_id = "t" + word  # ids start with a letter
        if registry.latest(tool_id) is not None:
            continue
        entry = ToolEntry(contract(tool_id, "1.0.0", "admin" if hidden else "read"), None)
        registry.add(entry)
    view = views.view(reader, family)
    visible_names = {view.vendor_name(c.ref) for c in view.contracts()}  # type: ignore[misc]
    hidden_ids = {c.id for c in registry.latest_contracts() if "admin" in c.required_capabilities}
    for typo in typos:
        found = view.suggest("t" + typo)
        assert set(found.names) <= visible_names
        assert not set(found.names) & (hidden_ids - visible_names)
        # hidden tools cannot even sway the ranking: an index of the visible names alone
        # answers the same
        assert found.names == NameIndex(sorted(visible_names)).suggest("t" + typo).names


def test_a_hidden_near_miss_is_answered_from_visible_tools_only(tmp_path: Path) -> None:
    harness = Harness(home=tmp_path)
    harness.register(contract("set_item", "1.0.0", "write"), executor=echo)
    harness.register(contract("get_item", "1.0.0", "read"), executor=echo)
    envelope = harness.invoke_sync(Proposal("c1", "set_itme", {}), principal=principal("read"))
    assert envelope.error is not None
    fix = envelope.error.suggested_fix or ""
    assert "set_item" not in fix
    assert set(re.findall(r"'([^']+)'", fix)) <= {"get_item"}


@pytest.mark.parametrize("family", FAMILIES)
def test_views_show_the_names_the_adapters_render(tmp_path: Path, family: str) -> None:
    harness = Harness(home=tmp_path)
    for tool_id in ("math.factorial", "math_factorial", "kb/search", "kb:search"):
        harness.register(contract(tool_id), executor=echo)
    view = harness.views.view(principal(), family)
    rendered = vendor_names(harness.visible_contracts(principal()), family)
    assert {ref: view.vendor_name(ref) for ref in rendered} == rendered
