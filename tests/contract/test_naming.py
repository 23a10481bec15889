"""Vendor names: legal for each family, distinct, reversible by table, order-independent."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.contract.model import ModelView, ToolContract
from toolkeeper.contract.naming import FAMILIES, is_legal, vendor_names
from toolkeeper.errors import ConfigError


def contract(tool_id: str, version: str | None = "1.0.0", **fields: object) -> ToolContract:
    return ToolContract.model_validate(
        {"id": tool_id, "version": version, "description": "d", **fields}
    )


@pytest.mark.parametrize(
    ("name", "family", "legal"),
    [
        ("get_weather", "openai", True),
        ("get-weather", "anthropic", True),
        ("math.factorial", "openai", False),
        ("math.factorial", "anthropic", False),
        ("math.factorial", "gemini", True),
        ("math.factorial", "mcp", True),
        ("ns:tool", "gemini", True),
        ("ns:tool", "mcp", False),
        ("1tool", "openai", True),
        ("1tool", "gemini", False),
        ("-tool", "gemini", False),
        ("_tool", "gemini", True),
        ("", "openai", False),
        ("a" * 64, "openai", True),
        ("a" * 65, "openai", False),
        ("a" * 65, "gemini", False),
        ("a" * 128, "mcp", True),
        ("a" * 129, "mcp", False),
        ("wetter_für", "mcp", False),
    ],
)
def test_is_legal_follows_each_vendor_rule(name: str, family: str, legal: bool) -> None:
    assert is_legal(name, family) is legal


def test_unknown_family_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="openai, anthropic, gemini, mcp") as info:
        is_legal("x", "cohere")
    assert info.value.key == "family"
    assert info.value.value == "cohere"


def test_legal_names_pass_through_unchanged() -> None:
    names = vendor_names([contract("get_weather"), contract("search-docs")], "openai")
    assert names == {"get_weather@1.0.0": "get_weather", "search-docs@1.0.0": "search-docs"}


def test_illegal_characters_are_mapped_per_family() -> None:
    tool = contract("billing.invoices/create")
    assert vendor_names([tool], "openai")[tool.ref] == "billing_invoices_create"
    assert vendor_names([tool], "gemini")[tool.ref] == "billing.invoices_create"
    assert vendor_names([tool], "mcp")[tool.ref] == "billing.invoices_create"


def test_gemini_names_start_with_a_letter_or_underscore() -> None:
    tool = contract("3d.render")
    assert vendor_names([tool], "gemini")[tool.ref] == "_3d.render"
    assert vendor_names([tool], "openai")[tool.ref] == "3d_render"


def test_model_view_name_is_the_starting_point() -> None:
    tool = contract("kb.search", model_views={"anthropic": ModelView(name="search_knowledge")})
    assert vendor_names([tool], "anthropic")[tool.ref] == "search_knowledge"
    assert vendor_names([tool], "openai")[tool.ref] == "kb_search"


def test_long_names_are_cut_with_a_stable_hash_suffix() -> None:
    long_a = contract("a" * 70 + ".one")
    long_b = contract("a" * 70 + ".two")
    names = vendor_names([long_a, long_b], "openai")
    assert all(len(name) == 64 and is_legal(name, "openai") for name in names.values())
    assert names[long_a.ref] != names[long_b.ref]
    assert names[long_a.ref].startswith("a" * 55 + "_")
    assert vendor_names([long_a], "openai")[long_a.ref] == names[long_a.ref]


def test_unmapped_name_keeps_it_over_a_mapped_one() -> None:
    dotted, plain = contract("math.factorial"), contract("math_factorial")
    names = vendor_names([dotted, plain], "openai")
    assert names[plain.ref] == "math_factorial"
    assert names[dotted.ref].startswith("math_factorial_")
    assert len(names[dotted.ref]) == len("math_factorial_") + 8


def test_newest_version_keeps_the_plain_name() -> None:
    versions = [contract("deploy", v) for v in ("1.2.0", "1.10.0", "1.10.0-rc.1", "1.9.9")]
    names = vendor_names(versions, "anthropic")
    assert names["deploy@1.10.0"] == "deploy"
    assert len(set(names.values())) == 4


def test_release_outranks_its_prerelease_and_prereleases_order_by_semver() -> None:
    names = vendor_names([contract("t", "2.0.0-rc.2"), contract("t", "2.0.0-rc.10")], "mcp")
    assert names["t@2.0.0-rc.10"] == "t"
    names = vendor_names([contract("t", "2.0.0"), contract("t", "2.0.0-rc.10")], "mcp")
    assert names["t@2.0.0"] == "t"


def test_a_suffixed_name_never_steals_another_tools_name() -> None:
    dotted, plain = contract("x.y"), contract("x_y")
    stolen = vendor_names([dotted, plain], "openai")[dotted.ref]
    squatter = contract(stolen)
    names = vendor_names([dotted, plain, squatter], "openai")
    assert names[squatter.ref] == stolen
    assert len(set(names.values())) == 3


_ID_CHARS = "abcxyz019_.-:/"
ids = st.text(alphabet=_ID_CHARS, min_size=1, max_size=90).filter(lambda s: s[0] not in ".-:/")
versions = st.sampled_from([None, "1.0.0", "1.0.1", "2.0.0-beta.1", "10.0.0"])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(ids, versions), min_size=1, max_size=12), st.randoms())
def test_names_are_legal_distinct_and_order_independent(
    specs: list[tuple[str, str | None]], rnd: random.Random
) -> None:
    contracts = [contract(tool_id, version) for tool_id, version in specs]
    shuffled = list(contracts)
    rnd.shuffle(shuffled)
    for family in FAMILIES:
        names = vendor_names(contracts, family)
        assert set(names) == {c.ref for c in contracts}
        assert len(set(names.values())) == len(names)
        assert all(is_legal(name, family) for name in names.values())
        assert vendor_names(shuffled, family) == names
