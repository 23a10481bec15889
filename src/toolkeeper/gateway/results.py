"""The gateway's wire shapes: a principal's ``tools/list`` and a ``CallToolResult`` per envelope.

Rendering is `toolkeeper.adapters.mcp.render`, the same one every other entry point uses, so
the names a client sees are the names the harness resolves. The gateway adds one tool of its
own, `RESUME_TOOL`, through which a client continues a call a human has approved: models cannot
set ``_meta``, but they can call a tool, and the pending envelope tells them to.

A result that did not succeed is a tool execution error (``isError: true``) carrying the whole
envelope in ``structuredContent``, so a model can read the field errors and the fix; ledger ids
ride in ``_meta`` so a host can find the call in `toolkeeper ledger show`.

A tool that answered with content blocks (an upstream MCP tool) is answered with those blocks,
in order, with its ``structuredContent`` and ``isError`` as it sent them (`passed_through`):
the envelope rides in ``_meta`` under `ENVELOPE_META`, and what the gateway must tell the model
itself (a replay, a pending record, a refusal of the tool's output) is one text block appended
after the tool's own (docs/gateway-fidelity.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcp_types import CallToolResult, TextContent, Tool

from toolkeeper.adapters.mcp import CALL_ID_META, render
from toolkeeper.contract.model import ToolContract
from toolkeeper.gateway.resources import readable_uri
from toolkeeper.runtime.envelope import ErrorCategory, ResultEnvelope, Status, ToolError

RESUME_TOOL = "toolkeeper.resume"
"""The gateway's own tool: continue a call after its approval was decided."""

META_PREFIX = CALL_ID_META.rsplit("/", 1)[0] + "/"
"""The ``_meta`` key prefix for ledger ids, shared with the MCP adapter (``toolkeeper.dev/``)."""
REQUEST_ID_META = META_PREFIX + "request_id"
APPROVAL_ID_META = META_PREFIX + "approval_id"
RECORD_PENDING_META = META_PREFIX + "record_pending"
"""Set (true) when the call's ledger record is queued because the ledger refuses writes."""
ENVELOPE_META = META_PREFIX + "envelope"
"""The call's envelope (without the content it repeats), on a passed-through result."""

_RESUME_DEFINITION: dict[str, Any] = {
    "name": RESUME_TOOL,
    "description": (
        "Continue a call that was answered with status pending_approval, once a human has "
        "decided it. Returns the call's outcome: its result if approved, approval_denied if "
        "denied, or pending_approval again while nobody has decided.\n"
        "Use when: an earlier answer said pending_approval and gave an approval_id.\n"
        "Do not use when: you have no approval_id from an earlier answer; call the tool itself."
    ),
    "inputSchema": {
        "type": "object",
        "properties": {
            "approval_id": {
                "type": "string",
                "minLength": 1,
                "description": "The approval_id from the pending_approval answer.",
            }
        },
        "required": ["approval_id"],
        "additionalProperties": False,
    },
    "annotations": {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}


def tool_listing(contracts: Sequence[ToolContract]) -> list[Tool]:
    """The tools one principal sees: its visible contracts, then `RESUME_TOOL`."""
    rendered = [*render(contracts), _RESUME_DEFINITION]
    return [Tool.model_validate(tool) for tool in rendered]


def advertised_output_schema(contract: ToolContract) -> dict[str, Any] | None:
    """The ``outputSchema`` the listing shows for `contract`, if any (the adapter decides)."""
    return render([contract])[0].get("outputSchema")


def call_result(
    envelope: ResultEnvelope, *, structured_content: Mapping[str, Any] | None = None
) -> CallToolResult:
    """The ``CallToolResult`` for `envelope`.

    `structured_content` overrides a success's content: the server passes the full stored
    result when the projection stored it aside, since a client validates a success's
    ``structuredContent`` against the advertised output schema and the preview would not match.
    """
    text = envelope.to_model_text(max_chars=None)
    meta = envelope.execution_meta
    if meta is not None:
        for ref in envelope.artifact_refs:
            text += f"\nread {ref.uri} with resources/read {readable_uri(ref, meta.request_id)}"
    if envelope.status is Status.PENDING_APPROVAL and meta is not None and meta.approval_id:
        text += (
            f'\nnext: once a human decides, call {RESUME_TOOL} with {{"approval_id": '
            f'"{meta.approval_id}"}}'
        )
    if envelope.ok:
        content = envelope.structured_content if structured_content is None else structured_content
    else:
        content = envelope.model_dump(mode="json", exclude_none=True)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=dict(content) if content is not None else None,
        is_error=not envelope.ok,
        # The SDK's model takes the field's name; its stub shows only the `_meta` alias.
        meta=_ledger_ids(envelope),  # type: ignore[call-arg]
    )


def withheld_result(envelope: ResultEnvelope, limit: int) -> CallToolResult:
    """A success whose whole result is over `limit` bytes, the most a response carries
    inline: it cannot travel as ``structuredContent`` (which must match the advertised output
    schema, so a preview would not do), so it is flagged ``isError`` — the one shape a client
    does not validate — with the envelope, and the text says that the call succeeded and
    where its result is stored."""
    ref = envelope.artifact_refs[0]
    result = call_result(envelope)
    meta = envelope.execution_meta
    where = readable_uri(ref, meta.request_id) if meta is not None else ref.uri
    note = (
        f"\nnote: the call succeeded; do not repeat it. Its result ({ref.size} bytes) is over "
        f"the gateway's inline limit of {limit} bytes (result_bytes), so it is not sent here; "
        f"read it with resources/read {where}"
    )
    text = envelope.to_model_text(max_chars=None)
    return result.model_copy(
        update={
            "content": [TextContent(type="text", text=text + note)],
            "structured_content": envelope.model_dump(mode="json", exclude_none=True),
            "is_error": True,
        }
    )


def passed_through(
    envelope: ResultEnvelope,
    blocks: Sequence[Mapping[str, Any]],
    *,
    structured_content: Mapping[str, Any] | None,
    note: str | None = None,
) -> CallToolResult:
    """The ``CallToolResult`` of a tool that answered with content blocks: `blocks` as the
    tool sent them (redacted), then `note` — the gateway's own words — as one more text block;
    ``isError`` when the tool said so or the pipeline did not let the answer succeed."""
    content = envelope.content
    assert content is not None
    meta = _ledger_ids(envelope) or {}
    meta[ENVELOPE_META] = envelope.model_dump(
        mode="json", exclude_none=True, exclude={"structured_content", "content"}
    )
    wire: dict[str, Any] = {
        "content": [*blocks, *([{"type": "text", "text": note}] if note else [])],
        "isError": content.is_error or not envelope.ok,
        "_meta": meta,
    }
    if structured_content is not None:
        wire["structuredContent"] = dict(structured_content)
    return CallToolResult.model_validate(wire)


def gateway_note(envelope: ResultEnvelope, *, stored: str | None = None) -> str | None:
    """What the model must hear from the gateway about a passed-through answer, if anything:
    why the answer did not succeed, a replay, a pending record, where content too large to
    send inline can be read (`stored`)."""
    meta = envelope.execution_meta
    lines = []
    if not envelope.ok:
        # The error, without the data the tool's own blocks already show.
        bare = envelope.model_copy(update={"structured_content": None})
        lines.append(bare.to_model_text(max_chars=None))
    else:
        if meta is not None and meta.replay_of:
            lines.append(
                f"toolkeeper: the recorded outcome of an earlier call with the same "
                f"idempotency key ({meta.replay_of}); nothing ran again"
            )
        if meta is not None and meta.record_pending:
            lines.append("toolkeeper: record pending (the audit ledger is unavailable; queued)")
    if stored is not None:
        lines.append(stored)
    return "\n".join(lines) or None


def refusal(category: ErrorCategory, message: str, fix: str) -> ResultEnvelope:
    """An envelope for a gateway-level refusal that never reached the pipeline (nothing ran)."""
    error = ToolError(category=category, message=message, suggested_fix=fix)
    return ResultEnvelope(status=Status.REJECTED, error=error, summary=message)


def _ledger_ids(envelope: ResultEnvelope) -> dict[str, Any] | None:
    meta = envelope.execution_meta
    if meta is None:
        return None
    ids: dict[str, Any] = {REQUEST_ID_META: meta.request_id, CALL_ID_META: meta.call_id}
    if meta.approval_id:
        ids[APPROVAL_ID_META] = meta.approval_id
    if meta.record_pending:
        ids[RECORD_PENDING_META] = True
    return ids
