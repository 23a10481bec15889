"""Regressions for the false positives lint raised on public MCP catalogs, each on the real
item that showed it (tests/lint/catalogs; issue 11, "what hurt" 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper.importers.catalog import load_catalog
from toolkeeper.importers.formats import from_mcp_tool
from toolkeeper.lint import Severity, lint_catalog, lint_contract

CATALOGS = Path(__file__).parent / "catalogs"


def tool(catalog: str, name: str) -> dict[str, Any]:
    tools = json.loads((CATALOGS / catalog).read_text())["tools"]
    found: dict[str, Any] = next(t for t in tools if t["name"] == name)
    return found


def fired(catalog: str, name: str) -> list[tuple[str, str]]:
    return [(f.code, f.path) for f in lint_contract(from_mcp_tool(tool(catalog, name)))]


@pytest.mark.parametrize(
    ("catalog", "name", "parameter"),
    [
        ("mcp-server-time.json", "get_current_time", "timezone"),  # (e.g., 'A', 'B')
        ("mcp-server-time.json", "convert_time", "source_timezone"),
        ("github-mcp-server.json", "get_file_contents", "ref"),  # such as `a`, `b` or `c`
        ("github-mcp-server.json", "search_code", "query"),  # supports `OR`, `NOT`
    ],
)
def test_example_values_are_not_a_closed_set(catalog: str, name: str, parameter: str) -> None:
    assert ("TK310", f"/input_schema/properties/{parameter}") not in fired(catalog, name)


def test_values_listed_as_a_closed_set_still_are() -> None:
    listed = tool("mcp-server-time.json", "get_current_time")
    listed["inputSchema"]["properties"]["timezone"]["description"] = (
        "IANA timezone name, one of 'UTC', 'Europe/Paris' (e.g. 'UTC')"
    )
    assert ("TK310", "/input_schema/properties/timezone") in [
        (f.code, f.path) for f in lint_contract(from_mcp_tool(listed))
    ]


def test_a_travel_mode_is_an_option_not_an_action_switch() -> None:
    """Baidu Maps' map_directions: mode is driving, walking, riding or transit."""
    assert "TK305" not in [code for code, _ in fired("baidu-map-mcp.json", "map_directions")]


def test_a_method_naming_actions_is_still_a_switch() -> None:
    """github-mcp-server's issue_read: method is get, get_comments, get_sub_issues..."""
    assert ("TK305", "/input_schema/properties/method") in fired(
        "github-mcp-server.json", "issue_read"
    )


@pytest.mark.parametrize(
    ("catalog", "name", "code"),
    [
        ("github-mcp-server.json", "search_code", "TK202"),  # "Best for finding exact symbols"
        ("github-mcp-server.json", "search_repositories", "TK202"),  # "Perfect for discovering"
        ("mcp-server-sequentialthinking.json", "sequentialthinking", "TK202"),  # When to use:
        ("mcp-server-filesystem.json", "read_media_file", "TK203"),  # "Only works within"
        ("github-mcp-server.json", "get_team_members", "TK203"),  # "Limited to organizations"
    ],
)
def test_guidance_in_the_words_public_catalogs_use_is_recognized(
    catalog: str, name: str, code: str
) -> None:
    assert code not in [c for c, _ in fired(catalog, name)]


def test_chinese_guidance_is_recognized() -> None:
    guided = tool("baidu-map-mcp.json", "map_weather")
    guided["description"] += "。用于查询天气；不适用于历史天气。"
    codes = [f.code for f in lint_contract(from_mcp_tool(guided))]
    assert "TK202" not in codes and "TK203" not in codes


def test_public_catalogs_have_no_errors() -> None:
    """docs/lint.md reviews every error lint reports on these catalogs; there are none."""
    errors = [
        (path.name, f.code, f.contract)
        for path in sorted(CATALOGS.glob("*.json"))
        for f in lint_catalog(load_catalog(path)).findings
        if f.severity is Severity.ERROR
    ]
    assert errors == []
