"""How large a call may be: `Limits`, the walk that measures arguments against them, and the
bounds that keep an envelope and its ledger row small whatever a tool or a caller sends.

One large request must not stall everyone (issue 9, item 7): a 4 MB argument object with 200k
keys once held the event loop for tens of seconds in validation, digests and redaction, and
came back as a 28 MB error. So the validate stage first measures the arguments with `measure`
— one iterative pass that stops at the first limit it crosses, and costs at most as much as
the limits allow — and refuses a call over a limit as `invalid_argument` before any heavy work.
Arguments within the limits but larger than `Limits.offload_bytes` are then validated,
digested and redacted on a worker thread, and so are large results; small calls stay on the
loop, where a thread hop would cost more than the work.

The walk is iterative (an explicit stack), so arbitrarily deep input never reaches Python's
recursion limit here; the depth limit keeps it from reaching the recursive stages after it
(jsonschema, redaction, the Cedar context, pydantic serialization).
"""

from __future__ import annotations

import json.encoder
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final, NamedTuple

from toolkeeper.errors import ConfigError
from toolkeeper.runtime.envelope import ErrorCategory, FieldError, ToolError
from toolkeeper.validation.text import Unreadable, parse_arguments

KIB: Final = 1024
MIB: Final = 1024 * KIB

MAX_ARGUMENT_DEPTH: Final = 100
"""The deepest `Limits.argument_depth` accepts. The stages after the walk recurse once or
more per level (jsonschema, redaction, the Cedar context, pydantic serialization), and Cedar
refuses a context nested past 128 levels, which would deny every such call; arguments 100
deep pass all of them well within Python's default recursion limit
(tests/adversarial/test_resource_limits.py proves it)."""

MAX_FIELD_ERRORS: Final = 50
"""Field errors an envelope lists at most; the message says how many more there were."""
MAX_ERROR_TEXT: Final = 4096
"""Characters an error's message or fix keeps at most."""
MAX_FIELD_TEXT: Final = 512
"""Characters of a field error's message, and bytes of its expected value, kept at most."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """What one call may send and how much of its result travels inline.

    ``Harness(limits=Limits(argument_bytes=4 * MIB))``; the gateway reads the same fields
    from its configuration's ``[limits]`` table. Arguments over a limit are refused as
    `invalid_argument` before validation, and the message names the limit.
    """

    argument_bytes: int = 1 * MIB
    """The arguments' size as JSON text: the text as sent, or an object's compact JSON
    (UTF-8, escapes counted)."""
    argument_depth: int = 64
    """Nesting of objects and arrays; ``{"a": [1]}`` is 2 deep. At most `MAX_ARGUMENT_DEPTH`."""
    argument_items: int = 10_000
    """Object members plus array elements, at every level together."""
    result_bytes: int = 1 * MIB
    """Structured content over this many bytes is stored as an artifact and the envelope
    carries a preview, whatever larger `artifact_threshold` a contract sets."""
    offload_bytes: int = 64 * KIB
    """Arguments and results larger than this are validated, digested, redacted and
    serialized on a worker thread instead of the event loop."""

    def __post_init__(self) -> None:
        for name in (f.name for f in fields(self)):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(
                    f"limits {name} = {value!r} must be a whole number of at least 1",
                    key=name,
                    value=value,
                )
        if self.argument_depth > MAX_ARGUMENT_DEPTH:
            raise ConfigError(
                f"limits argument_depth = {self.argument_depth} is over {MAX_ARGUMENT_DEPTH}, "
                "the deepest nesting every stage of the pipeline can walk; pass deeper data "
                "as a JSON string field, or flatten it",
                key="argument_depth",
                value=self.argument_depth,
            )


DEFAULT_LIMITS: Final = Limits()


@dataclass(frozen=True, slots=True)
class Breach:
    """The first limit a value crossed; the walk stopped there, so `found` is a lower bound."""

    limit: str
    """The `Limits` field: argument_bytes, argument_depth or argument_items."""
    allowed: int
    found: int

    def error(self) -> ToolError:
        """The `invalid_argument` error a call over this limit is refused with."""
        what = {
            "argument_bytes": f"at least {self.found} bytes of JSON, over the limit of "
            f"{self.allowed}",
            "argument_depth": f"nested at least {self.found} levels deep, over the limit of "
            f"{self.allowed}",
            "argument_items": f"at least {self.found} keys and array elements, over the "
            f"limit of {self.allowed}",
        }[self.limit]
        smaller = {
            "argument_bytes": "Send smaller arguments",
            "argument_depth": "Send flatter arguments",
            "argument_items": "Send fewer keys and array elements",
        }[self.limit]
        return ToolError(
            category=ErrorCategory.INVALID_ARGUMENT,
            message=f"the arguments are {what} ({self.limit}); nothing was run",
            suggested_fix=(
                f"{smaller} (split the work into several calls, or pass large data by "
                f"reference). The operator can raise the limit: Limits({self.limit}=...) for "
                f"a Harness, or [limits] {self.limit} in the gateway configuration."
            ),
            effect_committed=False,
        )


class Size(NamedTuple):
    """What the walk measured of a value within the limits."""

    bytes: int
    depth: int
    items: int


_encode_string = json.encoder.encode_basestring
"""The C encoder json uses with ensure_ascii=False: a string with its quotes and escapes."""

_UNBOUNDED: Final = 1 << 62


def measure(
    value: Any,
    *,
    max_bytes: int = _UNBOUNDED,
    max_depth: int = _UNBOUNDED,
    max_items: int = _UNBOUNDED,
) -> Size | Breach:
    """The compact-JSON size, nesting depth and member-plus-element count of `value`, or the
    first limit it crosses — found without recursion, and stopping there, so the cost is
    bounded by the limits, not by `value`.

    Bytes are exact for JSON values (as `canonical_json` would write them, UTF-8 encoded);
    a value JSON cannot hold counts as one byte, since validation refuses it anyway. Tuples
    count as arrays and any `Mapping` as an object.
    """
    if type(value) is not dict and not _is_container(value):
        size = _leaf_bytes(value)
        return Breach("argument_bytes", max_bytes, size) if size > max_bytes else Size(size, 0, 0)
    size = depth = items = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, level = pop()
        if level > depth:
            depth = level
            if depth > max_depth:
                return Breach("argument_depth", max_depth, depth)
        count = len(node)
        items += count
        if items > max_items:
            return Breach("argument_items", max_items, items)
        size += count + 1 if count else 2  # brackets and the commas between members
        below = level + 1
        children = node
        if type(node) is dict or not isinstance(node, list | tuple):
            size += count  # a colon per member
            for key in node:
                ascii_key = type(key) is str and key.isascii()
                size += len(_encode_string(key)) if ascii_key else _key_bytes(key)
            children = node.values()
        for item in children:
            kind = type(item)
            if kind is str and item.isascii():
                size += len(_encode_string(item))
                if size > max_bytes:  # a long string may cross the limit on its own
                    return Breach("argument_bytes", max_bytes, size)
            elif kind in _SCALARS:
                size += _leaf_bytes(item)
            elif kind is dict or kind is list or _is_container(item):
                push((item, below))
            else:
                size += _leaf_bytes(item)
        if size > max_bytes:
            return Breach("argument_bytes", max_bytes, size)
    return Size(size, depth, items)


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | Mapping)


def admit(raw: Any, limits: Limits) -> tuple[Any, int] | Breach:
    """The arguments to validate and their size in bytes, or the first argument limit they
    cross. JSON text (str or bytes) is measured as sent, so text over the byte limit is never
    parsed; text within it is parsed and walked for depth and count. Text that does not parse
    is returned as is, for validation to say why."""
    if isinstance(raw, str | bytes | bytearray):
        sent = len(raw) if not isinstance(raw, str) or raw.isascii() else _utf8_length(raw)
        if sent > limits.argument_bytes:
            return Breach("argument_bytes", limits.argument_bytes, sent)
        parsed = parse_arguments(raw)
        if isinstance(parsed, Unreadable):
            # The parser gives up on deep nesting as on any bad text; say which it was.
            deeper = _nesting_over(raw, limits.argument_depth)
            if deeper is not None:
                return Breach("argument_depth", limits.argument_depth, deeper)
            return raw, sent
    else:
        parsed = raw
    size = measure(
        parsed,
        max_bytes=limits.argument_bytes,
        max_depth=limits.argument_depth,
        max_items=limits.argument_items,
    )
    if isinstance(size, Breach):
        return size
    return parsed, size.bytes


_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')
"""A string literal (skipped whole) or a bracket, in JSON text."""


def _nesting_over(raw: str | bytes | bytearray, max_depth: int) -> int | None:
    """The depth past `max_depth` that unparsed JSON text reaches, or None; the scan stops
    there, so deep text costs `max_depth` brackets."""
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8", "replace")
    depth = 0
    for token in _STRUCTURE.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            if depth > max_depth:
                return depth
        elif bracket in ("]", "}"):
            depth -= 1
    return None


def _utf8_length(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def larger_than(value: Any, threshold: int) -> bool:
    """Whether `value`'s compact JSON exceeds `threshold` bytes; the walk stops as soon as
    it does, so asking costs at most `threshold` bytes' worth of walking."""
    return isinstance(measure(value, max_bytes=threshold), Breach)


def _key_bytes(key: Any) -> int:
    """Bytes of an object key: JSON writes a non-string key (an int) as a string."""
    return _leaf_bytes(key) if isinstance(key, str) else _leaf_bytes(key) + 2


def _leaf_bytes(value: Any) -> int:
    """Bytes of a scalar as `canonical_json` writes it, UTF-8 encoded."""
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, int):
        if -_LONG < value < _LONG:
            return len(int.__repr__(value))
        # str() of a huge int is quadratic (and refused past 4300 digits): estimate it.
        return int(value.bit_length() * 0.30103) + 1 + (value < 0)
    if isinstance(value, str):
        encoded = len(_encode_string(value))
        if value.isascii():
            return encoded
        # Non-ASCII text stays unescaped: count its UTF-8 bytes (a lone surrogate as 3).
        return encoded + _utf8_length(value) - len(value)
    if isinstance(value, float):
        if value != value:
            return 3  # NaN
        if value in (math.inf, -math.inf):
            return 8 + (value < 0)  # Infinity, -Infinity
        return len(float.__repr__(value))
    return 1


_LONG: Final = 1 << 64


def bound_error(error: ToolError, redact: Callable[[Any], Any]) -> ToolError:
    """`error` as a caller and the ledger may see it: secrets scrubbed by `redact`, then cut
    to at most `MAX_FIELD_ERRORS` field errors, `MAX_ERROR_TEXT` characters of message and
    fix, and `MAX_FIELD_TEXT` of each field error's message and expected value (a message may
    quote the offending value). Ten thousand wrong values once came back as a 30 MB error.

    Surplus field errors are dropped before redaction (dropping whole entries cannot split a
    secret, and the rest need not be scrubbed); text is cut after it, so no cut splits one."""
    errors = error.field_errors
    if len(errors) > MAX_FIELD_ERRORS:
        error = error.model_copy(
            update={
                "message": f"{error.message} (the first {MAX_FIELD_ERRORS} of {len(errors)} "
                "are listed)",
                "field_errors": errors[:MAX_FIELD_ERRORS],
            }
        )
    error = ToolError.model_validate(redact(error.model_dump()))
    message, fix = error.message, error.suggested_fix
    if (
        len(message) <= MAX_ERROR_TEXT
        and (fix is None or len(fix) <= MAX_ERROR_TEXT)
        and all(_small(field) for field in error.field_errors)
    ):
        return error
    return error.model_copy(
        update={
            "message": _cut(message, MAX_ERROR_TEXT),
            "suggested_fix": _cut(fix, MAX_ERROR_TEXT) if fix is not None else None,
            "field_errors": tuple(_bound_field(field) for field in error.field_errors),
        }
    )


def _small(field: FieldError) -> bool:
    return len(field.message) <= MAX_FIELD_TEXT and not larger_than(field.expected, MAX_FIELD_TEXT)


def _bound_field(field: FieldError) -> FieldError:
    if _small(field):
        return field
    expected = field.expected
    if larger_than(expected, MAX_FIELD_TEXT):
        expected = f"(over {MAX_FIELD_TEXT} bytes; see the tool's input schema)"
    return field.model_copy(
        update={"message": _cut(field.message, MAX_FIELD_TEXT), "expected": expected}
    )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    more = f"… ({len(text) - limit} more characters)"
    return text[: limit - len(more)] + more
