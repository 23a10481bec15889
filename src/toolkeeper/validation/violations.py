"""From a schema failure to `Violation`s: one per offending value, addressed by instance path.

The rich path of argument validation runs jsonschema's `iter_errors`, whose errors are shaped
for humans reading a traceback: one error for all unknown properties, the object (not the
missing key) as the location of a missing property, and every branch of a failed `oneOf`
mixed together. This module reshapes them into the facts a fix needs, and aligns jsonschema's
`pattern` and `format` semantics with jsonschema_rs (the fast path), so a value the fast path
rejects is explained by the same rules.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

import jsonschema
import jsonschema_rs
from jsonschema import ValidationError

Path = tuple[str | int, ...]

MISSING: Final = type("Missing", (), {"__repr__": lambda self: "MISSING"})()
"""The value of a required property that is absent."""

CODES: Final[Mapping[str | None, str]] = {
    "type": "type",
    "required": "required",
    "enum": "enum",
    "const": "const",
    "minimum": "minimum",
    "maximum": "maximum",
    "exclusiveMinimum": "exclusive_minimum",
    "exclusiveMaximum": "exclusive_maximum",
    "multipleOf": "multiple_of",
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "format": "format",
    "additionalProperties": "additional_property",
    "properties": "additional_property",
    "unevaluatedProperties": "additional_property",
    "propertyNames": "additional_property",
    "minItems": "min_items",
    "maxItems": "max_items",
    "items": "max_items",
    "unevaluatedItems": "max_items",
    "uniqueItems": "unique_items",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
    "dependentRequired": "dependent_required",
    "not": "not",
    "oneOf": "one_of",
    "anyOf": "any_of",
    "contains": "contains",
    "minContains": "contains",
    "maxContains": "contains",
}
"""JSON Schema keyword → FieldError code. A `false` schema (and any keyword not listed)
refuses the value outright, which is what `not` reports."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One offending value and the schema keyword it broke."""

    path: Path
    """Instance path; for `required` it ends with the missing property's name."""
    code: str
    keyword_value: Any
    """The failed keyword's value in the schema (the enum list, the bound, ...)."""
    value: Any
    """The offending value, or `MISSING` for an absent property."""
    schema: Any
    """The (sub)schema holding the failed keyword: the object schema for property errors."""
    detail: str
    """The validator's own message, kept for codes whose facts we cannot restate."""


# -- jsonschema, aligned with jsonschema_rs -----------------------------------------------


@lru_cache(maxsize=1024)
def _rs_keyword(keyword: str, value: str | float) -> jsonschema_rs.Validator | None:
    try:
        return jsonschema_rs.Draft202012Validator({keyword: value}, validate_formats=True)
    except (jsonschema_rs.ValidationError, ValueError):
        return None


def _pattern_matches(pattern: str, text: str) -> bool:
    """Regex search with jsonschema_rs's (ECMA-262) semantics, Python's `re` where it
    refuses the pattern or the text."""
    validator = _rs_keyword("pattern", pattern)
    if validator is not None:
        try:
            return validator.is_valid(text)
        except ValueError:  # text jsonschema_rs cannot take (a lone surrogate)
            pass
    return re.search(pattern, text) is not None


def _format_conforms(fmt: str, instance: Any) -> bool:
    validator = _rs_keyword("format", fmt)
    try:
        return validator is None or validator.is_valid(instance)
    except ValueError:  # not JSON (a set, bytes...): jsonschema_rs cannot judge it
        return True


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _pattern_matches(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _format(validator: Any, fmt: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not _format_conforms(fmt, instance):
        yield ValidationError(f"{instance!r} is not a valid {fmt!r}")


def _multiple_of(
    validator: Any, step: float, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    # jsonschema rejects 0.3 as a multiple of 0.1 (float division); jsonschema_rs does not.
    checker = _rs_keyword("multipleOf", step)
    if validator.is_type(instance, "number") and checker is not None:
        try:
            conforms = checker.is_valid(instance)
        except (ValueError, OverflowError):
            return
        if not conforms:
            yield ValidationError(f"{instance!r} is not a multiple of {step}")


def _properties(
    validator: Any, properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    # As jsonschema's, except that a property whose schema is `false` is reported at the
    # property: jsonschema's `descend` drops the path for boolean schemas.
    if not validator.is_type(instance, "object"):
        return
    for name, subschema in properties.items():
        if name not in instance:
            continue
        if subschema is False:
            yield ValidationError(f"{name!r} is not allowed", path=(name,), instance=instance[name])
        else:
            yield from validator.descend(instance[name], subschema, path=name, schema_path=name)


def _required(
    validator: Any, required: Sequence[str], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    # One error per missing property, located at the property itself.
    if validator.is_type(instance, "object"):
        for name in required:
            if name not in instance:
                yield ValidationError(f"{name!r} is a required property", path=(name,))


def _dependent_required(
    validator: Any, dependent: Mapping[str, Sequence[str]], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "object"):
        for trigger, names in dependent.items():
            for name in names:
                if trigger in instance and name not in instance:
                    yield ValidationError(
                        f"{name!r} is required when {trigger!r} is present", path=(name,)
                    )


def _unknown_properties(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    """Keys that neither `properties` nor `patternProperties` of `schema` name."""
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    return [
        key
        for key in instance
        if key not in known and not any(_pattern_matches(p, key) for p in patterns)
    ]


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    # One error per unknown property, located at that property.
    if not validator.is_type(instance, "object"):
        return
    extras = _unknown_properties(instance, schema)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False:
        for extra in extras:
            yield ValidationError(
                f"{extra!r} is not allowed", path=(extra,), instance=instance[extra]
            )


RichValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    validators={
        "pattern": _pattern,
        "format": _format,
        "multipleOf": _multiple_of,
        "properties": _properties,
        "required": _required,
        "dependentRequired": _dependent_required,
        "additionalProperties": _additional_properties,
    },
)
"""Draft 2020-12 with jsonschema_rs's `pattern`, `format` and `multipleOf`, reporting one error
per offending value."""


# -- reshaping errors ---------------------------------------------------------------------


def violations(validator: Any, instance: Any) -> list[Violation]:
    """Every violation of `instance`, deduplicated by path and code, in schema order."""
    found: dict[tuple[Path, str], Violation] = {}
    for error in validator.iter_errors(instance):
        for violation in _reshape(error, instance):
            found.setdefault((violation.path, violation.code), violation)
    return list(found.values())


def _reshape(error: ValidationError, root: Any) -> list[Violation]:
    keyword = error.validator
    path: Path = tuple(error.absolute_path)
    if keyword in ("anyOf", "oneOf") and error.context:
        return _best_branch(error, root)
    if "propertyNames" in error.absolute_schema_path and isinstance(error.instance, str):
        return [_property_violation(root, path, error.instance, {}, error.message)]
    if keyword == "unevaluatedProperties" and isinstance(error.instance, dict):
        names = _unexpected_names(error.message, error.instance)
        if names:
            return [_property_violation(root, path, n, error.schema, error.message) for n in names]
    if keyword in ("required", "dependentRequired"):
        return [Violation(path, CODES[keyword], error.validator_value, MISSING, error.schema, "")]
    return [
        Violation(
            path,
            CODES.get(str(keyword), "not"),
            error.validator_value,
            error.instance,
            error.schema,
            error.message,
        )
    ]


def _property_violation(root: Any, parent: Path, name: str, schema: Any, message: str) -> Violation:
    value = resolve(root, (*parent, name))
    return Violation((*parent, name), "additional_property", False, value, schema, message)


def _unexpected_names(message: str, container: Mapping[str, Any]) -> list[str]:
    # jsonschema lists unevaluated properties as reprs: "('a', 'b' were unexpected)", or
    # "('a' was unevaluated and invalid)" when `unevaluatedProperties` is a schema.
    match = re.search(r"\((.*) (?:was|were) (?:unexpected|unevaluated and invalid)\)$", message)
    if match is None:
        return []
    try:
        names = ast.literal_eval(f"[{match.group(1)}]")
    except (ValueError, SyntaxError):
        return []
    return [name for name in names if isinstance(name, str) and name in container]


def _best_branch(error: ValidationError, root: Any) -> list[Violation]:
    """Explain a failed `anyOf`/`oneOf` by the branch the value most nearly matches.

    Branches whose type does not fit the value are set aside; if none fits, one `type`
    violation lists every accepted type (or, when no branch names one, the keyword itself
    refuses the value: `anyOf: [false]`). If the fitting branches fail only on `const` or
    `enum`, their values merge into one `enum` violation. Otherwise the fitting branch with
    the fewest errors speaks for the whole keyword.
    """
    branches: dict[int, list[ValidationError]] = {}
    for sub in error.context:
        # A `false` branch's error has no schema path (jsonschema's `descend` drops it for
        # boolean schemas). Such a branch accepts nothing: it never fits and names no type.
        if sub.relative_schema_path:
            branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
    path: Path = tuple(error.absolute_path)
    code = CODES[str(error.validator)]
    fitting = [
        errors
        for errors in branches.values()
        if not any(e.validator == "type" and not e.relative_path for e in errors)
    ]
    if not fitting:
        types: list[str] = []
        for errors in branches.values():
            for e in errors:
                if e.validator == "type" and not e.relative_path:
                    value = e.validator_value
                    types.extend(t for t in _as_list(value) if t not in types)
        if not types:  # only `false` branches, or none that says what type it wants
            return [
                Violation(
                    path, code, error.validator_value, error.instance, error.schema, error.message
                )
            ]
        return [Violation(path, "type", types, error.instance, error.schema, error.message)]
    choices = _merged_choices(fitting)
    if choices is not None:
        return [Violation(path, "enum", choices, error.instance, error.schema, error.message)]
    best = min(fitting, key=len)
    return [violation for sub in best for violation in _reshape(sub, root)]


def _merged_choices(branches: list[list[ValidationError]]) -> list[Any] | None:
    choices: list[Any] = []
    for errors in branches:
        for e in errors:
            if e.relative_path or e.validator not in ("const", "enum"):
                return None
            value: Any = e.validator_value  # jsonschema's stub types it as possibly unset
            values = [value] if e.validator == "const" else list(value)
            choices.extend(v for v in values if v not in choices)
    return choices


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


# -- jsonschema_rs errors, for the rare value the two libraries judge differently ---------


def rs_violations(validator: Any, instance: Any, schema: Any) -> list[Violation]:
    """Violations as jsonschema_rs reports them; used when jsonschema finds none."""
    found: list[Violation] = []
    for error in validator.iter_errors(instance):
        kind = error.kind
        path: Path = tuple(error.instance_path)
        keyword = str(error.schema_path[-1]) if error.schema_path else None
        holder = resolve(schema, tuple(error.schema_path[:-1]))
        if isinstance(holder, dict) and keyword in holder:
            keyword_value = holder[keyword]
        else:  # the schema path did not resolve; the error kind carries the keyword's value
            keyword_value = next(iter(kind.as_dict().values()), None)
        message = error.message
        # jsonschema_rs reports its own conversion of the value (NaN becomes null).
        value = resolve(instance, path)
        if kind.name == "required":
            code = "dependent_required" if keyword == "dependentRequired" else "required"
            found.append(
                Violation((*path, kind.property), code, keyword_value, MISSING, holder, message)
            )
        elif kind.name in ("additionalProperties", "unevaluatedProperties"):
            found.extend(
                Violation(
                    (*path, name),
                    "additional_property",
                    False,
                    resolve(instance, (*path, name)),
                    holder,
                    message,
                )
                for name in kind.unexpected
            )
        elif kind.name == "propertyNames":
            name = str(kind.error.instance)
            value = resolve(instance, (*path, name))
            found.append(Violation((*path, name), "additional_property", False, value, {}, message))
        elif kind.name == "falseSchema" and path and isinstance(path[-1], str):
            parent = resolve(schema, tuple(error.schema_path[:-2]))
            found.append(Violation(path, "additional_property", False, value, parent, message))
        else:
            code = CODES.get(keyword, CODES.get(kind.name, "not"))
            found.append(Violation(path, code, keyword_value, value, holder, message))
    return found


def resolve(document: Any, path: Sequence[str | int]) -> Any:
    """The value at `path` inside `document`, or `MISSING` where the path leaves it."""
    node = document
    for part in path:
        in_object = isinstance(node, dict) and part in node
        in_array = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if not (in_object or in_array):
            return MISSING
        node = node[part]
    return node
