"""A JSON document's addresses and bytes: RFC 6901 pointers, same-document `$ref`s, and the
canonical text every digest is computed over. One copy of each, used by every package.

    pointer("properties", "a/b")          -> "/properties/a~1b"
    pointer_parts("/properties/a~1b")     -> ["properties", "a/b"]
    resolve({"a": [1, 2]}, "/a/1")        -> 2
    resolve_ref(schema, "#/$defs/Item")   -> the Item subschema, or None
    canonical_json({"b": 1, "a": "é"})    -> '{"a":"é","b":1}'
    utf8_text("a\ud800")                  -> 'a\\ud800' (a lone surrogate as its escape)

Hand-written rather than taken from `jsonpointer` or `referencing`: each function is a few
lines, the validation path calls them per argument, and callers want "not there" as a value
(None or a sentinel), not an exception raised through a registry of resources.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "canonical_json",
    "escape",
    "pointer",
    "pointer_parts",
    "resolve",
    "resolve_ref",
    "unescape",
    "utf8_json",
    "utf8_text",
]

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
"""An array index as RFC 6901 writes it: no sign, no leading zero."""


def escape(token: str | int) -> str:
    """One reference token escaped for a pointer: '~' as '~0', then '/' as '~1'."""
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """The key an escaped reference token names ('~1' before '~0', as RFC 6901 §4 says)."""
    return token.replace("~1", "/").replace("~0", "~")


def pointer(*parts: str | int) -> str:
    """The pointer to `parts` (keys and indexes, unescaped); '' is the whole document."""
    return "".join("/" + escape(part) for part in parts)


def pointer_parts(text: str) -> list[str]:
    """The unescaped reference tokens of pointer `text` ('' is the whole document: none)."""
    if not text:
        return []
    return [unescape(token) for token in text[1:].split("/")]


def resolve(document: Any, text: str, default: Any = None) -> Any:
    """The value pointer `text` names inside `document`, or `default` where there is none."""
    node = document
    for token in pointer_parts(text):
        if isinstance(node, Mapping) and token in node:
            node = node[token]
        elif isinstance(node, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(node):
            node = node[int(token)]
        else:
            return default
    return node


def resolve_ref(root: Any, ref: str) -> dict[str, Any] | None:
    """The subschema a same-document `$ref` ("#", "#/$defs/Item") names inside `root`.

    None when `ref` is not a pointer fragment (another document, an anchor), names nothing,
    or names something that is not a schema object.
    """
    if ref != "#" and not ref.startswith("#/"):
        return None
    target = resolve(root, ref[1:])
    return target if isinstance(target, dict) else None


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
).encode


def canonical_json(value: Any) -> str:
    """Key-sorted, compact JSON with non-ASCII kept as is: the form every digest (arguments,
    contracts, upstream pins, stored artifacts) is computed over. Values JSON cannot hold
    are written as their `str()`."""
    return _CANONICAL(value)


def utf8_text(text: str) -> str:
    """`text` as UTF-8 can encode it: each lone surrogate (which JSON escapes such as
    ``"\\ud800"`` and Python's ``surrogateescape`` produce, but UTF-8 cannot carry) written as
    its escape ``\\ud800``, the rest unchanged."""
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def utf8_json(value: Any) -> Any:
    """A JSON value with `utf8_text` applied to every string and key: what a vendor SDK or
    a transport can encode. Lists and tuples come back as lists; other values unchanged."""
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        return {utf8_json(key): utf8_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [utf8_json(item) for item in value]
    return value
