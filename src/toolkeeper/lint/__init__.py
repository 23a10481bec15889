"""Static checks of tool contracts: seed 000 §2's ten conditions and seed 003's pattern 1.

A model reads a tool only through its name, description and schema, and the runtime can
govern a call only through what the contract declares. `lint_contract` checks one contract;
`lint_catalog` adds what only a whole catalog shows: load problems, duplicate refs, preview
pairs, vendor-name collisions, and one note (TK004) for what the import defaults of imported
tools cause, instead of the same findings on every imported tool. Every check has a stable
code in `RULES`, listed in docs/lint.md. Fixes are phrased for the contract's origin
(`toolkeeper.lint.advice`): decorator arguments for a function, keys for a file, the
gateway's per-tool overrides for an imported tool.

Three of the ten conditions are not checked statically: errors that tell fixable input from
policy and system faults, and provenance, are the envelope's job at run time; end-to-end
evaluation needs a model and a task, not a contract.

    lint_contract ─┬─ surface.check_names, surface.check_description   (TK1, TK2)
                   ├─ schema.check_input_schema, schema.check_output   (TK3, TK4)
                   └─ runtime.check_effects, runtime.check_version_…   (TK5, TK6, TK7, TK003)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from toolkeeper.contract.model import ToolContract
from toolkeeper.contract.naming import FAMILIES, vendor_names
from toolkeeper.importers.catalog import Catalog, ProblemKind
from toolkeeper.lint.advice import Origin, origin_of
from toolkeeper.lint.imports import IMPORT_DEFAULTS, Imported, import_note
from toolkeeper.lint.rules import RULES, Finding, LintConfig, Rule, Severity, finding
from toolkeeper.lint.runtime import check_effects, check_version_and_examples
from toolkeeper.lint.schema import check_input_schema, check_output
from toolkeeper.lint.surface import (
    VERBS,
    check_description,
    check_names,
    count_tokens,
    count_words,
)

__all__ = [
    "RULES",
    "VERBS",
    "Finding",
    "LintConfig",
    "LintReport",
    "Rule",
    "Severity",
    "count_tokens",
    "count_words",
    "lint_catalog",
    "lint_contract",
]

_CHECKS: tuple[Callable[[ToolContract, LintConfig], Iterator[Finding]], ...] = (
    check_names,
    check_description,
    check_input_schema,
    check_output,
    check_effects,
    check_version_and_examples,
)


@dataclass(frozen=True, slots=True)
class LintReport:
    """Findings over a catalog, in catalog order, and how many contracts were checked."""

    findings: tuple[Finding, ...]
    contracts: int

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def has_errors(self) -> bool:
        return self.count(Severity.ERROR) > 0

    def summary(self) -> dict[str, int]:
        return {
            "contracts": self.contracts,
            "errors": self.count(Severity.ERROR),
            "warnings": self.count(Severity.WARNING),
            "info": self.count(Severity.INFO),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"findings": [f.to_dict() for f in self.findings], "summary": self.summary()}


def lint_contract(contract: ToolContract, *, config: LintConfig | None = None) -> list[Finding]:
    """Every finding for one contract, in check order, filtered by the config's selection;
    an imported contract's import defaults included (`lint_catalog` folds those)."""
    config = config or LintConfig()
    return [f for check in _CHECKS for f in check(contract, config) if config.enabled(f.code)]


def lint_catalog(catalog: Catalog, *, config: LintConfig | None = None) -> LintReport:
    """Lint every contract of `catalog`, its load problems, and what spans contracts; the
    findings imported tools' defaults cause become one TK004 note (`toolkeeper.lint.imports`).
    """
    config = config or LintConfig()
    findings = [
        finding("TK002", p.source, "", p.message, "bump one version or rename one id")
        if p.kind is ProblemKind.DUPLICATE
        else finding("TK001", p.source, "", p.message, "fix or remove the file")
        for p in catalog.problems
    ]
    ids = {c.id for c in catalog.contracts}
    collisions = _collisions(catalog.contracts)
    imported: list[Imported] = []
    for contract in catalog.contracts:
        source = catalog.sources.get(contract.ref)
        own = [*lint_contract(contract, config=config), *collisions.get(contract.ref, ())]
        if origin_of(contract) is Origin.IMPORTED:
            folded = tuple(f for f in own if f.code in IMPORT_DEFAULTS)
            own = [f for f in own if f.code not in IMPORT_DEFAULTS]
            imported.append(Imported(contract, source, folded))
        if contract.preview is not None and contract.preview not in ids:
            own.append(
                finding(
                    "TK507",
                    contract.ref,
                    "/preview",
                    f"preview names {contract.preview!r}, which is not in this catalog",
                    "add the preview tool to the catalog, or correct the id",
                )
            )
        findings.extend(f.with_source(source) for f in own)
    note = import_note(imported, config)
    if note is not None:
        findings.append(note)
    kept = tuple(f for f in findings if f is note or config.enabled(f.code))
    return LintReport(findings=kept, contracts=len(catalog.contracts))


def _collisions(contracts: tuple[ToolContract, ...]) -> dict[str, list[Finding]]:
    """TK106: distinct tools whose names land on one vendor name, so one is shown suffixed.

    Versions of one id are left alone: the older one is renamed on purpose (see
    `toolkeeper.contract.naming.vendor_names`).
    """
    found: dict[str, list[Finding]] = defaultdict(list)
    for family in FAMILIES:
        shown = vendor_names(contracts, family)
        wanted = {c.ref: vendor_names([c], family)[c.ref] for c in contracts}
        claims: dict[str, list[ToolContract]] = defaultdict(list)
        for contract in contracts:
            claims[wanted[contract.ref]].append(contract)
        for name, claimants in claims.items():
            for contract in claimants:
                rivals = [c.ref for c in claimants if c.id != contract.id]
                if rivals and shown[contract.ref] != name:
                    found[contract.ref].append(
                        finding(
                            "TK106",
                            contract.ref,
                            "/id",
                            f"{family} name {name!r} is also claimed by {', '.join(rivals)}, "
                            f"so {family} models see this tool as {shown[contract.ref]!r}",
                            f"rename one of them, or set model_views.{family}.name",
                        )
                    )
    return found
