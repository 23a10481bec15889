"""MCP: tools/list entries, tools/call requests -> proposals -> CallToolResults (REF-036:
a tool error is a result with isError, annotations are derived from the contract)."""

from __future__ import annotations

from collections.abc import Callable

import mcp_types

from toolkeeper.adapters import mcp
from toolkeeper.adapters.report import IssueKind
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope


def test_render_is_a_valid_tools_list_with_annotations_from_the_contract(
    weather: ToolContract, send_email: ToolContract
) -> None:
    tools = mcp.render([weather, send_email])
    listed = mcp_types.ListToolsResult.model_validate({"tools": tools})
    read, write = listed.tools
    assert (read.name, write.name) == ("weather.current", "mail_send")
    assert read.input_schema == weather.input_schema
    assert read.annotations is not None and write.annotations is not None
    assert (read.annotations.read_only_hint, read.annotations.destructive_hint) == (True, False)
    assert (write.annotations.read_only_hint, write.annotations.destructive_hint) == (False, True)
    assert write.annotations.idempotent_hint is False


def test_output_schema_is_sent_only_when_results_will_match_it(weather: ToolContract) -> None:
    output = {"type": "object", "properties": {"temp_c": {"type": "number"}}}
    full = weather.model_copy(update={"output_schema": output})
    projected = ToolContract.model_validate(
        {**full.to_dict(), "id": "weather.brief", "result_projection": {"fields": ["temp_c"]}}
    )
    tools, report = mcp.render_with_report([full, projected])
    assert tools[0]["outputSchema"] == output
    assert "outputSchema" not in tools[1]
    [issue] = report.issues
    assert (issue.ref, issue.kind) == (projected.ref, IssueKind.DROPPED)


def test_tools_call_requests_single_batched_or_bare_become_proposals() -> None:
    request = mcp_types.JSONRPCRequest(
        jsonrpc="2.0",
        id=7,
        method="tools/call",
        params={"name": "weather.current", "arguments": {"city": "Oslo"}},
    )
    [one] = mcp.parse(request)
    assert (one.call_id, one.tool, one.arguments, one.family) == (
        "7",
        "weather.current",
        {"city": "Oslo"},
        "mcp",
    )
    batch = [
        request.model_dump(mode="json", by_alias=True),
        {"jsonrpc": "2.0", "id": "b", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": "nope"}},
    ]
    assert [(p.call_id, p.tool, p.arguments) for p in mcp.parse(batch)] == [
        ("7", "weather.current", {"city": "Oslo"}),
        ("c", "nope", {}),
    ]
    bare = mcp_types.CallToolRequestParams(name="weather.current", arguments={"city": "Lima"})
    assert [(p.call_id, p.tool) for p in mcp.parse(bare)] == [("mcp-0", "weather.current")]


def test_results_are_call_tool_results_and_errors_carry_the_envelope(
    succeeded: Callable[..., ResultEnvelope], rejected: Callable[[str], ResultEnvelope]
) -> None:
    ok_call, bad_call = mcp.parse(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "a"}},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "a"}},
        ]
    )
    ok, bad = (
        mcp_types.CallToolResult.model_validate(result)
        for result in mcp.answer(
            [(ok_call, succeeded("1", {"temp_c": 4})), (bad_call, rejected("2"))]
        )
    )
    assert (ok.is_error, ok.structured_content) == (False, {"temp_c": 4})
    assert ok.meta == {mcp.CALL_ID_META: "1"}
    assert bad.is_error is True
    assert bad.structured_content["status"] == "rejected"
    assert bad.structured_content["error"]["category"] == "invalid_argument"
    assert ResultEnvelope.model_validate(bad.structured_content) == rejected("2")


def test_output_schema_is_withheld_when_secret_fields_are_redacted() -> None:
    contract = ToolContract(
        id="get_user",
        description="Read a user.",
        side_effect="none",
        output_schema={"type": "object", "properties": {"ssn": {"type": "integer"}}},
        data_classification={"fields": {"/ssn": "secret"}},
    )
    [tool] = mcp.render([contract])
    assert "outputSchema" not in tool
