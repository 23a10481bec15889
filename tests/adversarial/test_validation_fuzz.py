"""Argument validation over arbitrary JSON Schemas and values (issue 9, item 11 and the fuzzing
deliverable).

Any schema a contract accepts (JSON Schema 2020-12, to which every dialect toolkeeper reads is
normalized), with any value, gives a pass or a list of violations — never an exception. The
verdict agrees with jsonschema_rs, whose semantics the fast path uses, and with the reference
`jsonschema` wherever toolkeeper claims the same semantics (it does not for `format`, which
it asserts, nor for `multipleOf` on floats, which it judges as jsonschema_rs does). Applying
the repairs of a rejection never adds a violation. Values generated from the shipped
catalogs' schemas always pass.

The budget comes from the Hypothesis profile (tests/conftest.py; docs/testing.md): bounded
in `.ci/run`, much longer with ``--hypothesis-profile=release``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema

from toolkeeper import ToolContract, validate_arguments
from toolkeeper.importers.catalog import load_catalog
from toolkeeper.schema.document import resolve_ref
from toolkeeper.schema.values import schema_types
from toolkeeper.validation import ValidationResult, apply_repairs

ROOT = Path(__file__).resolve().parents[2]

FUZZ = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
"""No max_examples here: the profile sets the budget."""

# -- values ---------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "a/b", "x~y", ""])
KEYS = NAMES | st.text("abc", max_size=2)
EDGE_NUMBERS = st.sampled_from(
    [0, -0.0, 1, -1, 1.0, 0.5, 0.1, 3, 10, 1e-9, 5e-324, 1e308, -1e308,
     2**53, 2**53 + 1, 2**63, -(2**63), 2**64, 10**30]
)  # fmt: skip
NUMBERS = EDGE_NUMBERS | st.integers(-20, 20) | st.floats(-1e3, 1e3, allow_nan=False)
TEXT = st.text("abc019-@.:/ ", max_size=6) | st.sampled_from(
    ["2024-01-31", "2024-01-31T12:00:00Z", "user@example.com", "192.0.2.1", "abab", "ab", "\ud800"]
)
SCALARS = st.none() | st.booleans() | NUMBERS | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=10,
)
ARGUMENTS = st.dictionaries(KEYS, JSON, max_size=4)
"""Tool arguments: always an object at the top."""
NOT_JSON = st.sampled_from(
    [float("nan"), float("inf"), (1, "a"), frozenset({1}), b"ab", object(), 10**400, {1: "a"}]
)
ODD_ARGUMENTS = st.dictionaries(
    KEYS,
    st.recursive(
        SCALARS | NOT_JSON,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
        max_leaves=6,
    ),
    max_size=3,
)
"""What a Python caller can hand `invoke`: values JSON does not have, anywhere."""

# -- schemas --------------------------------------------------------------------------------

TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])
SIZES = st.integers(0, 3) | st.just(2.0)  # 2.0 is an integer to JSON Schema
PATTERNS = st.sampled_from(["^a", "b$", "^[a-c]*$", "a|b", "^$", "[0-9]", "(?:ab)+", "^.{2}$"])
"""Patterns that mean the same in Python's `re` and ECMA-262 for the text generated here."""
FORMATS = st.sampled_from(
    ["date", "date-time", "time", "email", "uri", "ipv4", "ipv6", "uuid", "hostname",
     "duration", "json-pointer", "regex", "no-such-format"]
)  # fmt: skip


@st.composite
def sparse(draw: st.DrawFn, keywords: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    """A schema holding up to three of `keywords`: enough to combine, few enough to be
    satisfiable often."""
    names = draw(st.lists(st.sampled_from(sorted(keywords)), max_size=3, unique=True))
    return {name: draw(keywords[name]) for name in names}


def assertions(refs: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """Boolean schemas, schemas of assertion keywords, and references to `refs`."""
    unique_names = st.lists(NAMES, max_size=3, unique=True)
    keywords = {
        "type": TYPES | st.lists(TYPES, min_size=1, max_size=3, unique=True),
        "enum": st.lists(JSON, max_size=3),
        "const": JSON,
        "minimum": NUMBERS,
        "maximum": NUMBERS,
        "exclusiveMinimum": NUMBERS,
        "exclusiveMaximum": NUMBERS,
        "multipleOf": st.sampled_from([1, 2, 3, 0.5, 0.1, 1e-9, 1e308, 2**64]),
        "minLength": SIZES,
        "maxLength": SIZES,
        "pattern": PATTERNS,
        "format": FORMATS,
        "minItems": SIZES,
        "maxItems": SIZES,
        "uniqueItems": st.booleans(),
        "minContains": SIZES,
        "maxContains": SIZES,
        "minProperties": SIZES,
        "maxProperties": SIZES,
        "required": unique_names,
        "dependentRequired": st.dictionaries(NAMES, unique_names, max_size=2),
        "default": JSON,
    }
    options = st.booleans() | sparse(keywords)
    if refs:
        options |= st.sampled_from(refs).map(lambda ref: {"$ref": ref})
    return options


def applicators(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Schemas of applicator keywords around `inner` schemas. ``{"$ref": "#"}`` appears only
    where the instance gets smaller (under a property or an item), so recursion ends."""
    some = st.lists(inner, min_size=1, max_size=3)
    smaller = inner | st.just({"$ref": "#"})
    return sparse(
        {
            "type": TYPES,
            "anyOf": some,
            "oneOf": some,
            "allOf": some,
            "not": inner,
            "if": inner,
            "then": inner,
            "else": inner,
            "properties": st.dictionaries(NAMES, smaller, max_size=3),
            "patternProperties": st.dictionaries(PATTERNS, smaller, max_size=2),
            "additionalProperties": smaller,
            "propertyNames": inner,
            "unevaluatedProperties": smaller,
            "dependentSchemas": st.dictionaries(NAMES, inner, max_size=2),
            "items": smaller,
            "prefixItems": st.lists(smaller, min_size=1, max_size=3),
            "contains": smaller,
            "unevaluatedItems": smaller,
            "required": st.lists(NAMES, max_size=3, unique=True),
            "enum": st.lists(JSON, max_size=3),
        }
    )


def schemas(refs: tuple[str, ...]) -> st.SearchStrategy[Any]:
    return st.recursive(assertions(refs), applicators, max_leaves=8)


FIRST, SECOND, BODY = (schemas(()), schemas(("#/$defs/d0",)), schemas(("#/$defs/d0", "#/$defs/d1")))


@st.composite
def input_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A contract's input schema: an object at the root (maybe typed "object"), with `$defs`
    that refer only to earlier ones, so no reference loops without consuming the value."""
    first, second, body = draw(FIRST), draw(SECOND), draw(BODY)
    schema = dict(body) if isinstance(body, dict) else {"allOf": [body]}
    schema["$defs"] = {"d0": first, "d1": second}
    if draw(st.booleans()):
        schema["type"] = "object"
    return schema


def contract(schema: dict[str, Any]) -> ToolContract:
    return ToolContract(id="fuzz", description="Fuzzed schema.", input_schema=schema)


def found(result: ValidationResult) -> set[tuple[str, str]]:
    return {(e.path, e.code) for e in result.error.field_errors} if result.error else set()


def assert_well_formed(result: ValidationResult) -> None:
    assert result.ok == (result.error is None) == (result.arguments is not None)
    if result.error is not None:
        assert result.error.field_errors, "a rejection names at least one violation"


def rs_verdict(schema: dict[str, Any], value: Any) -> bool | None:
    """jsonschema_rs's verdict; None where it cannot read the schema or the value (a 2**64
    bound, a lone surrogate): there the rich path decides alone."""
    try:
        return bool(
            jsonschema_rs.Draft202012Validator(schema, validate_formats=True).is_valid(value)
        )
    except (jsonschema_rs.ValidationError, ValueError, OverflowError):
        return None


def same_semantics_as_jsonschema(schema: dict[str, Any]) -> bool:
    text = json.dumps(schema)
    return '"format"' not in text and '"multipleOf"' not in text


# -- item 11: the crash, and its class --------------------------------------------------------


def under(node: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"p": node}}


CRASHES = {
    "anyOf_false": (under({"anyOf": [False]}), {"p": 1}, {"/p"}),
    "anyOf_false_and_string": (under({"anyOf": [False, {"type": "string"}]}), {"p": 1}, {"/p"}),
    "oneOf_false_and_integer": (under({"oneOf": [False, {"type": "integer"}]}), {"p": "x"}, {"/p"}),
    "oneOf_only_false": (under({"oneOf": [False, False]}), {"p": None}, {"/p"}),
    "lone_surrogate_in_the_schema": (under({"const": "\ud800"}), {"p": "a"}, {"/p"}),
    "pattern_on_a_lone_surrogate": (under({"pattern": "^a"}), {"p": "\ud800"}, {"/p"}),
    "unevaluatedProperties_schema": (
        {"type": "object", "unevaluatedProperties": {"type": "integer"}},
        {"x": "y"},
        {"/x"},
    ),
}


@pytest.mark.parametrize(("schema", "value", "paths"), CRASHES.values(), ids=CRASHES.keys())
def test_schemas_that_crashed_validation_give_violations(
    schema: dict[str, Any], value: dict[str, Any], paths: set[str]
) -> None:
    """Defect: `anyOf`/`oneOf` holding the boolean schema `false` raised IndexError (its
    error has no schema path), `unevaluatedProperties` with a schema raised IndexError (a
    property violation reported without its property), a `pattern` raised
    UnicodeEncodeError on text jsonschema_rs cannot take (found by the release profile), and
    so did the contract digest of a schema holding a lone surrogate."""
    result = validate_arguments(contract(schema), value)
    assert not result.ok
    assert result.error is not None
    assert {e.path for e in result.error.field_errors} == paths


def test_one_of_matching_nothing_is_not_told_it_matched_twice() -> None:
    schema = {"type": "object", "properties": {"p": {"oneOf": [False, {"const": 1}]}}}
    result = validate_arguments(contract(schema), {"p": 2})
    assert result.error is not None
    assert "more than one" not in result.error.message


@FUZZ
@given(input_schemas(), st.data())
def test_any_schema_and_value_give_a_verdict_never_an_exception(
    schema: dict[str, Any], data: st.DataObject
) -> None:
    tool = contract(schema)
    value = data.draw(JSON | ARGUMENTS | ODD_ARGUMENTS, label="value")
    assert_well_formed(validate_arguments(tool, value))
    text = data.draw(st.text(max_size=12) | JSON.map(json.dumps), label="text")
    assert_well_formed(validate_arguments(tool, text))


@FUZZ
@given(input_schemas(), ARGUMENTS)
def test_the_verdict_agrees_with_the_reference_validators(
    schema: dict[str, Any], value: dict[str, Any]
) -> None:
    result = validate_arguments(contract(schema), value)
    fast = rs_verdict(schema, value)
    if fast is not None:
        assert result.ok == fast, (result.error, fast)
    if same_semantics_as_jsonschema(schema):
        try:
            reference = jsonschema.Draft202012Validator(schema).is_valid(value)
        except RecursionError:
            return
        assert result.ok == reference, result.error


@FUZZ
@given(input_schemas(), ARGUMENTS)
def test_repairs_never_add_a_violation(schema: dict[str, Any], value: dict[str, Any]) -> None:
    tool = contract(schema)
    result = validate_arguments(tool, value)
    if result.ok:
        return
    repaired = apply_repairs(value, result.repairs)
    assert isinstance(repaired, dict)
    after = validate_arguments(tool, repaired)
    assert_well_formed(after)
    assert found(after) <= found(result), (result.repairs, after.error)


# -- the shipped catalogs -----------------------------------------------------------------------


def catalog_contracts() -> list[ToolContract]:
    """Every contract of examples/ and tests/data (BFCL, one entry at a time: the sample
    defines some names twice, differently)."""
    contracts = [
        *load_catalog(ROOT / "examples" / "catalog").contracts,
        *load_catalog(ROOT / "examples" / "catalogs" / "mcp_tools_list.json").contracts,
    ]
    for path in sorted((ROOT / "tests" / "data" / "bfcl").glob("BFCL_*.json")):
        language = path.stem.removeprefix("BFCL_v4_simple_") if "java" in path.stem else "python"
        for line in path.read_text().splitlines():
            for doc in json.loads(line)["function"]:
                contracts.append(ToolContract.from_bfcl_function(doc, language=language))
    return contracts


CATALOG = catalog_contracts()


def conforming(schema: Any, root: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values `schema` accepts. Objects and arrays are composed here, every other schema is
    `hypothesis_jsonschema.from_schema`'s: its object strategy (0.23.1) calls a private
    Hypothesis API (`many.more`) that current Hypothesis no longer has."""
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        schema = resolve_ref(root, schema["$ref"])
    if not isinstance(schema, dict):
        return JSON if schema is not False else st.nothing()
    kinds = schema_types(schema)
    if not kinds and not {"enum", "const"} & schema.keys():
        return JSON  # says nothing about the value (a Java `Object` parameter)
    if "object" in kinds:
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        members = {name: conforming(sub, root) for name, sub in properties.items()}
        return st.fixed_dictionaries(
            {name: members[name] for name in properties if name in required},
            optional={name: members[name] for name in properties if name not in required},
        )
    if "array" in kinds and "items" in schema:
        return st.lists(
            conforming(schema["items"], root),
            min_size=int(schema.get("minItems", 0)),
            max_size=int(schema.get("maxItems", 4)),
        )
    return from_schema(schema)


@functools.cache
def catalog_values(index: int) -> st.SearchStrategy[Any]:
    schema = CATALOG[index].input_schema
    return conforming(schema, schema)


PER_TOOL = settings(FUZZ, max_examples=max(10, settings.default.max_examples // 20))
"""A twentieth of the profile's budget for each of the catalogs' ~160 tools."""


@pytest.mark.parametrize("index", range(len(CATALOG)), ids=[c.ref for c in CATALOG])
@PER_TOOL
@given(data=st.data())
def test_values_generated_from_a_catalog_schema_pass(index: int, data: st.DataObject) -> None:
    value = data.draw(catalog_values(index))
    result = validate_arguments(CATALOG[index], value)
    assert result.ok, result.error
