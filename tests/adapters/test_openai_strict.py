"""OpenAI strict mode: the transform checked against the documented strict-mode rules.

`strict_violations` is written from OpenAI's Structured Outputs "supported schemas" page,
independently of the transform: root object (not anyOf), additionalProperties false and
every property required on every object, only supported keywords and formats, a $ref with
no siblings, and the size limits (5,000 properties, 10 object levels, 1,000 enum values,
120,000 characters of names and values).
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from toolkeeper.adapters import openai_chat
from toolkeeper.adapters._schema import NotExpressible
from toolkeeper.adapters.openai_strict import omit_strict_nulls, to_strict
from toolkeeper.adapters.report import IssueKind
from toolkeeper.contract import ToolContract

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


def strict_violations(schema: dict[str, Any]) -> list[str]:
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


RICH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 200, "description": "Text."},
        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
        "sort": {"enum": ["asc", "desc"]},
        "kind": {"const": "doc"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "since": {"type": "string", "format": "date"},
        "site": {"type": "string", "format": "uri"},
        "owner": {"$ref": "#/$defs/person", "description": "Who owns it."},
        "reviewer": {"$ref": "#/$defs/person"},
        "id": {"type": ["string", "integer"]},
        "filter": {
            "oneOf": [
                {"type": "object", "properties": {"field": {"type": "string"}}},
                {"type": "string"},
            ]
        },
        "tree": {"$ref": "#/$defs/node"},
    },
    "required": ["query"],
    "additionalProperties": False,
    "$defs": {
        "person": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
            "required": ["name"],
        },
        "node": {
            "type": "object",
            "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        },
    },
}


def test_a_rich_schema_becomes_one_strict_mode_accepts() -> None:
    result = to_strict(RICH)
    assert strict_violations(result.schema) == []
    assert strict_violations(RICH) != []
    moved = {
        (path, detail)
        for path, kind, detail in result.notes
        if kind is IssueKind.MOVED_TO_DESCRIPTION
    }
    assert {
        ("/properties/query", "minLength"),
        ("/properties/query", "maxLength"),
        ("/properties/limit", "default"),
        ("/properties/tags", "uniqueItems"),
        ("/properties/site", "format"),
    } <= moved
    assert ("/properties/filter", IssueKind.RELAXED, "oneOf rendered as anyOf") in result.notes
    limit = result.schema["properties"]["limit"]
    assert limit["type"] == ["integer", "null"]
    assert "default: 10" in limit["description"]
    assert result.schema["properties"]["sort"]["enum"] == ["asc", "desc", None]
    assert result.schema["properties"]["reviewer"] == {
        "anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]
    }


def test_the_strict_schema_accepts_what_the_model_sends_for_a_valid_call() -> None:
    strict = to_strict(RICH).schema
    call = {"query": "q", "owner": {"name": "Ana"}, "tree": {"children": [{}]}}
    assert jsonschema.Draft202012Validator(RICH).is_valid(call)
    as_sent = {name: None for name in RICH["properties"]}
    as_sent |= {"query": "q", "owner": {"name": "Ana", "email": None}}
    as_sent["tree"] = {"children": [{"children": None}]}
    assert jsonschema.Draft202012Validator(strict).is_valid(as_sent)
    assert omit_strict_nulls(as_sent, RICH) == call


def test_nulls_a_schema_accepts_are_kept() -> None:
    schema = {"type": "object", "properties": {"note": {"type": ["string", "null"]}}}
    assert omit_strict_nulls({"note": None}, schema) == {"note": None}
    assert omit_strict_nulls("not an object", schema) == "not an object"


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "array", "items": {"type": "string"}}, "root"),
        ({"type": "object", "properties": {"x": {}}}, "any type"),
        ({"type": "object", "properties": {"m": {"type": "object"}}}, "open-ended"),
        (
            {
                "type": "object",
                "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}},
            },
            "open-ended",
        ),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "items"),
        (
            {
                "type": "object",
                "properties": {"a": {"allOf": [{"type": "string"}, {"minLength": 1}]}},
            },
            "allOf",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing", "title": "t"}}},
            "cannot be resolved",
        ),
    ],
)
def test_shapes_strict_mode_cannot_express_are_refused(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(NotExpressible, match=reason):
        to_strict(schema)


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", "properties": {"leaf": {"type": "string"}}}
    for _ in range(depth - 1):
        node = {"type": "object", "properties": {"child": node}}
    return node


def test_size_limits_are_enforced() -> None:
    assert strict_violations(to_strict(nested(10)).schema) == []
    with pytest.raises(NotExpressible, match="10 levels"):
        to_strict(nested(11))
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(5001)}}
    with pytest.raises(NotExpressible, match="5000 object properties"):
        to_strict(wide)
    many = {"type": "object", "properties": {"e": {"enum": list(range(1001))}}}
    with pytest.raises(NotExpressible, match="1000 enum values"):
        to_strict(many)


def test_a_tool_strict_mode_cannot_express_is_sent_non_strict_and_reported(
    weather: ToolContract,
) -> None:
    free_form = ToolContract.model_validate(
        {
            "id": "kv.put",
            "description": "Store a map.",
            "input_schema": {"type": "object", "properties": {"values": {"type": "object"}}},
        }
    )
    tools, report = openai_chat.render_with_report([weather, free_form], strict=True)
    assert [t["function"]["strict"] for t in tools] == [True, False]
    assert tools[1]["function"]["parameters"] == free_form.input_schema
    assert report.fallbacks() == (free_form.ref,)
    [issue] = [i for i in report.for_tool(free_form.ref)]
    assert issue.path == "/properties/values"
    assert "open-ended" in str(issue)
    assert all(
        strict_violations(t["function"]["parameters"]) == []
        for t in tools
        if t["function"]["strict"]
    )
