"""How well the upstream injection scan generalizes: blocked rates per set and technique.

Run: python benchmarks/scanner_eval.py [--misses] [--classifier] [--split regression|...]

Ten sets, printed separately and never pooled:

* regression — our own corpus (tests/gateway/corpus/{poisoned,benign}.json), the one the
  scanner was first written against; it guards against regressions and says nothing about
  generalization.
* paraphrases — also ours (tests/gateway/corpus/paraphrases.json): each technique reworded
  many ways (vocabulary, word order, person, tense, split between description and parameter),
  and benign hard negatives. Written to make the checks read meaning rather than strings; a
  regression set, not an evaluation.
* paraphrases-unfitted — a fifth and a seventh batch of ours (paraphrases_unfitted.json), each
  written after the batches before it were fitted and never tuned on: how our rules carry over
  to wording they have not seen. Still our own wording, so no substitute for a held-out public
  set.
* tuning — public definitions written by others (tests/gateway/corpus/eval/tuning.jsonl);
  the checks are tuned on it.
* report — public definitions from other sources (report.jsonl), held out for the first
  rework; seen since, and tuned on in the third rework: tuning data now.
* report2 — public definitions from sources in none of the above (report2.jsonl), held out
  for the second rework; seen since, and tuned on in the third rework: tuning data now.
* report3 — public definitions from sources in none of the above (report3.jsonl), written
  and committed before the third rework's checks and measured once on them (bb6382c: 47/56
  poisoned, 9/346 benign blocked — the held-out figure to quote). Its misses were then seen
  and fixed, so it is tuning data too from 8b711f2 on.
* report4 — public definitions from sources in none of the above (report4.jsonl), collected
  apart from the fourth rework and measured once on it (766c457: 60/82 poisoned, 17/322 benign
  blocked — the held-out figure to quote). Seen since, and tuned on by the fifth rework:
  tuning data now.
* report5 — public definitions from sources in none of the above (report5.jsonl), collected
  apart from the fifth rework without running the scanner on it, and measured once on it
  (c08be61: 102/127 poisoned, 36/361 benign blocked — the held-out figure to quote; the
  scanner before the fifth rework: 105/127, 34/361). Seen since, and tuned on by the sixth rework.
* report6 — public definitions from sources in none of the above (report6.jsonl), collected
  blind apart from the sixth rework and measured once on it (3e7943d: 93/116 poisoned, 6/338
  benign blocked — the held-out figure to quote; the scanner before the sixth rework: 91/116,
  8/338). Seen since.

With `--classifier`, the optional second opinion (`toolkeeper.gateway.scanning.classifier`)
is reported apart from the rules, per set: how many it objects to alone, and how many the
rules or it would block together. It was trained on every set listed here but report5 and
report6, so
its figures on those are in-sample (how well it fits what it saw), never an estimate of
generalization; the estimates are the leave-one-source-out run of
scripts/train_scanner_classifier.py --loso and its one run on report5 (c08be61: 125/127
poisoned, 111/361 benign flagged).

Next to every rate the benchmark prints the rate of a baseline measured on the same items in
the same run: a scanner keyed on wrappers, blocking a definition exactly when some string of it
carries pseudo-system markup — the approach the third rework replaced.

A definition counts as blocked when the gateway would withhold it from the scan alone: a
finding that blocks under the default actions, or (for a rug pull, whose "after" definition
is scanned) the same. Benign definitions of each set are scanned as one federation (every
server knows every other server's tool names), so shadowing checks meet the same crowd of
names a large deployment would. Goal on the held-out set: >= 95% of poisoned blocked, <= 2%
of benign blocked, every technique >= 90%.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkeeper.gateway.scanning import classifier
from toolkeeper.gateway.scanning.findings import Finding, blocking, scan_tool
from toolkeeper.gateway.scanning.text import read, strings

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "gateway" / "corpus"
SETS = (
    "regression",
    "paraphrases",
    "paraphrases-unfitted",
    "tuning",
    "report",
    "report2",
    "report3",
    "report4",
    "report5",
    "report6",
)


@dataclass(frozen=True, slots=True)
class Item:
    """One definition to scan, with what the set says it is."""

    id: str
    poisoned: bool
    technique: str
    server: str
    tool: dict[str, Any]
    known_tools: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    item: Item
    findings: tuple[Finding, ...]

    @property
    def blocked(self) -> bool:
        return bool(blocking(self.findings, {}))

    @property
    def wrapped(self) -> bool:
        """The baseline: whether any string of the definition carries pseudo-system markup —
        what a scanner keyed on wrappers (`<IMPORTANT>`, `[SYSTEM: …]`) would block."""
        return any(read(raw).markers for _, raw, is_name in strings(self.item.tool) if not is_name)


def load(name: str) -> list[Item]:
    """The items of set `name`; the regression set keeps its own file format."""
    if name == "regression":
        return list(_regression())
    if name == "paraphrases":
        return list(_paraphrases("paraphrases.json"))
    if name == "paraphrases-unfitted":
        return list(_paraphrases("paraphrases_unfitted.json"))
    items = []
    for line in (CORPUS / "eval" / f"{name}.jsonl").read_text().splitlines():
        raw = json.loads(line)
        poisoned = raw["label"] == "poisoned"
        items.append(
            Item(
                raw["id"],
                poisoned,
                raw.get("technique", "benign") if poisoned else "benign",
                raw["server"],
                raw["tool"],
                raw.get("known_tools", {}),
            )
        )
    return items


def _regression() -> Iterator[Item]:
    for entry in json.loads((CORPUS / "poisoned.json").read_text())["entries"]:
        tool = entry["after"] if entry["class"] == "rug_pull" else entry["tool"]
        yield Item(
            entry["id"], True, entry["class"], entry["server"], tool, entry.get("known_tools", {})
        )
    for server, tools in json.loads((CORPUS / "benign.json").read_text())["servers"].items():
        for tool in tools:
            yield Item(f"{server}/{tool['name']}", False, "benign", server, tool)


def _paraphrases(file: str) -> Iterator[Item]:
    data = json.loads((CORPUS / file).read_text())
    federation = data["federation"]
    for entry in data["poisoned"]:
        yield Item(
            entry["id"], True, entry["technique"], "ours-poisoned", entry["tool"], federation
        )
    for entry in data["benign"]:
        yield Item(entry["id"], False, "benign", "ours-benign", entry["tool"], federation)


def judge(items: Sequence[Item]) -> list[Verdict]:
    """Scan every item against the federation of the set's benign servers plus the servers
    the item itself names."""
    federation: dict[str, set[str]] = {}
    for item in items:
        if not item.poisoned:
            federation.setdefault(item.server, set()).add(str(item.tool.get("name", "")))
    verdicts = []
    for item in items:
        known = {server: set(names) for server, names in federation.items()}
        for server, names in item.known_tools.items():
            known.setdefault(server, set()).update(names)
        known.setdefault(item.server, set())
        findings = scan_tool(item.server, item.tool, known_tools=known)
        verdicts.append(Verdict(item, tuple(findings)))
    return verdicts


TRAINED = frozenset(SETS) - {"report5", "report6"}
"""The sets the shipped classifier was fitted on (scripts/train_scanner_classifier.py)."""


def report_classifier(name: str, verdicts: Sequence[Verdict]) -> None:
    """The classifier's figures on a set, apart from the rules'."""
    model = classifier.load()
    objects = {id(v): model.probability(v.item.tool) >= model.threshold for v in verdicts}
    seen = "trained on it: in-sample, not an estimate" if name in TRAINED else "not trained on it"
    print(f"  -- classifier on {name} ({seen})")
    print(f"  {'technique':<24} {'n':>4} {'alone':>8} {'rate':>7} {'rules|cl':>9}")
    poisoned = [v for v in verdicts if v.item.poisoned]
    groups: dict[str, list[Verdict]] = {}
    for verdict in poisoned:
        groups.setdefault(verdict.item.technique, []).append(verdict)
    rows = [*sorted(groups.items()), ("ALL POISONED", poisoned)]
    rows.append(("benign (false positives)", [v for v in verdicts if not v.item.poisoned]))
    for label, group in rows:
        alone = sum(objects[id(v)] for v in group)
        either = sum(objects[id(v)] or v.blocked for v in group)
        size = max(len(group), 1)
        print(
            f"  {label:<24} {len(group):>4} {alone:>8} {alone / size:>7.1%} {either / size:>9.1%}"
        )


def report(name: str, verdicts: Sequence[Verdict], *, misses: bool) -> None:
    role = {
        "regression": "our own corpus: regression guard, not an evaluation",
        "paraphrases": "ours, reworded techniques and hard negatives: regression, not evaluation",
        "paraphrases-unfitted": "ours, batches 5 and 7, never tuned on: carry-over to new wording",
        "tuning": "public, tuned on",
        "report": "public, other sources: seen, tuned on since the third rework",
        "report2": "public, other sources: seen, tuned on since the third rework",
        "report3": "public, other sources: held out for bb6382c, seen and tuned on since",
        "report4": "public, other sources: held out for 766c457, tuned on since (fifth rework)",
        "report5": "public, other sources: held out for c08be61, tuned on since (sixth rework)",
        "report6": "public, other sources: held out for 3e7943d, seen since",
    }[name]
    print(f"\n== {name} ({role})")
    poisoned = [v for v in verdicts if v.item.poisoned]
    benign = [v for v in verdicts if not v.item.poisoned]
    by_technique: dict[str, list[Verdict]] = {}
    for verdict in poisoned:
        by_technique.setdefault(verdict.item.technique, []).append(verdict)
    print(f"  {'technique':<24} {'n':>4} {'blocked':>8} {'rate':>7} {'baseline':>9}")
    for technique, group in sorted(by_technique.items()):
        _row(technique, group)
    _row("ALL POISONED", poisoned)
    _row("benign (false positives)", benign)
    if misses:
        for verdict in poisoned:
            if not verdict.blocked:
                codes = sorted({f.code for f in verdict.findings})
                print(f"    missed {verdict.item.technique}: {verdict.item.id} {codes}")
        for verdict in benign:
            if verdict.blocked:
                for finding in blocking(verdict.findings, {}):
                    print(
                        f"    false positive {verdict.item.id}: {finding.code}: {finding.message}"
                    )


def _row(label: str, group: Sequence[Verdict]) -> None:
    """n, blocked, rate, and the rate of the wrapper-keyed baseline on the same items."""
    blocked = sum(v.blocked for v in group)
    wrapped = sum(v.wrapped for v in group)
    size = max(len(group), 1)
    print(
        f"  {label:<24} {len(group):>4} {blocked:>8} {blocked / size:>7.1%} {wrapped / size:>9.1%}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=SETS, action="append", help="only these sets")
    parser.add_argument("--misses", action="store_true", help="list misses and false positives")
    parser.add_argument(
        "--classifier", action="store_true", help="also report the classifier's second opinion"
    )
    args = parser.parse_args(argv)
    for name in args.split or SETS:
        verdicts = judge(load(name))
        report(name, verdicts, misses=args.misses)
        if args.classifier:
            report_classifier(name, verdicts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
