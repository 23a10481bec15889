"""The tools the official MCP conformance suite calls by name (npm
@modelcontextprotocol/conformance, server scenarios), served by `toolkeeper serve`.

Only tools whose checks a governed gateway can meet are here: every answer is the envelope as
text plus structured content, so the scenarios that need image, audio or embedded-resource
content, log or progress notifications, or requests to the client (sampling, elicitation)
have no tool and are listed as expected failures beside this file.
"""

from __future__ import annotations

from typing import Any

from toolkeeper import tool
from toolkeeper.executors import ToolFailure

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
