"""A plain MCP SDK server with every fixture the official conformance suite's server
scenarios call by name (npm @modelcontextprotocol/conformance): its tools, resources,
prompts, completions and log level. scripts/conformance-federated.sh runs the suite against
it directly and through `toolkeeper serve`, and compares.

    python scenario_server.py PORT      # Streamable HTTP on 127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import anyio
from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage
from pydantic import BaseModel, Field

PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5E"
    "rkJggg=="
)
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

server = MCPServer("conformance-scenarios")


# -- tools ---------------------------------------------------------------------------------


@server.tool(description="A fixed text.")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="One image block.")
def test_image_content() -> list[types.ImageContent]:
    return [types.ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool(description="One audio block.")
def test_audio_content() -> list[types.AudioContent]:
    return [types.AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


def _text_resource(uri: str, mime: str, text: str) -> types.EmbeddedResource:
    contents = types.TextResourceContents(uri=uri, mime_type=mime, text=text)
    return types.EmbeddedResource(type="resource", resource=contents)


@server.tool(description="One embedded resource block.")
def test_embedded_resource() -> list[types.EmbeddedResource]:
    text = "This is an embedded resource content."
    return [_text_resource("test://embedded-resource", "text/plain", text)]


@server.tool(description="Text, image and embedded resource blocks, in that order.")
def test_multiple_content_types() -> list[types.ContentBlock]:
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG, mime_type="image/png"),
        _text_resource(
            "test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}'
        ),
    ]


@server.tool(description="Log three messages while running.")
async def test_tool_with_logging(ctx: Context) -> str:
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(message)
        await anyio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool(description="Report progress 0, 50 and 100 of 100.")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await anyio.sleep(0.05)
    meta = ctx.request_context.meta
    return str(meta.get("progressToken", 0) if isinstance(meta, dict) else 0)


@server.tool(description="Ask the client's model to answer a prompt.")
async def test_sampling(prompt: str, ctx: Context) -> str:
    message = types.SamplingMessage(
        role="user", content=types.TextContent(type="text", text=prompt)
    )
    try:
        result = await ctx.session.create_message([message], max_tokens=100)
    except Exception as exc:
        return f"Sampling not supported or error: {exc}"
    content = result.content
    return (
        f"LLM response: {content.text if isinstance(content, types.TextContent) else 'No response'}"
    )


class UserResponse(BaseModel):
    response: str = Field(description="User's response")


class Defaults(BaseModel):
    name: str = Field(default="John Doe", description="User name")
    age: int = Field(default=30, description="User age")
    score: float = Field(default=95.5, description="User score")
    status: str = Field(
        default="active",
        description="User status",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    verified: bool = Field(default=True, description="Verification status")


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": const, "title": title} for const, title in pairs]


class Enums(BaseModel):
    untitledSingle: str = Field(
        description="Simple enum without titles",
        json_schema_extra={"enum": ["active", "inactive", "pending"]},
    )
    titledSingle: str = Field(
        description="Enum with titled options (oneOf)",
        json_schema_extra={
            "oneOf": _titled(
                ("low", "Low Priority"), ("medium", "Medium Priority"), ("high", "High Priority")
            )
        },
    )
    untitledMulti: list[str] = Field(
        description="Multi-select without titles",
        json_schema_extra={"items": {"type": "string", "enum": ["read", "write", "execute"]}},
    )
    titledMulti: list[str] = Field(
        description="Multi-select with titled options",
        json_schema_extra={
            "items": {
                "anyOf": _titled(
                    ("feature", "New Feature"), ("bug", "Bug Fix"), ("docs", "Documentation")
                )
            }
        },
    )
    legacyEnum: str = Field(
        description="Legacy enum with enumNames",
        json_schema_extra={
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    )


async def _elicited(ctx: Context, message: str, schema: type[BaseModel], label: str) -> str:
    try:
        result = await ctx.elicit(message, schema)
    except Exception as exc:
        return f"Elicitation not supported or error: {exc}"
    content = result.data.model_dump_json() if result.action == "accept" and result.data else "{}"
    return f"{label}: action={result.action}, content={content}"


@server.tool(description="Ask the user for a response.")
async def test_elicitation(message: str, ctx: Context) -> str:
    return await _elicited(ctx, message, UserResponse, "User response")


@server.tool(description="Ask with defaults for every primitive type (SEP-1034).")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    return await _elicited(ctx, "Please provide user information", Defaults, "Elicitation result")


@server.tool(description="Ask with every enum schema variant (SEP-1330).")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    message = "Please select values using different enum schema types"
    return await _elicited(ctx, message, Enums, "Elicitation completed")


@server.tool(description="Always fail.")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool(description="Close the call's SSE stream mid-call (SEP-1699).")
async def test_reconnection(ctx: Context) -> str:
    await ctx.info("Before disconnect")
    await ctx.close_sse_stream()
    await anyio.sleep(0.2)
    await ctx.info("After reconnect")
    return "Reconnection test completed"


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


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str | None = None, address: dict[str, Any] | None = None) -> str:
    return f"name={name}, address={address}"


# The suite checks that the schema is listed exactly as declared (its $schema, $defs, $ref).
server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = JSON_SCHEMA_2020_12  # type: ignore[union-attr]


# -- resources, prompts, completions, log level ----------------------------------------------


@server.resource("test://static-text", description="A static text resource.")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", description="A static binary resource.")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource("test://template/{id}/data", description="A templated resource.")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", description="A resource clients subscribe to.")
def watched() -> str:
    return "Watched resource content"


@server.prompt(description="A prompt without arguments.")
def test_simple_prompt() -> list[UserMessage]:
    text = "This is a simple prompt for testing."
    return [UserMessage(role="user", content=types.TextContent(type="text", text=text))]


@server.prompt(description="A prompt with two required arguments.")
def test_prompt_with_arguments(arg1: str, arg2: str) -> list[UserMessage]:
    text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
    return [UserMessage(role="user", content=types.TextContent(type="text", text=text))]


@server.prompt(description="A prompt embedding a resource.")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    resource = _text_resource(resourceUri, "text/plain", "Embedded resource content for testing.")
    follow = "Please process the embedded resource above."
    return [
        UserMessage(role="user", content=resource),
        UserMessage(role="user", content=types.TextContent(type="text", text=follow)),
    ]


@server.prompt(description="A prompt with an image.")
def test_prompt_with_image() -> list[UserMessage]:
    image = types.ImageContent(type="image", data=PNG, mime_type="image/png")
    follow = "Please analyze the image above."
    return [
        UserMessage(role="user", content=image),
        UserMessage(role="user", content=types.TextContent(type="text", text=follow)),
    ]


@server.completion()
async def complete(ref: Any, argument: Any, context: Any) -> types.Completion:
    return types.Completion(values=[], total=0, has_more=False)


async def _acknowledge(_ctx: Any, _params: Any) -> dict[str, Any]:
    return {}


lowlevel = server._lowlevel_server
lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _acknowledge)
lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _acknowledge)
lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _acknowledge)


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
