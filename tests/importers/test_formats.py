"""Importers: MCP, OpenAI, Anthropic and BFCL definitions become cautious contracts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from bfcl_data import bfcl_data_dir
from toolkeeper import CatalogError, ContractError, Idempotency, SideEffect, ToolContract
from toolkeeper.importers import load_tool_list
from toolkeeper.importers.formats import (
    from_anthropic_tool,
    from_bfcl_function,
    from_mcp_tool,
    from_openai_function,
)

BFCL_DATA = bfcl_data_dir()
BFCL_CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "simple_java",
    "simple_javascript",
    "live_simple",
    "live_multiple",
)

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
    "required": ["city"],
}


def assert_cautious(contract: ToolContract) -> None:
    assert contract.side_effect is SideEffect.COMMITTING
    assert contract.open_world is True
    assert contract.idempotency is Idempotency.NONE


# -- MCP ----------------------------------------------------------------------------------


MCP_TOOL = {
    "name": "get_weather",
    "title": "Weather",
    "description": "Current weather for a city.",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string", "nullable": True}},
        "required": ["city"],
    },
    "outputSchema": {"type": "object", "properties": {"celsius": {"type": "float"}}},
    "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
}


def test_an_mcp_tool_imports_its_name_description_and_schemas() -> None:
    contract = from_mcp_tool(MCP_TOOL)
    assert contract.id == "get_weather"
    assert contract.version is None
    assert contract.description == "Current weather for a city."
    assert contract.input_schema["properties"]["city"] == {"type": ["string", "null"]}
    assert contract.output_schema == {
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
    }
    assert contract.import_warnings == (
        "input_schema/properties/city/nullable: OpenAPI nullable: true normalized to type "
        "['string', 'null']",
        "output_schema/properties/celsius/type: non-standard type 'float' normalized to 'number'",
    )


def test_mcp_annotations_are_kept_as_hints_and_never_set_the_effect_class() -> None:
    contract = from_mcp_tool(MCP_TOOL)
    assert contract.annotations == {
        "readOnlyHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
        "title": "Weather",
    }
    assert_cautious(contract)


def test_mcp_title_wins_over_annotations_title_with_a_warning() -> None:
    contract = from_mcp_tool({**MCP_TOOL, "annotations": {"title": "Old"}})
    assert contract.annotations == {"title": "Weather"}
    assert "title: differs from annotations.title; the tool's title is kept" in (
        contract.import_warnings
    )


def test_overrides_are_contract_fields_applied_on_top() -> None:
    contract = from_mcp_tool(
        MCP_TOOL, side_effect="none", idempotency="natural", open_world=False, version="1.2.0"
    )
    assert contract.side_effect is SideEffect.NONE
    assert contract.idempotency is Idempotency.NATURAL
    assert contract.open_world is False
    assert contract.version == "1.2.0"


def test_an_unknown_override_is_a_contract_error() -> None:
    with pytest.raises(ContractError, match="side_effects"):
        from_mcp_tool(MCP_TOOL, side_effects="none")


def test_the_classmethod_imports_the_same_contract() -> None:
    assert ToolContract.from_mcp_tool(MCP_TOOL) == from_mcp_tool(MCP_TOOL)


def test_mcp_fields_without_a_place_in_the_contract_are_named() -> None:
    contract = from_mcp_tool({**MCP_TOOL, "icons": [], "_meta": {}})
    assert "icons: MCP field not imported" in contract.import_warnings
    assert "_meta: MCP field not imported" in contract.import_warnings


def test_an_mcp_tool_without_input_schema_takes_no_arguments() -> None:
    contract = from_mcp_tool({"name": "ping", "description": "Ping."})
    assert contract.input_schema == ToolContract(id="x", description="x").input_schema
    assert contract.import_warnings == (
        "inputSchema: missing; the tool is imported as taking no arguments",
    )


def test_a_missing_description_is_warned_about() -> None:
    contract = from_mcp_tool({"name": "ping", "inputSchema": {"type": "object"}})
    assert contract.description == ""
    assert contract.import_warnings == (
        "description: missing; the model will see only the tool's name",
    )


# -- names --------------------------------------------------------------------------------


def test_an_illegal_name_is_a_catalog_error_suggesting_an_id() -> None:
    with pytest.raises(CatalogError) as caught:
        from_mcp_tool({**MCP_TOOL, "name": "-get weather"})
    message = str(caught.value)
    assert "MCP tool name '-get weather' is not a legal contract id" in message
    assert "id='get_weather'" in message


def test_an_illegal_name_imports_under_an_explicit_id() -> None:
    contract = from_mcp_tool({**MCP_TOOL, "name": "-get weather"}, id="get_weather")
    assert contract.id == "get_weather"
    assert "id: imported as 'get_weather'; the source calls it '-get weather'" in (
        contract.import_warnings
    )


def test_a_tool_without_a_name_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="MCP tool without a name"):
        from_mcp_tool({"inputSchema": {"type": "object"}})


def test_an_input_schema_that_is_not_an_object_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="describes 'string', not an object"):
        from_mcp_tool({"name": "x", "inputSchema": {"type": "string"}})


def test_a_tool_that_is_not_an_object_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="MCP tool must be a JSON object, got list"):
        from_mcp_tool([])  # type: ignore[arg-type]


# -- OpenAI -------------------------------------------------------------------------------


CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather.",
        "parameters": WEATHER_SCHEMA,
    },
}
RESPONSES_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather.",
    "parameters": WEATHER_SCHEMA,
}


def test_openai_chat_and_responses_shapes_import_the_same_contract() -> None:
    chat = from_openai_function(CHAT_TOOL)
    responses = from_openai_function(RESPONSES_TOOL)
    assert chat == responses
    assert chat.id == "get_weather"
    assert chat.input_schema == WEATHER_SCHEMA
    assert chat.import_warnings == ()
    assert_cautious(chat)


def test_openai_strict_is_named_as_not_imported() -> None:
    contract = from_openai_function({**RESPONSES_TOOL, "strict": True})
    assert contract.import_warnings == (
        "strict: OpenAI strict mode belongs to the OpenAI view, not the contract; not imported",
    )


def test_an_openai_function_without_parameters_takes_no_arguments() -> None:
    contract = from_openai_function({"type": "function", "name": "now", "description": "Time."})
    assert contract.input_schema["properties"] == {}


def test_an_openai_hosted_tool_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match=r"type 'web_search' .* is a hosted tool"):
        from_openai_function({"type": "web_search"})


# -- Anthropic ----------------------------------------------------------------------------


def test_anthropic_input_examples_that_validate_become_examples() -> None:
    contract = from_anthropic_tool(
        {
            "name": "get_weather",
            "description": "Weather.",
            "input_schema": WEATHER_SCHEMA,
            "input_examples": [{"city": "Paris", "days": 2}, {"city": "Oslo", "days": 0}, 5],
        }
    )
    assert [example.arguments for example in contract.examples] == [{"city": "Paris", "days": 2}]
    assert contract.import_warnings == (
        "input_examples/1: does not match input_schema at /days: 0 is less than the minimum of "
        "1; not kept as an example",
        "input_examples/2: does not match input_schema at not an object; not kept as an example",
    )
    assert_cautious(contract)


def test_anthropic_fields_without_a_place_are_named() -> None:
    contract = from_anthropic_tool(
        {"name": "x", "description": "X.", "input_schema": WEATHER_SCHEMA, "cache_control": {}}
    )
    assert contract.import_warnings == ("cache_control: Anthropic field not imported",)


def test_an_anthropic_server_tool_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match=r"type 'bash_20250124' .* is defined by Anthropic"):
        from_anthropic_tool({"type": "bash_20250124", "name": "bash"})


# -- BFCL ---------------------------------------------------------------------------------


def test_a_bfcl_function_with_a_dotted_name_imports() -> None:
    contract = from_bfcl_function(
        {
            "name": "math.factorial",
            "description": "Factorial.",
            "parameters": {
                "type": "dict",
                "properties": {"number": {"type": "integer"}},
                "required": ["number"],
            },
        }
    )
    assert contract.id == "math.factorial"
    assert contract.input_schema["type"] == "object"
    assert contract.import_warnings == (
        "input_schema/type: BFCL type 'dict' normalized to 'object'",
    )
    assert_cautious(contract)


def test_a_bfcl_java_function_accepts_java_expressions() -> None:
    contract = from_bfcl_function(
        {
            "name": "Repo.update",
            "description": "Update.",
            "parameters": {"type": "dict", "properties": {"ids": {"type": "ArrayList"}}},
        },
        language="java",
    )
    assert contract.input_schema["properties"]["ids"]["type"] == ["array", "string"]


def test_an_unknown_bfcl_language_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="unknown BFCL language 'kotlin'"):
        from_bfcl_function({"name": "x"}, language="kotlin")


def bfcl_functions() -> dict[str, tuple[dict[str, Any], str]]:
    """Every distinct function doc of the categories, with its language."""
    functions: dict[str, tuple[dict[str, Any], str]] = {}
    for category in BFCL_CATEGORIES:
        language = category.removeprefix("simple_") if "java" in category else "python"
        for line in (BFCL_DATA / f"BFCL_v4_{category}.json").read_text().splitlines():
            for doc in json.loads(line)["function"]:
                functions[language + json.dumps(doc, sort_keys=True)] = (doc, language)
    return functions


def test_every_bfcl_function_loads_as_a_cautious_contract() -> None:
    functions = bfcl_functions()
    assert len(functions) > 2000
    for doc, language in functions.values():
        contract = from_bfcl_function(doc, language=language)
        assert contract.id == doc["name"]
        assert contract.input_schema["type"] == "object"
        assert_cautious(contract)


def test_a_whole_bfcl_java_file_loads_as_one_catalog() -> None:
    java = load_tool_list(BFCL_DATA / "BFCL_v4_simple_java.json", source="simple_java")
    javascript = load_tool_list(
        (BFCL_DATA / "BFCL_v4_simple_javascript.json").read_text(), source="simple_javascript"
    )
    assert (len(java), len(javascript)) == (100, 50)
    assert java[0].id == "GeometryPresentation.createPresentation"


def test_a_bfcl_file_with_two_definitions_of_a_name_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError) as caught:
        load_tool_list(BFCL_DATA / "BFCL_v4_simple_python.json", source="simple_python")
    message = str(caught.value)
    assert "is defined twice, differently (entry simple_python_" in message
    assert "load one entry at a time" in message


def test_one_bfcl_entry_loads_with_its_language() -> None:
    entry = json.loads((BFCL_DATA / "BFCL_v4_simple_java.json").read_text().splitlines()[22])
    (contract,) = load_tool_list(entry, source="bfcl")
    assert contract.input_schema["properties"]["ids"]["type"] == ["array", "string"]


# -- tool lists ---------------------------------------------------------------------------


def test_an_mcp_tools_list_result_loads() -> None:
    contracts = load_tool_list({"tools": [MCP_TOOL], "nextCursor": None}, source="server")
    assert [c.id for c in contracts] == ["get_weather"]


def test_a_json_rpc_response_loads() -> None:
    response = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [MCP_TOOL]}}
    assert load_tool_list(response, source="server") == [from_mcp_tool(MCP_TOOL)]


def test_a_json_rpc_error_is_a_catalog_error() -> None:
    response = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}}
    with pytest.raises(CatalogError, match="server: the server answered with an error"):
        load_tool_list(response, source="server")


def test_a_mixed_list_detects_each_format() -> None:
    anthropic = {"name": "c", "description": "C.", "input_schema": WEATHER_SCHEMA}
    contracts = load_tool_list(
        [{**MCP_TOOL, "name": "a"}, {**RESPONSES_TOOL, "name": "b"}, anthropic], source="mixed"
    )
    assert [c.id for c in contracts] == ["a", "b", "c"]
    assert all(c.side_effect is SideEffect.COMMITTING for c in contracts)


def test_identical_duplicates_load_once() -> None:
    assert len(load_tool_list([CHAT_TOOL, CHAT_TOOL], source="dupes")) == 1


def test_conflicting_duplicates_are_a_catalog_error() -> None:
    changed = {**RESPONSES_TOOL, "description": "Other."}
    with pytest.raises(CatalogError, match="tool 'get_weather' is defined twice, differently"):
        load_tool_list([RESPONSES_TOOL, changed], source="dupes")


def test_an_item_that_cannot_be_imported_is_named_with_its_position() -> None:
    with pytest.raises(
        CatalogError, match=r"mixed: item 1 \('a b'\): MCP tool name 'a b' is not a legal"
    ):
        load_tool_list([MCP_TOOL, {**MCP_TOOL, "name": "a b"}], source="mixed")


def test_an_unrecognized_item_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="cannot tell the format of item 0 \\(keys: spec\\)"):
        load_tool_list([{"spec": {}}], source="odd")


def test_a_built_in_tool_in_a_list_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="built-in tool of type 'web_search_20250305'"):
        load_tool_list([{"type": "web_search_20250305", "name": "web_search"}], source="x")


def test_text_that_is_not_json_suggests_passing_a_path() -> None:
    with pytest.raises(CatalogError, match=r"not JSON or JSON lines .* pass a pathlib\.Path"):
        load_tool_list("tools.json", source="tools.json")


def test_data_that_is_not_a_tool_list_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="expected a tool list, got int"):
        load_tool_list(5, source="five")


def test_json_lines_and_yaml_files_load(tmp_path: Path) -> None:
    lines = tmp_path / "tools.jsonl"
    lines.write_text(json.dumps(CHAT_TOOL) + "\n" + json.dumps({**MCP_TOOL, "name": "b"}) + "\n")
    document = tmp_path / "tools.yaml"
    document.write_text(yaml.safe_dump({"tools": [MCP_TOOL]}))
    assert [c.id for c in load_tool_list(lines, source="jsonl")] == ["get_weather", "b"]
    assert load_tool_list(document, source="yaml") == [from_mcp_tool(MCP_TOOL)]


def test_an_unreadable_file_is_a_catalog_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read"):
        load_tool_list(tmp_path / "missing.json", source="missing")
