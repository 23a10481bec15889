"""OpenAI strict mode: the input schema as the JSON Schema subset strict mode accepts.

Strict mode (Structured Outputs for function calling) constrains decoding to the schema, and
accepts only a subset of JSON Schema. The rules applied here are OpenAI's documented ones:

- the root is an object, not an ``anyOf``; every object has ``additionalProperties: false``
  and lists every property in ``required`` — optional properties become nullable (``"type":
  [T, "null"]``, or an ``anyOf`` with ``{"type": "null"}``);
- supported keywords: ``type``, ``description``, ``title``, ``enum``, ``const``, ``anyOf``,
  ``$ref``/``$defs``; strings ``pattern`` and ``format`` (date-time, time, date, duration,
  email, hostname, ipv4, ipv6, uuid); numbers ``multipleOf``, ``minimum``, ``maximum``,
  ``exclusiveMinimum``, ``exclusiveMaximum``; arrays ``items``, ``minItems``, ``maxItems``;
  a ``$ref`` has no sibling keywords;
- limits: 5,000 object properties, 10 levels of object nesting, 1,000 enum values, 120,000
  characters of property names, definition names, enum and const values, and 15,000
  characters for one string enum of more than 250 values.

Anything else is moved into the node's description (`IssueKind.MOVED_TO_DESCRIPTION`), and
``oneOf`` is rendered as ``anyOf`` (`IssueKind.RELAXED`). Shapes strict mode cannot express
(a value of any type, an open-ended object, an array without ``items``, ``allOf`` of several
schemas, a root that is not an object, a schema over the limits) raise `NotExpressible`, and
the adapter renders that tool non-strict instead.

Because strict mode makes the model send ``null`` for an optional property it wants to
leave out, `omit_strict_nulls` removes those nulls again before validation sees them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jsonschema

from toolkeeper.adapters._schema import (
    META_KEYWORDS,
    Notes,
    NotExpressible,
    move_to_description,
    types_of,
)
from toolkeeper.adapters.report import IssueKind
from toolkeeper.schema.document import pointer, resolve_ref

STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
MAX_PROPERTIES = 5000
MAX_OBJECT_DEPTH = 10
MAX_ENUM_VALUES = 1000
MAX_SCHEMA_STRINGS = 120_000
LARGE_ENUM = 250
MAX_LARGE_ENUM_CHARS = 15_000

_COMMON = frozenset({"type", "description", "title", "enum", "const", "anyOf", "$ref"})
_BY_TYPE = {
    "string": frozenset({"pattern", "format"}),
    "number": frozenset(
        {"multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    ),
    "integer": frozenset(
        {"multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    ),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
    "boolean": frozenset(),
    "null": frozenset(),
}
_MAX_REF_INLINING = 32


@dataclass(frozen=True, slots=True)
class StrictSchema:
    """The strict rendering of one schema, and what it changed."""

    schema: dict[str, Any]
    notes: list[tuple[str, IssueKind, str]]


def to_strict(schema: dict[str, Any]) -> StrictSchema:
    """Transform `schema` for strict mode; raises `NotExpressible` when it cannot be."""
    if types_of(schema) != ["object"] or "anyOf" in schema or "oneOf" in schema:
        raise NotExpressible("", "strict mode needs a plain object schema at the root")
    notes = Notes()
    walker = _StrictWalker(schema, notes)
    out = walker.node({k: v for k, v in schema.items() if k != "$defs"}, "")
    definitions = schema.get("$defs")
    if isinstance(definitions, dict) and definitions:
        out["$defs"] = {
            name: walker.node(sub, pointer("$defs", name)) for name, sub in definitions.items()
        }
    check_limits(out)
    return StrictSchema(out, notes.items)


class _StrictWalker:
    def __init__(self, root: dict[str, Any], notes: Notes):
        self.root = root
        self.notes = notes

    def node(self, schema: Any, path: str, inlined: int = 0) -> dict[str, Any]:
        if not isinstance(schema, dict):
            raise NotExpressible(
                path, "a boolean schema accepts anything; strict mode needs a type"
            )
        node = {k: v for k, v in schema.items() if k not in META_KEYWORDS}
        if "$ref" in node:
            if len(node) == 1 and resolve_ref(self.root, str(node["$ref"])) is not None:
                return node
            node = self._inline(node, path, inlined)
            return self.node(node, path, inlined + 1)
        if "allOf" in node:
            parts = node.pop("allOf")
            if not (isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict)):
                raise NotExpressible(path, "allOf of several schemas has no strict equivalent")
            return self.node({**parts[0], **node}, path, inlined + 1)
        if "oneOf" in node:
            if "anyOf" in node:
                raise NotExpressible(path, "oneOf beside anyOf has no strict equivalent")
            node["anyOf"] = node.pop("oneOf")
            self.notes.add(path, IssueKind.RELAXED, "oneOf rendered as anyOf")
        types = types_of(node)
        if not types and "properties" in node:
            node["type"] = types = ["object"]
        if len([t for t in types if t != "null"]) > 1:
            return self.node(_split_union(node, types), path, inlined)
        if not types and not {"enum", "const", "anyOf"} & node.keys():
            raise NotExpressible(path, "a value of any type; strict mode needs a type")

        allowed = _COMMON.union(*(_BY_TYPE.get(t, frozenset()) for t in types))
        unsupported = [k for k in node if k not in allowed]
        if node.get("format") not in (None, *STRICT_FORMATS):
            unsupported.append("format")
        node = move_to_description(node, unsupported, path, self.notes)
        if "object" in types:
            node = self._object(node, path)
        if "array" in types:
            node = self._array(node, path)
        if "anyOf" in node:
            node["anyOf"] = [
                self.node(branch, path + pointer("anyOf", i))
                for i, branch in enumerate(node["anyOf"])
            ]
        return node

    def _inline(self, node: dict[str, Any], path: str, inlined: int) -> dict[str, Any]:
        # A $ref may not have siblings in strict mode: merge the target in, siblings winning.
        target = resolve_ref(self.root, str(node["$ref"]))
        if target is None or inlined > _MAX_REF_INLINING:
            raise NotExpressible(path, f"$ref {node['$ref']!r} cannot be resolved in this schema")
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return {**target, **siblings}

    def _object(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        if not properties and extra is not False:
            raise NotExpressible(
                path, "an open-ended object (no fixed properties) cannot be strict"
            )
        if extra not in (None, False):
            self.notes.add(
                path, IssueKind.DROPPED, "additionalProperties: strict mode allows no extra keys"
            )
        required = set(node.get("required") or ())
        node["properties"] = {
            name: self._property(sub, path + pointer("properties", name), name in required)
            for name, sub in properties.items()
        }
        node["required"] = list(properties)
        node["additionalProperties"] = False
        return node

    def _property(self, schema: Any, path: str, required: bool) -> dict[str, Any]:
        node = self.node(schema, path)
        return node if required else nullable(node)

    def _array(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        if not isinstance(node.get("items"), dict):
            raise NotExpressible(path, "an array without an 'items' schema cannot be strict")
        node["items"] = self.node(node["items"], path + pointer("items"))
        return node


def _split_union(node: dict[str, Any], types: list[str]) -> dict[str, Any]:
    """``{"type": [A, B]}`` as ``anyOf`` of one schema per type, each with its own keywords."""
    shared: dict[str, Any] = {k: node[k] for k in ("description", "title") if k in node}
    branches = []
    for declared in types:
        keep = _COMMON.union(_BY_TYPE.get(declared, frozenset())) - {"description", "title"}
        branch = {k: v for k, v in node.items() if k in keep and k != "type"}
        branches.append({"type": declared, **branch})
    return {**shared, "anyOf": branches}


def nullable(node: dict[str, Any]) -> dict[str, Any]:
    """`node` widened to also accept null (how strict mode spells 'optional')."""
    if "anyOf" in node:
        if any(types_of(b) == ["null"] for b in node["anyOf"]):
            return node
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    if "$ref" in node or not ({"type", "enum", "const"} & node.keys()):
        return {"anyOf": [node, {"type": "null"}]}
    node = dict(node)
    types = types_of(node)
    if types and "null" not in types:
        node["type"] = [*types, "null"]
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "enum" in node and None not in node["enum"]:
        node["enum"] = [*node["enum"], None]
    return node


def check_limits(schema: dict[str, Any]) -> None:
    """Raise `NotExpressible` when `schema` is over one of strict mode's size limits."""
    properties = enum_values = strings = 0
    for node, depth in _walk(schema, 0):
        if types_of(node) and "object" in types_of(node):
            depth += 1
            if depth > MAX_OBJECT_DEPTH:
                raise NotExpressible("", f"more than {MAX_OBJECT_DEPTH} levels of nested objects")
        names = node.get("properties") or {}
        properties += len(names)
        strings += sum(len(name) for name in names)
        strings += sum(len(name) for name in node.get("$defs") or {})
        values = list(node.get("enum") or ())
        enum_values += len(values)
        texts = [v for v in values if isinstance(v, str)]
        if "const" in node and isinstance(node["const"], str):
            texts.append(node["const"])
        strings += sum(len(text) for text in texts)
        if len(values) > LARGE_ENUM and sum(map(len, texts)) > MAX_LARGE_ENUM_CHARS:
            raise NotExpressible("", f"an enum of over {LARGE_ENUM} values is too long")
    if properties > MAX_PROPERTIES:
        raise NotExpressible("", f"more than {MAX_PROPERTIES} object properties")
    if enum_values > MAX_ENUM_VALUES:
        raise NotExpressible("", f"more than {MAX_ENUM_VALUES} enum values")
    if strings > MAX_SCHEMA_STRINGS:
        raise NotExpressible("", f"more than {MAX_SCHEMA_STRINGS} characters of names and values")


def _walk(node: Any, depth: int) -> Iterator[tuple[dict[str, Any], int]]:
    """Every schema node with the object depth above it; definitions count from the top."""
    if not isinstance(node, dict):
        return
    yield node, depth
    below = depth + (1 if "object" in types_of(node) else 0)
    for sub in (node.get("properties") or {}).values():
        yield from _walk(sub, below)
    yield from _walk(node.get("items"), below)
    for sub in node.get("anyOf") or ():
        yield from _walk(sub, depth)
    for sub in (node.get("$defs") or {}).values():
        yield from _walk(sub, 0)


def omit_strict_nulls(arguments: Any, schema: dict[str, Any]) -> Any:
    """Drop the nulls strict mode forced on optional properties that do not accept null.

    Strict mode has no optional properties, so a model leaves one out by sending null; the
    contract's schema says 'absent', and the validator would reject null.
    """
    validator = jsonschema.Draft202012Validator(schema)
    return _omit(arguments, schema, validator)


def _omit(value: Any, node: Any, validator: jsonschema.Draft202012Validator) -> Any:
    node = _deref(node, validator.schema)
    if not isinstance(node, dict):
        return value
    branches = node.get("anyOf") or node.get("oneOf")
    if isinstance(value, dict) and branches and "properties" not in node:
        for branch in branches:
            cleaned = _omit(value, branch, validator)
            if validator.evolve(schema=branch).is_valid(cleaned):
                return cleaned
        return value
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        required = set(node.get("required") or ())
        cleaned = {}
        for name, item in value.items():
            sub = properties.get(name)
            if (
                item is None
                and sub is not None
                and name not in required
                and not validator.evolve(schema=sub).is_valid(None)
            ):
                continue
            cleaned[name] = _omit(item, sub, validator) if sub is not None else item
        return cleaned
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_omit(item, node["items"], validator) for item in value]
    return value


def _deref(node: Any, root: Any) -> Any:
    for _ in range(_MAX_REF_INLINING):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            return node
        target = resolve_ref(root, node["$ref"])
        if target is None:
            return node
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node
