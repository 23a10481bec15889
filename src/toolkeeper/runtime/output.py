"""What a tool returned, as JSON: `json_output` and the values it refuses.

An executor may return anything Python can hold. Structured content, the ledger row and every
vendor's tool result are JSON, so the check stage converts the value once, here, and a value
that has no faithful JSON form is refused as a whole rather than guessed at: the call then
fails (`internal`), its effect recorded as it happened (docs/tool-output.md).
"""

from __future__ import annotations

import enum
import math
from typing import Any

from pydantic_core import to_jsonable_python

from toolkeeper.schema.document import utf8_text

MAX_DEPTH = 256
"""Levels of nesting a result may have; deeper (or self-containing) values are refused."""


class NoJsonForm(ValueError):
    """Raised by `json_output` for a value with no faithful JSON form; the check stage turns
    it into a failed call."""


def json_output(value: Any) -> Any:
    """`value` as plain JSON data (dict with str keys, list, str, int, float, bool, None).

    Converted:

    - dicts, lists and tuples (subclasses too) as dicts and lists; sets, frozensets and
      generators as lists, in the order they iterate;
    - pydantic models, dataclasses, TypedDicts, enums, dates, times, UUIDs, decimals and
      paths as pydantic serializes them in JSON mode;
    - ``bytes``, ``bytearray`` and ``memoryview`` holding UTF-8 text, as that text;
    - NaN and infinities as null (what JSON encoders write; JSON has no such numbers);
    - a lone surrogate in a string or key (``surrogateescape`` file names, ``"\\ud800"``
      escapes) as its escape text ``\\ud800``, as the ledger stores it;
    - keys that are ints, finite floats, booleans or None as JSON writes them ("1", "1.5",
      "true", "null"), and enum keys by their value.

    Refused, with `NoJsonForm` saying why: objects pydantic cannot serialize (an arbitrary
    class, a function, a type); bytes that are not UTF-8 text (binary data needs an
    encoding the tool chooses and documents, such as base64); other keys (tuples, objects)
    and keys that collide once written as text (``1`` and ``"1"``); values nested deeper
    than `MAX_DEPTH` or containing themselves; and any exception the value's own code
    raises while it is read (a generator, a property, a serializer).
    """
    try:
        return _plain(value, 0)
    except NoJsonForm:
        raise
    except Exception as exc:  # the value's own code (a generator, a property) raised
        raise NoJsonForm(f"reading it raised {described(exc)}") from exc


def described(exc: BaseException) -> str:
    """``Type: message`` for an exception from tool code, even one whose `__str__` raises."""
    try:
        message = str(exc)
    except Exception:
        message = "(its message could not be read)"
    name = type(exc).__name__
    return f"{name}: {message}" if message else name


_AS_IS = frozenset({int, bool, type(None)})
"""Types whose values are JSON as they are (exactly these: subclasses may say otherwise)."""


def _plain(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise NoJsonForm(f"it is nested deeper than {MAX_DEPTH} levels, or contains itself")
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is str:
        return value if value.isascii() else utf8_text(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return _object(value, depth)
    if isinstance(value, list | tuple):
        return [
            item if type(item) in _AS_IS else _plain(item, depth + 1)  # most items are
            for item in value
        ]
    if kind is bytes or kind is bytearray or kind is memoryview:
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise NoJsonForm(
                "it holds bytes that are not UTF-8 text; return text, or binary data in an "
                "encoding the tool documents (such as base64)"
            ) from None
    try:
        # Everything else is pydantic's to convert (sets, generators, models, enums, ...);
        # what it makes is read again, for the key and text rules above.
        converted = to_jsonable_python(value, inf_nan_mode="null", fallback=_unknown)
    except UnicodeEncodeError:
        raise NoJsonForm(
            f"a value of type {kind.__name__} holds text that is not valid Unicode"
        ) from None
    return _plain(converted, depth + 1)


def _unknown(value: Any) -> Any:
    if isinstance(value, memoryview):
        return _plain(value, 0)
    raise NoJsonForm(f"a value of type {type(value).__name__} has no JSON form")


def _object(value: dict[Any, Any], depth: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in value.items():
        name = key if type(key) is str and key.isascii() else _key(key)
        if name in result:
            raise NoJsonForm(f"two keys are both written {name!r} in JSON")
        result[name] = item if type(item) in _AS_IS else _plain(item, depth + 1)
    return result


def _key(key: Any) -> str:
    kind = type(key)
    if kind is str:
        return utf8_text(key)
    if key is None or kind is bool:
        return {None: "null", True: "true", False: "false"}[key]
    if kind is int or (kind is float and math.isfinite(key)):
        return repr(key)
    if isinstance(key, enum.Enum):
        return _key(key.value)
    raise NoJsonForm(f"a key of type {kind.__name__} has no JSON form")
