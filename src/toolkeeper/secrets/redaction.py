"""Scrubbing secret values out of text, bytes, structures, log records and streams.

Stage 9 of the pipeline (DESIGN.md, *project*), the gateway's logs and its upstream logs run
what a tool, an upstream or a provider produced through a `Redactor` before a model, a ledger
row, an artifact or a log line sees it. A value is registered once — the `SecretBroker` does
it the moment a secret is resolved, the gateway for every ``${NAME}`` an upstream's ``env`` or
``headers`` reads — and its forms are worked out then: its spellings, its hex, its
base64.

A redaction first undoes, in copies of the input called views, up to three layers of the
escapes serializers write — backslash escapes of JSON, JavaScript, Python and C, HTML
entities, percent-encoding — each view remembering where every character came from, so a
value escaped wholly or partly, once or three times, reads plainly there. Then it looks, in
the input and in every view, for

- the value's spellings: as is, NFC, NFD, with ``+`` for each space, and its UTF-8 read as
  Latin-1 or cp1252 (mojibake, which is also how a bytes repr ``b'\\xc3\\xa9'`` reads once
  its escapes are undone);
- hex of its UTF-8 bytes, either case, the bytes optionally separated by ``:``, ``-`` or a
  space;
- base64 of its UTF-8 bytes and of its JSON escape, standard or URL-safe alphabet, padded or
  not, wrapped into lines, at each of the three byte alignments inside a larger payload (a
  ``user:secret`` pair, a JWT, a blob).

Each match is mapped back to the stretch of input it was read from, and the stretches are
replaced by the placeholder, once: the placeholder is never scanned again. docs/redaction.md
says what is not covered and why. Values shorter than `min_length` are refused: a short
value would redact unrelated words.
"""

from __future__ import annotations

import base64
import bisect
import functools
import html
import json
import logging
import re
import string
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from toolkeeper.errors import ConfigError

logger = logging.getLogger(__name__)

LAYERS = 3
"""Layers of escaping undone: JSON inside JSON inside JSON, a URL encoded three times."""
WIDEST_CHARACTER = 28
"""The most input characters one character of a value can take within `LAYERS` layers
(four UTF-8 bytes percent-encoded three times: ``%2525F0`` four times)."""

_SCHEMES = (
    r"\\(?:[uU]\{[0-9a-fA-F]{1,6}\}"
    r"|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    r"|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|x[0-9a-fA-F]{2}|[0-7]{1,3}|.)",
    r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?",
    r"%u[0-9a-fA-F]{4}|%[0-9a-fA-F]{2}(?:%[0-9a-fA-F]{2})*",
)
_ESCAPE = re.compile("|".join(_SCHEMES), re.DOTALL)
"""One escape: a backslash escape (``\\u00e9``, a surrogate pair, ``\\U0001f600``,
``\\u{1f600}``, ``\\xe9``, octal ``\\351``, ``\\"``, ``\\n``…), an HTML entity (named,
decimal, hex, with or without ``;``), ``%u00e9``, or a run of percent-escaped bytes. Every
alternative starts with a literal character, so the engine skips ahead to the next ``\\``,
``&`` or ``%`` at C speed."""
_SCHEME_ESCAPES = tuple(re.compile(scheme, re.DOTALL) for scheme in _SCHEMES)
"""The escapes of one scheme each (backslash, entity, percent). Decoding all at once, the
escape of one scheme can swallow the start of another's (``\\`` before ``0%3A`` reads as
octal ``\\0``); decoding one scheme alone leaves the other's characters as they are."""
_SWALLOWED = 10
"""The most characters an escape can swallow from what follows it: ``\\U`` and eight hex
digits."""
_SHORT = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a"}
_LINE_BREAKS = re.compile(r"[\r\n][\r\n]*")
_HEX_DIGITS = str.maketrans("ABCDEF", "abcdef")
_BASE64 = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
_BASE64_STANDARD = str.maketrans("-_", "+/")
"""The URL-safe alphabet's two characters as the standard alphabet writes them."""
_Replace = Callable[[str], tuple[tuple[int, int, str], ...]]
"""What one match stands for, as (start, end, text) pieces of it, in order."""


def _utf8(text: str) -> bytes:
    # A lone surrogate (an environment variable that was not UTF-8) stands for the byte the
    # child process really receives; any other one is kept as its CESU bytes.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


# -- what a value looks like ---------------------------------------------------------------


def _spellings(value: str) -> set[str]:
    raw = _utf8(value)
    cp1252 = "".join(bytes([b]).decode("cp1252", "ignore") or chr(b) for b in raw)
    return {
        value,
        unicodedata.normalize("NFC", value),
        unicodedata.normalize("NFD", value),
        value.replace(" ", "+"),
        raw.decode("latin-1"),
        cp1252,
    }


def _hexes(raw: bytes) -> set[str]:
    return {separator.join(f"{b:02x}" for b in raw) for separator in ("", ":", "-", " ")}


def _base64(raw: bytes, offset: int) -> tuple[str, str]:
    """Base64 of `raw` starting `offset` bytes into the encoded payload: the characters its
    bits alone decide, and the characters the next one may be (its known high bits match;
    the rest come from the following byte, or the zero padding), or "" when `raw` ends on a
    character boundary. The first character at offsets 1 and 2 mixes 2 or 4 of the value's
    bits with the previous byte's: it is left out."""
    encoded = base64.b64encode(bytes(offset) + raw).decode()
    bits = 8 * (offset + len(raw))
    known = encoded[-(-8 * offset // 6) : bits // 6]
    shared = bits % 6  # the known high bits of the character after `known`
    if not shared:
        return known, ""
    high = _BASE64.index(encoded[bits // 6]) >> (6 - shared)
    return known, "".join(c for v, c in enumerate(_BASE64) if v >> (6 - shared) == high)


@dataclass(frozen=True, slots=True)
class _Secret:
    """A registered value and the literals it is looked for as: plain searches, so that
    registering even a long value (a PEM key) compiles nothing."""

    value: str
    spellings: tuple[str, ...]
    hexes: tuple[str, ...]
    base64: tuple[tuple[str, str], ...]
    parts: tuple[tuple[str, str], ...]
    """(head, tail) of each spelling, cut where an escape next to it could swallow one."""

    @classmethod
    def compile(cls, value: str) -> _Secret:
        raw = _utf8(value)
        sources = dict.fromkeys([raw, _utf8(json.dumps(value)[1:-1])])
        base64 = {_base64(source, offset) for source in sources for offset in range(3)}
        spellings = _spellings(value)
        parts = {
            (spelling[:cut], spelling[cut:])
            for spelling in spellings
            for cut in range(1, len(spelling))
            if cut <= _SWALLOWED or len(spelling) - cut <= _SWALLOWED
        }
        return cls(value, tuple(spellings), tuple(_hexes(raw)), tuple(base64), tuple(parts))


# -- where the input says it ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _View:
    """The input, or a copy of a view with some stretches replaced (escapes undone, line
    breaks dropped), knowing where each replaced stretch came from in its parent."""

    text: str
    parent: _View | None = None
    starts: tuple[int, ...] = ()
    stretches: tuple[tuple[int, int, int, int], ...] = ()
    """(start, end) here and (start, end) in the parent of every replaced stretch."""

    def source(self, start: int, end: int) -> tuple[int, int]:
        """The stretch of the input that `text[start:end]` was read from."""
        view = self
        while view.parent is not None:
            start, end = view._in_parent(start, 0), view._in_parent(end - 1, 1)
            view = view.parent
        return start, end

    def _in_parent(self, position: int, after: int) -> int:
        # `after` 0: where the character at `position` starts in the parent; 1: where it ends.
        index = bisect.bisect_right(self.starts, position) - 1
        if index < 0:
            return position + after
        _, end, parent_start, parent_end = self.stretches[index]
        if position < end:
            return parent_end if after else parent_start
        return position - end + parent_end + after


def _replaced_view(view: _View, pattern: re.Pattern[str], replace: _Replace) -> _View | None:
    """`view` with every match of `pattern` replaced by the (start, end, text) pieces
    `replace` gives for it (an empty tuple leaves the match as it is); None when nothing
    was replaced. Built by `re.sub`, so text between matches is copied at C speed."""
    starts: list[int] = []
    stretches: list[tuple[int, int, int, int]] = []
    shift = 0  # how far the output has moved from the input so far

    def substitute(match: re.Match[str]) -> str:
        nonlocal shift
        pieces = replace(match.group())
        if not pieces:
            return match.group()
        base = match.start()
        for start, end, text in pieces:
            here = base + start + shift
            starts.append(here)
            stretches.append((here, here + len(text), base + start, base + end))
            shift += len(text) - (end - start)
        return pieces[0][2] if len(pieces) == 1 else "".join(p[2] for p in pieces)

    text = pattern.sub(substitute, view.text)
    if not stretches:
        return None
    return _View(text, view, tuple(starts), tuple(stretches))


def _unescaped(view: _View, escape: re.Pattern[str] = _ESCAPE) -> _View | None:
    """`view` with one layer of escapes undone."""
    return _replaced_view(view, escape, _unescape)


def _unwrapped(view: _View) -> _View | None:
    """`view` without line breaks: base64 wrapped into lines (MIME, PEM) reads whole."""
    if "\n" not in view.text and "\r" not in view.text:
        return None
    return _replaced_view(view, _LINE_BREAKS, lambda breaks: ((0, len(breaks), ""),))


@functools.lru_cache(maxsize=4096)
def _unescape(token: str) -> tuple[tuple[int, int, str], ...]:
    """What one `_ESCAPE` match stands for, as (start, end, text) pieces of it: one, or one
    per character of a percent-escaped run; none when it stands for nothing else. Cached:
    escaped text repeats a few tokens (``\\"``, ``%20``, ``&amp;``) thousands of times."""
    if token.startswith("%u"):
        return ((0, len(token), chr(int(token[2:], 16))),)
    if token.startswith("%"):
        return _percent_run(bytes.fromhex(token.replace("%", "")))
    if token.startswith("&"):
        text = html.unescape(token)
        return () if text == token else ((0, len(token), text),)
    body = token[1:]
    if body[:2] in ("u{", "U{"):
        point = int(body[2:-1], 16)
    elif len(body) == 11:  # a surrogate pair
        high, low = int(body[1:5], 16), int(body[7:], 16)
        point = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
    elif len(body) in (5, 9) or (len(body) == 3 and body[0] == "x"):
        point = int(body[1:], 16)
    elif set(body) <= set("01234567"):
        point = int(body, 8)
    else:
        return ((0, len(token), _SHORT.get(body, body)),)
    return ((0, len(token), chr(point)),) if point <= 0x10FFFF else ()


def _percent_run(data: bytes) -> tuple[tuple[int, int, str], ...]:
    """Percent-escaped bytes, one piece per UTF-8 character; a byte that starts none is
    read as Latin-1 (``%E9`` is é, as a Latin-1 form would have it)."""
    pieces = []
    index = 0
    while index < len(data):
        lead = data[index]
        size = 4 if lead >= 0xF0 else 3 if lead >= 0xE0 else 2 if lead >= 0xC2 else 1
        try:
            text = data[index : index + size].decode("utf-8")
        except UnicodeDecodeError:
            size, text = 1, chr(lead)
        pieces.append((3 * index, 3 * (index + size), text))
        index += size
    return tuple(pieces)


# -- the redactor ----------------------------------------------------------------------------


class Redactor:
    """A registry of secret values and a scrubber for everything that may contain them.

    Thread-safe: the broker registers values from whichever thread resolves them while other
    threads redact. Each value's forms are worked out once, when it is registered: plain
    strings, so nothing is compiled and even a long value (a PEM key) takes milliseconds.
    """

    def __init__(self, *, placeholder: str = "[REDACTED]", min_length: int = 4) -> None:
        if min_length < 1:
            raise ConfigError(
                f"Redactor min_length must be at least 1, got {min_length}; an empty secret "
                "would match between every two characters",
                key="min_length",
                value=min_length,
            )
        self.placeholder = placeholder
        self.min_length = min_length
        self._secrets: tuple[_Secret, ...] = ()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Redactor(placeholder={self.placeholder!r}, min_length={self.min_length}, "
            f"secrets=<{len(self._secrets)} hidden>)"
        )

    def __len__(self) -> int:
        return len(self._secrets)

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and any(s.value == value for s in self._secrets)

    @property
    def max_width(self) -> int:
        """The most input characters one match can span: how much of a stream
        `redact_bytes_prefix` holds back."""
        longest = max((len(s.value) for s in self._secrets), default=0)
        return WIDEST_CHARACTER * longest + 8 if longest else 0

    def add(self, value: str) -> None:
        """Register `value` and work out its forms; a value shorter than `min_length` is
        refused.

        A refused value is logged (by length, never by content) and stays unredacted: the
        caller still holds it, so a too-short credential is a configuration problem to fix at
        its source, not something to hide by blanking every matching word.
        """
        if len(value) < self.min_length:
            logger.warning(
                "refusing to register a %d-character secret for redaction (min_length is %d): "
                "it would redact unrelated text, and it will not be redacted",
                len(value),
                self.min_length,
            )
            return
        if value in self:
            return
        secret = _Secret.compile(value)
        with self._lock:
            if value not in self:
                self._secrets = (*self._secrets, secret)

    def redact_text(self, text: str) -> str:
        """`text` with every occurrence of a registered value, in any covered form, replaced
        by the placeholder.

        Overlapping occurrences (two secrets sharing characters) are merged into one span, so
        no character of either survives. Text without any occurrence is returned as is.
        """
        if not self._secrets:
            return text
        spans = self._spans(text)
        return _replaced(text, spans, self.placeholder) if spans else text

    def redact_bytes(self, data: bytes) -> bytes:
        """`data` with every occurrence of a registered value replaced by the placeholder's
        UTF-8 bytes: the value's own UTF-8 bytes, and every covered form of it written in
        UTF-8 or ASCII."""
        if not self._secrets:
            return data
        text = data.decode("utf-8", "surrogateescape")
        spans = self._spans(text)
        if not spans:
            return data
        return _replaced(data, _byte_spans(text, spans), self.placeholder.encode())

    def redact_bytes_prefix(self, data: bytes) -> tuple[bytes, bytes]:
        """For a stream: ``(scrubbed, held)``, where `scrubbed` is the redacted part of `data`
        that no later byte can change, and `held` the raw tail (at most `max_width`
        characters) that a secret could still be completing; prepend it to the next chunk."""
        text = data.decode("utf-8", "surrogateescape")
        safe = len(text) - max(self.max_width - 1, 0)
        if safe <= 0:
            return b"", data
        spans: list[tuple[int, int]] = []
        cut = safe
        for start, end in self._spans(text) if self._secrets else ():
            if start >= safe:
                break
            spans.append((start, end))
            cut = max(cut, end)
        *byte_spans, (byte_cut, _) = _byte_spans(text, [*spans, (cut, cut)])
        scrubbed = _replaced(data[:byte_cut], byte_spans, self.placeholder.encode())
        return scrubbed, data[byte_cut:]

    def redact(self, value: Any) -> Any:
        """A copy of `value` with secrets scrubbed from every string and byte string in it.

        Walks mappings (keys and values), lists, tuples, sets and frozensets, rebuilding each
        as its base type (`dict`, `list`, ...); `bytes`, `bytearray` and `memoryview` become
        scrubbed `bytes`. Other objects are returned untouched, since a redactor cannot
        rebuild what it does not know. Two keys that redact to the same text collapse into
        one entry, the later winning. Without registered secrets, `value` itself is returned.
        """
        if not self._secrets:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, bytes | bytearray | memoryview):
            return self.redact_bytes(bytes(value))
        if isinstance(value, Mapping):
            return {self._walk(key): self._walk(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._walk(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self._walk(item) for item in value)
        if isinstance(value, frozenset):
            return frozenset(self._walk(item) for item in value)
        if isinstance(value, set):
            return {self._walk(item) for item in value}
        return value

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Every stretch of `text` a registered value was read from, merged, in order."""
        secrets = self._secrets
        layers = [_View(text)]
        while len(layers) <= LAYERS and (deeper := _unescaped(layers[-1])) is not None:
            layers.append(deeper)
        schemes = [escape for escape in _SCHEME_ESCAPES if escape.search(text)]
        singles = [_unescaped(layers[0], escape) for escape in schemes] if len(schemes) > 1 else []
        unwrapped = _unwrapped(layers[0])
        found: list[tuple[int, int]] = []
        for view in [*layers, *filter(None, singles)]:
            standard = view.text.translate(_BASE64_STANDARD)
            for secret in secrets:
                for spelling in secret.spellings:
                    found += _found(view, view.text, spelling)
                for known, last in secret.base64:
                    found += _found(view, standard, known, last)
        if len(layers) > 1:
            swallowing = _Swallowing(secrets)
            for view in layers[1:]:
                found += swallowing.find(view)
        hexes = text.translate(_HEX_DIGITS)
        for secret in secrets:
            for literal in secret.hexes:
                found += _found(layers[0], hexes, literal)
        if unwrapped is not None:
            standard = unwrapped.text.translate(_BASE64_STANDARD)
            for secret in secrets:
                for known, last in secret.base64:
                    found += _found(unwrapped, standard, known, last)
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged


def _found(view: _View, text: str, literal: str, last: str = "") -> list[tuple[int, int]]:
    """Where `literal` occurs in `text` (the view's text, or a same-length translation of
    it) — followed by one of the characters `last`, when given, and any ``=`` padding — as
    stretches of the input."""
    spans = []
    start = text.find(literal)
    while start >= 0:
        end = start + len(literal)
        if last:
            if end >= len(text) or text[end] not in last:
                start = text.find(literal, start + 1)
                continue
            end += 1
        while end < len(text) and end - start < len(literal) + 3 and text[end] == "=":
            end += 1
        spans.append(view.source(start, end))
        # From start + 1, not end: a second occurrence may begin inside this one.
        start = text.find(literal, start + 1)
    return spans


class _Swallowing:
    """Values an escape next to them swallowed part of when a view was decoded: ``\\``
    before ``0000%3A`` reads as octal ``\\000`` and leaves ``0:``; a value ending in ``%``
    before ``41`` reads as ``A``.

    Such a value reads, in the view, as its tail right after a decoded escape (or its head
    right before one); it is taken when the rest of that escape's text (or the start of it)
    decodes to exactly the missing part. The parts are indexed by the two characters next
    to the escape, so escape-dense text costs a few dictionary lookups per escape."""

    def __init__(self, secrets: tuple[_Secret, ...]) -> None:
        self.by_tail: dict[str, list[tuple[str, str]]] = {}
        self.by_head: dict[str, list[tuple[str, str]]] = {}
        for secret in secrets:
            for head, tail in secret.parts:
                if len(head) <= _SWALLOWED:
                    self.by_tail.setdefault(tail[:2], []).append((head, tail))
                if len(tail) <= _SWALLOWED:
                    self.by_head.setdefault(head[-2:], []).append((head, tail))

    def find(self, view: _View) -> list[tuple[int, int]]:
        assert view.parent is not None
        parent, text = view.parent.text, view.text
        spans = []
        for start, end, parent_start, parent_end in view.stretches:
            after = self.by_tail.get(text[end : end + 2], [])
            after += self.by_tail.get(text[end : end + 1], [])
            for head, tail in after:
                if text.startswith(tail, end):
                    for cut in range(parent_start + 1, parent_end):
                        if _decoded(parent[cut:parent_end]) == head:
                            input_start = view.parent.source(cut, cut + 1)[0]
                            spans.append((input_start, view.source(end, end + len(tail))[1]))
                            break
            before = self.by_head.get(text[start - 2 : start] if start > 1 else text[:start], [])
            before += self.by_head.get(text[start - 1 : start], []) if start else []
            for head, tail in before:
                if text.endswith(head, 0, start):
                    for cut in range(parent_end - 1, parent_start, -1):
                        if _decoded(parent[parent_start:cut]) == tail:
                            input_end = view.parent.source(cut - 1, cut)[1]
                            spans.append((view.source(start - len(head), start)[0], input_end))
                            break
        return spans


def _decoded(text: str) -> str:
    view = _unescaped(_View(text))
    return view.text if view is not None else text


def _byte_spans(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` of `text` as spans of its UTF-8 (surrogate-escaped) bytes."""
    out = []
    position = offset = 0
    for start, end in spans:
        offset += len(text[position:start].encode("utf-8", "surrogateescape"))
        byte_start = offset
        offset += len(text[start:end].encode("utf-8", "surrogateescape"))
        out.append((byte_start, offset))
        position = end
    return out


def _replaced(data: Any, spans: list[tuple[int, int]], placeholder: Any) -> Any:
    pieces: list[Any] = []
    kept_from = 0
    for start, end in spans:
        pieces += (data[kept_from:start], placeholder)
        kept_from = end
    pieces.append(data[kept_from:])
    return data[:0].join(pieces)


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs a record's message, arguments and traceback.

    Attach it to *handlers* (`handler.addFilter`): a logger's own filters do not see records
    propagated from child loggers. The message is rendered once (`msg % args`) and replaced
    by its redacted text with `args` cleared, because an argument's `str()` can reveal a
    secret even when the argument is not a string. The traceback is rendered into
    `exc_text`, redacted, and `exc_info` is cleared so that no later formatter re-renders
    the exception from the live object.
    """

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if not len(self.redactor):
            return True
        try:
            message = record.getMessage()
        except Exception:
            # A malformed call (wrong argument count) would make logging print msg and args
            # raw in its error report; log them scrubbed instead.
            message = f"{record.msg} {record.args!r}"
        record.msg = self.redactor.redact_text(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None
        if record.exc_text:
            record.exc_text = self.redactor.redact_text(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redactor.redact_text(record.stack_info)
        return True


@contextmanager
def redacting_log_records(redactor: Redactor) -> Iterator[None]:
    """While inside, scrub every log record this process makes, as it is made.

    For a process that owns its logging, as the gateway does: a record factory reaches the
    records of every logger (the SDK's, uvicorn's, tool code's) whatever handlers were or
    will be configured, where `RedactingFilter` reaches only the handlers it was added to.
    On exit the previous factory is restored, unless another was installed over this one.
    """
    previous = logging.getLogRecordFactory()
    scrub = RedactingFilter(redactor)

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        scrub.filter(record)
        return record

    logging.setLogRecordFactory(factory)
    try:
        yield
    finally:
        if logging.getLogRecordFactory() is factory:
            logging.setLogRecordFactory(previous)
