"""Small JSON Schema helpers shared by the vendor schema transforms.

Both transforms (OpenAI strict mode, Gemini's OpenAPI subset) walk a contract's input schema
node by node, move keywords the vendor rejects into the node's description, and stop on
shapes the vendor cannot express at all. These helpers hold the parts they share.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolkeeper.adapters.report import IssueKind

JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")

META_KEYWORDS = frozenset({"$schema", "$id", "$comment", "$anchor", "$dynamicAnchor"})
"""Keywords that describe the schema document, not the value; vendors need none of them."""

KEYWORDS_BY_TYPE: dict[str, frozenset[str]] = {
    "string": frozenset({"pattern", "format", "minLength", "maxLength", "contentEncoding"}),
    "number": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    ),
    "integer": frozenset(
        {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
    ),
    "array": frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems", "contains"}),
    "object": frozenset(
        {
            "properties",
            "required",
            "additionalProperties",
            "patternProperties",
            "minProperties",
            "maxProperties",
            "propertyNames",
        }
    ),
    "boolean": frozenset(),
    "null": frozenset(),
}
"""Which type each type-specific keyword applies to, for splitting a type union."""


class NotExpressible(Exception):
    """A schema shape the target vendor format cannot represent; the caller falls back."""

    def __init__(self, path: str, detail: str):
        super().__init__(f"{path or '/'}: {detail}")
        self.path = path
        self.detail = detail


@dataclass
class Notes:
    """The departures one transform made, as (JSON pointer, kind, detail)."""

    items: list[tuple[str, IssueKind, str]] = field(default_factory=list)

    def add(self, path: str, kind: IssueKind, detail: str) -> None:
        self.items.append((path, kind, detail))


def types_of(node: dict[str, Any]) -> list[str]:
    """The node's declared types as a list (empty when it declares none)."""
    declared = node.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    return []


def move_to_description(
    node: dict[str, Any], keywords: list[str], path: str, notes: Notes
) -> dict[str, Any]:
    """Remove `keywords` from `node` and state them in its description instead.

    The model still reads the constraint; the harness still enforces it, because validation
    runs against the contract's schema, never the rendered one.
    """
    if not keywords:
        return node
    node = dict(node)
    stated = []
    for keyword in dict.fromkeys(keywords):
        value = node.pop(keyword)
        stated.append(f"{keyword}: {json.dumps(value, ensure_ascii=False, sort_keys=True)}")
        notes.add(path, IssueKind.MOVED_TO_DESCRIPTION, keyword)
    extra = "; ".join(stated)
    description = node.get("description")
    node["description"] = f"{description} ({extra})" if description else f"({extra})"
    return node
