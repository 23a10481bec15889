"""MCP: ``tools/list`` entries out, ``tools/call`` requests in, ``CallToolResult``s back.

These are the wire shapes (camelCase, as ``mcp_types`` serializes them). In MCP the call id
is the JSON-RPC request id, which belongs to the session that answers the request; `answer`
returns the results in request order and also states each call id in ``_meta`` under
``toolkeeper.dev/call_id``, so a transport can pair them without relying on position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolkeeper.adapters._common import as_data, call_id, get, views
from toolkeeper.adapters.report import IssueKind, RenderIssue, RenderReport
from toolkeeper.contract.model import Classification, SideEffect, ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope
from toolkeeper.runtime.invocation import Proposal
from toolkeeper.schema.document import utf8_json

FAMILY = "mcp"
CALL_ID_META = "toolkeeper.dev/call_id"


def render(contracts: Sequence[ToolContract]) -> list[dict[str, Any]]:
    """The ``tools`` of a ``tools/list`` result for `contracts`."""
    return render_with_report(contracts)[0]


def render_with_report(
    contracts: Sequence[ToolContract],
) -> tuple[list[dict[str, Any]], RenderReport]:
    """`render`, plus the output schemas left out.

    Annotations are derived from the contract; an upstream's own hints (kept in
    ``contract.annotations``) are passed on where they are at least as cautious, and its
    ``title`` and other annotation keys as they are (`cautious_annotations`). An output
    schema is sent only when it is an object and the contract's result projection keeps
    every field and redacts none: a projected or redacted result would not match it, and
    clients may validate ``structuredContent`` against it.
    """
    issues: list[RenderIssue] = []
    tools = []
    for view in views(contracts, FAMILY, issues):
        contract = view.contract
        tool: dict[str, Any] = {
            "name": view.name,
            "description": view.description,
            "inputSchema": view.schema,
        }
        output = contract.output_schema
        if output is not None:
            redacted = Classification.SECRET in contract.data_classification.fields.values()
            if (
                output.get("type") == "object"
                and contract.result_projection.fields is None
                and not redacted
            ):
                tool["outputSchema"] = output
            else:
                reason = (
                    "not an object"
                    if output.get("type") != "object"
                    else "secret fields are redacted"
                    if redacted
                    else "projected"
                )
                issues.append(
                    RenderIssue(contract.ref, "", IssueKind.DROPPED, f"outputSchema ({reason})")
                )
        derived = {
            "readOnlyHint": contract.is_read_only,
            "destructiveHint": contract.effective_side_effect is SideEffect.COMMITTING,
            "idempotentHint": contract.is_idempotent,
            "openWorldHint": contract.open_world,
        }
        hints = contract.annotations or {}
        if isinstance(hints.get("title"), str):
            tool["title"] = hints["title"]
        tool["annotations"] = cautious_annotations(hints, derived)
        tools.append(tool)
    return tools, RenderReport(tuple(issues))


CAUTIOUS_HINTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
"""Each behaviour hint's cautious value: the one a client should assume when unsure."""


def cautious_annotations(hints: Mapping[str, Any], derived: Mapping[str, bool]) -> dict[str, Any]:
    """The annotations to list: the upstream's `hints` (title and any other keys) with each
    behaviour hint the more cautious of theirs and ours — ours may make a hint more cautious
    (an upstream's ``readOnlyHint: true`` on a tool our contract treats as a write becomes
    false), never less (an upstream's ``destructiveHint: true`` stays, whatever we derived)."""
    merged = {key: value for key, value in hints.items() if key not in CAUTIOUS_HINTS}
    for key, ours in derived.items():
        cautious = CAUTIOUS_HINTS[key]
        merged[key] = cautious if cautious in (ours, hints.get(key)) else ours
    return merged


def parse(request: Any) -> list[Proposal]:
    """Proposals from ``tools/call`` requests: one request, a batch (list), or bare params.

    Accepts ``mcp_types`` objects or their dict forms. The JSON-RPC id becomes the call id
    (as a string); params without a request id get ``mcp-<n>``. Anything that is not a
    ``tools/call`` is not a tool call and is skipped.
    """
    data = as_data(request)
    messages = data if isinstance(data, list) else [data]
    proposals = []
    for index, message in enumerate(as_data(m) for m in messages):
        if get(message, "method") not in (None, "tools/call"):
            continue
        params = get(message, "params") if get(message, "method") else message
        proposals.append(
            Proposal(
                call_id=call_id(get(message, "id"), FAMILY, index),
                tool=str(get(params, "name") or ""),
                arguments=get(params, "arguments") if get(params, "arguments") is not None else {},
                family=FAMILY,
            )
        )
    return proposals


def answer(results: Sequence[tuple[Proposal, ResultEnvelope]]) -> list[dict[str, Any]]:
    """One ``CallToolResult`` per call, in call order.

    A result that did not succeed is a tool execution error (``isError: true``) carrying the
    whole envelope in ``structuredContent``; a success carries the envelope's structured
    content. The text block holds the envelope's model text either way. Lone surrogates
    are sent as their escapes: a transport cannot encode them as UTF-8.
    """
    answers = []
    for proposal, envelope in results:
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": envelope.to_model_text()}],
            "isError": not envelope.ok,
            "_meta": {CALL_ID_META: proposal.call_id},
        }
        if not envelope.ok:
            result["structuredContent"] = envelope.model_dump(mode="json", exclude_none=True)
        elif envelope.structured_content is not None:
            result["structuredContent"] = envelope.structured_content
        answers.append(result)
    return utf8_json(answers)
