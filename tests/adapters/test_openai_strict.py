"""OpenAI strict mode: the transform checked against the documented strict-mode rules
(``strict_violations`` in conftest.py, written from OpenAI's documentation)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from toolkeeper.adapters import openai_chat
from toolkeeper.adapters._schema import NotExpressible
from toolkeeper.adapters.openai_strict import omit_strict_nulls, to_strict
from toolkeeper.adapters.report import IssueKind
from toolkeeper.contract.model import ToolContract

Violations = Callable[[dict[str, Any]], list[str]]

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


def test_a_rich_schema_becomes_one_strict_mode_accepts(strict_violations: Violations) -> None:
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
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
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


def test_size_limits_are_enforced(strict_violations: Violations) -> None:
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
    weather: ToolContract, strict_violations: Violations
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
