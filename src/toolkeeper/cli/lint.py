"""`toolkeeper lint PATH|MODULE`: check a catalog's contracts before a model ever sees them.

Exit status: 0 when there are no errors (warnings and info allowed), 1 when there are, 2 when
the target cannot be read at all. Import defaults never make it 1 (one TK004 note instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path

from toolkeeper.cli.conventions import add_format, positive
from toolkeeper.lint import Finding, LintConfig, LintReport, Severity, lint_catalog
from toolkeeper.lint.targets import load_target

_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def _codes(text: str) -> tuple[str, ...]:
    return tuple(code.strip() for code in text.split(",") if code.strip())


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="check tool contracts for safety and model-readiness",
        description="Lint a catalog: a directory of contract files, one file (contracts, MCP "
        "tools/list, OpenAI or Anthropic tools, BFCL JSON lines), a Python file (tools.py) or "
        "module path (package.module or package.module:attribute). Python targets are "
        "imported, which runs their top-level code.",
    )
    parser.add_argument("target", metavar="PATH|MODULE", help="what to lint")
    add_format(parser)
    parser.add_argument(
        "--max-tokens",
        type=positive,
        default=LintConfig().max_description_tokens,
        metavar="N",
        help="token budget of a model-facing description (default %(default)s)",
    )
    parser.add_argument(
        "--select", type=_codes, default=(), metavar="CODES", help="only these codes or prefixes"
    )
    parser.add_argument(
        "--ignore", type=_codes, default=(), metavar="CODES", help="skip these codes or prefixes"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = LintConfig(
        max_description_tokens=args.max_tokens, select=args.select, ignore=args.ignore
    )
    if not Path(args.target).exists() and os.getcwd() not in sys.path:
        # Like `python -m`, resolve module targets against the working directory.
        sys.path.insert(0, os.getcwd())
    report = lint_catalog(load_target(args.target), config=config)
    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        print(render_text(report))
    return 1 if report.has_errors else 0


def render_text(report: LintReport) -> str:
    """Findings grouped by contract (errors first), each with its path and fix; a summary."""
    groups: dict[tuple[str, str | None], list[Finding]] = defaultdict(list)
    for finding in report.findings:
        groups[(finding.contract, finding.source)].append(finding)
    lines: list[str] = []
    for (contract, source), findings in groups.items():
        lines.append(contract if source in (None, contract) else f"{contract}  ({source})")
        for f in sorted(findings, key=lambda f: _ORDER[f.severity]):
            message = f.message.replace("\n", "\n" + " " * 10)
            lines.append(f"  {f.severity.value:<8}{f.code} {f.path or '/'}: {message}")
            lines.append(f"          fix: {f.fix}")
        lines.append("")
    counts = report.summary()
    noun = "contract" if counts["contracts"] == 1 else "contracts"
    lines.append(
        f"Checked {counts['contracts']} {noun}: {counts['errors']} errors, "
        f"{counts['warnings']} warnings, {counts['info']} info."
    )
    return "\n".join(lines)
