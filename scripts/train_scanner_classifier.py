"""Train the scanner's optional second-opinion classifier and estimate how it generalizes.

Run (from the repository root):

    PYTHONPATH=$PWD/src python scripts/train_scanner_classifier.py [--loso] [--write]

Trains on the tuning material only — tests/gateway/corpus/eval/{tuning,report,report2,
report3,report4}.jsonl, the regression corpus (poisoned.json, benign.json) and the
paraphrase sets — never on a held-out set. `--loso` estimates generalization by leaving one
*source* out at a time (a repository, package or named origin; each of our own files counts as
one source): the model is trained on every other source and scores the one left out, so
a rule of thumb fitted to one lab's phrasing is not rewarded on the same lab. That figure is a
cross-validation estimate over seen material, not a held-out figure. `--write` stores the
model fitted on everything in src/toolkeeper/gateway/scanning/classifier_weights.npz.

The model: logistic regression over the hashed features of `classifier.vector`, classes
weighted to balance, L2-regularized, fitted by full-batch Adam; deterministic (no random
state), so the same data gives the same weights.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from toolkeeper.gateway.scanning import classifier

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "gateway" / "corpus"
SPLITS = ("tuning", "report", "report2", "report3", "report4")
OUT = ROOT / "src" / "toolkeeper" / "gateway" / "scanning" / classifier.WEIGHTS_FILE
L2 = 1e-4
STEPS = 250
THRESHOLD = 0.5


@dataclass(frozen=True, slots=True)
class Example:
    source: str
    split: str
    poisoned: bool
    technique: str
    tool: dict[str, Any]


def examples() -> list[Example]:
    """Every item of the tuning material, with the source it came from."""
    out: list[Example] = []
    for split in SPLITS:
        for line in (CORPUS / "eval" / f"{split}.jsonl").read_text().splitlines():
            raw = json.loads(line)
            src = raw.get("source", {})
            source = (
                src.get("repo") or src.get("package") or src.get("origin") or src.get("index_id")
            )
            poisoned = raw["label"] == "poisoned"
            out.append(
                Example(
                    str(source or raw["server"]),
                    split,
                    poisoned,
                    raw.get("technique", "benign") if poisoned else "benign",
                    raw["tool"],
                )
            )
    for entry in json.loads((CORPUS / "poisoned.json").read_text())["entries"]:
        tool = entry["after"] if entry["class"] == "rug_pull" else entry["tool"]
        out.append(Example("ours:regression", "regression", True, entry["class"], tool))
    for tools in json.loads((CORPUS / "benign.json").read_text())["servers"].values():
        out.extend(Example("ours:regression", "regression", False, "benign", t) for t in tools)
    for file in ("paraphrases.json", "paraphrases_unfitted.json"):
        data = json.loads((CORPUS / file).read_text())
        source = f"ours:{file}"
        for entry in data["poisoned"]:
            out.append(Example(source, file, True, entry["technique"], entry["tool"]))
        for entry in data["benign"]:
            out.append(Example(source, file, False, "benign", entry["tool"]))
    return out


@dataclass(frozen=True, slots=True)
class Matrix:
    """A sparse design matrix in coordinate form."""

    rows: npt.NDArray[np.int64]
    cols: npt.NDArray[np.int64]
    vals: npt.NDArray[np.float64]
    size: int

    def take(self, keep: npt.NDArray[np.bool_]) -> Matrix:
        renumber = np.cumsum(keep) - 1
        mask = keep[self.rows]
        return Matrix(renumber[self.rows[mask]], self.cols[mask], self.vals[mask], int(keep.sum()))

    def dot(self, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.bincount(self.rows, self.vals * w[self.cols], minlength=self.size)

    def tdot(self, g: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.bincount(self.cols, self.vals * g[self.rows], minlength=classifier.DIM)


def design(items: Sequence[Example]) -> Matrix:
    rows, cols, vals = [], [], []
    for row, item in enumerate(items):
        index, values = classifier.vector(item.tool)
        rows.append(np.full(len(index), row, dtype=np.int64))
        cols.append(index)
        vals.append(values)
    return Matrix(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), len(items))


def fit(x: Matrix, y: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], float]:
    """Class-balanced, L2-regularized logistic regression by full-batch Adam."""
    positives = max(float(y.sum()), 1.0)
    negatives = max(float(len(y) - y.sum()), 1.0)
    weight = np.where(y > 0, 0.5 / positives, 0.5 / negatives)
    w = np.zeros(classifier.DIM)
    b = 0.0
    m_w, v_w = np.zeros_like(w), np.zeros_like(w)
    m_b = v_b = 0.0
    rate, beta1, beta2, eps = 0.05, 0.9, 0.999, 1e-8
    for step in range(1, STEPS + 1):
        p = 1.0 / (1.0 + np.exp(-(x.dot(w) + b)))
        g = weight * (p - y)
        grad_w = x.tdot(g) + L2 * w
        grad_b = float(g.sum())
        m_w = beta1 * m_w + (1 - beta1) * grad_w
        v_w = beta2 * v_w + (1 - beta2) * grad_w**2
        m_b = beta1 * m_b + (1 - beta1) * grad_b
        v_b = beta2 * v_b + (1 - beta2) * grad_b**2
        correction1, correction2 = 1 - beta1**step, 1 - beta2**step
        w -= rate * (m_w / correction1) / (np.sqrt(v_w / correction2) + eps)
        b -= rate * (m_b / correction1) / (np.sqrt(v_b / correction2) + eps)
    return w, b


def loso(
    items: Sequence[Example], x: Matrix, y: npt.NDArray[np.float64], *, progress: bool = False
) -> None:
    """Leave one source out: every item scored by a model that never saw its source."""
    sources = np.array([item.source for item in items])
    scores = np.zeros(len(items))
    for number, source in enumerate(sorted(set(sources)), 1):
        if progress:
            print(f"  fold {number}: {source}", file=sys.stderr, flush=True)
        held = sources == source
        w, b = fit(x.take(~held), y[~held])
        scores[held] = 1.0 / (1.0 + np.exp(-(x.take(held).dot(w) + b)))
    print(f"leave-one-source-out over {len(set(sources))} sources (seen material; an estimate,")
    print("not a held-out figure), threshold", THRESHOLD)
    blocked = scores >= THRESHOLD
    _summary("ALL (public + ours)", items, blocked, lambda _: True)
    _summary("public only", items, blocked, lambda i: not i.source.startswith("ours:"))
    for split in (*SPLITS, "regression", "paraphrases.json", "paraphrases_unfitted.json"):
        _summary(split, items, blocked, lambda i, s=split: i.split == s)  # type: ignore[misc]
    print("  other thresholds (public only):")
    for threshold in (0.6, 0.7, 0.8, 0.9):
        _summary(
            f"threshold {threshold}",
            items,
            scores >= threshold,
            lambda i: not i.source.startswith("ours:"),
        )
    print("  per technique (public only):")
    techniques = sorted(
        {i.technique for i in items if i.poisoned and not i.source.startswith("ours:")}
    )
    for technique in techniques:
        group = [
            k
            for k, i in enumerate(items)
            if i.poisoned and i.technique == technique and not i.source.startswith("ours:")
        ]
        hit = int(blocked[group].sum())
        print(f"    {technique:<24} {hit:>3}/{len(group):<3} {hit / len(group):6.1%}")


def _summary(label: str, items: Sequence[Example], blocked: Any, chosen: Any) -> None:
    poisoned = [k for k, i in enumerate(items) if chosen(i) and i.poisoned]
    benign = [k for k, i in enumerate(items) if chosen(i) and not i.poisoned]
    hit = int(blocked[poisoned].sum()) if poisoned else 0
    false = int(blocked[benign].sum()) if benign else 0
    print(
        f"  {label:<26} poisoned {hit:>4}/{len(poisoned):<4} "
        f"({hit / max(len(poisoned), 1):6.1%})  benign {false:>4}/{len(benign):<4} "
        f"({false / max(len(benign), 1):5.1%})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loso", action="store_true", help="leave-one-source-out estimate")
    parser.add_argument("--progress", action="store_true", help="name each fold on stderr")
    parser.add_argument("--write", action="store_true", help=f"store the model in {OUT.name}")
    args = parser.parse_args(argv)
    items = examples()
    x = design(items)
    y = np.array([1.0 if item.poisoned else 0.0 for item in items])
    print(f"{len(items)} items, {int(y.sum())} poisoned, {len({i.source for i in items})} sources")
    if args.loso:
        loso(items, x, y, progress=args.progress)
    if args.write:
        w, b = fit(x, y)
        np.savez_compressed(
            OUT, weights=w.astype(np.float16), bias=np.float64(b), threshold=np.float64(THRESHOLD)
        )
        print(f"wrote {OUT.relative_to(ROOT)} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
