"""The text of a tool definition as a model reads it: where every string is, and how the scan
folds it before matching.

Every string a model may read counts, not only the description: names, titles, defaults,
enums, examples and unknown schema keys (CyberArk's "full-schema poisoning"). Folding decodes
entities and drops compatibility forms and invisible characters, so a check's pattern cannot
be dodged by spelling a word differently from how the model will read it.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator

from toolkeeper.schema.document import pointer

# What a schema may say; any other key is free text to the model and is read as such.
_SCHEMA_KEYWORDS = frozenset(Draft202012Validator.VALIDATORS) | {
    "$schema", "$id", "$defs", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary",
    "definitions", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly", "nullable", "contentEncoding", "contentMediaType", "contentSchema", "then",
    "else",
}  # fmt: skip
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})


def strings(tool: Mapping[str, Any]) -> Iterator[tuple[str, str, bool]]:
    """(JSON pointer, text, is_name) for every string a model would read."""
    yield "/name", str(tool.get("name", "")), True
    for key in ("title", "description"):
        if isinstance(tool.get(key), str):
            yield pointer(key), tool[key], False
    yield from _walk(tool.get("annotations"), ("annotations",), schema=False)
    for key in ("inputSchema", "outputSchema"):
        yield from _walk(tool.get(key), (key,), schema=True)


def _walk(node: Any, at: tuple[str | int, ...], *, schema: bool) -> Iterator[tuple[str, str, bool]]:
    if isinstance(node, str):
        yield pointer(*at), node, False
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from _walk(item, (*at, index), schema=schema)
    elif isinstance(node, dict):
        for key, value in node.items():
            key = str(key)
            if schema and key in _SCHEMA_MAPS and isinstance(value, dict):
                for prop, sub in value.items():
                    yield pointer(*at, key, prop), str(prop), True
                    yield from _walk(sub, (*at, key, prop), schema=True)
                continue
            if schema and key == "required":
                continue  # the names again; already read under properties
            if schema and key not in _SCHEMA_KEYWORDS:
                yield pointer(*at, key), key, True
            yield from _walk(value, (*at, key), schema=schema)


def parameters(tool: Mapping[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(JSON pointer, name, schema) of every input parameter."""
    schema = tool.get("inputSchema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    for prop, sub in (props or {}).items():
        yield (
            pointer("inputSchema", "properties", prop),
            str(prop),
            sub if isinstance(sub, dict) else {},
        )


_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800")  # render as nothing: hidden text


def is_hidden(char: str) -> bool:
    """Whether `char` renders as nothing (a format or control character, a variation selector,
    a blank letter) and so can hide text from a reviewer."""
    code = ord(char)
    if char in "\t\n\r":
        return False
    return (
        unicodedata.category(char) in ("Cf", "Cc") or 0xE0100 <= code <= 0xE01EF or char in _BLANK
    )


def fold(text: str) -> str:
    """The text as a model reads it: entities decoded, compatibility forms and invisible
    characters removed (so "ig\u200bnore" still reads "ignore"), lower case, one space."""
    text = unicodedata.normalize("NFKC", html.unescape(text))
    text = "".join(ch for ch in text if not is_hidden(ch))
    return " ".join(text.lower().split())


def humanize(name: str) -> str:
    """An identifier as words: ``contentFromReading_ssh-key`` → ``content From Reading ssh key``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_\-.:/]+", " ", name)


def snippet(text: str, match: re.Match[str]) -> str:
    """The match with some context either side, for a finding's message."""
    start, end = max(0, match.start() - 20), min(len(text), match.end() + 20)
    return repr(text[start:end])
