"""One semver ordering (`semver_key`), checked against the precedence rules of semver 2.0.0
§11, and used alike by the registry (which version is latest) and the vendor names (which
version keeps a shared name)."""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkeeper.contract.model import ToolContract, semver_key
from toolkeeper.contract.naming import vendor_names
from toolkeeper.runtime.registry import Registry, ToolEntry


def precedence(left: str, right: str) -> int:
    """semver.org §11, written out as the spec words it: -1, 0 or 1."""
    left_core, _, left_pre = left.split("+")[0].partition("-")
    right_core, _, right_pre = right.split("+")[0].partition("-")
    left_numbers = [int(part) for part in left_core.split(".")]
    right_numbers = [int(part) for part in right_core.split(".")]
    if left_numbers != right_numbers:
        return -1 if left_numbers < right_numbers else 1
    if not left_pre or not right_pre:  # a release outranks its pre-releases
        return (not left_pre) - (not right_pre)
    for a, b in itertools.zip_longest(left_pre.split("."), right_pre.split(".")):
        if a is None or b is None:  # the longer run of equal identifiers ranks higher
            return -1 if a is None else 1
        if a == b:
            continue
        if a.isdigit() and b.isdigit():
            return -1 if int(a) < int(b) else 1
        if a.isdigit() or b.isdigit():  # numeric identifiers rank below alphanumeric ones
            return -1 if a.isdigit() else 1
        return -1 if a < b else 1
    return 0


numbers = st.integers(min_value=0, max_value=12).map(str)
identifiers = st.one_of(
    st.integers(min_value=0, max_value=12).map(str),
    st.sampled_from(["alpha", "beta", "rc", "a1", "x-y", "RC", "0a"]),
)
versions = st.builds(
    lambda core, pre, build: (
        ".".join(core) + (f"-{'.'.join(pre)}" if pre else "") + (f"+{build}" if build else "")
    ),
    st.lists(numbers, min_size=3, max_size=3),
    st.lists(identifiers, max_size=3),
    st.sampled_from(["", "build.7", "sha.abc"]),
)


@given(versions, versions)
@settings(max_examples=400, deadline=None)
def test_the_key_orders_as_semver_precedence(left: str, right: str) -> None:
    expected = precedence(left, right)
    actual = (semver_key(left) > semver_key(right)) - (semver_key(left) < semver_key(right))
    assert actual == expected


SPEC_EXAMPLE = "1.0.0-alpha 1.0.0-alpha.1 1.0.0-alpha.beta 1.0.0-beta 1.0.0-beta.2 1.0.0-beta.11"


@pytest.mark.parametrize(
    "ordered",
    [
        [*SPEC_EXAMPLE.split(), "1.0.0-rc.1", "1.0.0"],  # semver.org's own example
        ["1.0.0-rc.2", "1.0.0-rc.10", "1.0.0", "1.0.1", "1.10.0", "10.0.0"],
    ],
)
def test_the_spec_examples_are_in_order(ordered: list[str]) -> None:
    assert sorted(ordered, key=semver_key) == ordered
    assert sorted(ordered, key=functools.cmp_to_key(precedence)) == ordered


def test_a_string_that_is_not_semver_is_refused() -> None:
    with pytest.raises(ValueError, match="is not semver"):
        semver_key("1.0")


def contract(version: str) -> ToolContract:
    return ToolContract(id="report", version=version, description="Report.", side_effect="none")


@given(st.lists(versions, min_size=1, max_size=5, unique_by=lambda v: v.split("+")[0]))
@settings(max_examples=100, deadline=None)
def test_the_registry_and_vendor_names_agree_on_the_newest(chosen: list[str]) -> None:
    contracts = [contract(version) for version in chosen]
    registry = Registry()
    for each in contracts:
        registry.add(ToolEntry(each, None))
    latest = registry.latest("report")
    assert latest is not None
    keeper = [ref for ref, name in vendor_names(contracts, "openai").items() if name == "report"]
    assert keeper == [latest.ref]
    assert latest.contract.version == max(chosen, key=functools.cmp_to_key(precedence))
