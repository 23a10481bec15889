"""Scrubbing secret values out of text, bytes, structures, log records and streams.

Stage 9 of the pipeline (DESIGN.md, *project*), the gateway's logs and its upstream logs run
what a tool, an upstream or a provider produced through a `Redactor` before a model, a ledger
row, an artifact or a log line sees it. A value is registered once — the `SecretBroker` does
it the moment a secret is resolved, the gateway for every ``${NAME}`` an upstream's ``env`` or
``headers`` reads — and all its forms are compiled then, into one pattern per value:

- the value, each character written literally or in any escape a serializer uses for one
  character, freely mixed (so a partial escape is found as well as a full one): backslash
  escapes of JSON, JavaScript, Python and C (``\\u00e9``, ``\\xe9``, ``\\xc3\\xa9``, ``\\303``,
  ``\\"``), nested up to four backslashes deep; HTML entities (named, decimal, hex, and
  escaped again as ``&amp;…``); percent-encoding (single, double and triple, either case, ``+``
  for a space, ``%u00e9``); UTF-8 read as Latin-1 or cp1252 (mojibake); NFC and NFD;
- hex of its UTF-8 bytes, either case, the bytes optionally separated by ``:``, ``-`` or a space;
- base64 (standard or URL-safe alphabet, padded or not, wrapped into lines, ``+/=``
  percent-encoded) of its UTF-8 bytes and of its JSON escape, at any of the three byte
  alignments, so it is found inside a larger payload: a ``user:secret`` pair, a JWT, a blob.

docs/redaction.md says what is not covered (encryption, hashing, compression, splitting,
reversing, changed letter case, other character sets…) and why. Values shorter than
`min_length` are refused: a short value would redact unrelated words.

Redaction is a single pass over the input; the placeholder is never scanned again.
"""

from __future__ import annotations

import html.entities
import itertools
import json
import logging
import re
import string
import threading
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from toolkeeper.errors import ConfigError

logger = logging.getLogger(__name__)

_Piece = tuple[str, int]
"""A regular expression and the most UTF-8 bytes a match of it can span."""

_BACKSLASHES = r"\\\\{0,3}"
"""The backslashes before an escape: one, or one escaped again once or twice (JSON in JSON).
Written as a literal first, like every piece that can start a form: a pattern whose first
character is known is scanned by the regex engine's fast character-set search."""
_AMPERSAND = "&(?:amp;){0,2}"
"""An entity's ampersand, itself escaped as ``&amp;`` up to twice."""
_PERCENT = "%(?:25){0,2}"
"""A percent escape's sign, itself percent-encoded up to twice."""
_SHORT_ESCAPES = {
    '"': '"',
    "'": "'",
    "/": "/",
    "\\": r"\\",
    "\n": "n",
    "\t": "t",
    "\r": "r",
    "\b": "b",
    "\f": "f",
    "\v": "v",
    "\a": "a",
    "\0": "0",
}
"""The one-letter backslash escapes of JSON, Python, JavaScript and C, by character."""
_ENTITY_NAMES: dict[str, list[str]] = {}
for _name, _text in html.entities.html5.items():
    if len(_text) == 1:
        _ENTITY_NAMES.setdefault(_text, []).append(_name)
_BASE64 = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"


def _utf8(text: str) -> bytes:
    # A lone surrogate (an environment variable that was not UTF-8) stands for the byte the
    # child process really receives; any other one is kept as its CESU bytes.
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _hex(number: int, digits: int) -> str:
    return f"(?i:{number:0{digits}x})"


def _any(pieces: list[_Piece]) -> _Piece:
    unique = dict(pieces)
    return "(?:" + "|".join(unique) + ")", max(unique.values())


def _escapes(char: str) -> list[_Piece]:
    """`char` as backslash escapes: JSON/JavaScript ``\\uXXXX`` (surrogate pairs beyond the
    BMP), ``\\U0001F600``, ``\\u{1f600}``, ``\\xe9``, the UTF-8 bytes as ``\\xc3\\xa9`` (a
    Python bytes repr) or octal ``\\303\\251`` (C, git), and one-letter escapes."""
    point, raw = ord(char), _utf8(char)
    after: list[_Piece] = [
        (f"U{_hex(point, 8)}", 9),
        (rf"u\{{0{{0,4}}{_hex(point, 1)}\}}", 12),
    ]
    if point < 0x10000:
        after.append((f"u{_hex(point, 4)}", 5))
    else:
        high = 0xD800 + ((point - 0x10000) >> 10)
        low = 0xDC00 + ((point - 0x10000) & 0x3FF)
        after.append((f"u{_hex(high, 4)}{_BACKSLASHES}u{_hex(low, 4)}", 14))
    if point < 0x100:
        after.append((f"x{_hex(point, 2)}", 3))
    if char in _SHORT_ESCAPES:
        after.append((_SHORT_ESCAPES[char], 1))
    escaped, width = _any(after)
    pieces = [(_BACKSLASHES + escaped, 4 + width)]
    if point >= 0x80:
        pieces.append(("".join(f"{_BACKSLASHES}x{_hex(b, 2)}" for b in raw), 7 * len(raw)))
    pieces.append(("".join(f"{_BACKSLASHES}{b:03o}" for b in raw), 7 * len(raw)))
    return pieces


def _entities(char: str) -> list[_Piece]:
    """`char` as an HTML/XML entity: decimal, hex, or any HTML5 name for it."""
    point = ord(char)
    names = sorted(_ENTITY_NAMES.get(char, ()), key=len, reverse=True)
    after = [(f"#0{{0,4}}{point};?", 6 + len(str(point))), (f"#[xX]0{{0,4}}{_hex(point, 1)};?", 14)]
    after += [(re.escape(name), len(name)) for name in names]
    escaped, width = _any(after)
    return [(_AMPERSAND + escaped, 9 + width)]


def _percents(char: str) -> list[_Piece]:
    """`char` percent-encoded: its UTF-8 bytes (single, double, triple), ``+`` for a space,
    and JavaScript's ``%uXXXX``."""
    point, raw = ord(char), _utf8(char)
    pieces = [("".join(f"{_PERCENT}{_hex(b, 2)}" for b in raw), 7 * len(raw))]
    if char == " ":
        pieces += [(r"\+", 1), (f"{_PERCENT}{_hex(ord('+'), 2)}", 7)]
    if 0x80 <= point < 0x10000:
        pieces.append((f"%u{_hex(point, 4)}", 6))
    return pieces


def _spellings(char: str) -> list[_Piece]:
    """`char` literally, in its NFC and NFD spellings, and as mojibake: its UTF-8 bytes
    decoded as Latin-1 or cp1252."""
    spellings = {char, unicodedata.normalize("NFC", char), unicodedata.normalize("NFD", char)}
    raw = _utf8(char)
    if len(raw) > 1:
        spellings.add(raw.decode("latin-1"))
        spellings.add("".join(bytes([b]).decode("cp1252", "ignore") or chr(b) for b in raw))
    return [(re.escape(text), len(_utf8(text))) for text in sorted(spellings)]


def _character(char: str) -> _Piece:
    return _any(_spellings(char) + _escapes(char) + _entities(char) + _percents(char))


def _backslash_run(count: int) -> _Piece:
    """`count` backslashes in a row, as one piece: as separate pieces, each of which matches
    one to five backslashes, a long run of them in the text would make the regex engine try
    every way to share it out (exponential backtracking)."""
    others = _entities("\\") + _percents("\\")
    rest, width = _any(others)
    options = [(rf"\\\\{{{count - 1},{5 * count - 1}}}", 5 * count)]
    options += [(f"{first}(?:{rest}){{{count - 1}}}", count * width) for first, _ in others]
    return _any(options)


def _text_form(value: str) -> _Piece:
    pieces = []
    for char, group in itertools.groupby(value):
        count = len(list(group))
        if char == "\\" and count > 1:
            pieces.append(_backslash_run(count))
        else:
            pieces += [_character(char)] * count
    return "".join(p for p, _ in pieces), sum(w for _, w in pieces)


def _hex_form(raw: bytes) -> _Piece:
    return "(?i:" + "[ :-]?".join(f"{b:02x}" for b in raw) + ")", 3 * len(raw)


def _base64_form(raw: bytes, offset: int) -> _Piece:
    """Base64 of `raw` when it starts `offset` bytes into the encoded payload: the characters
    its bits alone decide, then the last one as the class of characters whose known bits
    match (the rest come from the next byte, or the zero padding). The first character at
    offsets 1 and 2 mixes 2 or 4 of the value's bits with the previous byte's; it is left
    out, so every form starts with a known character."""
    bits = "?" * (8 * offset) + "".join(f"{b:08b}" for b in raw)
    bits += "?" * (-len(bits) % 6)
    pieces = []
    for start in range(-(-8 * offset // 6) * 6, len(bits), 6):
        sextet = bits[start : start + 6]
        chars = [
            c
            for v, c in enumerate(_BASE64)
            if all(k in ("?", b) for k, b in zip(sextet, f"{v:06b}", strict=True))
        ]
        pieces.append(_base64_characters(chars))
    body = r"(?:\r?\n)?".join(pieces)
    return body + "(?:=|%3[dD]){0,2}", 5 * len(pieces) + 6


def _base64_characters(chars: list[str]) -> str:
    options = []
    if len(chars) > 1:
        urlsafe = {"+": "-", "/": "_"}
        options.append("[" + "".join(re.escape(c + urlsafe.get(c, "")) for c in chars) + "]")
    else:
        options.append(re.escape(chars[0]))
        options += {"+": ["-"], "/": ["_", r"\\/"]}.get(chars[0], [])
    if "+" in chars:
        options.append("%2[bB]")
    if "/" in chars:
        options.append("%2[fF]")
    return "(?:" + "|".join(options) + ")"


def _forms(value: str) -> list[_Piece]:
    """Every form of `value` (see the module docstring), one pattern each: each starts with
    a known character, which an alternation of them all would not."""
    raw = _utf8(value)
    forms = [_text_form(value), _hex_form(raw)]
    for source in dict.fromkeys([raw, _utf8(json.dumps(value)[1:-1])]):
        forms += [_base64_form(source, offset) for offset in range(3)]
    return forms


@dataclass(frozen=True, slots=True)
class _Secret:
    value: str
    sources: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    width: int


class Redactor:
    """A registry of secret values and a scrubber for everything that may contain them.

    Thread-safe: the broker registers values from whichever thread resolves them while other
    threads redact. Each value's forms are compiled once, when it is registered; a redaction
    runs each value's pattern over the input and replaces the union of what they found.
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
        self._binary: dict[str, tuple[re.Pattern[bytes], ...]] = {}
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
        """The most bytes one match can span: how much of a stream `redact_bytes_prefix`
        holds back."""
        return max((s.width for s in self._secrets), default=0)

    def add(self, value: str) -> None:
        """Register `value` and compile its forms; a value shorter than `min_length` is refused.

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
        forms = _forms(value)
        sources = tuple(source for source, _ in forms)
        patterns = tuple(re.compile(source) for source in sources)
        secret = _Secret(value, sources, patterns, max(width for _, width in forms))
        with self._lock:
            if value not in self:
                self._secrets = (*self._secrets, secret)

    def redact_text(self, text: str) -> str:
        """`text` with every occurrence of a registered form replaced by the placeholder.

        Overlapping occurrences (two secrets sharing characters) are merged into one span, so
        no character of either survives. Text without any occurrence is returned as is.
        """
        secrets = self._secrets
        if not secrets:
            return text
        spans = _spans([p for s in secrets for p in s.patterns], text)
        return _replaced(text, spans, self.placeholder) if spans else text

    def redact_bytes(self, data: bytes) -> bytes:
        """`data` with every registered form, as UTF-8 bytes, replaced by the placeholder."""
        spans = _spans(self._binary_patterns(), data)
        return _replaced(data, spans, self.placeholder.encode()) if spans else data

    def redact_bytes_prefix(self, data: bytes) -> tuple[bytes, bytes]:
        """For a stream: ``(scrubbed, held)``, where `scrubbed` is the redacted part of `data`
        that no later byte can change, and `held` the raw tail (shorter than `max_width`)
        that a secret could still be completing; prepend it to the next chunk."""
        safe = len(data) - max(self.max_width - 1, 0)
        if safe <= 0:
            return b"", data
        cut, kept = safe, []
        for start, end in _spans(self._binary_patterns(), data):
            if start >= safe:
                break
            kept.append((start, end))
            cut = max(cut, end)
        return _replaced(data[:cut], kept, self.placeholder.encode()), data[cut:]

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

    def _binary_patterns(self) -> list[re.Pattern[bytes]]:
        # Compiled on first use: most redactors never see bytes.
        patterns = []
        for secret in self._secrets:
            compiled = self._binary.get(secret.value)
            if compiled is None:
                # The text patterns' non-ASCII literals become their UTF-8 byte sequences;
                # no quantifier or class ever applies to one, so the meaning is unchanged.
                compiled = tuple(re.compile(_utf8(source)) for source in secret.sources)
                self._binary[secret.value] = compiled
            patterns += compiled
        return patterns


def _spans(patterns: list[re.Pattern[Any]], data: Any) -> list[tuple[int, int]]:
    """Every stretch of `data` some pattern matches, overlapping ones merged, in order."""
    found = []
    for pattern in patterns:
        match = pattern.search(data)
        while match is not None:
            found.append(match.span())
            # From start + 1, not end: a second occurrence may begin inside this one.
            match = pattern.search(data, match.start() + 1)
    merged: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _replaced(data: Any, spans: list[tuple[int, int]], placeholder: Any) -> Any:
    pieces, kept_from = [], 0
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
