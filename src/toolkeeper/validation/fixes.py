"""Concrete fixes for argument violations: a sentence for the model, a patch for programs.

Each `Violation` becomes a `FieldError` (what is wrong), a fix sentence (what to send
instead: the closest enum value, the nearest bound, the closest known property name, the
value in the right type) and zero or more `Repair`s that make that field valid. Every value
a repair writes is checked against the field's schema first, so applying a repair never
trades one error for another at that field.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolkeeper.runtime.envelope import FieldError
from toolkeeper.schema.document import pointer
from toolkeeper.schema.values import Check, coerce, example_value, identity, nearest_number
from toolkeeper.schema.values import schema_types as types_of
from toolkeeper.validation.repairs import Repair
from toolkeeper.validation.violations import MISSING, Path, Violation, resolve
from toolkeeper.validation.wording import (
    article,
    closest,
    count,
    is_number,
    json_type,
    listing,
    show,
    squashed,
)


@dataclass(frozen=True, slots=True)
class Explanation:
    """A violation told three ways: the field error, the fix sentence, the repairs."""

    field_error: FieldError
    fix: str
    repairs: tuple[Repair, ...] = ()


def explain(
    found: Sequence[Violation], instance: Any, check: Check, root: Any
) -> list[Explanation]:
    """An `Explanation` per violation. An unknown property that looks like a typo of an
    absent known one becomes a rename, and that property's `required` error points at it."""
    context = _Context(instance, check, root)
    renames = context.plan_renames(found)
    explanations = []
    for violation in found:
        explainer = _EXPLAINERS.get(violation.code, _refused)
        message, expected, fix, repairs = explainer(context, violation, renames)
        error = FieldError(
            path=pointer(*violation.path), code=violation.code, message=message, expected=expected
        )
        explanations.append(Explanation(error, fix, tuple(repairs)))
    return explanations


@dataclass(frozen=True, slots=True)
class _Context:
    instance: Any
    check: Check
    root: Any

    def plan_renames(self, found: Sequence[Violation]) -> dict[Path, str]:
        """Unknown property path → the absent known property it most likely misspells."""
        renames: dict[Path, str] = {}
        for v in found:
            if v.code != "additional_property" or not v.path:
                continue
            container = resolve(self.instance, v.path[:-1])
            absent = [
                name
                for name in _known_properties(v.schema)
                if isinstance(container, dict)
                and name not in container
                and name not in {t for p, t in renames.items() if p[:-1] == v.path[:-1]}
            ]
            if not absent:
                continue
            keys = [squashed(name) for name in absent]
            target, near = closest(squashed(str(v.path[-1])), keys)
            if near:
                renames[v.path] = absent[keys.index(target)]
        return renames

    def valid(self, schema: Any, value: Any) -> Any:
        """`value` if it satisfies `schema`, else MISSING."""
        return value if value is not MISSING and self.check(schema, value) else MISSING

    def example(self, schema: Any) -> Any:
        return self.valid(schema, example_value(schema, self.root))

    def converted(self, schema: Any, value: Any, kinds: Sequence[str]) -> tuple[Any, str] | None:
        """`value` in one of the JSON types `kinds`, valid for `schema`, with the sentence."""
        for kind in kinds:
            candidate = coerce(value, kind)
            if candidate is None:
                continue
            if self.check(schema, candidate[0]):
                return candidate
            if is_number(candidate[0]) and isinstance(value, str):
                # "30" for an integer up to 14: the type and the bound fixed in one step.
                nearest = self.valid(schema, nearest_number(candidate[0], schema))
                if nearest is not MISSING:
                    return nearest, f"send a number, not a string, within bounds: {show(nearest)}"
        return None


_Parts = tuple[str, Any, str, list[Repair]]
_Renames = Mapping[Path, str]


def _type(x: _Context, v: Violation, _: _Renames) -> _Parts:
    kinds = [
        str(t)
        for t in (v.keyword_value if isinstance(v.keyword_value, list) else [v.keyword_value])
    ]
    wanted = " or ".join(kinds)
    message = f"expected {wanted}, got {json_type(v.value)} {show(v.value)}"
    converted = x.converted(v.schema, v.value, kinds)
    if converted is not None:
        return message, v.keyword_value, converted[1], [_replace(v, converted[0])]
    fix = f"send {article(wanted)} {wanted}"
    return _with_example(x, v, message, v.keyword_value, fix)


def _enum(x: _Context, v: Violation, _: _Renames) -> _Parts:
    choices = list(v.keyword_value) if isinstance(v.keyword_value, list | tuple) else []
    message = f"{show(v.value)} is not one of {listing(choices)}"
    if not choices:
        return message, choices, "no value is allowed here; remove it", []
    choice, near = closest(v.value, choices)
    if not near:
        return message, choices, f"use one of {listing(choices)}", [_replace(v, choice, True)]
    return (
        message,
        choices,
        f"use {show(choice)} (the closest allowed value)",
        [_replace(v, choice)],
    )


def _const(x: _Context, v: Violation, _: _Renames) -> _Parts:
    value = v.keyword_value
    return f"must be {show(value)}", value, f"use {show(value)}", [_replace(v, value)]


_BOUNDS = {
    # code: (relation in the message, name of the suggestion, what to send without one)
    "minimum": ("is less than the minimum", "the minimum", "a number of at least"),
    "maximum": ("is greater than the maximum", "the maximum", "a number of at most"),
    "exclusive_minimum": ("must be greater than", "a value above", "a number greater than"),
    "exclusive_maximum": ("must be less than", "a value below", "a number less than"),
    "multiple_of": ("is not a multiple of", "the nearest multiple of", "a multiple of"),
}


def _bound(x: _Context, v: Violation, _: _Renames) -> _Parts:
    relation, name, wanted = _BOUNDS[v.code]
    bound = v.keyword_value
    message = f"{show(v.value)} {relation} {bound}"
    value = x.valid(v.schema, nearest_number(v.value, v.schema)) if is_number(v.value) else MISSING
    if value is MISSING:
        return message, bound, f"send {wanted} {bound}", []
    named = name if v.code in ("minimum", "maximum") else f"{name} {bound}"
    return message, bound, f"use {show(value)} ({named})", [_replace(v, value)]


def _length(x: _Context, v: Violation, _: _Renames) -> _Parts:
    limit = int(v.keyword_value) if is_number(v.keyword_value) else 0  # 3.0 is a valid length
    size = len(v.value) if isinstance(v.value, str) else 0
    if v.code == "min_length":
        message = f"is {size} characters long, at least {limit} needed"
        return _with_example(x, v, message, limit, f"send at least {limit} characters")
    message = f"is {size} characters long, at most {limit} allowed"
    shortened = x.valid(v.schema, v.value[:limit]) if isinstance(v.value, str) else MISSING
    repairs = [] if shortened is MISSING else [_replace(v, shortened)]
    return message, limit, f"shorten it to at most {limit} characters", repairs


def _pattern(x: _Context, v: Violation, _: _Renames) -> _Parts:
    message = f"{show(v.value)} does not match the pattern {v.keyword_value}"
    fix = f"send a string matching {v.keyword_value}"
    return _with_example(x, v, message, v.keyword_value, fix)


def _format(x: _Context, v: Violation, _: _Renames) -> _Parts:
    message = f"{show(v.value)} is not a valid {v.keyword_value}"
    return _with_example(x, v, message, v.keyword_value, f"send a valid {v.keyword_value}")


def _unknown(x: _Context, v: Violation, renames: _Renames) -> _Parts:
    if not v.path:  # a keyword about properties that named none of them
        return _refused(x, v, renames)
    name = str(v.path[-1])
    target = renames.get(v.path)
    if target is None:
        known = _known_properties(v.schema)
        hint = f" (known: {', '.join(map(repr, known[:12]))})" if known else ""
        message = f"unknown property {name!r}"
        return message, None, f"remove {name!r}{hint}", [Repair("remove", pointer(*v.path))]
    destination = pointer(*v.path[:-1], target)
    repairs = [Repair("move", destination, from_=pointer(*v.path))]
    schema = v.schema.get("properties", {}).get(target, True)
    if x.valid(schema, v.value) is MISSING:
        converted = x.converted(schema, v.value, types_of(schema))
        value = converted[0] if converted else x.example(schema)
        if value is not MISSING:
            repairs.append(Repair("replace", destination, value, placeholder=not converted))
    fix = f"did you mean {target!r}? rename {name!r} to {target!r}"
    return f"unknown property {name!r}", target, fix, repairs


def _missing(x: _Context, v: Violation, renames: _Renames) -> _Parts:
    if not v.path:  # a keyword about properties that named none of them
        return _refused(x, v, renames)
    name = str(v.path[-1])
    properties = v.schema.get("properties", {}) if isinstance(v.schema, dict) else {}
    schema = properties.get(name, True)
    expected = _type_name(schema)
    message = f"missing required property {name!r}"
    if v.code == "dependent_required":
        rules = v.keyword_value if isinstance(v.keyword_value, dict) else {}
        triggers = [t for t, names in rules.items() if name in names]
        if triggers:
            message = f"{name!r} is required when {triggers[0]!r} is present"
    for typo, target in renames.items():
        if target == name and typo[:-1] == v.path[:-1]:
            return message, expected, f"rename {typo[-1]!r} to {name!r}", []
    described = _describe(schema)
    fix = f"add {name!r}" + (f" ({described})" if described else "")
    value = x.example(schema)
    if value is MISSING:
        return message, expected, fix, []
    stand_in = not (isinstance(schema, dict) and "default" in schema)
    return message, expected, fix, [Repair("add", pointer(*v.path), value, placeholder=stand_in)]


def _items(x: _Context, v: Violation, _: _Renames) -> _Parts:
    items = v.value if isinstance(v.value, list) else []
    limit = int(v.keyword_value) if is_number(v.keyword_value) else None
    if v.code == "unique_items":
        seen: set[Any] = set()
        repeats = []
        for index, item in enumerate(items):
            key = identity(item)
            if key in seen:
                repeats.append(index)
            seen.add(key)
        where = ", ".join(map(str, repeats))
        removals = [Repair("remove", pointer(*v.path, i)) for i in reversed(repeats)]
        message = f"the items at index {where} repeat earlier items"
        return message, True, f"remove the duplicate items at index {where}", removals
    if v.code == "max_items":
        if limit is None:  # `items: false` after `prefixItems`
            limit = len(v.schema.get("prefixItems", [])) if isinstance(v.schema, dict) else 0
        extra = range(limit, len(items))
        removals = [Repair("remove", pointer(*v.path, i)) for i in reversed(extra)]
        message = f"has {count(len(items), 'item')}, at most {limit} allowed"
        return message, limit, f"send at most {limit} items (drop the last {len(extra)})", removals
    limit = limit or 0
    message = f"has {count(len(items), 'item')}, at least {limit} needed"
    filler = x.example(v.schema.get("items", True) if isinstance(v.schema, dict) else True)
    if filler is MISSING:
        return message, limit, f"send at least {limit} items", []
    add = Repair("add", pointer(*v.path, "-"), filler, placeholder=True)
    fix = f"send at least {limit} items, e.g. add {show(filler)}"
    return message, limit, fix, [add] * max(0, limit - len(items))


def _size(x: _Context, v: Violation, _: _Renames) -> _Parts:
    size = len(v.value) if isinstance(v.value, dict) else 0
    bound, verdict = (
        ("at least", "needed") if v.code == "min_properties" else ("at most", "allowed")
    )
    message = f"has {count(size, 'property')}, {bound} {v.keyword_value} {verdict}"
    return message, v.keyword_value, f"send {bound} {v.keyword_value} properties", []


def _contains(x: _Context, v: Violation, _: _Renames) -> _Parts:
    schema = v.schema.get("contains", True) if isinstance(v.schema, dict) else True
    message = "too few or too many items match the `contains` schema"
    return message, schema, f"include the right number of items matching {show(schema)}", []


def _refused(x: _Context, v: Violation, _: _Renames) -> _Parts:
    branches = v.keyword_value if v.code == "one_of" and isinstance(v.keyword_value, list) else []
    if sum(x.check(branch, v.value) for branch in branches) > 1:
        message = "matches more than one of the alternatives"
        return message, None, "send a value that matches exactly one alternative", []
    message = f"{show(v.value)} is not allowed here"
    if v.code == "not":
        return (
            message,
            v.keyword_value,
            f"send a value that does not match {show(v.keyword_value)}",
            [],
        )
    return message, None, f"send a different value ({v.detail or 'see the schema'})", []


def _with_example(x: _Context, v: Violation, message: str, expected: Any, fix: str) -> _Parts:
    example = x.example(v.schema)
    if example is MISSING:
        return message, expected, fix, []
    return message, expected, f"{fix}, e.g. {show(example)}", [_replace(v, example, True)]


def _replace(v: Violation, value: Any, placeholder: bool = False) -> Repair:
    return Repair("replace", pointer(*v.path), value, placeholder=placeholder)


_EXPLAINERS: dict[str, Callable[[_Context, Violation, _Renames], _Parts]] = {
    "type": _type,
    "enum": _enum,
    "const": _const,
    "minimum": _bound,
    "maximum": _bound,
    "exclusive_minimum": _bound,
    "exclusive_maximum": _bound,
    "multiple_of": _bound,
    "min_length": _length,
    "max_length": _length,
    "pattern": _pattern,
    "format": _format,
    "additional_property": _unknown,
    "required": _missing,
    "dependent_required": _missing,
    "min_items": _items,
    "max_items": _items,
    "unique_items": _items,
    "min_properties": _size,
    "max_properties": _size,
    "contains": _contains,
}


def _known_properties(schema: Any) -> list[str]:
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return [name for name, sub in properties.items() if sub is not False]


def _type_name(schema: Any) -> Any:
    kinds = types_of(schema)
    return None if not kinds else kinds[0] if len(kinds) == 1 else kinds


def _describe(schema: Any) -> str:
    if not isinstance(schema, dict):
        return ""
    parts = [" or ".join(types_of(schema))] if types_of(schema) else []
    if isinstance(schema.get("enum"), list):
        parts.append(f"one of {listing(schema['enum'])}")
    if "default" in schema:
        parts.append(f"default {show(schema['default'])}")
    return ", ".join(parts)
