"""Scrubbing secret values out of text, structures and log records.

Stage 9 of the pipeline (DESIGN.md, *project*) and every log handler run what a tool or a
provider produced through a `Redactor` before a model, a ledger row or a log line sees it.
A value is registered once (the `SecretBroker` does it the moment a secret is resolved) and
is then recognised in these forms:

- the raw value;
- base64 of its UTF-8 bytes, standard and URL-safe alphabets, with and without `=` padding;
- URL-encoded with `quote` (with and without `/` kept) and `quote_plus`, upper- and
  lower-case percent escapes;
- JSON-escaped, as `json.dumps` writes it inside a string with and without `ensure_ascii`.

Out of scope, because the encoding no longer contains the value's own encoding as a
substring: base64 of the value inside a larger payload (an HTTP Basic `user:secret` pair, a
base64-encoded JSON document), hashes, encryption, doubly-applied encodings, and a value
split across two strings. Values shorter than `min_length` are refused: a two-character
"secret" would redact every word that contains it.

Redaction is a single pass over the input; the placeholder is never scanned again.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from toolkeeper.errors import ConfigError

logger = logging.getLogger(__name__)

_PERCENT_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def _encoded_forms(value: str) -> frozenset[str]:
    """Every form of `value` the redactor looks for (see the module docstring)."""
    raw = value.encode("utf-8")
    b64 = {base64.b64encode(raw).decode("ascii"), base64.urlsafe_b64encode(raw).decode("ascii")}
    url = {quote(value, safe=""), quote(value), quote_plus(value, safe="")}
    url |= {_PERCENT_ESCAPE.sub(lambda m: m.group().lower(), form) for form in url}
    forms = {value, *b64, *(form.rstrip("=") for form in b64), *url}
    forms |= {json.dumps(value, ensure_ascii=ascii_only)[1:-1] for ascii_only in (True, False)}
    return frozenset(forms)


class Redactor:
    """A registry of secret values and a fast scrubber for everything that may contain them.

    Thread-safe: the broker registers values from whichever thread resolves them while other
    threads redact. All forms are matched by one compiled alternation, longest first, rebuilt
    lazily on the first redaction after an `add`.
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
        self._values: set[str] = set()
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"Redactor(placeholder={self.placeholder!r}, min_length={self.min_length}, "
            f"secrets=<{len(self._values)} hidden>)"
        )

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, value: object) -> bool:
        return isinstance(value, str) and value in self._values

    def add(self, value: str) -> None:
        """Register `value` and its encoded forms; a value shorter than `min_length` is refused.

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
        with self._lock:
            if value in self._values:
                return
            self._values.add(value)
            self._forms |= _encoded_forms(value)
            self._pattern = None

    def redact_text(self, text: str) -> str:
        """`text` with every occurrence of a registered form replaced by the placeholder.

        Overlapping occurrences (two secrets sharing characters) are merged into one span, so
        no character of either survives. Text without any occurrence is returned as is.
        """
        if not self._values:
            return text
        pattern = self._compiled()
        match = pattern.search(text)
        if match is None:
            return text
        pieces: list[str] = []
        kept_from = 0
        while match is not None:
            start, end = match.span()
            # Searching again from start + 1 (not end) finds a secret that begins inside
            # this one and reaches past it; the alternation gives the longest at each start.
            match = pattern.search(text, start + 1)
            while match is not None and match.start() < end:
                end = max(end, match.end())
                match = pattern.search(text, match.start() + 1)
            pieces += (text[kept_from:start], self.placeholder)
            kept_from = end
        pieces.append(text[kept_from:])
        return "".join(pieces)

    def redact(self, value: Any) -> Any:
        """A copy of `value` with secrets scrubbed from every string inside it.

        Walks mappings (keys and values), lists, tuples, sets and frozensets, rebuilding each
        as its base type (`dict`, `list`, ...); other objects are returned untouched, since
        a redactor cannot rebuild what it does not know. Two keys that redact to the same
        text collapse into one entry, the later winning. Without registered secrets, `value`
        itself is returned without walking.
        """
        if not self._values:
            return value
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
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

    def _compiled(self) -> re.Pattern[str]:
        pattern = self._pattern
        if pattern is None:
            with self._lock:
                if self._pattern is None:
                    ordered = sorted(self._forms, key=len, reverse=True)
                    self._pattern = re.compile("|".join(map(re.escape, ordered)))
                pattern = self._pattern
        return pattern


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
