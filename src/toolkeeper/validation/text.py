"""Reading the argument text a model sent: JSON, or where and why it is not, with a fix.

Models send arguments as JSON text, and the common failures are few and recognisable: text
cut off by the token limit, single quotes, Python's True/None, trailing commas, two objects
back to back. Each gets a fix that names the position and the edit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_PYTHON_LITERALS = re.compile(r"(True|False|None)\b")


@dataclass(frozen=True, slots=True)
class Unreadable:
    """Why the argument text is not JSON, and the edit that makes it JSON."""

    message: str
    fix: str


class _NonFinite(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _reject_constant(name: str) -> Any:
    # json.loads accepts NaN and Infinity; JSON does not, and neither do validators.
    raise _NonFinite(name)


def parse_arguments(raw: Any) -> Any | Unreadable:
    """The parsed arguments, or `Unreadable`. None, "" and blank text mean no arguments:
    models often send "" for tools without parameters. Anything not text is returned as is."""
    if raw is None:
        return {}
    if isinstance(raw, bytes | bytearray):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            return Unreadable(
                f"arguments are not valid UTF-8 (byte {exc.start})",
                "arguments must be a JSON object encoded as UTF-8",
            )
    if not isinstance(raw, str):
        return raw
    if not raw.strip():
        return {}
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        return _diagnose(raw, exc)
    except _NonFinite as exc:
        at = _outside_strings(raw, exc.name)
        return Unreadable(
            f"arguments are not valid JSON: {exc.name} at char {at} is not a JSON number",
            f"arguments must be a JSON object; replace {exc.name} at char {at} with a number "
            "or null",
        )
    except (ValueError, RecursionError) as exc:
        return Unreadable(
            f"arguments cannot be parsed: {str(exc) or type(exc).__name__}",
            "arguments must be a JSON object of reasonable size and nesting",
        )


def _diagnose(text: str, exc: json.JSONDecodeError) -> Unreadable:
    where = f"line {exc.lineno} column {exc.colno} (char {exc.pos})"
    message = f"arguments are not valid JSON: {exc.msg}: {where}"
    return Unreadable(message, "arguments must be a JSON object; " + _edit(text, exc))


def _edit(text: str, exc: json.JSONDecodeError) -> str:
    pos, msg = exc.pos, exc.msg
    rest = text[pos:].lstrip()
    in_string, opened = _open_at_end(text)
    if (in_string or opened) and (not rest or msg.startswith("Unterminated string")):
        parts = (["the string"] if in_string else []) + [
            "the object" if bracket == "{" else "the array" for bracket in reversed(opened)
        ]
        closing = ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]
        complete = "complete the value, then " if msg == "Expecting value" else ""
        return f"the text is cut off at char {len(text)}: {complete}close {closing}"
    before = text[:pos].rstrip()[-1:]
    if msg.startswith("Expecting property name"):
        if rest.startswith("'"):
            return "put property names in double quotes, not single quotes"
        if rest.startswith("}") and before == ",":
            return f"remove the trailing comma before char {pos}"
        return f"put the property name at char {pos} in double quotes"
    if msg == "Expecting value":
        if rest.startswith("'"):
            return f"put the string at char {pos} in double quotes, not single quotes"
        if literal := _PYTHON_LITERALS.match(rest):
            word = {"True": "true", "False": "false", "None": "null"}[literal.group(1)]
            return f"write {literal.group(1)} at char {pos} as {word}"
        if rest[:1] in ("]", "}") and before == ",":
            return f"remove the trailing comma before char {pos}"
        if pos == 0:
            return 'send an object such as {"name": "value"}'
        return (
            f"put a JSON value (string in double quotes, number, true, false, null) at char {pos}"
        )
    if msg == "Extra data":
        return f"send exactly one JSON object; remove everything from char {pos}"
    if msg.startswith("Invalid control character"):
        return f"escape the control character at char {pos} (write a newline as \\n)"
    if msg.startswith("Invalid \\"):
        return f"escape the backslash at char {pos} as \\\\"
    if msg == "Expecting ',' delimiter":
        return f'add a comma at char {pos}, or escape a double quote inside a string as \\"'
    if msg == "Expecting ':' delimiter":
        return f"add ':' after the property name, at char {pos}"
    return f"correct the JSON at char {pos}"


def _structural(text: str) -> Iterator[tuple[int, str, bool]]:
    """Each character of JSON text outside string literals (quotes excluded), with whether
    the text from there on to its end is inside a string — a walk both callers share."""
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        else:
            yield index, char, False
    if in_string:
        yield len(text), "", True


def _open_at_end(text: str) -> tuple[bool, list[str]]:
    """Whether the text ends inside a string, and the brackets still open at its end."""
    opened: list[str] = []
    for _, char, unterminated in _structural(text):
        if unterminated:
            return True, opened
        if char in "{[":
            opened.append(char)
        elif char in "}]" and opened:
            opened.pop()
    return False, opened


def _outside_strings(text: str, word: str) -> int:
    """The index of the first `word` outside string literals (-1 if none)."""
    for index, char, unterminated in _structural(text):
        if not unterminated and char and text.startswith(word, index):
            return index
    return -1
