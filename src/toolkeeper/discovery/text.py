"""What a tool says about itself, as search terms: fields, words, stems and synonyms.

A contract becomes a `ToolText`: its fields (name, description, when to use, parameters,
examples, tags) as plain text, for the plain-BM25 baseline and the embedding ranker, and as
weighted terms for the default ranker. `terms` splits identifiers (``getWeather``,
``get_weather``, ``get-weather``), lowercases, drops English stop words and stems with the
Snowball stemmer, so "forecasts" meets "forecast" and ``list_files`` meets "listing files".
Field weights repeat a field's terms (the usual BM25F approximation): a word in the name says
more about a tool than the same word deep in a parameter description.

Derived synonyms add the common other words for a tool's actions and objects ("delete" also
finds "remove", "erase"; "get" also "fetch", "retrieve"). The table is written by hand from
general usage — not from any evaluation query — and is applied on the document side only, so
a query is never rewritten.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import Stemmer
from bm25s.stopwords import STOPWORDS_EN_PLUS

from toolkeeper.contract.model import ToolContract

FIELD_WEIGHTS: Mapping[str, int] = {
    "name": 3,
    "description": 2,
    "when_to_use": 1,
    "parameters": 1,
    "examples": 1,
    "tags": 2,
    "synonyms": 1,
    "prefixes": 1,
}
"""How many times each field's terms count (chosen on the tuning split, docs/discovery.md)."""

PREFIX = 5
"""Characters of a long stem kept as its prefix term."""
_MAX_FIELD_CHARS = 4_000
"""Text kept per field: a huge description cannot make indexing or a search slow."""
_MAX_SCHEMA_NODES = 200
"""Schema nodes walked for parameter names and descriptions, however deep the schema."""

_STOPWORDS = frozenset(STOPWORDS_EN_PLUS) | {
    # words every tool description and request carries, which tell no tool from another
    "tool",
    "function",
    "use",
    "used",
    "using",
    "given",
    "specified",
    "specific",
    "please",
    "want",
    "need",
    "like",
    "help",
    "would",
    "could",
    "return",
    "returns",
}

_SYNONYM_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get", "fetch", "retrieve", "read", "obtain", "lookup", "look", "show", "view", "find"),
    ("list", "enumerate", "browse", "all"),
    ("search", "find", "query", "lookup", "look"),
    ("create", "add", "make", "new", "insert", "register", "open"),
    ("delete", "remove", "erase", "drop", "destroy", "purge", "cancel"),
    ("update", "modify", "edit", "change", "set", "alter", "patch", "adjust"),
    ("send", "post", "submit", "deliver", "notify", "message"),
    ("email", "mail", "message"),
    ("calculate", "compute", "calc", "determine", "estimate", "evaluate"),
    ("convert", "transform", "translate", "change"),
    ("book", "reserve", "reservation", "schedule"),
    ("buy", "purchase", "order", "pay"),
    ("weather", "forecast", "temperature", "climate"),
    ("stock", "share", "ticker", "equity"),
    ("price", "cost", "fee", "rate", "quote"),
    ("user", "account", "member", "customer", "person"),
    ("file", "document", "doc"),
    ("directory", "folder", "dir"),
    ("image", "picture", "photo"),
    ("video", "movie", "film"),
    ("song", "music", "track", "audio"),
    ("car", "vehicle", "automobile"),
    ("flight", "airline", "plane", "fly"),
    ("hotel", "lodging", "accommodation", "room"),
    ("restaurant", "dining", "food", "eat"),
    ("location", "place", "address", "city", "where"),
    ("distance", "route", "directions", "travel"),
    ("time", "date", "day", "when"),
    ("money", "currency", "exchange"),
    ("issue", "ticket", "bug"),
    ("repository", "repo", "project"),
    ("run", "execute", "start", "launch", "invoke"),
    ("stop", "halt", "kill", "terminate", "end"),
    ("count", "number", "total", "how many"),
    ("area", "size", "dimension"),
    ("population", "people", "inhabitants"),
    ("translate", "translation", "language"),
    ("summary", "summarize", "overview"),
)


@functools.cache
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


_WORD = re.compile(
    # One pass, no Python loop per word: a capitalized or lowercase run (``Weather``,
    # ``get``, ``straße``: every letter but A-Z counts as lowercase), an acronym before its
    # plural ``s`` (``PDF`` of ``PDFs``, not ``PD`` and ``Fs``; the lone ``s`` left is no
    # term), an acronym not followed by a lowercase run (``HTTP`` in ``HTTPServer``), or
    # digits.
    r"[A-Z]?[^\W\dA-Z_]+|[A-Z]{2,}(?=s(?![^\W\dA-Z_]))|[A-Z]+(?![^\W\dA-Z_])|\d+"
)


def words(text: str) -> list[str]:
    """`text` split into lowercase words: identifiers at case humps, ``_``, ``-``, ``.``
    and digits. Compatibility forms are read as what they stand for first (NFKC: full-width
    ``ＷＥＡＴＨＥＲ`` is ``WEATHER``, the ligature in ``ﬁle`` is ``fi``), as a model reads
    them."""
    return [
        w.lower() for w in _WORD.findall(unicodedata.normalize("NFKC", text[:_MAX_FIELD_CHARS]))
    ]


@functools.lru_cache(maxsize=65_536)
def _terms(text: str) -> tuple[str, ...]:
    kept = [w for w in words(text) if w not in _STOPWORDS and (len(w) > 1 or w.isdigit())]
    return tuple(_stemmer().stemWords(kept)) if kept else ()


def terms(text: str) -> list[str]:
    """The search terms of `text`: its `words` without stop words, stemmed. (Cached per
    text: catalogs repeat parameter descriptions, and queries repeat.)"""
    return list(_terms(text))


@functools.cache
def _synonyms() -> Mapping[str, tuple[str, ...]]:
    """Stem → the stems of its other words, over every group it is in."""
    table: dict[str, set[str]] = {}
    for group in _SYNONYM_GROUPS:
        stems = [s for word in group for s in terms(word)]
        for stem in stems:
            table.setdefault(stem, set()).update(s for s in stems if s != stem)
    return {stem: tuple(sorted(others)) for stem, others in table.items()}


def synonyms(found: list[str]) -> list[str]:
    """The derived synonyms of terms `found` (each once, none already found)."""
    have = set(found)
    table = _synonyms()
    extra: dict[str, None] = {}
    for stem in dict.fromkeys(found):
        for other in table.get(stem, ()):
            if other not in have:
                extra[other] = None
    return list(extra)


@dataclass(frozen=True, slots=True)
class ToolText:
    """One contract as search text: every field, plain and as weighted terms."""

    fields: Mapping[str, str]
    """Field → plain text (`FIELD_WEIGHTS` names, synonyms excepted)."""
    terms: tuple[str, ...]
    """The default ranker's document: each field's terms repeated by its weight."""

    @property
    def plain(self) -> str:
        """Every field as one text: what plain BM25 and the embedding ranker read."""
        return "\n".join(text for text in self.fields.values() if text)


def tool_text(contract: ToolContract, tags: tuple[str, ...] = ()) -> ToolText:
    """The search text of `contract`, with the discovery `tags` it carries."""
    fields = {
        "name": contract.id,
        "description": contract.description,
        "when_to_use": contract.when_to_use or "",
        "parameters": " ".join(_schema_words(contract.input_schema)),
        "examples": " ".join(_example_words(contract)),
        "tags": " ".join(tags),
    }
    fields = {name: text[:_MAX_FIELD_CHARS] for name, text in fields.items()}
    weighted: list[str] = []
    found: list[str] = []
    for name, text in fields.items():
        field_terms = terms(text)
        found.extend(field_terms)
        weighted.extend(field_terms * FIELD_WEIGHTS[name])
    weighted.extend(synonyms(found) * FIELD_WEIGHTS["synonyms"])
    weighted.extend(prefixes(found) * FIELD_WEIGHTS["prefixes"])
    return ToolText(fields, tuple(weighted))


def prefixes(found: list[str]) -> list[str]:
    """Prefix terms of long stems (``~watch`` for ``watchlist`` and ``watching``), each
    once: compounds and derived words meet their stem, as Lucene's edge n-grams do."""
    return list(dict.fromkeys(f"~{stem[:PREFIX]}" for stem in found if len(stem) > PREFIX))


def query_weights(query: str) -> dict[str, float]:
    """A query's terms (its `terms` and their `prefixes`), each with its weight: 1 + ln of
    how often the query says it. A long conversational request repeats its words ("exchange
    the lamp … only exchange the lamp … exchange anything"), and BM25 would count each
    repetition in full, so one repeated word would outweigh the rest of the request;
    sublinear weighting (as in SMART's ``l`` query weighting) keeps a repeated word ahead
    without letting it drown the others.

    A number of two digits or more is left out: in a request it is a value (an amount, a
    date, a zip code, an order id), not what a tool does, and a tool whose text happens to
    hold the same number (an example, a default) is no better a match for it. Single digits
    stay, as they are often part of a name (``mp3``, ``ec2``, ``3d``). A request of nothing
    but numbers keeps them: the number is then what the caller searches by."""
    every = terms(query)
    found = [t for t in every if not (t.isdigit() and len(t) > 1)] or every
    counts: dict[str, int] = {}
    for term in found + prefixes(found):
        counts[term] = counts.get(term, 0) + 1
    return {term: 1.0 + math.log(count) for term, count in counts.items()}


def _schema_words(schema: Any) -> Iterator[str]:
    """Parameter names, titles, descriptions and enum values, breadth first, bounded."""
    queue: list[Any] = [schema]
    seen = 0
    while queue and seen < _MAX_SCHEMA_NODES:
        node = queue.pop(0)
        seen += 1
        if isinstance(node, list):
            queue.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key in ("title", "description"):
            if isinstance(node.get(key), str):
                yield node[key]
        enum = node.get("enum")
        if isinstance(enum, list):
            yield " ".join(str(value) for value in enum[:20])
        properties = node.get("properties")
        if isinstance(properties, dict):
            for name, sub in properties.items():
                yield str(name)
                queue.append(sub)
        for key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties", "$defs"):
            sub = node.get(key)
            if isinstance(sub, dict) and key == "$defs":
                queue.extend(sub.values())
            elif sub is not None:
                queue.append(sub)


def _example_words(contract: ToolContract) -> Iterator[str]:
    for example in contract.examples:
        if example.description:
            yield example.description
        for name, value in example.arguments.items():
            yield str(name)
            if isinstance(value, str):
                yield value


__all__ = [
    "FIELD_WEIGHTS",
    "ToolText",
    "query_weights",
    "synonyms",
    "terms",
    "tool_text",
    "words",
]
