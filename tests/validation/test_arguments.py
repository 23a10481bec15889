"""validate_arguments: every violation found, located by JSON pointer, with a fix that works."""

from __future__ import annotations

import gc
import json
import weakref
from typing import Any

import pytest

from toolkeeper import ContractError, ErrorCategory, FieldError, ToolContract, validate_arguments
from toolkeeper.validation import Repair, ValidationResult, apply_repairs

WEATHER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city"],
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "unit": {"enum": ["celsius", "fahrenheit"], "default": "celsius"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
    },
}


def tool(schema: dict[str, Any], name: str = "get_weather") -> ToolContract:
    return ToolContract(id=name, description="a tool under test", input_schema=schema)


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def only_error(result: ValidationResult) -> FieldError:
    assert result.error is not None
    assert len(result.error.field_errors) == 1, result.error.field_errors
    return result.error.field_errors[0]


def fix_text(result: ValidationResult) -> str:
    assert result.error is not None and result.error.suggested_fix is not None
    return result.error.suggested_fix


def codes(result: ValidationResult) -> set[str]:
    assert result.error is not None
    return {e.code for e in result.error.field_errors}


def fixed(contract: ToolContract, arguments: Any, result: ValidationResult) -> Any:
    """Apply the result's repairs and check that the repaired arguments validate."""
    repaired = apply_repairs(arguments, result.repairs)
    assert validate_arguments(contract, repaired).ok, repaired
    return repaired


# -- valid input and defaults -------------------------------------------------------------


def test_valid_arguments_come_back_as_a_copy_with_defaults() -> None:
    arguments = {"city": "Paris"}
    result = validate_arguments(tool(WEATHER), arguments)
    assert result == ValidationResult(True, {"city": "Paris", "unit": "celsius"}, None, ())
    assert result.arguments is not arguments
    assert arguments == {"city": "Paris"}


def test_a_given_value_is_not_replaced_by_the_default() -> None:
    result = validate_arguments(tool(WEATHER), {"city": "Oslo", "unit": "fahrenheit"})
    assert result.arguments == {"city": "Oslo", "unit": "fahrenheit"}


def test_defaults_apply_in_nested_objects_and_through_refs() -> None:
    schema = {
        "type": "object",
        "$defs": {"Paging": obj(size={"type": "integer", "default": 20})},
        "properties": {
            "filters": obj(lang={"type": "string", "default": "en"}, tags={"default": []}),
            "paging": {"$ref": "#/$defs/Paging"},
        },
    }
    given = {"filters": {}, "paging": {}}
    result = validate_arguments(tool(schema), given)
    assert result.arguments == {"filters": {"lang": "en", "tags": []}, "paging": {"size": 20}}
    assert given == {"filters": {}, "paging": {}}


def test_an_absent_nested_object_is_not_created_for_its_defaults() -> None:
    schema = obj(filters=obj(lang={"type": "string", "default": "en"}))
    assert validate_arguments(tool(schema), {}).arguments == {}


def test_mutable_defaults_are_not_shared_between_calls() -> None:
    contract = tool(obj(tags={"type": "array", "default": []}))
    first = validate_arguments(contract, {}).arguments
    assert first is not None
    first["tags"].append("changed")
    assert validate_arguments(contract, {}).arguments == {"tags": []}


@pytest.mark.parametrize("raw", ["", "   ", None, "{}", b"{}", b""])
def test_empty_arguments_mean_an_empty_object(raw: Any) -> None:
    result = validate_arguments(tool({"type": "object", "properties": {}}), raw)
    assert result.ok and result.arguments == {}


def test_json_text_and_bytes_are_parsed() -> None:
    contract = tool(WEATHER)
    text = '{"city": "Zürich", "days": 3}'
    assert validate_arguments(contract, text).arguments == {
        "city": "Zürich",
        "days": 3,
        "unit": "celsius",
    }
    assert validate_arguments(contract, text.encode()).ok


# -- the error envelope -------------------------------------------------------------------


def test_every_violation_is_reported_with_one_combined_fix() -> None:
    arguments = {"ctiy": "Paris", "unit": "Celsius", "days": 30}
    result = validate_arguments(tool(WEATHER), arguments)
    assert not result.ok and result.arguments is None and result.error is not None
    error = result.error
    assert error.category is ErrorCategory.INVALID_ARGUMENT
    assert error.retryable is False and error.effect_committed is False
    assert {(e.path, e.code) for e in error.field_errors} == {
        ("/ctiy", "additional_property"),
        ("/city", "required"),
        ("/unit", "enum"),
        ("/days", "maximum"),
    }
    assert error.message.startswith("4 invalid arguments for get_weather: ")
    assert error.suggested_fix == (
        "/ctiy: did you mean 'city'? rename 'ctiy' to 'city'; "
        "/city: rename 'ctiy' to 'city'; "
        '/unit: use "celsius" (the closest allowed value); '
        "/days: use 14 (the maximum)"
    )
    assert fixed(tool(WEATHER), arguments, result) == {
        "city": "Paris",
        "unit": "celsius",
        "days": 14,
    }


# -- bad JSON -----------------------------------------------------------------------------


def test_cut_off_json_names_the_position_and_what_to_close() -> None:
    text = '{"city": "Par'
    error = only_error(validate_arguments(tool(WEATHER), text))
    assert (error.path, error.code) == ("", "json")
    assert "line 1 column 10 (char 9)" in error.message
    result = validate_arguments(tool(WEATHER), text)
    assert result.error is not None
    assert result.error.suggested_fix == (
        "(arguments): arguments must be a JSON object; the text is cut off at char 13: "
        "close the string and the object"
    )


@pytest.mark.parametrize(
    ("text", "fix"),
    [
        ('{"a": [1, 2', "cut off at char 11: close the array and the object"),
        ('{"a": ', "cut off at char 6: complete the value, then close the object"),
        ("{'a': 1}", "put property names in double quotes, not single quotes"),
        ("{\"a\": 'x'}", "put the string at char 6 in double quotes"),
        ('{"a": True}', "write True at char 6 as true"),
        ('{"a": None}', "write None at char 6 as null"),
        ('{"a": 1,}', "remove the trailing comma before char 8"),
        ('{"a": [1,]}', "remove the trailing comma before char 9"),
        ('{"a": 1}{"b": 2}', "send exactly one JSON object; remove everything from char 8"),
        ('{"a": NaN}', "replace NaN at char 6 with a number or null"),
        ('{"a": "x\ny"}', "escape the control character at char 8"),
        ('{"a" 1}', "add ':' after the property name, at char 5"),
        ("city=Paris", 'send an object such as {"name": "value"}'),
    ],
)
def test_common_json_mistakes_get_a_specific_fix(text: str, fix: str) -> None:
    result = validate_arguments(tool(obj()), text)
    assert only_error(result).code == "json"
    assert result.error is not None and result.error.suggested_fix is not None
    assert fix in result.error.suggested_fix


def test_bytes_that_are_not_utf8_are_a_json_error() -> None:
    error = only_error(validate_arguments(tool(obj()), b'{"a": "\xff"}'))
    assert error.code == "json" and "UTF-8 (byte 7)" in error.message


def test_absurdly_nested_json_is_an_error_not_a_crash() -> None:
    assert only_error(validate_arguments(tool(obj()), "[" * 100_000)).code == "json"


# -- arguments that are not an object -----------------------------------------------------


def test_valid_json_that_is_not_an_object_is_a_type_error_at_the_root() -> None:
    error = only_error(validate_arguments(tool(WEATHER), "[1, 2]"))
    assert (error.path, error.code, error.expected) == ("", "type", "object")


def test_a_json_encoded_object_is_unwrapped_by_the_repair() -> None:
    contract = tool(WEATHER)
    raw = json.dumps(json.dumps({"city": "Rome"}))
    result = validate_arguments(contract, raw)
    assert only_error(result).code == "type"
    assert result.error is not None
    assert "send the object itself, not a JSON-encoded string" in str(result.error.suggested_fix)
    assert fixed(contract, json.loads(raw), result) == {"city": "Rome"}


# -- type ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "sent", "repaired", "fix"),
    [
        ({"type": "integer"}, "3", 3, "send 3 as a number, not a string"),
        ({"type": "number"}, "2.5", 2.5, "send 2.5 as a number, not a string"),
        ({"type": "string"}, 3, "3", 'send "3" as a string, in quotes'),
        ({"type": "boolean"}, "true", True, "send true as a boolean, not a string"),
        ({"type": "integer"}, 2.7, 3, "send a whole number: 3"),
        ({"type": "array"}, "a", ["a"], 'wrap it in a list: ["a"]'),
        ({"type": "object"}, '{"k": 1}', {"k": 1}, "send the object itself"),
        ({"type": "integer", "maximum": 14}, "30", 14, "within bounds: 14"),
        ({"type": "integer"}, [1], 0, "send an integer, e.g. 0"),
    ],
)
def test_wrong_type_fix_converts_the_value_or_gives_an_example(
    schema: dict[str, Any], sent: Any, repaired: Any, fix: str
) -> None:
    contract = tool(obj(x=schema))
    result = validate_arguments(contract, {"x": sent})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/x", "type", schema["type"])
    assert fix in fix_text(result)
    assert fixed(contract, {"x": sent}, result) == {"x": repaired}


def test_an_optional_field_lists_every_accepted_type() -> None:
    contract = tool(obj(n={"anyOf": [{"type": "integer"}, {"type": "null"}]}))
    result = validate_arguments(contract, {"n": "5"})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/n", "type", ["integer", "null"])
    assert error.message == 'expected integer or null, got string "5"'
    assert fixed(contract, {"n": "5"}, result) == {"n": 5}


# -- enum and const -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "closest"),
    [("Celsius", "celsius"), ("farenheit", "fahrenheit"), ("celcius", "celsius")],
)
def test_enum_fix_is_the_closest_allowed_value(sent: str, closest: str) -> None:
    result = validate_arguments(tool(WEATHER), {"city": "Oslo", "unit": sent})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/unit", "enum", ["celsius", "fahrenheit"])
    assert result.error is not None
    assert result.error.suggested_fix == f'/unit: use "{closest}" (the closest allowed value)'
    assert result.repairs == (Repair("replace", "/unit", closest),)


def test_enum_far_from_every_value_lists_them_and_marks_the_repair_a_placeholder() -> None:
    result = validate_arguments(tool(WEATHER), {"city": "Oslo", "unit": "kelvin"})
    assert result.error is not None
    assert result.error.suggested_fix == '/unit: use one of "celsius", "fahrenheit"'
    assert result.repairs[0].placeholder


def test_numeric_enum_fix_is_the_numerically_nearest_value() -> None:
    result = validate_arguments(tool(obj(size={"enum": [8, 16, 32]})), {"size": 20})
    assert result.repairs == (Repair("replace", "/size", 16),)


def test_const_fix_is_the_constant() -> None:
    contract = tool(obj(version={"const": 2}))
    result = validate_arguments(contract, {"version": 1})
    assert only_error(result).code == "const"
    assert fixed(contract, {"version": 1}, result) == {"version": 2}


# -- bounds -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "sent", "code", "fix", "repaired"),
    [
        ({"minimum": 1}, 0, "minimum", "use 1 (the minimum)", 1),
        ({"maximum": 100}, 120, "maximum", "use 100 (the maximum)", 100),
        ({"exclusiveMinimum": 0}, 0, "exclusive_minimum", "use 1 (a value above 0)", 1),
        ({"exclusiveMaximum": 10}, 10, "exclusive_maximum", "use 9 (a value below 10)", 9),
        ({"multipleOf": 5}, 12, "multiple_of", "use 10 (the nearest multiple of 5)", 10),
        ({"multipleOf": 0.1}, 0.35, "multiple_of", "the nearest multiple of 0.1", 0.3),
        ({"minimum": 0.5}, 0, "minimum", "use 1 (the minimum)", 1),
    ],
)
def test_bound_fix_is_the_nearest_allowed_number(
    schema: dict[str, Any], sent: float, code: str, fix: str, repaired: float
) -> None:
    number_type = "integer" if isinstance(repaired, int) else "number"
    contract = tool(obj(x={"type": number_type, **schema}))
    result = validate_arguments(contract, {"x": sent})
    error = only_error(result)
    assert (error.path, error.code) == ("/x", code)
    assert error.expected == next(iter(schema.values()))
    assert fix in fix_text(result)
    assert fixed(contract, {"x": sent}, result) == {"x": repaired}


def test_bound_and_multiple_together_are_fixed_by_one_value() -> None:
    contract = tool(obj(x={"type": "integer", "multipleOf": 5, "exclusiveMinimum": 0}))
    result = validate_arguments(contract, {"x": -7})
    assert codes(result) == {"multiple_of", "exclusive_minimum"}
    assert fixed(contract, {"x": -7}, result) == {"x": 5}


# -- strings ------------------------------------------------------------------------------


def test_too_long_string_is_shortened() -> None:
    contract = tool(obj(code={"type": "string", "maxLength": 3}))
    result = validate_arguments(contract, {"code": "ABCDE"})
    assert only_error(result).code == "max_length"
    assert fixed(contract, {"code": "ABCDE"}, result) == {"code": "ABC"}


def test_too_short_string_gets_a_placeholder_example() -> None:
    contract = tool(obj(code={"type": "string", "minLength": 3}))
    result = validate_arguments(contract, {"code": "A"})
    error = only_error(result)
    assert (error.code, error.expected) == ("min_length", 3)
    assert result.repairs[0].placeholder
    fixed(contract, {"code": "A"}, result)


def test_pattern_error_names_the_pattern() -> None:
    result = validate_arguments(
        tool(obj(sku={"type": "string", "pattern": "^[A-Z]{3}$"})), {"sku": "ab"}
    )
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/sku", "pattern", "^[A-Z]{3}$")
    assert "send a string matching ^[A-Z]{3}$" in fix_text(result)


@pytest.mark.parametrize(
    ("fmt", "bad", "example"),
    [("email", "nope", "user@example.com"), ("date", "2024-13-45", "2024-01-31")],
)
def test_format_is_checked_and_fixed_with_an_example(fmt: str, bad: str, example: str) -> None:
    contract = tool(obj(v={"type": "string", "format": fmt}))
    result = validate_arguments(contract, {"v": bad})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/v", "format", fmt)
    assert fixed(contract, {"v": bad}, result) == {"v": example}


def test_pattern_semantics_match_the_fast_path() -> None:
    # ECMA-262 \d is ASCII; Python's is Unicode. The fast path rejects Arabic-Indic digits,
    # and the rich path must explain that rejection rather than find nothing.
    result = validate_arguments(tool(obj(n={"type": "string", "pattern": "^\\d+$"})), {"n": "١٢"})
    assert only_error(result).code == "pattern"


# -- required and unknown properties ------------------------------------------------------


def test_missing_required_property_is_located_at_the_property() -> None:
    contract = tool(WEATHER)
    result = validate_arguments(contract, {"days": 2})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/city", "required", "string")
    assert result.error is not None and result.error.suggested_fix == "/city: add 'city' (string)"
    assert result.repairs[0].op == "add" and result.repairs[0].placeholder
    fixed(contract, {"days": 2}, result)


def test_missing_property_with_enum_names_the_choices() -> None:
    schema = {**obj(mode={"enum": ["fast", "safe"]}), "required": ["mode"]}
    result = validate_arguments(tool(schema), {})
    assert result.error is not None
    assert result.error.suggested_fix == '/mode: add \'mode\' (one of "fast", "safe")'


def test_unknown_property_fix_is_the_closest_known_name() -> None:
    contract = tool(WEATHER)
    result = validate_arguments(contract, {"city": "Oslo", "Days": 3})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/Days", "additional_property", "days")
    assert result.error is not None
    assert result.error.suggested_fix == "/Days: did you mean 'days'? rename 'Days' to 'days'"
    assert fixed(contract, {"city": "Oslo", "Days": 3}, result) == {"city": "Oslo", "days": 3}


def test_renamed_property_is_also_converted_to_the_right_type() -> None:
    contract = tool(WEATHER)
    result = validate_arguments(contract, {"city": "Oslo", "day": "3"})
    assert fixed(contract, {"city": "Oslo", "day": "3"}, result) == {"city": "Oslo", "days": 3}


def test_unknown_property_without_a_close_name_is_removed() -> None:
    contract = tool(WEATHER)
    result = validate_arguments(contract, {"city": "Oslo", "verbose": True})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/verbose", "additional_property", None)
    assert result.error is not None
    assert result.error.suggested_fix == (
        "/verbose: remove 'verbose' (known: 'city', 'unit', 'days')"
    )
    assert fixed(contract, {"city": "Oslo", "verbose": True}, result) == {"city": "Oslo"}


def test_a_property_already_given_is_not_a_rename_target() -> None:
    result = validate_arguments(tool(WEATHER), {"city": "Oslo", "citty": "Bergen"})
    assert result.repairs == (Repair("remove", "/citty"),)


def test_unevaluated_and_forbidden_properties_are_located_at_the_property() -> None:
    unevaluated = {**obj(q={"type": "string"}), "unevaluatedProperties": False}
    forbidden = obj(q=False)
    names = {**obj(), "propertyNames": {"maxLength": 3}}
    for schema, arguments, path in (
        (unevaluated, {"q": "x", "r": 1}, "/r"),
        (forbidden, {"q": 1}, "/q"),
        (names, {"long": 1}, "/long"),
    ):
        result = validate_arguments(tool(schema), arguments)
        error = only_error(result)
        assert (error.path, error.code) == (path, "additional_property"), schema
        fixed(tool(schema), arguments, result)


def test_dependent_required_names_the_trigger() -> None:
    schema = {**obj(card={}, cvc={"type": "string"}), "dependentRequired": {"card": ["cvc"]}}
    result = validate_arguments(tool(schema), {"card": "4111"})
    error = only_error(result)
    assert (error.path, error.code) == ("/cvc", "dependent_required")
    assert error.message == "'cvc' is required when 'card' is present"
    fixed(tool(schema), {"card": "4111"}, result)


@pytest.mark.parametrize(
    ("sent", "code"), [({}, "min_properties"), ({"a": 1, "b": 2, "c": 3}, "max_properties")]
)
def test_property_counts(sent: dict[str, Any], code: str) -> None:
    schema = {"type": "object", "minProperties": 1, "maxProperties": 2}
    error = only_error(validate_arguments(tool(schema), sent))
    assert (error.path, error.code) == ("", code)


# -- nesting and pointers -----------------------------------------------------------------


def test_nested_array_item_paths() -> None:
    schema = obj(
        items={
            "type": "array",
            "items": {**obj(name={"type": "string"}), "required": ["name"]},
        }
    )
    arguments = {"items": [{"name": "a"}, {"name": "b"}, {"nme": "c"}, {"name": 4}]}
    result = validate_arguments(tool(schema), arguments)
    assert result.error is not None
    assert [(e.path, e.code) for e in result.error.field_errors] == [
        ("/items/2/name", "required"),
        ("/items/3/name", "type"),
    ]


def test_pointers_escape_tilde_and_slash() -> None:
    contract = tool(obj(**{"a/b": {"type": "integer"}, "c~d": {"type": "integer"}}))
    result = validate_arguments(contract, {"a/b": "1", "c~d": "2"})
    assert result.error is not None
    assert [e.path for e in result.error.field_errors] == ["/a~1b", "/c~0d"]
    assert fixed(contract, {"a/b": "1", "c~d": "2"}, result) == {"a/b": 1, "c~d": 2}


def test_one_of_is_explained_by_the_branch_the_value_fits() -> None:
    branch = {**obj(a={"type": "integer"}), "required": ["a"]}
    contract = tool(obj(p={"oneOf": [{"type": "string"}, branch]}))
    error = only_error(validate_arguments(contract, {"p": {"a": "x"}}))
    assert (error.path, error.code) == ("/p/a", "type")


def test_one_of_constants_merge_into_an_enum() -> None:
    contract = tool(obj(p={"oneOf": [{"const": "a"}, {"const": "b"}]}))
    result = validate_arguments(contract, {"p": "B"})
    error = only_error(result)
    assert (error.code, error.expected) == ("enum", ["a", "b"])
    assert fixed(contract, {"p": "B"}, result) == {"p": "b"}


def test_one_of_matching_several_branches() -> None:
    contract = tool(obj(p={"oneOf": [{"type": "number"}, {"type": "integer"}]}))
    assert only_error(validate_arguments(contract, {"p": 3})).code == "one_of"


# -- arrays -------------------------------------------------------------------------------


def test_duplicates_and_excess_items_are_removed() -> None:
    schema = obj(a={"type": "array", "uniqueItems": True, "maxItems": 3})
    result = validate_arguments(tool(schema), {"a": [1, 1, 2, 2, 5]})
    assert codes(result) == {"unique_items", "max_items"}
    repaired = apply_repairs({"a": [1, 1, 2, 2, 5]}, result.repairs)
    assert validate_arguments(tool(schema), repaired).ok


def test_true_and_one_are_distinct_items() -> None:
    schema = obj(a={"type": "array", "uniqueItems": True})
    assert validate_arguments(tool(schema), {"a": [1, True]}).ok
    result = validate_arguments(tool(schema), {"a": [1, 1.0]})
    assert result.repairs == (Repair("remove", "/a/1"),)


def test_too_few_items_get_placeholders() -> None:
    contract = tool(obj(a={"type": "array", "minItems": 2, "items": {"type": "string"}}))
    result = validate_arguments(contract, {"a": ["x"]})
    assert only_error(result).code == "min_items"
    fixed(contract, {"a": ["x"]}, result)


def test_items_beyond_prefix_items() -> None:
    contract = tool(obj(t={"type": "array", "prefixItems": [{"type": "integer"}], "items": False}))
    result = validate_arguments(contract, {"t": [1, 2, 3]})
    error = only_error(result)
    assert (error.path, error.code, error.expected) == ("/t", "max_items", 1)
    assert fixed(contract, {"t": [1, 2, 3]}, result) == {"t": [1]}


def test_contains_and_not() -> None:
    contains = validate_arguments(
        tool(obj(a={"type": "array", "contains": {"const": 1}})), {"a": [2]}
    )
    assert (only_error(contains).path, only_error(contains).code) == ("/a", "contains")
    negated = validate_arguments(tool(obj(a={"not": {"type": "null"}})), {"a": None})
    assert (only_error(negated).code, only_error(negated).expected) == ("not", {"type": "null"})


# -- robustness ---------------------------------------------------------------------------


def test_values_jsonschema_rs_cannot_read_do_not_raise() -> None:
    contract = tool(obj(p={"type": "string"}))
    assert only_error(validate_arguments(contract, {"p": {1, 2}})).code == "type"
    assert only_error(validate_arguments(contract, {"p": b"x"})).code == "type"


def test_nan_in_a_parsed_dict_is_rejected_with_a_field_error() -> None:
    # jsonschema accepts NaN as a number, jsonschema_rs does not; the rejection must still
    # come with a field error.
    result = validate_arguments(tool(obj(p={"type": "number"})), {"p": float("nan")})
    error = only_error(result)
    assert (error.path, error.code) == ("/p", "type")


def test_a_remote_ref_is_a_contract_error_naming_the_fix() -> None:
    contract = tool(obj(p={"$ref": "https://example.com/s.json"}))
    with pytest.raises(ContractError, match=r"\$defs") as caught:
        validate_arguments(contract, {"p": 1})
    assert caught.value.contract_id == "get_weather"


def test_equal_contracts_share_a_compiled_validator_and_are_not_kept_alive() -> None:
    first, second = tool(WEATHER), tool(WEATHER)
    assert validate_arguments(first, {"city": "a"}).ok
    assert validate_arguments(second, {"city": "a"}).ok
    alive = weakref.ref(first)
    del first
    gc.collect()
    assert alive() is None
    changed = tool({**WEATHER, "required": ["city", "days"]})
    assert not validate_arguments(changed, {"city": "a"}).ok


def test_repairs_are_json_patch_operations() -> None:
    assert Repair("move", "/city", from_="/ctiy").as_patch() == {
        "op": "move",
        "from": "/ctiy",
        "path": "/city",
    }
    assert Repair("replace", "/x", 3).as_patch() == {"op": "replace", "path": "/x", "value": 3}
    assert Repair("remove", "/x").as_patch() == {"op": "remove", "path": "/x"}


def test_apply_repairs_leaves_the_input_alone_and_skips_stale_paths() -> None:
    original = {"a": [1, 2, 3]}
    repairs = (Repair("remove", "/a/0"), Repair("replace", "/gone/x", 1), Repair("add", "/b", 2))
    assert apply_repairs(original, repairs) == {"a": [2, 3], "b": 2}
    assert original == {"a": [1, 2, 3]}
