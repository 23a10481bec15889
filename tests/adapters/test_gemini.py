"""Gemini: function_call parts -> proposals (stand-in ids where Gemini sent none) ->
function_response parts, and the OpenAPI-subset conversion of ``parameters``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from google.genai import types

from toolkeeper.adapters import gemini
from toolkeeper.adapters._schema import NotExpressible
from toolkeeper.adapters.gemini_schema import to_gemini
from toolkeeper.adapters.report import IssueKind
from toolkeeper.contract.model import ToolContract
from toolkeeper.runtime.envelope import ResultEnvelope


def response(*parts: types.Part) -> types.GenerateContentResponse:
    return types.GenerateContentResponse(
        candidates=[
            types.Candidate(
                content=types.Content(role="model", parts=list(parts)),
                finish_reason=types.FinishReason.STOP,
            )
        ],
        model_version="gemini-2.5-flash",
    )


def call(name: str, args: dict[str, Any] | None, call_id: str | None = None) -> types.Part:
    return types.Part(function_call=types.FunctionCall(id=call_id, name=name, args=args))


def test_text_only_candidates_propose_nothing() -> None:
    assert gemini.parse(response(types.Part(text="Sunny."))) == []
    assert gemini.parse(types.GenerateContentResponse(candidates=[])) == []
    assert gemini.answer([]) == []


def test_calls_without_ids_get_deterministic_stand_in_ids_per_turn() -> None:
    result = response(
        types.Part(text="Checking both."),
        call("weather_current", {"city": "Oslo"}),
        call("weather_current", None),
        call("unknown", {"x": 1}),
    )
    proposals = gemini.parse(result, turn=3)
    assert [(p.call_id, p.tool, p.arguments, p.family) for p in proposals] == [
        ("gemini-3-0", "weather_current", {"city": "Oslo"}, "gemini"),
        ("gemini-3-1", "weather_current", {}, "gemini"),
        ("gemini-3-2", "unknown", {"x": 1}, "gemini"),
    ]
    assert gemini.parse(result, turn=3) == proposals


def test_ids_gemini_sends_are_kept_and_camel_case_dicts_parse_too() -> None:
    result = response(call("weather_current", {"city": "Oslo"}, call_id="fc-7"))
    [proposal] = gemini.parse(result)
    assert proposal.call_id == "fc-7"
    wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert "functionCall" in wire["candidates"][0]["content"]["parts"][0]
    assert gemini.parse(wire) == [proposal]


def test_answer_is_one_user_content_of_function_responses(
    succeeded: Callable[..., ResultEnvelope], rejected: Callable[[str], ResultEnvelope]
) -> None:
    result = response(
        call("weather_current", {"city": "Oslo"}, call_id="fc-1"),
        call("weather_current", {"city": ""}),
    )
    a, b = gemini.parse(result)
    [reply] = gemini.answer([(a, succeeded("fc-1", {"temp_c": 4})), (b, rejected(b.call_id))])
    content = types.Content.model_validate(reply)
    assert content.role == "user"
    first, second = (part.function_response for part in content.parts or [])
    assert first is not None and second is not None
    assert (first.id, first.name) == ("fc-1", "weather_current")
    assert first.response == {
        "output": {"text": "status: succeeded\nsummary: ok", "structured_content": {"temp_c": 4}}
    }
    assert second.id is None, "a stand-in id is not Gemini's to correlate"
    assert "status: rejected" in (second.response or {})["error"]["text"]


def test_render_is_one_tool_of_declarations_the_sdk_accepts(weather: ToolContract) -> None:
    tools, report = gemini.render_with_report([weather])
    tool = types.Tool.model_validate(tools[0])
    [declaration] = tool.function_declarations or []
    assert declaration.name == "weather.current"
    assert declaration.parameters is not None
    assert declaration.parameters.required == ["city"]
    unit = (declaration.parameters.properties or {})["unit"]
    assert (unit.type, unit.enum, unit.default) == (types.Type.STRING, ["C", "F"], "C")
    assert report.issues == ()
    assert gemini.render([]) == []


def test_json_schema_option_sends_the_schema_unchanged(weather: ToolContract) -> None:
    [tool] = gemini.render([weather], json_schema=True)
    declaration = (types.Tool.model_validate(tool).function_declarations or [])[0]
    assert declaration.parameters_json_schema == weather.input_schema
    assert declaration.parameters is None


def test_a_tool_without_parameters_declares_none() -> None:
    ping = ToolContract.model_validate({"id": "ping", "description": "Ping."})
    [tool] = gemini.render([ping])
    assert tool["function_declarations"][0] == {"name": "ping", "description": "Ping."}


def test_conversion_inlines_refs_and_rewrites_const_unions_and_enums() -> None:
    schema = {
        "type": "object",
        "properties": {
            "owner": {"$ref": "#/$defs/person"},
            "kind": {"const": "doc"},
            "level": {"type": "integer", "enum": [1, 2, 3]},
            "note": {"type": ["string", "null"], "maxLength": 9},
            "id": {"type": ["string", "integer"], "description": "Either."},
            "pick": {"oneOf": [{"type": "string"}, {"type": "number", "exclusiveMinimum": 0}]},
            "when": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email"},
        },
        "required": ["owner"],
        "$defs": {"person": {"type": "object", "properties": {"name": {"type": "string"}}}},
    }
    converted, notes = to_gemini(schema)
    assert converted is not None
    types.Schema.model_validate(converted)
    props = converted["properties"]
    assert props["owner"] == {"type": "OBJECT", "properties": {"name": {"type": "STRING"}}}
    assert props["kind"] == {"type": "STRING", "enum": ["doc"]}
    assert props["level"] == {"type": "INTEGER", "enum": ["1", "2", "3"], "format": "enum"}
    assert props["note"] == {"type": "STRING", "nullable": True, "max_length": 9}
    assert props["id"] == {
        "description": "Either.",
        "any_of": [{"type": "STRING"}, {"type": "INTEGER"}],
    }
    assert props["pick"]["any_of"][1] == {"type": "NUMBER", "description": "(exclusiveMinimum: 0)"}
    assert ("/properties/pick", IssueKind.RELAXED, "oneOf rendered as any_of") in notes.items
    assert props["when"] == {"type": "STRING", "format": "date-time"}
    assert props["mail"] == {"type": "STRING", "description": '(format: "email")'}
    assert "$ref" not in str(converted) and "const" not in str(converted)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "object", "properties": {"x": {}}}, "any type"),
        ({"type": "object", "properties": {"bad-name": {"type": "string"}}}, "not legal"),
        ({"type": "object", "properties": {"m": {"type": "object"}}}, "without properties"),
        (
            {
                "type": "object",
                "properties": {"n": {"$ref": "#/$defs/n"}},
                "$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
            },
            "recursive",
        ),
    ],
)
def test_what_openapi_cannot_carry_is_refused(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(NotExpressible, match=reason):
        to_gemini(schema)


def test_a_refused_schema_falls_back_to_parameters_json_schema_and_is_reported() -> None:
    odd = ToolContract.model_validate(
        {
            "id": "odd",
            "description": "Odd names.",
            "input_schema": {"type": "object", "properties": {"x-y": {"type": "string"}}},
        }
    )
    [tool], report = gemini.render_with_report([odd])
    declaration = (types.Tool.model_validate(tool).function_declarations or [])[0]
    assert declaration.parameters_json_schema == odd.input_schema
    assert report.fallbacks() == (odd.ref,)
