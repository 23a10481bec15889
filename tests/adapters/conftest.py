"""Shared fixtures of the adapter tests: contracts and SDK-type validation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import TypeAdapter

from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import (
    ErrorCategory,
    ExecutionMeta,
    FieldError,
    ResultEnvelope,
    Status,
    ToolError,
)

SdkCheck = Callable[[Any, Any], Any]


def _materialize(value: Any) -> Any:
    # pydantic validates Iterable[...] fields lazily; consuming them runs the validation.
    if isinstance(value, dict):
        return {k: _materialize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_materialize(v) for v in value]
    if isinstance(value, Iterator):
        return [_materialize(v) for v in value]
    return value


@pytest.fixture
def sdk_valid() -> SdkCheck:
    """Validate `value` as the SDK's request type `typ` (a TypedDict or union of them)."""

    def check(typ: Any, value: Any) -> Any:
        # The adapter must outlive the lazy iterators it hands out, or pydantic-core panics.
        adapter = TypeAdapter(typ)
        validated = adapter.validate_python(value)
        return _materialize(validated)

    return check


@pytest.fixture
def weather() -> ToolContract:
    return ToolContract.model_validate(
        {
            "id": "weather.current",
            "version": "1.2.0",
            "description": "Current weather for a city.",
            "when_to_use": "The user asks about weather now.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "minLength": 1},
                    "unit": {"type": "string", "enum": ["C", "F"], "default": "C"},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
            "side_effect": "none",
            "examples": [
                {"arguments": {"city": "Oslo"}},
                {"arguments": {"city": "Lima", "unit": "F"}},
            ],
        }
    )


@pytest.fixture
def send_email() -> ToolContract:
    return ToolContract.model_validate(
        {
            "id": "mail/send",
            "version": "2.0.0",
            "description": "Send an email.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "to": {"type": "string", "format": "email"},
                    "body": {"type": "string"},
                },
                "required": ["to", "body"],
            },
            "side_effect": "committing",
        }
    )


def _succeeded(call_id: str, data: dict[str, Any] | None = None) -> ResultEnvelope:
    return ResultEnvelope(
        status=Status.SUCCEEDED,
        summary="ok",
        structured_content=data,
        execution_meta=ExecutionMeta(request_id=f"req_{call_id}", call_id=call_id),
    )


def _rejected(call_id: str) -> ResultEnvelope:
    return ResultEnvelope(
        status=Status.REJECTED,
        error=ToolError(
            category=ErrorCategory.INVALID_ARGUMENT,
            message="arguments are not valid JSON",
            field_errors=(FieldError(path="", code="json", message="Expecting value"),),
            suggested_fix="send a JSON object",
        ),
        execution_meta=ExecutionMeta(request_id=f"req_{call_id}", call_id=call_id),
    )


@pytest.fixture
def succeeded() -> Callable[..., ResultEnvelope]:
    """A succeeded envelope for a call id, with optional structured content."""
    return _succeeded


@pytest.fixture
def rejected() -> Callable[[str], ResultEnvelope]:
    """A rejected (invalid JSON) envelope for a call id."""
    return _rejected


# -- vendor rules, written from the vendors' documentation independently of the adapters --

DOC_COMMON = {"type", "description", "title", "enum", "const", "anyOf", "$ref"}
DOC_BY_TYPE = {
    "string": {"pattern", "format"},
    "number": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "integer": {"multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum"},
    "array": {"items", "minItems", "maxItems"},
    "object": {"properties", "required", "additionalProperties"},
    "boolean": set(),
    "null": set(),
}
DOC_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def _strict_violations(schema: dict[str, Any]) -> list[str]:
    """Every way `schema` breaks OpenAI's documented strict-mode rules."""
    problems: list[str] = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("root must be an object, not anyOf")
    totals = {"properties": 0, "enum": 0, "chars": 0}

    def visit(node: Any, where: str, depth: int) -> None:
        if not isinstance(node, dict):
            problems.append(f"{where}: not a schema object")
            return
        if "$ref" in node:
            if len(node) > 1:
                problems.append(f"{where}: $ref with siblings")
            return
        declared = node.get("type")
        types = [declared] if isinstance(declared, str) else list(declared or [])
        if not types and not {"enum", "const", "anyOf"} & node.keys():
            problems.append(f"{where}: no type")
        allowed = set(DOC_COMMON).union(*(DOC_BY_TYPE.get(t, set()) for t in types))
        if where == "":
            allowed.add("$defs")
        for key in node.keys() - allowed:
            problems.append(f"{where}: unsupported keyword {key}")
        if "format" in node and node["format"] not in DOC_FORMATS:
            problems.append(f"{where}: unsupported format {node['format']}")
        if "object" in types:
            depth += 1
            if depth > 10:
                problems.append(f"{where}: deeper than 10 object levels")
            properties = node.get("properties", {})
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties must be false")
            if set(node.get("required", [])) != set(properties):
                problems.append(f"{where}: every property must be required")
            totals["properties"] += len(properties)
            totals["chars"] += sum(map(len, properties))
            for name, sub in properties.items():
                visit(sub, f"{where}/properties/{name}", depth)
        if "array" in types:
            visit(node.get("items"), f"{where}/items", depth)
        values = node.get("enum", [])
        totals["enum"] += len(values)
        totals["chars"] += sum(len(v) for v in values if isinstance(v, str))
        for i, branch in enumerate(node.get("anyOf", [])):
            visit(branch, f"{where}/anyOf/{i}", depth)

    visit({k: v for k, v in schema.items()}, "", 0)
    for name, sub in schema.get("$defs", {}).items():
        totals["chars"] += len(name)
        visit(sub, f"/$defs/{name}", 0)
    if totals["properties"] > 5000:
        problems.append("more than 5000 properties")
    if totals["enum"] > 1000:
        problems.append("more than 1000 enum values")
    if totals["chars"] > 120_000:
        problems.append("more than 120000 characters of names and values")
    return problems


@pytest.fixture
def strict_violations() -> Callable[[dict[str, Any]], list[str]]:
    """OpenAI strict mode's documented rules: root object (not anyOf), additionalProperties
    false and every property required on every object, only the supported keywords and
    formats, a $ref without siblings, 5,000 properties, 10 object levels, 1,000 enum values
    and 120,000 characters of names and values."""
    return _strict_violations
