"""Gemini's ``parameters``: a contract's JSON Schema as the OpenAPI 3.0 subset Gemini reads.

``FunctionDeclaration.parameters`` takes google-genai's ``Schema``: upper-case types, one
type per node (a null union is ``nullable``), string-only ``enum``, ``any_of``, snake_case
keyword names, and no ``$ref``, ``const``, ``oneOf``/``allOf``, exclusive bounds or
``multipleOf``. Parameter names must start with a letter or ``_`` and hold only letters,
digits and ``_`` (64 at most), and an object must declare properties. This module converts:

- ``$ref`` is inlined (a recursive schema cannot be, and falls back);
- ``const`` becomes a one-value ``enum``; an integer or number enum is written as strings
  with ``format: "enum"``, as the SDK documents; ``null`` in a type or enum becomes
  ``nullable``; a union of several types becomes ``any_of``; ``oneOf`` becomes ``any_of``
  (`IssueKind.RELAXED`);
- other keywords move into the description (`IssueKind.MOVED_TO_DESCRIPTION`).

What cannot be converted (a value of any type, a recursive ``$ref``, an illegal parameter
name, an object without properties, ``allOf`` of several schemas) raises `NotExpressible`;
the adapter then sends that tool's schema as ``parameters_json_schema``.
"""

from __future__ import annotations

import re
from typing import Any

from toolkeeper.adapters._schema import (
    META_KEYWORDS,
    Notes,
    NotExpressible,
    move_to_description,
    types_of,
)
from toolkeeper.adapters.report import IssueKind
from toolkeeper.schema.document import pointer, resolve_ref

PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

_RENAMED = {
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
}
_COMMON = frozenset({"type", "description", "title", "enum", "const", "default", "examples"})
_BY_TYPE = {
    "string": frozenset({"format", "minLength", "maxLength", "pattern"}),
    "number": frozenset({"format", "minimum", "maximum"}),
    "integer": frozenset({"format", "minimum", "maximum"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "minProperties", "maxProperties"}),
    "boolean": frozenset(),
    "null": frozenset(),
}
_HANDLED = frozenset({"$ref", "anyOf", "oneOf", "allOf", "additionalProperties"})
_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
"""The formats the Gemini API accepts per type; others are stated in the description."""


def to_gemini(schema: dict[str, Any]) -> tuple[dict[str, Any] | None, Notes]:
    """`schema` as a genai ``Schema`` dict, or None for an object without parameters.

    Raises `NotExpressible` when the OpenAPI subset cannot carry the schema.
    """
    if types_of(schema) != ["object"]:
        raise NotExpressible("", "function parameters must be an object schema")
    notes = Notes()
    if not schema.get("properties"):
        return None, notes
    return _Converter(schema, notes).node(schema, "", ()), notes


class _Converter:
    def __init__(self, root: dict[str, Any], notes: Notes):
        self.root = root
        self.notes = notes

    def node(self, schema: Any, path: str, refs: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(schema, dict):
            raise NotExpressible(path, "a boolean schema has no OpenAPI equivalent")
        # Definitions are inlined where referenced, so the container itself is not rendered.
        node = {k: v for k, v in schema.items() if k not in META_KEYWORDS and k != "$defs"}
        if "$ref" in node:
            ref = str(node.pop("$ref"))
            target = resolve_ref(self.root, ref)
            if target is None or ref in refs:
                raise NotExpressible(
                    path, f"$ref {ref!r} cannot be inlined (recursive or external)"
                )
            return self.node({**target, **node}, path, (*refs, ref))
        if "allOf" in node:
            parts = node.pop("allOf")
            if not (isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], dict)):
                raise NotExpressible(path, "allOf of several schemas has no OpenAPI equivalent")
            return self.node({**parts[0], **node}, path, refs)
        if "oneOf" in node and "anyOf" not in node:
            node["anyOf"] = node.pop("oneOf")
            self.notes.add(path, IssueKind.RELAXED, "oneOf rendered as any_of")

        types = types_of(node)
        if not types and "properties" in node:
            types = ["object"]
        if not types and _all_strings([node["const"]] if "const" in node else node.get("enum")):
            types = ["string"]
        nullable = "null" in types or None in (node.get("enum") or ())
        concrete = [t for t in types if t != "null"]
        if len(concrete) > 1:
            return self._union(node, concrete, nullable, path, refs)
        if not concrete and "anyOf" not in node:
            if types == ["null"]:
                return {"nullable": True}
            raise NotExpressible(path, "a value of any type; Gemini parameters need a type")

        allowed = _COMMON | _HANDLED | _BY_TYPE.get(concrete[0] if concrete else "", frozenset())
        extra = node.get("additionalProperties")
        unsupported = [
            k
            for k in node
            if k not in allowed or (k == "additionalProperties" and extra is not False)
        ]
        if "format" in node and node["format"] not in _FORMATS.get(
            concrete[0] if concrete else "", ()
        ):
            unsupported.append("format")
        node = move_to_description(node, unsupported, path, self.notes)
        out: dict[str, Any] = {}
        if concrete:
            out["type"] = concrete[0].upper()
        if nullable:
            out["nullable"] = True
        for key in ("title", "description", "default", "pattern", "format", "minimum", "maximum"):
            if key in node:
                out[key] = node[key]
        for key, renamed in _RENAMED.items():
            if key in node:
                out[renamed] = node[key]
        if node.get("examples"):
            out["example"] = node["examples"][0]
        self._enum(node, out, path)
        if "anyOf" in node:
            out["any_of"] = [
                self.node(b, path + pointer("anyOf", i), refs) for i, b in enumerate(node["anyOf"])
            ]
        if concrete == ["object"]:
            self._object(node, out, path, refs)
        if concrete == ["array"]:
            if not isinstance(node.get("items"), dict):
                raise NotExpressible(path, "an array without an 'items' schema")
            out["items"] = self.node(node["items"], path + pointer("items"), refs)
        return out

    def _union(
        self,
        node: dict[str, Any],
        types: list[str],
        nullable: bool,
        path: str,
        refs: tuple[str, ...],
    ) -> dict[str, Any]:
        branches = []
        for declared in types:
            keep = (_COMMON | _BY_TYPE[declared]) - {"description", "title", "default", "examples"}
            branches.append(
                {"type": declared, **{k: v for k, v in node.items() if k in keep and k != "type"}}
            )
        shared = {k: node[k] for k in ("description", "title") if k in node}
        out = self.node({**shared, "anyOf": branches}, path, refs)
        if nullable:
            out["nullable"] = True
        return out

    def _enum(self, node: dict[str, Any], out: dict[str, Any], path: str) -> None:
        values = [node["const"]] if "const" in node else node.get("enum")
        if values is None:
            return
        values = [v for v in values if v is not None]
        numeric = out.get("type") in ("INTEGER", "NUMBER")
        if _all_strings(values):
            out["enum"] = values
        elif numeric and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in values
        ):
            out["enum"] = [str(v) for v in values]
            out["format"] = "enum"
        else:
            keyword = "const" if "const" in node else "enum"
            described = move_to_description(
                {keyword: node[keyword], **out}, [keyword], path, self.notes
            )
            out["description"] = described["description"]

    def _object(
        self, node: dict[str, Any], out: dict[str, Any], path: str, refs: tuple[str, ...]
    ) -> None:
        properties = node.get("properties") or {}
        if not properties:
            raise NotExpressible(path, "an object without properties (Gemini needs at least one)")
        for name in properties:
            if not PARAMETER_NAME.match(name):
                raise NotExpressible(path, f"parameter name {name!r} is not legal for Gemini")
        out["properties"] = {
            name: self.node(sub, path + pointer("properties", name), refs)
            for name, sub in properties.items()
        }
        if node.get("required"):
            out["required"] = list(node["required"])


def _all_strings(values: Any) -> bool:
    return isinstance(values, list) and bool(values) and all(isinstance(v, str) for v in values)
