"""Progressive loading in every vendor road: summary, search, load, and only then schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import Harness, Principal, Proposal, ToolContract
from toolkeeper.adapters import anthropic
from toolkeeper.discovery import SEARCH_TOOLS, MetaTools, Progressive, catalog_summary
from toolkeeper.errors import ConfigError, RegistryError


def _noop(**_: Any) -> None:
    return None


def contract(tool_id: str, description: str, **extra: Any) -> ToolContract:
    return ToolContract(id=tool_id, version="1.0.0", description=description, **extra)


@pytest.fixture
def meta(tmp_path: Path) -> MetaTools:
    h = Harness(home=tmp_path)
    for c in [
        contract("weather.current", "Current weather for a city.", side_effect="none"),
        contract("weather.forecast", "Weather forecast for the next days.", side_effect="none"),
        contract("files.delete", "Delete a file.", side_effect="committing"),
        contract("billing.refund", "Refund an order.", required_capabilities=("billing",)),
    ]:
        h.register(c, executor=_noop)
    return MetaTools(h)


ME = Principal("me")


def names(tools: list[dict[str, Any]]) -> list[str]:
    """Tool names in any vendor's rendering (Gemini groups them in one declaration list)."""
    flat = [d for t in tools for d in t.get("function_declarations", [t])]
    return sorted(t.get("name") or t["function"]["name"] for t in flat)


def call(
    meta: MetaTools,
    tool: str,
    arguments: dict[str, Any],
    *,
    session: str = "s",
    family: str | None = None,
) -> Any:
    envelope = meta.harness.invoke_sync(
        Proposal("c1", tool, arguments, family=family), principal=ME, session=session
    )
    assert envelope.ok, envelope
    return envelope


def test_openai_turns_start_with_meta_tools_and_grow_by_loading(meta: MetaTools) -> None:
    conversation = Progressive(
        meta, principal=ME, vendor="openai_chat", session="s", always=["weather.current"]
    )
    assert names(conversation.tools()) == ["load_tools", "search_tools", "weather_current"]
    found = call(meta, "search_tools", {"query": "forecast", "k": 1}).structured_content
    assert [t["name"] for t in found["tools"]] == ["weather.forecast"]
    assert found["tools"][0]["effect"] == "none"
    loaded = call(meta, "load_tools", {"names": ["weather.forecast"]}).structured_content
    assert loaded == {"loaded": ["weather.forecast"]}
    assert "weather_forecast" in names(conversation.tools())
    # another session has loaded nothing
    other = Progressive(meta, principal=ME, vendor="gemini", session="t")
    assert names(other.tools()) == ["load_tools", "search_tools"]


def test_loading_a_hidden_tool_answers_as_for_an_unknown_one(meta: MetaTools) -> None:
    hidden = call(meta, "load_tools", {"names": ["billing.refund"]}).structured_content
    unknown = call(meta, "load_tools", {"names": ["no.such"]}).structured_content
    assert hidden["loaded"] == unknown["loaded"] == []
    assert hidden["hint"] == unknown["hint"]
    assert call(meta, "search_tools", {"query": "refund order"}).structured_content == {
        "tools": [],
        "tool_references": [],
    }


def test_meta_tools_are_never_search_results_nor_loadable(meta: MetaTools) -> None:
    found = call(meta, "search_tools", {"query": "search tools load"}).structured_content
    assert all(t["name"] not in {"search_tools", "load_tools"} for t in found["tools"])
    assert call(meta, "load_tools", {"names": ["load_tools"]}).structured_content["loaded"] == []


def test_anthropic_defers_every_tool_but_search_and_always(meta: MetaTools) -> None:
    conversation = Progressive(
        meta, principal=ME, vendor="anthropic", session="a", always=["files.delete"]
    )
    tools = {t["name"]: t for t in conversation.tools()}
    assert set(tools) == {"search_tools", "weather_current", "weather_forecast", "files_delete"}
    assert sorted(n for n, t in tools.items() if not t.get("defer_loading")) == [
        "files_delete",
        "search_tools",
    ]
    envelope = call(meta, "search_tools", {"query": "weather"}, family="anthropic")
    [message] = anthropic.answer([(Proposal("toolu_1", "search_tools", {}), envelope)])
    [result] = message["content"]
    assert sorted(result["content"], key=lambda block: block["tool_name"]) == [
        {"type": "tool_reference", "tool_name": "weather_current"},
        {"type": "tool_reference", "tool_name": "weather_forecast"},
    ]
    assert anthropic.SEARCH_TOOL == SEARCH_TOOLS


def test_anthropic_search_finding_nothing_answers_with_text(meta: MetaTools) -> None:
    envelope = call(meta, "search_tools", {"query": "zzz"}, family="anthropic")
    [message] = anthropic.answer([(Proposal("toolu_1", "search_tools", {}), envelope)])
    assert message["content"][0]["content"][0]["type"] == "text"


def test_first_context_is_far_smaller_than_the_catalog(meta: MetaTools) -> None:
    conversation = Progressive(meta, principal=ME, vendor="openai_chat")
    text = conversation.first_context()
    assert text.splitlines()[0].startswith("3 tools in 2 groups")
    assert "- weather (2; 2 read-only): weather.current, weather.forecast" in text
    assert "billing" not in text  # hidden tools are not summarized
    full = json.dumps(meta.harness.visible_contracts(ME)[0].input_schema)
    assert full not in text


def test_summary_bounds_groups() -> None:
    many = [contract(f"g{i}.t", "A tool.") for i in range(40)]
    text = catalog_summary(many, max_groups=5)
    assert text.splitlines()[-1] == "- 35 more groups (35 tools)"


def test_meta_tools_install_once_and_vendor_is_checked(meta: MetaTools) -> None:
    with pytest.raises(RegistryError, match="already registered"):
        MetaTools(meta.harness)
    with pytest.raises(ConfigError, match="unknown vendor"):
        Progressive(meta, principal=ME, vendor="cohere")
