"""Checks of what the runtime needs declared to govern a call (TK003, TK5, TK6, TK7).

Seed 000 §1 and §2: without a side-effect class policy cannot tell a read from a write;
without idempotency and a timeout the dispatcher cannot resolve an unknown outcome; a
retry of a non-idempotent write can repeat the effect. Seed 003 pattern 1: the version is
explicit, so a call can be pinned to what the model was shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from toolkeeper.contract.model import JSON_SCHEMA_DIALECT, Idempotency, SideEffect, ToolContract
from toolkeeper.lint.advice import declare
from toolkeeper.lint.rules import Finding, LintConfig, finding
from toolkeeper.schema.document import pointer

STANDARD_MCP_FIELDS = ("icons", "_meta", "execution")
"""Fields of an MCP `Tool` (2025-11-25) a contract has no place for. Dropping them changes
nothing a model or the pipeline relies on, so an import that drops them is not a defect
(`title`, `annotations` and `outputSchema` are imported)."""
STANDARD_DIALECTS = frozenset(
    {
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft-07/schema",
        "https://json-schema.org/draft-07/schema#",
        JSON_SCHEMA_DIALECT,
        JSON_SCHEMA_DIALECT + "#",
    }
)
"""``$schema`` values MCP servers declare (the SDKs' zod converters write draft-07; 2020-12 is
MCP's default): reading them as 2020-12 is a normalization, not a problem."""
_DROPPED_FIELD = re.compile(r"^(?P<field>[^:]+): MCP field not imported$")
_DIALECT = re.compile(r"^\w+(?:/[^:]*)?/\$schema: (?P<uri>\S+) replaced by 2020-12$")


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
            'declare "none" if it only reads, else "reversible" or "committing": '
            + declare(contract, "side_effect", '"none"'),
        )
    if committing and contract.idempotency is None:
        yield finding(
            "TK502",
            ref,
            "/idempotency",
            "committing tool does not say whether a repeat is harmless, so an unknown outcome "
            "cannot be resolved safely",
            'declare "keyed" (it takes an idempotency key), "natural" or "none": '
            + declare(contract, "idempotency", '"keyed"'),
        )
    if contract.timeout is None:
        consequence = (
            ", so the write runs under the caller's default bound whatever it needs: a slow "
            "one is cut off with an unknown outcome, a hung one holds its caller and grant"
            if committing
            else ""
        )
        yield finding(
            "TK503" if committing else "TK506",
            ref,
            "/timeout",
            f"no timeout declared{consequence}",
            "declare a timeout in seconds: " + declare(contract, "timeout", "30"),
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
            "retry once only, or make the tool idempotent: "
            + declare(contract, "retry.max_attempts", "1"),
        )
    if committing and contract.verifier is None:
        yield finding(
            "TK505",
            ref,
            "/verifier",
            "committing tool has no verifier, so success rests on the tool's word alone",
            "name a verifier that reads the target back and confirms the effect: "
            + declare(contract, "verifier", '"read_back"'),
        )
    if committing and not contract.concurrency.write_set:
        yield finding(
            "TK508",
            ref,
            "/concurrency/write_set",
            "committing tool declares no write set, so the scheduler cannot tell which calls "
            "it conflicts with",
            "list what it writes: "
            + declare(contract, "concurrency.write_set", '["manuscript:{manuscript_id}"]'),
        )


def check_version_and_examples(contract: ToolContract, config: LintConfig) -> Iterator[Finding]:
    """TK601, TK701 and TK003: a version where one is required, examples, and what the
    importer reported."""
    ref = contract.ref
    if contract.version is None and not contract.is_read_only:
        effect = contract.side_effect.value if contract.side_effect else "undeclared"
        yield finding(
            "TK601",
            ref,
            "/version",
            f"side effect is {effect} and the version is not explicit, so an approval or grant "
            "cannot be pinned to what was reviewed and a changed tool looks like the old one",
            "version it and bump it on every change (major for breaking ones): "
            + declare(contract, "version", '"1.0.0"'),
        )
    if not contract.examples:
        yield finding(
            "TK701",
            ref,
            "/examples",
            "no examples: a known-good call helps the model's first call succeed and seeds "
            "evaluation",
            "add one known-good call: " + declare(contract, "examples", '[{"arguments": {...}}]'),
        )
    for index, warning in enumerate(contract.import_warnings):
        if standard_import(warning) is None:
            yield finding(
                "TK003",
                ref,
                pointer("import_warnings", index),
                warning,
                "fix the upstream tool definition, then import it again",
            )
    yield from _check_hints(contract)


def standard_import(warning: str) -> str | None:
    """What a standard MCP construct the importer reported is (``icons``, ``draft-07
    $schema``), or None when `warning` is a problem with the upstream definition."""
    dropped = _DROPPED_FIELD.match(warning)
    if dropped and dropped["field"] in STANDARD_MCP_FIELDS:
        return dropped["field"]
    dialect = _DIALECT.match(warning)
    if dialect and dialect["uri"] in STANDARD_DIALECTS:
        return "draft-07 $schema" if "draft-07" in dialect["uri"] else "$schema"
    return None


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
        "if you trust this server, say so: "
        + declare(contract, "side_effect", f'"{claimed.value}"'),
    )
