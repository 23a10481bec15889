"""Imported tools: the findings their import defaults cause, folded into one note (TK004).

An MCP, OpenAI, Anthropic or BFCL definition says what a tool takes, not how it behaves, so
the importers start every tool at the cautious defaults (`CAUTIOUS_DEFAULTS`: committing,
open-world, not idempotent) with no version, timeout, verifier, write set, summary template or
examples. Linted tool by tool, each of those gaps fires on every imported tool — two of them
as errors — although nothing is wrong with any one tool: it is what "not reviewed yet" looks
like. `lint_catalog` therefore reports them once per catalog, with how many tools each
concerns, and keeps per tool only what the upstream definition itself gets wrong. No import
default makes a catalog fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from toolkeeper.contract.model import ToolContract
from toolkeeper.lint.rules import Finding, LintConfig, finding
from toolkeeper.lint.runtime import standard_import

IMPORT_DEFAULTS = frozenset({"TK503", "TK505", "TK508", "TK509", "TK601", "TK404", "TK701"})
"""Codes that, on an imported tool, restate a default the importer filled in: no timeout,
verifier or write set on a tool assumed committing, untrusted hints that differ from that
assumption, no version, no summary template, no examples."""


@dataclass(frozen=True, slots=True)
class Imported:
    """One imported contract, where it came from, and the findings its defaults caused."""

    contract: ToolContract
    source: str | None
    folded: tuple[Finding, ...]


def import_note(imported: Sequence[Imported], config: LintConfig) -> Finding | None:
    """The catalog's TK004 note about `imported`, or None when the selection hides it: TK004
    ignored, or neither TK004 nor any code it counts selected."""
    folded = Counter(f.code for item in imported for f in item.folded if config.enabled(f.code))
    if not imported or config.ignores("TK004") or not (config.enabled("TK004") or folded):
        return None
    sources = sorted({item.source.split("#")[0] for item in imported if item.source})
    where = sources[0] if len(sources) == 1 else f"{len(sources)} files"
    tools = len(imported)
    counts = ", ".join(f"{code} on {n}" for code, n in sorted(folded.items()))
    standard = Counter(
        label
        for item in imported
        for label in {standard_import(w) for w in item.contract.import_warnings} - {None}
    )
    kept = (
        "; standard MCP fields read as they are or not kept: "
        + ", ".join(f"{label} on {n}" for label, n in sorted(standard.items()))
        if standard
        else ""
    )
    message = (
        f"{tools} imported tool{'s' if tools != 1 else ''} start with the importer's cautious "
        "defaults: committing, open-world, not idempotent, with no version, timeout, verifier, "
        "write set, summary template or examples, because the source format cannot say "
        "otherwise. Until a person reviews them, policy asks or denies before every call and "
        "nothing is retried. The findings these defaults cause are counted here, not per "
        f"tool{': ' + counts if counts else ''}{kept}."
    )
    return finding(
        "TK004",
        where,
        "",
        message,
        "review each tool, then declare what you vouch for in the gateway's upstream config: "
        "[upstreams.SERVER.tools.TOOL] side_effect, idempotency, timeout, version "
        "(or pass them as overrides to ToolContract.from_mcp_tool and the other importers)",
    )
