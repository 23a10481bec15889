"""Regressions for the false positives lint raised on public MCP catalogs, each on the real
item that showed it (tests/lint/catalogs; issue 11, "what hurt" 10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from toolkeeper import tool as tool_decorator
from toolkeeper.contract.functions import contract_of
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


@pytest.mark.parametrize(
    ("catalog", "name", "code"),
    [
        ("mcp-server-filesystem.json", "move_file", "TK202"),  # "and can be used for simple"
        ("mcp-server-filesystem.json", "move_file", "TK203"),  # "the operation will fail"
        ("github-mcp-server.json", "delete_branch", "TK203"),  # "cannot be deleted"
        ("mcp-server-filesystem.json", "read_file", "TK202"),  # "DEPRECATED: Use ... instead"
    ],
)
def test_limits_and_retirement_count_as_guidance(catalog: str, name: str, code: str) -> None:
    assert code not in [c for c, _ in fired(catalog, name)]


def test_what_something_else_can_be_used_for_is_no_guidance() -> None:
    """The everything server's annotatedMessage: 'Demonstrates how annotations can be used
    to provide metadata' says what annotations are for, not when to call the tool."""
    assert "TK202" in [c for c, _ in fired("mcp-server-everything.json", "annotatedMessage")]


def test_a_tool_not_deprecated_still_needs_to_say_when_to_use_it() -> None:
    current = tool("mcp-server-filesystem.json", "read_file")
    current["description"] = "Read the complete contents of a file as text, in its encoding."
    assert "TK202" in [f.code for f in lint_contract(from_mcp_tool(current))]


def test_a_description_too_short_is_one_finding_that_says_what_it_lacks() -> None:
    """mcp-server-git's git_checkout, 'Switches branches': one defect, one finding."""
    findings = lint_contract(from_mcp_tool(tool("mcp-server-git.json", "git_checkout")))
    [short] = [f for f in findings if f.code in ("TK201", "TK202", "TK203")]
    assert short.code == "TK201"
    assert "does not say when to use it or when not to" in short.message
    assert "when to use it and when not to" in short.fix


def test_a_long_enough_description_without_guidance_gets_both_findings() -> None:
    longer = tool("mcp-server-git.json", "git_checkout")
    longer["description"] = "Switches the working tree of the repository to another branch."
    codes = [f.code for f in lint_contract(from_mcp_tool(longer))]
    assert "TK201" not in codes and "TK202" in codes and "TK203" in codes


@pytest.mark.parametrize(
    ("name", "parameter"),
    [
        ("create_entities", "entities"),
        ("create_relations", "relations"),
        ("add_observations", "observations"),
        ("delete_observations", "deletions"),
    ],
)
def test_a_list_of_described_objects_is_described(name: str, parameter: str) -> None:
    """The memory server's lists of entities, relations, observations: every field of an
    entry is described, and the type says it is a list of them."""
    assert ("TK308", f"/input_schema/properties/{parameter}") not in fired(
        "mcp-server-memory.json", name
    )


def test_a_list_with_an_undescribed_field_or_of_plain_values_is_not() -> None:
    entities = tool("mcp-server-memory.json", "create_entities")
    item = entities["inputSchema"]["properties"]["entities"]["items"]
    del item["properties"]["entityType"]["description"]
    assert ("TK308", "/input_schema/properties/entities") in [
        (f.code, f.path) for f in lint_contract(from_mcp_tool(entities))
    ]
    assert ("TK308", "/input_schema/properties/excludePatterns") in fired(
        "mcp-server-filesystem.json", "directory_tree"
    )


def test_a_short_docstring_is_told_which_lines_to_add() -> None:
    """The folded fix is phrased for a decorated function: its docstring, not a field."""

    @tool_decorator(side_effect="none")
    def switch_branch(name: str) -> str:
        """Switches branches."""
        return name

    [short] = [f for f in lint_contract(contract_of(switch_branch)) if f.code.startswith("TK20")]
    assert short.code == "TK201"
    assert "docstring's summary" in short.fix
    assert "'Use when:' and 'Do not use when:' lines" in short.fix
