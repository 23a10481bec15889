"""Values that satisfy a schema: stand-ins for missing fields, coercions, nearest numbers.

Fixes need a value to suggest. The best is derived from what the caller sent (the string
"3" sent as 3, 120 clamped to the maximum 100); failing that, a stand-in built from the
schema (its default, first enum value, example, or the simplest value of its type within
its bounds). Everything here is a best effort; callers check each value before offering it.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from toolkeeper.schema.document import resolve_ref

Check = Callable[[Any, Any], bool]
"""`check(schema, value)`: does `value` satisfy `schema` (resolving `$ref` against the root)?"""

FORMAT_EXAMPLES: Mapping[str, str] = {
    "date": "2024-01-31",
    "date-time": "2024-01-31T12:00:00Z",
    "time": "12:00:00Z",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "iri-reference": "https://example.com/",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "json-pointer": "/a",
    "relative-json-pointer": "0",
    "regex": ".*",
    "uri-template": "https://example.com/{id}",
}

_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")
_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def schema_types(schema: Any) -> list[str]:
    """The types `schema` names, inferred from its keywords when `type` is absent."""
    if not isinstance(schema, dict):
        return []
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    if "properties" in schema or "required" in schema:
        return ["object"]
    if "items" in schema or "prefixItems" in schema:
        return ["array"]
    if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
        return ["number"]
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return ["string"]
    return []


def example_value(schema: Any, root: Any, depth: int = 0) -> Any:
    """A value meant to satisfy `schema`; `$ref`s resolve against `root`."""
    if not isinstance(schema, dict) or depth > 16:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#"):
        return example_value(resolve_ref(root, ref), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if "default" in schema:
        return copy.deepcopy(schema["default"])
    for key in ("enum", "examples"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema[key][0]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            chosen = next((b for b in branches if schema_types(b) != ["null"]), branches[0])
            return example_value(chosen, root, depth + 1)
    types = schema_types(schema)
    kind = next((t for t in types if t != "null"), "null" if types else None)
    if kind == "string":
        if schema.get("format") in FORMAT_EXAMPLES:
            return FORMAT_EXAMPLES[schema["format"]]
        size = max(int(schema.get("minLength", 1)), 1)
        return "x" * min(size, int(schema.get("maxLength", size)))
    if kind in ("integer", "number"):
        return nearest_number(0, schema)
    if kind == "boolean":
        return False
    if kind == "array":
        prefix = [example_value(s, root, depth + 1) for s in schema.get("prefixItems", [])]
        filler = example_value(schema.get("items", {}), root, depth + 1)
        return prefix + [filler] * max(0, int(schema.get("minItems", 0)) - len(prefix))
    if kind == "object":
        properties = schema.get("properties", {})
        return {
            name: example_value(properties.get(name, {}), root, depth + 1)
            for name in schema.get("required", [])
        }
    return None


def nearest_number(value: float, schema: Mapping[str, Any]) -> float:
    """The number closest to `value` within the bounds and `multipleOf` of `schema`."""
    integer = isinstance(value, int) or "integer" in schema_types(schema)
    low, high = _number(schema.get("minimum")), _number(schema.get("maximum"))
    above, below = _number(schema.get("exclusiveMinimum")), _number(schema.get("exclusiveMaximum"))
    result: float = value
    if low is not None and result < low:
        result = math.ceil(low) if integer else low
    if high is not None and result > high:
        result = math.floor(high) if integer else high
    if above is not None and result <= above:
        ceiling = high if high is not None else below
        inside = (above + ceiling) / 2 if ceiling is not None and ceiling < above + 1 else above + 1
        result = math.floor(above) + 1 if integer else inside
    if below is not None and result >= below:
        floor = low if low is not None else above
        inside = (below + floor) / 2 if floor is not None and floor > below - 1 else below - 1
        result = math.ceil(below) - 1 if integer else inside
    step = _number(schema.get("multipleOf"))
    if step:

        def allowed(x: float) -> bool:
            return (
                (low is None or x >= low)
                and (high is None or x <= high)
                and (above is None or x > above)
                and (below is None or x < below)
            )

        nearest = round(result / step)
        candidates = [_tidy(k * step, step) for k in (nearest, nearest + 1, nearest - 1)]
        result = next((c for c in candidates if allowed(c)), candidates[0])
    return int(result) if integer and float(result).is_integer() else result


def _tidy(value: float, step: float) -> float:
    # 3 * 0.1 is 0.30000000000000004; keep only the step's own decimal places.
    exponent = Decimal(str(step)).as_tuple().exponent
    places = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return round(value, places) if places else value


def _number(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def coerce(value: Any, kind: str) -> tuple[Any, str] | None:
    """`value` converted to JSON type `kind` with a sentence saying how, or None."""
    if isinstance(value, str):
        return _from_text(value, kind)
    if kind == "string" and (isinstance(value, bool) or _number(value) is not None):
        text = json.dumps(value)
        return text, f"send {json.dumps(text)} as a string, in quotes"
    if kind == "integer" and isinstance(value, float) and math.isfinite(value):
        return round(value), f"send a whole number: {round(value)}"
    if kind == "boolean" and _number(value) in (0, 1):
        return bool(value), f"send {json.dumps(bool(value))} as a boolean"
    if (
        kind == "object"
        and isinstance(value, list)
        and len(value) == 1
        and isinstance(value[0], dict)
    ):
        return value[0], "send the object itself, not wrapped in a list"
    if kind == "array" and not isinstance(value, list):
        return [value], f"wrap it in a list: {json.dumps([value], default=repr)}"
    return None


def _from_text(text: str, kind: str) -> tuple[Any, str] | None:
    if kind == "integer" and _INTEGER_TEXT.fullmatch(text):
        return int(text), f"send {int(text)} as a number, not a string"
    if kind == "number" and _NUMBER_TEXT.fullmatch(text):
        number = float(text)
        if math.isfinite(number):
            value = int(number) if _INTEGER_TEXT.fullmatch(text) else number
            return value, f"send {json.dumps(value)} as a number, not a string"
    if kind == "boolean" and text.strip().lower() in ("true", "false"):
        value = text.strip().lower() == "true"
        return value, f"send {json.dumps(value)} as a boolean, not a string"
    if kind == "null" and text.strip().lower() in ("", "null", "none"):
        return None, "send null"
    if kind in ("object", "array"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict if kind == "object" else list):
            return parsed, f"send the {kind} itself, not a JSON-encoded string"
    if kind == "array":
        return [text], f"wrap it in a list: {json.dumps([text])}"
    return None


def identity(value: Any) -> Any:
    """A hashable key under which two values are equal exactly when JSON Schema says so
    (1 equals 1.0, but true does not equal 1)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(identity(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, identity(v)) for k, v in value.items()))
    return ("other", repr(value))
