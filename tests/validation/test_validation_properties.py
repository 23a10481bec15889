"""Properties of validate_arguments over generated schemas and arbitrary JSON.

The schemas are the kind tool catalogs contain: objects of typed properties with enums,
bounds, formats, patterns, required lists, nested objects and arrays, closed or open. Each
schema is generated together with a strategy for values it accepts, so "valid instances are
never rejected" is checked against an independent generator, not the validator itself.
"""

from __future__ import annotations

import datetime
from typing import Any

import jsonschema_rs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkeeper import ToolContract, validate_arguments
from toolkeeper.schema.document import pointer, pointer_parts
from toolkeeper.validation import ValidationResult, apply_repairs

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Node = tuple[dict[str, Any], st.SearchStrategy[Any]]

NAMES = st.sampled_from(
    ["city", "unit", "days", "query", "limit", "user_id", "tags", "options", "a/b", "x~y", "Name"]
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(NAMES | st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def strings(draw: st.DrawFn, patterns: bool) -> Node:
    kind = draw(st.sampled_from(["plain", "enum", "date", "email"] + ["pattern"] * patterns))
    if kind == "enum":
        choices = draw(
            st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=5, unique=True)
        )
        return {"type": "string", "enum": choices}, st.sampled_from(choices)
    if kind == "date":
        return {"type": "string", "format": "date"}, st.dates().map(datetime.date.isoformat)
    if kind == "email":
        emails = st.from_regex(r"[a-z]{1,8}@[a-z]{1,8}\.com", fullmatch=True)
        return {"type": "string", "format": "email"}, emails
    if kind == "pattern":
        return {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2}$"}, st.from_regex(
            r"[A-Z]{3}-[0-9]{2}", fullmatch=True
        )
    low = draw(st.integers(0, 3))
    high = draw(st.integers(low, low + 10))
    return {"type": "string", "minLength": low, "maxLength": high}, st.text(
        min_size=low, max_size=high
    )


@st.composite
def numbers(draw: st.DrawFn) -> Node:
    low = draw(st.integers(-100, 100))
    high = draw(st.integers(low, low + 200))
    if draw(st.booleans()):
        step = draw(st.sampled_from([1, 2, 5, 10]))
        first, last = -(-low // step), high // step
        if first > last:
            return {"type": "integer", "minimum": low}, st.integers(low, low + 50)
        schema = {"type": "integer", "minimum": low, "maximum": high, "multipleOf": step}
        return schema, st.integers(first, last).map(lambda k: k * step)
    if draw(st.booleans()):
        schema = {"type": "number", "exclusiveMinimum": low, "maximum": high + 1}
        return schema, st.floats(low, high + 1, exclude_min=True, allow_nan=False)
    return {"type": "integer", "minimum": low, "maximum": high}, st.integers(low, high)


@st.composite
def scalars(draw: st.DrawFn, patterns: bool) -> Node:
    kind = draw(st.sampled_from(["string", "string", "number", "boolean", "optional", "const"]))
    if kind == "string":
        return draw(strings(patterns))
    if kind == "number":
        return draw(numbers())
    if kind == "boolean":
        return {"type": "boolean"}, st.booleans()
    if kind == "const":
        value = draw(st.integers(0, 3) | st.sampled_from(["on", "off"]))
        return {"const": value}, st.just(value)
    schema, values = draw(numbers())
    return {"anyOf": [schema, {"type": "null"}]}, st.none() | values


@st.composite
def nodes(draw: st.DrawFn, depth: int, patterns: bool) -> Node:
    kind = draw(st.sampled_from(["scalar"] * 3 + ["array", "object"] * (depth < 2)))
    if kind == "object":
        return draw(objects(depth + 1, patterns))
    if kind == "array":
        items, values = draw(scalars(patterns) | nodes(depth + 1, patterns))
        low = draw(st.integers(0, 2))
        high = draw(st.integers(low, low + 4))
        schema = {"type": "array", "items": items, "minItems": low, "maxItems": high}
        return schema, st.lists(values, min_size=low, max_size=high)
    schema, values = draw(scalars(patterns))
    if draw(st.integers(0, 4)) == 0:
        schema = {**schema, "default": draw(values)}
    return schema, values


@st.composite
def objects(draw: st.DrawFn, depth: int = 0, patterns: bool = True) -> Node:
    names = draw(st.lists(NAMES, max_size=5, unique=True))
    children = {name: draw(nodes(depth, patterns)) for name in names}
    required = [name for name in names if draw(st.booleans())]
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: child[0] for name, child in children.items()},
        "required": required,
    }
    if draw(st.booleans()):
        schema["additionalProperties"] = False

    @st.composite
    def values(inner: st.DrawFn) -> dict[str, Any]:
        chosen = [n for n in names if n in required or inner(st.booleans())]
        return {name: inner(children[name][1]) for name in chosen}

    return schema, values()


def contract(schema: dict[str, Any]) -> ToolContract:
    return ToolContract(id="generated", description="generated schema", input_schema=schema)


def resolves(document: Any, pointer: str) -> bool:
    node = document
    for token in pointer_parts(pointer):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def check_paths(result: ValidationResult, instance: Any) -> None:
    assert result.ok == (result.error is None) == (result.arguments is not None)
    if result.error is None:
        return
    assert result.error.field_errors, "a rejection always names at least one field"
    for error in result.error.field_errors:
        if error.code == "json":
            assert error.path == ""
        elif error.code in ("required", "dependent_required"):
            tokens = pointer_parts(error.path)
            parent = pointer(*tokens[:-1])
            assert resolves(instance, parent) and not resolves(instance, error.path), error
        else:
            assert resolves(instance, error.path), error


@SETTINGS
@given(st.data())
def test_values_the_schema_accepts_are_never_rejected(data: st.DataObject) -> None:
    schema, values = data.draw(objects())
    instance = data.draw(values)
    result = validate_arguments(contract(schema), instance)
    assert result.ok, result.error
    assert result.arguments is not None and set(instance) <= set(result.arguments)


@SETTINGS
@given(st.data())
def test_any_json_gets_a_result_whose_paths_resolve(data: st.DataObject) -> None:
    schema, values = data.draw(objects())
    # Arbitrary JSON, accepted values, and accepted values with arbitrary keys mixed in.
    extra = st.dictionaries(NAMES | st.text(max_size=5), JSON, max_size=3)
    instance = data.draw(JSON | values | st.tuples(values, extra).map(lambda p: {**p[0], **p[1]}))
    result = validate_arguments(contract(schema), instance)
    check_paths(result, instance)
    if isinstance(instance, dict):
        fast = jsonschema_rs.Draft202012Validator(schema, validate_formats=True)
        assert result.ok == fast.is_valid(instance)


@SETTINGS
@given(st.data(), st.text(max_size=40))
def test_any_text_gets_a_result(data: st.DataObject, text: str) -> None:
    schema, _ = data.draw(objects())
    result = validate_arguments(contract(schema), text)
    check_paths(result, None)


def mutate(data: st.DataObject, instance: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """One fault of the kind models make, somewhere in the top-level arguments."""
    mutated = dict(instance)
    kind = data.draw(st.sampled_from(["type", "drop", "extra", "value"]))
    names = sorted(mutated)
    if kind == "drop" and names:
        del mutated[data.draw(st.sampled_from(names))]
    elif kind == "extra":
        mutated[data.draw(st.sampled_from(["zzz", "citty", "Limit", "user-id"]))] = 1
    elif names:
        name = data.draw(st.sampled_from(names))
        value = mutated[name]
        if kind == "type":
            mutated[name] = str(value) if not isinstance(value, str) else 12345
        else:
            mutated[name] = data.draw(st.integers(-1000, 1000) | st.text(max_size=6))
    return mutated


@SETTINGS
@given(st.data())
def test_applying_the_repairs_makes_a_single_fault_valid(data: st.DataObject) -> None:
    schema, values = data.draw(objects(patterns=False))
    tool = contract(schema)
    broken = mutate(data, data.draw(values), schema)
    result = validate_arguments(tool, broken)
    if result.ok:
        return
    repaired = apply_repairs(broken, result.repairs)
    after = validate_arguments(tool, repaired)
    assert after.ok, (broken, result.error, result.repairs, after.error)
