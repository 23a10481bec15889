"""The tools the official MCP conformance suite calls by name (npm
@modelcontextprotocol/conformance, server scenarios), served by `toolkeeper serve`.

Plain results are the envelope's text; the content scenarios (image, audio, embedded
resource, mixed) return a `ToolAnswer` whose blocks the gateway sends as the tool sent them;
progress, log messages, elicitation and sampling go through the call's governed peer. What
no governed tool can do is listed as expected failures beside this file.
"""

from __future__ import annotations

from typing import Any

from toolkeeper import ToolContext, tool
from toolkeeper.executors import ToolAnswer, ToolFailure
from toolkeeper.runtime.context import Peer

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


@tool(side_effect="none", idempotency="natural")
def test_simple_text() -> str:
    """Return a fixed text (scenario tools-call-simple-text)."""
    return "This is a simple text response for testing."


@tool(side_effect="none", idempotency="natural")
def test_error_handling() -> str:
    """Always fail (scenario tools-call-error)."""
    raise ToolFailure("This tool intentionally returns an error for testing")


@tool(
    id="json_schema_2020_12_tool",
    side_effect="none",
    idempotency="natural",
    description="Tool with JSON Schema 2020-12 features",
    input_schema=JSON_SCHEMA_2020_12,
)
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    """Echo the arguments (scenario json-schema-2020-12 lists this tool's schema)."""
    return f"name={name} address={address}"


PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


def _blocks(*blocks: dict[str, Any]) -> ToolAnswer:
    """Content blocks as an MCP tool sends them; the value is what a library caller reads."""
    return ToolAnswer(value={"blocks": len(blocks)}, blocks=blocks)


def _resource(uri: str, mime: str, text: str) -> dict[str, Any]:
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": text}}


@tool(side_effect="none", idempotency="natural")
def test_image_content() -> ToolAnswer:
    """One image block (scenario tools-call-image)."""
    return _blocks({"type": "image", "data": PNG, "mimeType": "image/png"})


@tool(side_effect="none", idempotency="natural")
def test_audio_content() -> ToolAnswer:
    """One audio block (scenario tools-call-audio)."""
    return _blocks({"type": "audio", "data": WAV, "mimeType": "audio/wav"})


@tool(side_effect="none", idempotency="natural")
def test_embedded_resource() -> ToolAnswer:
    """One embedded resource block (scenario tools-call-embedded-resource)."""
    text = "This is an embedded resource content."
    return _blocks(_resource("test://embedded-resource", "text/plain", text))


@tool(side_effect="none", idempotency="natural")
def test_multiple_content_types() -> ToolAnswer:
    """Text, image and embedded resource, in that order (scenario tools-call-mixed-content)."""
    return _blocks(
        {"type": "text", "text": "Multiple content types test:"},
        {"type": "image", "data": PNG, "mimeType": "image/png"},
        _resource(
            "test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}'
        ),
    )


# The client that made the call, through the ToolContext's governed peer: progress, log
# messages, and (as policy allows) elicitation and sampling.


def _peer(context: ToolContext) -> Peer:
    if context.peer is None:
        raise ToolFailure("no client to reach", category="unavailable")
    return context.peer


@tool(side_effect="none", idempotency="natural")
async def test_tool_with_progress(context: ToolContext) -> str:
    """Report progress 0, 50 and 100 of 100 (scenario tools-call-with-progress)."""
    for step in (0, 50, 100):
        await _peer(context).progress(step, 100, f"Completed step {step} of 100")
    return "progress reported"


@tool(side_effect="none", idempotency="natural")
async def test_tool_with_logging(context: ToolContext) -> str:
    """Log three messages (scenario tools-call-with-logging)."""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await _peer(context).log("info", message, None)
    return "Tool with logging executed successfully"


@tool(side_effect="none", idempotency="natural")
async def test_sampling(prompt: str, context: ToolContext) -> str:
    """Ask the client's model to answer `prompt` (scenario tools-call-sampling)."""
    message = {"role": "user", "content": {"type": "text", "text": prompt}}
    answer = await _peer(context).ask("sample", {"messages": [message], "maxTokens": 100})
    return f"LLM response: {answer.get('content', {}).get('text', 'No response')}"


async def _elicit(context: ToolContext, message: str, schema: dict[str, Any]) -> str:
    answer = await _peer(context).ask(
        "elicit", {"mode": "form", "message": message, "requestedSchema": schema}
    )
    return f"action={answer.get('action')}, content={answer.get('content', {})}"


@tool(side_effect="none", idempotency="natural")
async def test_elicitation(message: str, context: ToolContext) -> str:
    """Ask the user (scenario tools-call-elicitation)."""
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    return await _elicit(context, message, schema)


@tool(side_effect="none", idempotency="natural")
async def test_elicitation_sep1034_defaults(context: ToolContext) -> str:
    """Ask with a default for every primitive type (scenario elicitation-sep1034-defaults)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {
                "type": "string",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "default": True},
        },
    }
    return await _elicit(context, "Please provide user information", schema)


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": const, "title": title} for const, title in pairs]


@tool(side_effect="none", idempotency="natural")
async def test_elicitation_sep1330_enums(context: ToolContext) -> str:
    """Ask with every enum schema variant (scenario elicitation-sep1330-enums)."""
    levels = _titled(("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High"))
    kinds = _titled(("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation"))
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
            "titledSingle": {"type": "string", "oneOf": levels},
            "untitledMulti": {
                "type": "array",
                "items": {"type": "string", "enum": ["read", "write", "execute"]},
            },
            "titledMulti": {"type": "array", "items": {"anyOf": kinds}},
            "legacyEnum": {
                "type": "string",
                "enum": ["small", "medium", "large"],
                "enumNames": ["Small Size", "Medium Size", "Large Size"],
            },
        },
    }
    return await _elicit(context, "Please select values using different enum schema types", schema)
