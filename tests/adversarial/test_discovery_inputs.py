"""Tool search under hostile input: lone surrogates, huge and deep text, odd numbers. Every
case answers (hits or none) in bounded work; none raises."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Harness, Principal, ToolContract
from toolkeeper.discovery.index import MAX_K
from toolkeeper.discovery.text import tool_text

ME = Principal("me")


def _noop(**_: Any) -> None:
    return None


def deep_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "description": "leaf secret word"}
    for n in range(depth):
        schema = {"type": "object", "properties": {f"level{n}": schema}}
    return schema


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    h = Harness(home=tmp_path)
    h.register(
        ToolContract(id="odd", version="1.0.0", description="Odd \ud800 text: weather \udfff."),
        executor=_noop,
    )
    h.register(
        ToolContract(
            id="costly",
            version="1.0.0",
            description="Weather, at a price.",
            annotations={"tags": ["x"] * 1000, "cost": math.inf},
        ),
        executor=_noop,
    )
    h.register(
        ToolContract(
            id="nan_cost", version="1.0.0", description="Weather.", annotations={"cost": math.nan}
        ),
        executor=_noop,
    )
    return h


def test_lone_surrogates_in_query_and_description(harness: Harness) -> None:
    hits = harness.search_tools("weather \udc00 odd", principal=ME, k=5)
    assert hits and hits[0].name == "odd"
    assert harness.search_tools("\ud800\udfff", principal=ME) == []


def test_odd_numbers_for_k_and_cost(harness: Harness) -> None:
    assert harness.search_tools("weather", principal=ME, k=-3) == []
    assert len(harness.search_tools("weather", principal=ME, k=10**9)) == 3 <= MAX_K
    scores = [hit.score for hit in harness.search_tools("weather", principal=ME, k=5)]
    assert all(math.isfinite(s) and 0 < s <= 1 for s in scores)


def test_huge_query_costs_bounded_time(harness: Harness) -> None:
    harness.search_tools("warm", principal=ME)
    start = time.process_time()
    hits = harness.search_tools("weather " * 1_000_000, principal=ME)
    assert time.process_time() - start < 5  # the query is cut to MAX_QUERY_CHARS first
    assert hits


def test_deep_schema_and_huge_description_are_bounded() -> None:
    contract = ToolContract(
        id="deep", version="1.0.0", description="word " * 200_000, input_schema=deep_schema(300)
    )
    text = tool_text(contract)
    assert len(text.fields["description"]) <= 4_000
    assert len(text.terms) < 10_000
    assert "leaf" not in text.fields["parameters"]  # past the nodes walked: never reached


def test_filters_with_odd_values(harness: Harness) -> None:
    assert harness.search_tools("weather", principal=ME, filters={"effect": []}) == []
    assert harness.search_tools("weather", principal=ME, filters={"tags": ["\ud800"]}) == []


def test_hybrid_takes_lone_surrogates(harness: Harness) -> None:
    harness.discovery.ranker = "hybrid"
    hits = harness.search_tools("weather \udc00", principal=ME)
    assert {hit.name for hit in hits} == {"odd", "costly", "nan_cost"}


def test_compatibility_forms_are_read_as_what_they_stand_for(tmp_path: Path) -> None:
    h = Harness(home=tmp_path)
    h.register(
        ToolContract(id="get_weather", version="1.0.0", description="Weather."), executor=_noop
    )
    h.register(
        ToolContract(id="read_file", version="1.0.0", description="Read a file."), executor=_noop
    )
    assert [hit.name for hit in h.search_tools("ＷＥＡＴＨＥＲ", principal=ME)] == ["get_weather"]
    hits = h.search_tools("read the ﬁle", principal=ME)
    assert hits and hits[0].name == "read_file"


def test_a_request_of_numbers_alone_searches_by_them(tmp_path: Path) -> None:
    h = Harness(home=tmp_path)
    h.register(
        ToolContract(id="form_1040", version="1.0.0", description="US tax form."), executor=_noop
    )
    h.register(
        ToolContract(id="get_weather", version="1.0.0", description="Weather."), executor=_noop
    )
    assert [hit.name for hit in h.search_tools("1040", principal=ME)] == ["form_1040"]
    # Beside words, a number is a value and is left out: it does not pull in form_1040.
    assert [hit.name for hit in h.search_tools("weather 1040", principal=ME)] == ["get_weather"]
