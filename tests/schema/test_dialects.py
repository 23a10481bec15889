"""normalize_schema: every dialect rewrite, its warning, and 2020-12 validity of the result."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from bfcl_data import bfcl_data_dir
from toolkeeper import CatalogError
from toolkeeper.schema.dialects import SOURCES, normalize_schema


def normalize(schema: dict[str, Any], source: str = "bfcl") -> tuple[dict[str, Any], list[str]]:
    result, warnings = normalize_schema(schema, source=source)
    Draft202012Validator.check_schema(result)
    return result, warnings


def prop(schema: dict[str, Any], source: str = "bfcl") -> tuple[dict[str, Any], list[str]]:
    """Normalize `schema` as the property `p` of an object; return p and the warnings."""
    result, warnings = normalize({"type": "object", "properties": {"p": schema}}, source)
    return result["properties"]["p"], warnings


# -- type names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("dict", "object"),
        ("float", "number"),
        ("tuple", "array"),
        ("list", "array"),
        ("str", "string"),
        ("int", "integer"),
        ("bool", "boolean"),
    ],
)
def test_bfcl_type_names_become_json_types(name: str, expected: str) -> None:
    schema, warnings = prop({"type": name})
    assert schema == {"type": expected}
    assert warnings == [f"/properties/p/type: BFCL type {name!r} normalized to {expected!r}"]


def test_bfcl_any_removes_the_type_constraint() -> None:
    schema, warnings = prop({"type": "any", "description": "Anything."})
    assert schema == {"description": "Anything."}
    assert warnings == ["/properties/p/type: BFCL type 'any' removed: any value accepted"]


def test_the_warning_names_the_path_of_a_nested_rewrite() -> None:
    _, warnings = normalize(
        {"type": "dict", "properties": {"radius": {"type": "float"}}, "required": ["radius"]}
    )
    assert "/properties/radius/type: BFCL type 'float' normalized to 'number'" in warnings
    assert "/type: BFCL type 'dict' normalized to 'object'" in warnings


@pytest.mark.parametrize(
    ("name", "native"),
    [
        ("long", "integer"),
        ("int", "integer"),
        ("short", "integer"),
        ("byte", "integer"),
        ("double", "number"),
        ("float", "number"),
        ("boolean", "boolean"),
        ("Array", "array"),
        ("ArrayList", "array"),
        ("List", "array"),
        ("HashMap", "object"),
        ("Map", "object"),
        ("Hashtable", "object"),
    ],
)
def test_java_types_accept_their_value_or_a_java_expression(name: str, native: str) -> None:
    schema, warnings = prop({"type": name, "description": "A value."}, "bfcl-java")
    assert schema["type"] == [native, "string"]
    assert schema["description"] == f"A value. (Java {name}; a string value is a Java expression)"
    assert warnings == [f"/properties/p/type: Java {name} normalized to {[native, 'string']!r}"]


@pytest.mark.parametrize("name", ["String", "char"])
def test_java_string_types_stay_plain_strings(name: str) -> None:
    schema, _ = prop({"type": name}, "bfcl-java")
    assert schema == {"type": "string"}


def test_java_any_accepts_anything() -> None:
    schema, _ = prop({"type": "any"}, "bfcl-java")
    assert schema == {}


def test_java_set_requires_unique_items() -> None:
    schema, _ = prop({"type": "Set", "items": {"type": "String"}}, "bfcl-java")
    assert schema["uniqueItems"] is True
    assert schema["items"] == {"type": "string"}


def test_java_generic_type_names_map_by_their_base() -> None:
    schema, _ = prop({"type": "List<String>"}, "bfcl-java")
    assert schema["type"] == ["array", "string"]


@pytest.mark.parametrize(
    ("name", "native"),
    [("Boolean", "boolean"), ("Bigint", "integer"), ("float", "number"), ("number", "number")],
)
def test_javascript_types_accept_their_value_or_an_expression(name: str, native: str) -> None:
    schema, _ = prop({"type": name}, "bfcl-javascript")
    assert schema["type"] == [native, "string"]
    assert "JavaScript expression" in schema["description"]


def test_javascript_dict_keeps_its_properties() -> None:
    schema, _ = prop(
        {"type": "dict", "properties": {"role": {"type": "String"}}}, "bfcl-javascript"
    )
    assert schema["type"] == ["object", "string"]
    assert schema["properties"]["role"] == {"type": "string"}


def test_the_root_of_a_java_schema_stays_an_object() -> None:
    schema, _ = normalize({"type": "dict", "properties": {}}, "bfcl-java")
    assert schema["type"] == "object"


def test_java_names_outside_java_sources_map_to_plain_json_types() -> None:
    schema, warnings = prop({"type": "HashMap"}, "mcp")
    assert schema == {"type": "object"}
    assert warnings == ["/properties/p/type: non-standard type 'HashMap' normalized to 'object'"]


def test_uppercase_native_names_are_normalized() -> None:
    schema, _ = prop({"type": "STRING"}, "openapi")
    assert schema == {"type": "string"}


def test_type_lists_map_each_entry() -> None:
    schema, _ = prop({"type": ["str", "None"]})
    assert schema == {"type": ["string", "null"]}


@pytest.mark.parametrize("name", ["Foo", "", 5])
def test_an_unknown_type_moves_into_the_description(name: Any) -> None:
    schema, warnings = prop({"type": name, "description": "X."})
    assert "type" not in schema
    assert schema["description"].startswith("X. (declared type: ")
    assert warnings[0].startswith("/properties/p/type: unknown type")


def test_bfcl_java_and_javascript_gold_answers_validate() -> None:
    """The string-or-native choice exists for this: BFCL's gold values are converted values
    (true, [101, 202], {...}) with variable names (strings) anywhere inside them."""
    data = bfcl_data_dir()
    for category, source in (
        ("simple_java", "bfcl-java"),
        ("simple_javascript", "bfcl-javascript"),
    ):
        entries = (data / f"BFCL_v4_{category}.json").read_text().splitlines()
        answers = (data / "possible_answer" / f"BFCL_v4_{category}.json").read_text().splitlines()
        gold = {e["id"]: e["ground_truth"] for e in map(json.loads, answers)}
        for entry in map(json.loads, entries):
            for function in entry["function"]:
                schema, _ = normalize(function["parameters"], source)
                for call in gold[entry["id"]]:
                    arguments = _first_choice(call[function["name"]])
                    errors = list(Draft202012Validator(schema).iter_errors(arguments))
                    assert not errors, entry["id"]


def _first_choice(options: dict[str, list[Any]]) -> dict[str, Any]:
    """BFCL lists acceptable values per parameter ("" = may be omitted); take the first."""
    chosen = {}
    for name, values in options.items():
        if values and values[0] != "":
            first = values[0]
            chosen[name] = _first_choice(first) if isinstance(first, dict) else first
    return chosen


# -- OpenAPI and older drafts -------------------------------------------------------------


def test_nullable_becomes_a_type_union_with_null() -> None:
    schema, warnings = prop({"type": "string", "nullable": True, "enum": ["a", "b"]}, "openapi")
    assert schema == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert warnings == [
        "/properties/p/nullable: OpenAPI nullable: true normalized to type ['string', 'null']"
    ]


def test_nullable_without_a_type_is_removed_with_a_warning() -> None:
    schema, warnings = prop({"nullable": True}, "openapi")
    assert schema == {}
    assert "no effect" in warnings[0]


def test_nullable_false_is_removed_with_a_warning() -> None:
    schema, warnings = prop({"type": "integer", "nullable": False}, "openapi")
    assert schema == {"type": "integer"}
    assert warnings == ["/properties/p/nullable: OpenAPI nullable: false removed (the default)"]


def test_example_moves_into_examples() -> None:
    schema, warnings = prop({"type": "string", "example": "Paris", "examples": ["Rome"]}, "openapi")
    assert schema["examples"] == ["Rome", "Paris"]
    assert warnings == ["/properties/p/example: OpenAPI example moved into examples"]


def test_examples_as_a_map_become_a_list() -> None:
    schema, _ = prop({"examples": {"one": 1, "two": 2}}, "openapi")
    assert schema["examples"] == [1, 2]


def test_draft04_exclusive_minimum_becomes_a_number() -> None:
    schema, warnings = prop({"type": "number", "minimum": 0, "exclusiveMinimum": True}, "mcp")
    assert schema == {"type": "number", "exclusiveMinimum": 0}
    assert warnings == [
        "/properties/p/exclusiveMinimum: draft-04 true with minimum 0 normalized to 0"
    ]


def test_draft04_exclusive_false_is_removed_and_the_bound_stays() -> None:
    schema, _ = prop({"maximum": 5, "exclusiveMaximum": False}, "mcp")
    assert schema == {"maximum": 5}


def test_draft04_exclusive_without_a_bound_moves_into_the_description() -> None:
    schema, _ = prop({"exclusiveMaximum": True}, "mcp")
    assert schema == {"description": "(exclusiveMaximum: true)"}


def test_required_true_on_a_property_moves_to_the_parent() -> None:
    schema, warnings = normalize(
        {"type": "object", "properties": {"a": {"type": "string", "required": True}}}, "mcp"
    )
    assert schema["required"] == ["a"]
    assert schema["properties"]["a"] == {"type": "string"}
    assert warnings == ["/properties/a/required: 'a' moved into the parent's required list"]


@pytest.mark.parametrize("flag", [True, "True", "true", "yes"])
def test_optional_on_a_property_is_removed_and_leaves_it_optional(flag: Any) -> None:
    schema, warnings = normalize({"type": "dict", "properties": {"a": {"optional": flag}}})
    assert "required" not in schema
    assert schema["properties"]["a"] == {}
    assert warnings[-1] == "/properties/a/optional: removed; required already says 'a' is optional"


def test_optional_false_makes_a_property_required() -> None:
    schema, _ = normalize({"type": "object", "properties": {"a": {"optional": False}}}, "mcp")
    assert schema["required"] == ["a"]


def test_a_conflicting_optional_keeps_the_property_required() -> None:
    schema, warnings = normalize(
        {"type": "dict", "properties": {"a": {"optional": True}}, "required": ["a"]}
    )
    assert schema["required"] == ["a"]
    assert "kept required" in warnings[-1]


def test_an_optional_list_on_the_object_is_removed() -> None:
    schema, warnings = normalize(
        {"type": "dict", "properties": {"a": {}, "b": {}}, "required": ["a"], "optional": ["b"]}
    )
    assert "optional" not in schema
    assert schema["required"] == ["a"]
    assert warnings[-1] == "/optional: removed; required already says 'b' is optional"


def test_duplicate_required_names_are_removed() -> None:
    schema, warnings = normalize({"type": "object", "required": ["a", "a"]}, "mcp")
    assert schema["required"] == ["a"]
    assert warnings == ["/required: duplicate names removed"]


def test_tuple_items_become_prefix_items() -> None:
    schema, warnings = prop(
        {"type": "array", "items": [{"type": "float"}, {"type": "str"}], "additionalItems": False}
    )
    assert schema == {
        "type": "array",
        "prefixItems": [{"type": "number"}, {"type": "string"}],
        "items": False,
    }
    assert warnings[:2] == [
        "/properties/p/items: tuple form (a list of schemas) normalized to prefixItems",
        "/properties/p/additionalItems: normalized to items (after prefixItems)",
    ]


def test_definitions_become_defs_and_references_follow() -> None:
    schema, warnings = normalize(
        {
            "type": "object",
            "properties": {
                "a": {"$ref": "#/definitions/Point"},
                "definitions": {"type": "string"},
                "b": {"$ref": "#/properties/definitions"},
            },
            "definitions": {"Point": {"type": "object", "properties": {"x": {"type": "float"}}}},
        },
        "json-schema",
    )
    assert schema["$defs"]["Point"]["properties"]["x"] == {"type": "number"}
    assert schema["properties"]["a"] == {"$ref": "#/$defs/Point"}
    assert schema["properties"]["b"] == {"$ref": "#/properties/definitions"}
    assert "/definitions: renamed to $defs (references rewritten)" in warnings
    assert "/properties/a/$ref: '#/definitions/Point' rewritten to '#/$defs/Point'" in warnings
    assert Draft202012Validator(schema).is_valid({"a": {"x": 1.5}, "b": "s"})


def test_conflicting_definitions_and_defs_are_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="defines 'A' in both 'definitions' and '\\$defs'"):
        normalize_schema(
            {"definitions": {"A": {"type": "string"}}, "$defs": {"A": {"type": "integer"}}},
            source="json-schema",
        )


def test_dependencies_split_into_2020_keywords() -> None:
    schema, _ = normalize(
        {"type": "object", "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}, "json-schema"
    )
    assert schema["dependentRequired"] == {"a": ["b"]}
    assert schema["dependentSchemas"] == {"c": {"required": ["d"]}}


def test_an_older_schema_uri_is_replaced() -> None:
    schema, warnings = normalize(
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}, "json-schema"
    )
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert warnings[0].startswith("/$schema: ")


def test_a_root_with_properties_and_no_type_becomes_an_object() -> None:
    schema, warnings = normalize({"properties": {"a": {"type": "string"}}}, "openai")
    assert schema["type"] == "object"
    assert warnings == [
        "/type: missing at the root; set to 'object' (tool arguments are an object)"
    ]


# -- recursion and the catch-all ----------------------------------------------------------


def test_every_subschema_position_is_normalized() -> None:
    float_ = {"type": "float"}
    schema, _ = normalize(
        {
            "type": "dict",
            "properties": {"p": float_},
            "patternProperties": {"^x": float_},
            "additionalProperties": float_,
            "anyOf": [float_],
            "oneOf": [float_],
            "allOf": [float_],
            "not": float_,
            "$defs": {"d": float_},
            "items": float_,
            "prefixItems": [float_],
        }
    )
    number = {"type": "number"}
    assert schema["properties"]["p"] == schema["patternProperties"]["^x"] == number
    assert schema["additionalProperties"] == schema["not"] == schema["items"] == number
    assert schema["anyOf"] == schema["oneOf"] == schema["allOf"] == schema["prefixItems"]
    assert schema["anyOf"] == [number]
    assert schema["$defs"]["d"] == number


def test_a_value_that_is_not_a_schema_is_kept_as_a_description() -> None:
    schema, warnings = prop("string")  # type: ignore[arg-type]
    assert schema == {"description": "declared as string"}
    assert warnings[0].startswith("/properties/p: string is not a schema")


@pytest.mark.parametrize(
    ("keyword", "value"),
    [("minimum", "5"), ("pattern", "(?<name>x)"), ("enum", "a"), ("required", "yes")],
)
def test_an_invalid_keyword_moves_into_the_description(keyword: str, value: Any) -> None:
    schema, warnings = prop({"type": "string", "description": "D.", keyword: value}, "mcp")
    assert keyword not in schema
    assert schema["description"].startswith("D. (" + keyword + ": ")
    assert warnings[-1].startswith(f"/properties/p/{keyword}: ")
    assert warnings[-1].endswith("moved into description")


def test_valid_unknown_keywords_are_kept() -> None:
    schema, warnings = prop({"type": "string", "x-internal": True}, "openapi")
    assert schema == {"type": "string", "x-internal": True}
    assert warnings == []


def test_the_input_schema_is_not_modified() -> None:
    original = {"type": "dict", "properties": {"a": {"type": "float", "required": True}}}
    snapshot = copy.deepcopy(original)
    normalize(original)
    assert original == snapshot


def test_an_unknown_source_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="unknown schema source 'bfcl_java'; use one of"):
        normalize_schema({}, source="bfcl_java")


def test_a_schema_that_is_not_an_object_is_a_catalog_error() -> None:
    with pytest.raises(CatalogError, match="must be a JSON object, got list"):
        normalize_schema([], source="mcp")  # type: ignore[arg-type]


# -- property: whatever the dialect, the result is 2020-12 --------------------------------

TYPE_NAMES = st.sampled_from(
    ["string", "integer", "number", "boolean", "object", "array", "null", "dict", "float",
     "tuple", "any", "list", "str", "int", "bool", "String", "long", "double", "char",
     "ArrayList", "HashMap", "Set", "Bigint", "Boolean", "List<String>", "STRING", "Foo", ""]
)  # fmt: skip
SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
KEYWORDS = {
    "type": TYPE_NAMES | st.lists(TYPE_NAMES, max_size=3) | st.integers(),
    "description": st.text(max_size=4) | st.integers(),
    "nullable": st.booleans() | st.just("yes"),
    "example": SCALARS,
    "examples": st.lists(SCALARS, max_size=2) | st.dictionaries(st.text(max_size=2), SCALARS),
    "minimum": st.integers(-3, 3) | st.text(max_size=2),
    "exclusiveMinimum": st.booleans() | st.integers(-3, 3),
    "exclusiveMaximum": st.booleans(),
    "required": st.booleans() | st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
    "optional": st.booleans() | st.sampled_from(["True", "yes", "no", "maybe"]),
    "enum": st.lists(SCALARS, max_size=3) | st.integers(),
    "pattern": st.sampled_from(["^a+$", "[", "(?<n>a)", "(?P<n>a)"]),
    "$ref": st.sampled_from(["#/definitions/A", "#/$defs/A", "#/items/0", "other.json"]),
    "format": st.sampled_from(["date", "float"]),
    "default": SCALARS,
    "additionalItems": st.booleans(),
    "x-vendor": SCALARS,
}
LEAVES = st.lists(
    st.one_of(*(st.tuples(st.just(key), value) for key, value in KEYWORDS.items())), max_size=5
).map(dict)


def _with_children(children: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    names = st.sampled_from(["a", "b", "c", "definitions", "required"])
    containers = {
        "properties": st.dictionaries(names, children | SCALARS, max_size=3),
        "items": children | st.lists(children, max_size=2) | SCALARS,
        "anyOf": st.lists(children, min_size=1, max_size=2),
        "additionalProperties": children | st.booleans() | SCALARS,
        "definitions": st.dictionaries(st.just("A"), children, max_size=1),
        "$defs": st.dictionaries(st.just("B"), children, max_size=1),
        "dependencies": st.dictionaries(names, children | st.lists(names, max_size=2)),
    }
    some_containers = st.lists(
        st.one_of(*(st.tuples(st.just(key), value) for key, value in containers.items())),
        max_size=3,
    ).map(dict)
    return st.builds(lambda a, b: {**a, **b}, LEAVES, some_containers)


SCHEMAS = st.recursive(LEAVES, _with_children, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(schema=SCHEMAS, source=st.sampled_from(sorted(SOURCES)))
def test_any_dialect_schema_normalizes_to_valid_2020_12(
    schema: dict[str, Any], source: str
) -> None:
    snapshot = copy.deepcopy(schema)
    result, warnings = normalize_schema(schema, source=source)
    Draft202012Validator.check_schema(result)
    assert schema == snapshot
    assert all(warning.startswith("/") for warning in warnings)
