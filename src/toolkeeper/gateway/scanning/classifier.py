"""A second opinion on a tool definition: a small logistic regression over hashed word and
character n-grams of the definition as a model reads it.

Off by default and never a substitute for the rules: an upstream's `scan_classifier = true`
(`scan_tool(..., classifier=True)`) adds its opinion as one medium-severity `classifier`
finding (it warns, it does not block, unless an upstream's ``scan`` setting makes the class
block), and `benchmarks/scanner_eval.py
--classifier` reports its figures apart from the rules'. Its weights ship inside the package
(`classifier_weights.npz`, trained by `scripts/train_scanner_classifier.py` on the tuning
material only); nothing is downloaded and nothing but numpy runs.

Features: every string a model reads (`text.strings`), folded as the rules read it
(`text.read`: NFKC, invisible characters and look-alikes undone, lower case, markup taken
out), plus one token per kind of markup met. From that text: word unigrams and bigrams and
character 3- to 5-grams inside word boundaries, each hashed (CRC-32) into 2**16 signed
buckets, counts log-scaled and the vector L2-normalized. The finding names the word n-grams
that pushed the score up most, and the span of the first of them in the description.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from toolkeeper.gateway.scanning.text import humanize, read, strings

BITS = 16
DIM = 1 << BITS
WEIGHTS_FILE = "classifier_weights.npz"
_WORD = re.compile(r"[^\W_]+|[~/.$%@:<>|\[\]{}#`'\"]")


def _words(tool: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The word tokens of the definition and the markup kinds met, as the model reads them."""
    words: list[str] = []
    kinds: list[str] = []
    for _, raw, is_name in strings(tool):
        reading = read(humanize(raw) if is_name else raw[: 1 << 15])
        words.extend(_WORD.findall(reading.text))
        words.append("\n")
        kinds.extend(m.kind for m in reading.markers)
    return words, kinds


def grams(tool: Mapping[str, Any]) -> Iterator[str]:
    """Every feature string of `tool`: word 1- and 2-grams, character 3- to 5-grams of each
    word (with boundary marks), and the markup kinds."""
    words, kinds = _words(tool)
    for kind in kinds:
        yield f"markup:{kind}"
    previous = "\n"
    for word in words:
        if word == "\n":
            previous = "\n"
            continue
        yield f"w:{word}"
        yield f"b:{previous} {word}"
        previous = word
        padded = f"<{word}>"
        for size in (3, 4, 5):
            for start in range(max(len(padded) - size + 1, 0)):
                yield f"c:{padded[start : start + size]}"


@functools.lru_cache(maxsize=1 << 16)
def _bucket(feature: str) -> tuple[int, float]:
    code = zlib.crc32(feature.encode("utf-8"))
    return code & (DIM - 1), (1.0 if code >> 31 else -1.0)


def vector(tool: Mapping[str, Any]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The sparse feature vector of `tool`: bucket indices and values (log counts, signed,
    L2-normalized)."""
    counts: dict[int, float] = {}
    for feature in grams(tool):
        index, sign = _bucket(feature)
        counts[index] = counts.get(index, 0.0) + sign
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    buckets = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    raw = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    values = np.sign(raw) * np.log1p(np.abs(raw))
    norm = float(np.linalg.norm(values)) or 1.0
    return buckets, values / norm


@dataclass(frozen=True, slots=True)
class Model:
    """Weights over the hashed buckets, a bias, and the probability at which it objects."""

    weights: npt.NDArray[np.float64]
    bias: float
    threshold: float

    def probability(self, tool: Mapping[str, Any]) -> float:
        index, values = vector(tool)
        score = float(values @ self.weights[index]) + self.bias
        return float(1.0 / (1.0 + np.exp(-score)))

    def reasons(self, tool: Mapping[str, Any], count: int = 3) -> list[str]:
        """The word n-grams of `tool` that raise its score most."""
        weight: dict[str, float] = {}
        for feature in grams(tool):
            if feature[:2] in ("w:", "b:") and "\n" not in feature:
                index, sign = _bucket(feature)
                weight[feature[2:]] = sign * float(self.weights[index])
        ranked = sorted(weight.items(), key=lambda item: -item[1])
        return [text for text, value in ranked[:count] if value > 0]


@functools.lru_cache(maxsize=1)
def load() -> Model:
    """The model shipped with the package."""
    with resources.files(__package__).joinpath(WEIGHTS_FILE).open("rb") as handle:
        data = np.load(handle)
        return Model(
            data["weights"].astype(np.float64), float(data["bias"]), float(data["threshold"])
        )


@dataclass(frozen=True, slots=True)
class Opinion:
    """What the classifier thinks of one definition."""

    probability: float
    objects: bool
    reasons: tuple[str, ...]


def opinion(tool: Mapping[str, Any], model: Model | None = None) -> Opinion:
    """The classifier's opinion of `tool`."""
    model = model or load()
    probability = model.probability(tool)
    objects = probability >= model.threshold
    return Opinion(probability, objects, tuple(model.reasons(tool)) if objects else ())
