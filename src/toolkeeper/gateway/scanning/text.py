"""The text of a tool definition as a model reads it: where every string is, and the reading
the checks match against.

Every string a model may read counts, not only the description: names, titles, defaults,
enums, examples, `required` entries and unknown schema keys (CyberArk's "full-schema
poisoning"). A `Reading` of a string is what the model sees once rendering tricks are
undone: entities decoded, Unicode compatibility forms folded (NFKC), invisible characters
dropped, look-alike letters posing as Latin mapped to Latin, lower case, one space — and
markup taken out but remembered. Pseudo-system tags, chat-template tokens, bracket and
banner markers are blanked from the text the checks read (so an instruction is judged by
what it asks, whatever it is wrapped in) and kept as `markers`, which only raise the
severity of what the checks find. Every character of a reading maps back to its offset in
the raw string, so a finding can name the exact span.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import re
import unicodedata
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from toolkeeper.gateway.scanning.confusables import latin_lookalike, script_of
from toolkeeper.schema.document import pointer

# What a schema may say; any other key is free text to the model and is read as such.
_SCHEMA_KEYWORDS = frozenset(Draft202012Validator.VALIDATORS) | {
    "$schema", "$id", "$defs", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary",
    "definitions", "title", "description", "default", "examples", "deprecated", "readOnly",
    "writeOnly", "nullable", "contentEncoding", "contentMediaType", "contentSchema", "then",
    "else",
}  # fmt: skip
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_ANNOTATIONS = frozenset(
    {"title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"}
)


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
    """Depth-first, in document order, without recursion: a schema nested thousands of levels
    deep is read like any other (a recursive walk would crash on it)."""
    stack: list[tuple[Any, tuple[str | int, ...], bool] | tuple[str, str, bool, None]] = [
        (node, at, schema)
    ]
    while stack:
        item = stack.pop()
        if len(item) == 4:
            yield item[0], item[1], item[2]
            continue
        current, here, in_schema = item
        if isinstance(current, str):
            yield pointer(*here), current, False
        elif isinstance(current, list):
            stack.extend(
                (child, (*here, index), in_schema)
                for index, child in reversed(list(enumerate(current)))
            )
        elif isinstance(current, dict):
            stack.extend(reversed(list(_children(current, here, in_schema))))


def _children(
    node: dict[Any, Any], at: tuple[str | int, ...], schema: bool
) -> Iterator[tuple[Any, tuple[str | int, ...], bool] | tuple[str, str, bool, None]]:
    """What a dict holds for the walk, in order: names to emit (4-tuples) and nodes to walk."""
    names = node.get("properties") if schema else None
    for key, value in node.items():
        key = str(key)
        if schema and key in _SCHEMA_MAPS and isinstance(value, dict):
            for prop, sub in value.items():
                yield pointer(*at, key, prop), str(prop), True, None
                yield sub, (*at, key, prop), True
            continue
        if schema and key == "required" and isinstance(value, list):
            # A listed name is read under `properties`; anything else is free text.
            known = names if isinstance(names, dict) else {}
            for index, item in enumerate(value):
                if isinstance(item, str) and item not in known:
                    yield pointer(*at, key, index), item, False, None
            continue
        if key not in (_SCHEMA_KEYWORDS if schema else _ANNOTATIONS):
            yield pointer(*at, key), key, True, None
        yield value, (*at, key), schema


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


@dataclass(frozen=True, slots=True)
class Marker:
    """A piece of markup taken out of a reading: what kind, and where in the raw string."""

    kind: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Reading:
    """A string as a model reads it (`text`), each character's offset in the raw string
    (`origin`), and the markup taken out of it (`markers`)."""

    raw: str
    text: str
    origin: tuple[int, ...]
    markers: tuple[Marker, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The raw span of `text[start:end]` (clamped to the text, never empty)."""
        size = len(self.origin)
        if not size:
            return (0, 0)
        start = min(max(start, 0), size - 1)
        end = min(max(end, start + 1), size)
        first, last = self.origin[start], self.origin[end - 1]
        return (first, max(last + 1, first))


# Markup that frames text as coming from the system, not from a tool's author. The text
# inside stays; only the frame is taken out.
_MARKUP: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "chat-template token",
        re.compile(
            r"<\|[a-z_]{2,20}\|>|<\|/[a-z_]{2,20}\|>|\[/?inst\]|<</?sys>>|<(?:start|end)_of_turn>"
            r"|^#{2,3} ?(?:instruction|response|system|user|assistant|human):",
            re.M,
        ),
    ),
    (
        "pseudo-system tag",
        re.compile(
            r"<\s*/?\s*[a-z_][\w:-]*(?:important|system|instruction|secret|hidden|admin|critical"
            r"|override|global|priority|urgent|mandatory|require|note|assistant|directive|policy"
            r"|context|prompt|warning|internal|sys|inst)[\w:-]*(?:\s[^<>]{0,200})?\s*/?\s*>"
            # A tag named in several words (`<Mandatory Dev Security Protocol>`).
            r"|<\s*/?\s*(?:[a-z_][\w-]*\s+){1,4}[\w-]*?(?:important|system|instructions?"
            r"|security|protocol|mandatory|requirements?|directive|policy|override|admin"
            r"|critical)[\w-]*\s*>"
            r"|<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|critical|override"
            r"|global|ai|llm|model|assistant|note|sys|inst|shadow|internal)\s*(?:\s[^<>]{0,200})?>",
        ),
    ),
    (
        "bracket marker",
        re.compile(
            r"\[{1,3}\s*/?\s*(?:system|important|instructions?|admin|hidden|shadow|critical"
            r"|override|internal|secret|note to [a-z]+|do not show[^\]\n]{0,40}|hidden instruction)"
            r"(?:\s+(?:message|note|prompt|instruction|override))?\s*(?::|\]{1,3})"
            r"|\]{2,3}|\[{2,3}",
        ),
    ),
    (
        "banner",
        re.compile(
            r"^\s*#{1,6}\s*(?:system|important|critical|instructions?|requirements?|override|admin"
            r"|note)\b[^\n]*$"
            r"|-{3,}\s*(?:critical|system|important|override|admin)[^\n-]{0,60}-{3,}"
            r"|#{3}\s*(?:system|important|critical)[^\n#]{0,60}#{3}"
            # "SYSTEM NOTE FOR THE ASSISTANT:", "System directive:" opening a paragraph.
            r"|(?:^|(?<=[.!?]\s))\s*system (?:note|notice|directive|override|alert|update"
            r"|(?:message|instruction)s? for (?:the )?(?:ai|assistant|model|llm|agent))\b"
            r"[^:\n]{0,40}:",
            re.M,
        ),
    ),
    (
        # The same words framed by other delimiters: `**SYSTEM NOTICE:**`, `{{SYSTEM}}`,
        # `>>> ADMIN NOTICE <<<`, `==== ADMIN ====`.
        "delimited marker",
        re.compile(
            # Not `**Important:**` or `**Note:**`: honest Markdown docs bold those.
            r"(?:\*\*|\{\{|>{3}|={3,}|\|{2,}|%{3})\s*/?\s*(?:system|override|instructions?"
            r"|hidden|secret|internal|note to (?:the )?(?:ai|assistant|model|llm)|end"
            # "**Admin GraphQL**" names an API; an admin notice is a frame.
            r"|admin(?=\s+(?:notice|override|instructions?|message|mode)|\s*(?:={3}|<{3}|\}\})))\b"
            r"[^*{}<>=|%\n]{0,40}?"
            r"(?:\*\*|\}\}|<{3}|={3,}|\|{2,}|%{3})",
        ),
    ),
    (
        # A chat turn opened inside a description: "Human: …", "Assistant: …", "System: …".
        "chat-template token",
        re.compile(r"(?:^|(?<=\n))\s*(?:human|assistant|system)\s*:", re.M),
    ),
    ("html comment", re.compile(r"<!--|-->")),
    (
        # An element styled not to render: what it holds reaches the model, not the reader.
        "hidden html",
        re.compile(
            r"<\s*[a-z][\w-]*\s[^<>]{0,200}?style\s*=\s*[\"'][^\"'<>]{0,200}?(?:display\s*:\s*none"
            r"|visibility\s*:\s*hidden|font-size\s*:\s*0(?:px|pt|em)?\b|opacity\s*:\s*0(?:\.0+)?\b)"
            r"[^<>]{0,200}>"
        ),
    ),
    (
        "json injection key",
        re.compile(
            r"\"_?(?:system|instruction|prompt|priority|override|injection|hidden|command)"
            r"[\w-]{0,30}\"\s*:",
        ),
    ),
)


def read(raw: str) -> Reading:
    """The reading of `raw`: see the module docstring."""
    chars, origin = _fold(raw)
    text = "".join(chars)
    markers: list[Marker] = []
    blank = list(text)
    for kind, pattern in _MARKUP:
        for match in pattern.finditer(text):
            if match.end() == match.start():
                continue
            start, end = origin[match.start()], origin[match.end() - 1] + 1
            markers.append(Marker(kind, start, end))
            blank[match.start() : match.end()] = " " * (match.end() - match.start())
            if kind == "bracket marker" and match.group().endswith(":"):
                # `[SYSTEM: …]` opens with the marker; its closing bracket is markup too.
                close = text.find("]", match.end())
                if close >= 0:
                    markers.append(Marker(kind, origin[close], origin[close] + 1))
                    blank[close] = " "
    out, kept = _collapse("".join(blank), origin)
    return Reading(raw, out, tuple(kept), tuple(sorted(markers, key=lambda m: m.start)))


def _fold(raw: str) -> tuple[list[str], list[int]]:
    """Per character of `raw`: NFKC, hidden characters dropped, look-alikes inside
    mixed-script words mapped to Latin, lower case; with each output character's origin."""
    text = html.unescape(raw) if "&" in raw else raw
    # html.unescape can shorten the text; offsets then refer to the unescaped string, which
    # is as close to the raw one as a reviewer needs.
    mixed = _mixed_script_words(text)
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if index in mixed:
            char = latin_lookalike(char) or char
        for out in _folded(char):
            chars.append(out)
            origin.append(index)
    return chars, origin


@functools.lru_cache(maxsize=8192)
def _folded(char: str) -> str:
    """One character as read: nothing if it renders as nothing, else NFKC and lower case;
    a typographic apostrophe is the ASCII one ("don’t" is "don't" to a model)."""
    if char in _APOSTROPHES:
        return "'"
    return "" if is_hidden(char) else unicodedata.normalize("NFKC", char).lower()


_APOSTROPHES = frozenset("\u2018\u2019\u02bc")


def _mixed_script_words(text: str) -> frozenset[int]:
    """Offsets of the characters inside words posing as Latin: words that mix Latin with
    another script, and — in mostly Latin text — words spelled wholly in look-alikes
    (Cyrillic "сору"). Only there is a Cyrillic 'о' an 'o' in disguise; Russian text stays
    Russian."""
    letters = [c for c in text if c.isalpha()]
    latin = sum(script_of(c) == "LATIN" for c in letters)
    mostly_latin = latin * 2 > len(letters)
    inside: set[int] = set()
    for match in re.finditer(r"\w+", text):
        word = [c for c in match.group() if c.isalpha()]
        scripts = {script_of(c) for c in word}
        mixed = "LATIN" in scripts and len(scripts) > 1
        disguised = mostly_latin and word and all(latin_lookalike(c) for c in word)
        if mixed or disguised:
            inside.update(range(match.start(), match.end()))
    return frozenset(inside)


def _collapse(text: str, origin: list[int]) -> tuple[str, list[int]]:
    """Every run of white space becomes one space (a line break is layout, not meaning, to
    the checks); leading and trailing blanks go."""
    out: list[str] = []
    kept: list[int] = []
    for char, at in zip(text, origin, strict=True):
        if char.isspace():
            if not out or out[-1] == " ":
                continue
            char = " "
        out.append(char)
        kept.append(at)
    if out and out[-1] == " ":
        out.pop()
        kept.pop()
    return "".join(out), kept


_BASE64_RUN = re.compile(r"(?<![\w+/])[A-Za-z0-9+/_-]{20,}={0,2}(?![\w+/=])")
_HEX_RUN = re.compile(
    r"(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}(?:[ :]|(?=[0-9a-fA-F]))){11,}[0-9a-fA-F]{2}(?![0-9a-fA-F])"
)


# Percent-encoding (six escapes or more: a URL's `%20` is not a payload) and string escapes
# (`\\u0069\\u0067…`, `\\x69\\x67…`, four or more), which a model decodes as readily as base64.
_URL_RUN = re.compile(r"(?:[\w.~+-]{0,3}%[0-9a-fA-F]{2}){6,}[\w.~+-]*")
_ESCAPE_RUN = re.compile(
    r"(?:(?:\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|\\U[0-9a-fA-F]{8})[^\\\s\"']{0,3}){4,}"
)
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\U([0-9a-fA-F]{8})")


# Base32 (RFC 4648 alphabet, upper case as encoders write it), bytes written as groups of
# eight binary digits, and character codes written as decimal numbers (`73 103 110 …`): a
# model decodes all three as readily as base64.
_BASE32_RUN = re.compile(r"(?<![\w+/])[A-Z2-7]{16,}={0,6}(?![\w+/=])")
_BINARY_RUN = re.compile(r"(?<![01])(?:[01]{8}[ ,]?){4,}(?![01])")
_CODE = r"(?:3[2-9]|[4-9]\d|1[01]\d|12[0-6])"
_DECIMAL_RUN = re.compile(rf"(?<![\d.])(?:{_CODE}[ ,]{{1,2}}){{7,}}{_CODE}(?![\d.])")


def encoded_runs(raw: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, decoded text) for each base64, base32, hex, binary, decimal-code,
    percent-encoded or escaped run in `raw` that decodes to readable text. A model can decode
    such a run and read what a reviewer cannot; hashes, ids and other binary encodings decode
    to noise and are left alone."""
    for pattern, decode in (
        (_HEX_RUN, _from_hex),
        (_BASE64_RUN, _from_base64),
        (_BASE32_RUN, _from_base32),
        (_BINARY_RUN, _from_binary),
        (_DECIMAL_RUN, _from_decimal),
        (_URL_RUN, _from_percent),
        (_ESCAPE_RUN, _from_escapes),
    ):
        for match in pattern.finditer(raw):
            decoded = decode(match.group())
            if decoded is not None and _readable(decoded):
                yield match.start(), match.end(), decoded


def _from_hex(run: str) -> str | None:
    try:
        return bytes.fromhex(re.sub(r"[ :]", "", run)).decode("utf-8")
    except ValueError:
        return None


def _from_base32(run: str) -> str | None:
    stripped = run.rstrip("=")
    try:
        return base64.b32decode(stripped + "=" * (-len(stripped) % 8)).decode("utf-8")
    except (ValueError, binascii.Error):
        return None


def _from_binary(run: str) -> str | None:
    try:
        return bytes(int(b, 2) for b in re.findall(r"[01]{8}", run)).decode("utf-8")
    except ValueError:
        return None


def _from_decimal(run: str) -> str | None:
    return "".join(chr(int(n)) for n in re.findall(r"\d+", run))


def _from_percent(run: str) -> str | None:
    try:
        return urllib.parse.unquote_plus(run, errors="strict")
    except UnicodeDecodeError:
        return None


def _from_escapes(run: str) -> str | None:
    """`\\u` and four hex digits as a code point, `\\x` and two as a UTF-8 byte, the rest as is."""
    out = bytearray()
    at = 0
    for match in _ESCAPE.finditer(run):
        out += run[at : match.start()].encode("utf-8", "surrogatepass")
        wide, byte, long = match.groups()
        if byte is not None:
            out.append(int(byte, 16))
        else:
            code = int(wide or long, 16)
            if code > 0x10FFFF:
                return None
            out += chr(code).encode("utf-8", "surrogatepass")
        at = match.end()
    out += run[at:].encode("utf-8", "surrogatepass")
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _from_base64(run: str) -> str | None:
    stripped = run.rstrip("=")
    padded = stripped + "=" * (-len(stripped) % 4)
    altchars = b"-_" if "-" in run or "_" in run else None
    try:
        return base64.b64decode(padded, altchars=altchars, validate=True).decode("utf-8")
    except (ValueError, binascii.Error):
        return None


def _readable(text: str) -> bool:
    """Whether decoded bytes are text a model would read: printable, mostly letters and
    spaces, more than one word with a space between (noise decoded from a hash or a list
    of numbers has letters but no spaces)."""
    if not text or any(not ch.isprintable() and ch not in "\n\t" for ch in text):
        return False
    # Paths and punctuation count for a little: "read ~/.ssh/id_rsa" is text a model reads.
    letters = sum(ch.isalpha() or ch.isspace() for ch in text)
    return (
        letters >= 0.65 * len(text)
        and len(re.findall(r"[^\W\d_]{2,}", text)) >= 2
        and any(ch.isspace() for ch in text.strip())
    )


def fold(text: str) -> str:
    """The reading's text alone, for short strings such as parameter names."""
    return read(text).text


def humanize(name: str) -> str:
    """An identifier as words: ``contentFromReading_ssh-key`` → ``content From Reading ssh key``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|[_\-.:/]+", " ", name)


def excerpt(raw: str, span: tuple[int, int], width: int = 90) -> str:
    """The raw text of `span` with a little context, on one line, for a finding's message."""
    start, end = span
    left = max(0, start - 15)
    right = min(len(raw), max(end, start + 1) + 15)
    piece = " ".join(raw[left:right].split())
    return repr(piece if len(piece) <= width else piece[: width - 1] + "…")
