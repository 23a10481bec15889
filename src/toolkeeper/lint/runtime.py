"""Checks of what the runtime needs declared to govern a call (TK003, TK5, TK6, TK7).

Seed 000 §1 and §2: without a side-effect class policy cannot tell a read from a write;
without idempotency and a timeout the dispatcher cannot resolve an unknown outcome; a
retry of a non-idempotent write can repeat the effect. Seed 003 pattern 1: the version is
explicit, so a call can be pinned to what the model was shown.
"""

from __future__ import annotations

from collections.abc import Iterator

from toolkeeper.contract.model import Idempotency, SideEffect, ToolContract
from toolkeeper.lint.rules import Finding, LintConfig, finding
from toolkeeper.schema.document import pointer


def check_effects(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK501-TK509: side effect, idempotency, timeout, retries, verifier, write set, hints."""
    ref = contract.ref
    committing = contract.side_effect is SideEffect.COMMITTING
    if contract.side_effect is None:
        hints = {k: v for k, v in (contract.annotations or {}).items() if k.endswith("Hint")}
        hinted = f"; the upstream hints {hints} are untrusted, so confirm them" if hints else ""
        yield finding(
            "TK501",
            ref,
            "/side_effect",
            "side effect is not declared, so every call is treated as committing (policy "
            f"asks or denies, nothing is retried){hinted}",
            "declare side_effect: none (read-only), reversible or committing",
        )
    if committing and contract.idempotency is None:
        yield finding(
            "TK502",
            ref,
            "/idempotency",
            "committing tool does not say whether a repeat is harmless, so an unknown outcome "
            "cannot be resolved safely",
            "declare idempotency: keyed (takes an idempotency key), natural or none",
        )
    if contract.timeout is None:
        consequence = ", so a hung write holds its caller and its grant" if committing else ""
        yield finding(
            "TK503" if committing else "TK506",
            ref,
            "/timeout",
            f"no timeout declared{consequence}",
            "declare timeout in seconds",
        )
    if (
        contract.retry.max_attempts > 1
        and contract.effective_side_effect is SideEffect.COMMITTING
        and contract.effective_idempotency is Idempotency.NONE
    ):
        yield finding(
            "TK504",
            ref,
            "/retry/max_attempts",
            f"retry.max_attempts is {contract.retry.max_attempts} on a committing tool that is "
            "not idempotent: a retry after an unknown outcome can repeat the effect",
            "set retry.max_attempts to 1, or make the tool idempotent (idempotency: keyed)",
        )
    if committing and contract.verifier is None:
        yield finding(
            "TK505",
            ref,
            "/verifier",
            "committing tool has no verifier, so success rests on the tool's word alone",
            "declare a verifier that reads the target back and confirms the effect",
        )
    if committing and not contract.concurrency.write_set:
        yield finding(
            "TK508",
            ref,
            "/concurrency/write_set",
            "committing tool declares no write set, so the scheduler cannot tell which calls "
            "it conflicts with",
            "list what it writes, e.g. write_set: ['manuscript:{manuscript_id}']",
        )


def check_version_and_examples(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK601, TK701 and TK003: explicit version, examples, and what the importer reported."""
    ref = contract.ref
    if contract.version is None:
        yield finding(
            "TK601",
            ref,
            "/version",
            "version is not explicit, so calls cannot be pinned and a changed tool looks "
            "the same as the old one",
            "set version: '1.0.0' and bump it on every change (major for breaking ones)",
        )
    if not contract.examples:
        yield finding(
            "TK701",
            ref,
            "/examples",
            "no examples: a known-good call helps the model's first call succeed and seeds "
            "evaluation",
            "add examples: [{arguments: {...}, description: ...}]",
        )
    for index, warning in enumerate(contract.import_warnings):
        yield finding(
            "TK003",
            ref,
            pointer("import_warnings", index),
            warning,
            "fix the upstream tool definition, then import it again",
        )
    yield from _check_hints(contract)


def _check_hints(contract: ToolContract) -> Iterator[Finding]:
    """TK509: imports start every tool as committing; say where the upstream claims less (or
    more), so a person can decide whether to trust it. Hints never change the contract."""
    hints = contract.annotations or {}
    claimed = None
    if hints.get("readOnlyHint") is True:
        claimed = SideEffect.NONE
    elif hints.get("destructiveHint") is False:
        claimed = SideEffect.REVERSIBLE
    elif hints.get("destructiveHint") is True or hints.get("readOnlyHint") is False:
        claimed = SideEffect.COMMITTING
    declared = contract.side_effect
    if claimed is None or declared is None or declared is claimed:
        return
    said = ", ".join(f"{k}={v}" for k, v in hints.items() if k.endswith("Hint"))
    yield finding(
        "TK509",
        contract.ref,
        "/side_effect",
        f"side_effect is {declared.value}, but the upstream hints {claimed.value} ({said}); "
        "hints are untrusted and never change the contract",
        f"if you trust this server, declare side_effect: {claimed.value} yourself",
    )
